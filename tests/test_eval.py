"""neardup eval: metrics against hand-computed examples, the file contracts and the command."""

from __future__ import annotations

import csv
import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from neardup.cli.main import main
from neardup.eval.files import load_gold, load_prediction
from neardup.eval.metrics import Gold, Prediction, adjusted_rand_index, evaluate
from tests.conftest import read_jsonl, shared_file, write_lines

# Seven records: cluster A (0 original, 1 light, 2 medium), cluster B (3 original, 4 light),
# a unique record 5 and a heavy copy 6 of record 0.
GOLD_ROWS = [
    {"id": "r0", "cluster": "A", "level": "original", "topic": "economy"},
    {"id": "r1", "cluster": "A", "level": "light", "topic": "economy"},
    {"id": "r2", "cluster": "A", "level": "medium", "topic": "economy"},
    {"id": "r3", "cluster": "B", "level": "original", "topic": "sport"},
    {"id": "r4", "cluster": "B", "level": "light", "topic": "sport"},
    {"id": "r5", "cluster": "r5", "level": "unique", "topic": "sport"},
    {"id": "r6", "cluster": "r6", "level": "heavy", "derived_from": "r0", "topic": "economy"},
]
# Predicted: two right (0-1, 1-2), two wrong (3-5, 4-5), one with the heavy copy (0-6).
PAIR_ROWS = [
    {"a": "r0", "b": "r1", "distance": 1},
    {"a": "r1", "b": "r2", "distance": 3},
    {"a": "r3", "b": "r5", "distance": 2},
    {"a": "r0", "b": "r6", "distance": 3},
    {"a": "r4", "b": "r5", "distance": 0},
]


def gold_of(rows: list[dict]) -> Gold:
    position = {row["id"]: i for i, row in enumerate(rows)}
    return Gold.from_labels(
        [row["cluster"] for row in rows],
        [row.get("level") for row in rows],
        [row.get("topic") for row in rows],
        [position.get(row.get("derived_from"), -1) for row in rows],
    )


def test_gold_pairs_leave_out_heavy_and_unique() -> None:
    gi, gj = gold_of(GOLD_ROWS).pairs()
    assert sorted(zip(gi.tolist(), gj.tolist(), strict=True)) == [(0, 1), (0, 2), (1, 2), (3, 4)]


def test_pairwise_scores_by_hand() -> None:
    prediction = Prediction.from_pairs([0, 1, 3, 0, 4], [1, 2, 5, 6, 5])
    scores = evaluate(gold_of(GOLD_ROWS), prediction)
    # 4 scored predictions (0-6 involves the heavy copy), 2 right; 4 gold pairs.
    assert (scores.predicted_pairs, scores.true_positives, scores.gold_pairs) == (4, 2, 4)
    assert scores.precision == pytest.approx(0.5)
    assert scores.recall == pytest.approx(0.5)
    assert scores.f1 == pytest.approx(0.5)
    # Gold pairs take the more edited level: 0-1 and 3-4 light, 0-2 and 1-2 medium.
    assert {k: (v.found, v.total) for k, v in scores.by_level.items()} == {"light": (1, 2), "medium": (1, 2)}
    assert list(scores.by_level) == ["light", "medium"]
    assert {k: (v.found, v.total) for k, v in scores.by_topic.items()} == {"economy": (2, 3), "sport": (0, 1)}
    assert (scores.related.found, scores.related.total) == (1, 1)
    # Predicted components {0,1,2,6}, {3,4,5}; on the scored records 0-5 the contingency is
    # A∩X = 3, B∩Y = 2, U∩Y = 1: index 4, rows 4, columns 6, C(6,2) = 15, expected 1.6,
    # max 5, ARI = (4 - 1.6) / (5 - 1.6).
    assert scores.ari == pytest.approx(2.4 / 3.4)


def test_duplicate_and_reversed_pairs_count_once() -> None:
    prediction = Prediction.from_pairs([0, 1, 1], [1, 0, 0])
    scores = evaluate(gold_of(GOLD_ROWS), prediction)
    assert (scores.predicted_pairs, scores.true_positives) == (1, 1)


def test_closure_scores_all_pairs_of_each_cluster() -> None:
    prediction = Prediction.from_pairs([0, 1, 3, 0, 4], [1, 2, 5, 6, 5]).closure(7)
    scores = evaluate(gold_of(GOLD_ROWS), prediction)
    # Clusters {0,1,2,6} and {3,4,5}: 3 + 3 scored pairs, all 4 gold pairs inside.
    assert (scores.predicted_pairs, scores.true_positives) == (6, 4)
    assert scores.precision == pytest.approx(4 / 6)
    assert scores.recall == 1.0
    assert scores.kind == "clusters"


def test_cluster_labels_score_like_their_pairs() -> None:
    gold = gold_of(GOLD_ROWS)
    labels = np.array([0, 0, 9, 3, 3, 5, 6])
    from_labels = evaluate(gold, Prediction.from_labels(labels))
    from_pairs = evaluate(gold, Prediction.from_pairs([0, 3], [1, 4]))
    assert from_labels.as_dict() | {"predictions": ""} == from_pairs.as_dict() | {"predictions": ""}


def test_perfect_and_empty_predictions() -> None:
    gold = gold_of(GOLD_ROWS)
    perfect = evaluate(gold, Prediction.from_pairs([0, 0, 1, 3], [1, 2, 2, 4]))
    assert (perfect.precision, perfect.recall, perfect.f1, perfect.ari) == (1.0, 1.0, 1.0, 1.0)
    empty = evaluate(gold, Prediction.from_pairs([], []))
    assert (empty.precision, empty.recall, empty.f1) == (1.0, 0.0, 0.0)
    assert empty.ari == pytest.approx(0.0)


@pytest.mark.parametrize(
    ("truth", "predicted", "expected"),
    [
        ([0, 0, 1, 1], [0, 0, 1, 1], 1.0),
        ([0, 0, 1, 1], [1, 1, 0, 0], 1.0),  # label names do not matter
        ([0, 0, 1, 1], [0, 0, 1, 2], 4 / 7),  # scikit-learn's documented example: 0.5714...
        ([0, 0, 0, 0], [0, 1, 2, 3], 0.0),
        ([0, 1, 2, 3], [0, 1, 2, 3], 1.0),  # singletons only: perfect by convention
        ([0], [5], 1.0),
    ],
)
def test_adjusted_rand_index(truth: list[int], predicted: list[int], expected: float) -> None:
    assert adjusted_rand_index(truth, predicted) == pytest.approx(expected)


def test_adjusted_rand_index_against_brute_force_pair_counts() -> None:
    rng = np.random.default_rng(7)
    truth, predicted = rng.integers(0, 5, 40), rng.integers(0, 6, 40)
    pairs = list(combinations(range(40), 2))
    same_t = np.array([truth[a] == truth[b] for a, b in pairs])
    same_p = np.array([predicted[a] == predicted[b] for a, b in pairs])
    index, rows, cols, total = (same_t & same_p).sum(), same_t.sum(), same_p.sum(), len(pairs)
    expected = rows * cols / total
    assert adjusted_rand_index(truth, predicted) == pytest.approx(
        (index - expected) / ((rows + cols) / 2 - expected)
    )


# -- files and the command ---------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    gold = write_lines(tmp_path / "gold.jsonl", *GOLD_ROWS)
    pairs = write_lines(tmp_path / "pairs.jsonl", *PAIR_ROWS)
    clusters = write_lines(
        tmp_path / "clusters.jsonl",
        *[{"id": f"r{i}", "cluster": c} for i, c in enumerate(["r0", "r0", "r2", "r3", "r3", "r5", "r6"])],
    )
    return gold, pairs, clusters


def test_files_map_ids_to_positions(files: tuple[Path, Path, Path]) -> None:
    gold_path, pairs_path, clusters_path = files
    ids, gold = load_gold(gold_path)
    assert ids == [f"r{i}" for i in range(7)]
    assert gold.derived_from.tolist() == [-1, -1, -1, -1, -1, -1, 0]
    pairs = load_prediction(pairs_path, ids)
    assert pairs.kind == "pairs" and pairs.i is not None and pairs.i.tolist() == [0, 1, 3, 0, 4]
    clusters = load_prediction(clusters_path, ids)
    assert clusters.kind == "clusters" and clusters.labels is not None
    assert len(set(clusters.labels.tolist())) == 5


def test_eval_table_and_json(files: tuple[Path, Path, Path]) -> None:
    gold, pairs, _ = files
    table = CliRunner().invoke(main, ["eval", str(gold), str(pairs)])
    assert table.exit_code == 0, table.output
    assert "precision          0.5000" in table.output
    assert "adjusted Rand      0.7059" in table.output
    assert "related (heavy)    1/1" in table.output
    assert "recall by topic" in table.output
    result = CliRunner().invoke(main, ["eval", str(gold), str(pairs), "--format", "json"])
    data = json.loads(result.output)
    assert (data["precision"], data["recall"], data["f1"]) == (0.5, 0.5, 0.5)
    assert data["recall_by_level"]["medium"] == {"found": 1, "total": 2, "recall": 0.5}


def test_eval_clusters_and_closure(files: tuple[Path, Path, Path]) -> None:
    gold, pairs, clusters = files
    data = json.loads(CliRunner().invoke(main, ["eval", str(gold), str(clusters), "--format", "json"]).output)
    assert (data["predictions"], data["predicted_pairs"], data["true_positives"]) == ("clusters", 2, 2)
    closed = json.loads(
        CliRunner().invoke(main, ["eval", str(gold), str(pairs), "--closure", "--format", "json"]).output
    )
    assert (closed["predicted_pairs"], closed["true_positives"]) == (6, 4)


def test_eval_errors_name_the_problem(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    gold, _, _ = files
    stranger = write_lines(tmp_path / "stranger.jsonl", {"a": "r0", "b": "zz", "distance": 1})
    result = CliRunner().invoke(main, ["eval", str(gold), str(stranger)])
    assert result.exit_code == 1
    assert "id 'zz' is not in the gold file" in result.output and "stranger.jsonl:1" in result.output
    odd = write_lines(tmp_path / "odd.jsonl", {"x": 1})
    result = CliRunner().invoke(main, ["eval", str(gold), str(odd)])
    assert result.exit_code == 1 and "PAIRS file" in result.output
    twice = write_lines(tmp_path / "twice.jsonl", GOLD_ROWS[0], GOLD_ROWS[0])
    result = CliRunner().invoke(main, ["eval", str(twice), str(odd)])
    assert result.exit_code == 1 and "duplicate id 'r0'" in result.output


def write_csv_gold(path: Path, rows: list[dict[str, str]], columns: tuple[str, ...]) -> Path:
    """A CSV gold of ``rows`` (absent fields are empty cells), as labelled record sets come."""
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows({name: row.get(name, "") for name in columns} for row in rows)
    return path


def test_csv_gold_scores_like_the_same_jsonl_gold(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    gold, pairs, clusters = files
    columns = ("id", "cluster", "level", "topic", "derived_from")
    csv_gold = write_csv_gold(tmp_path / "gold.csv", GOLD_ROWS, columns)
    ids, loaded = load_gold(csv_gold)
    assert ids == [f"r{i}" for i in range(7)] and loaded.derived_from.tolist() == [-1] * 6 + [0]
    for predictions in (pairs, clusters):
        expected = CliRunner().invoke(main, ["eval", str(gold), str(predictions), "--format", "json"])
        result = CliRunner().invoke(main, ["eval", str(csv_gold), str(predictions), "--format", "json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == json.loads(expected.stdout)


def test_csv_gold_with_other_column_names_and_integer_prediction_ids(tmp_path: Path) -> None:
    """CSV cells are text: a prediction's integer id 1 (a database key) matches the cell "1"."""
    rows = [{"key": "1", "entity": "e1"}, {"key": "2", "entity": "e1"}, {"key": "3", "entity": "e3"}]
    gold = write_csv_gold(tmp_path / "people.CSV", rows, ("key", "name", "entity"))
    pairs = write_lines(tmp_path / "pairs.jsonl", {"a": 1, "b": 2, "distance": 0})
    args = [
        "eval",
        str(gold),
        str(pairs),
        "--id-field",
        "key",
        "--cluster-field",
        "entity",
        "--format",
        "json",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["f1"] == 1.0


def test_csv_gold_without_the_columns_is_one_line_naming_them(tmp_path: Path) -> None:
    gold = write_csv_gold(tmp_path / "gold.csv", [{"doc": "r0", "group": "A"}], ("doc", "group"))
    pairs = write_lines(tmp_path / "pairs.jsonl", *PAIR_ROWS)
    result = CliRunner().invoke(main, ["eval", str(gold), str(pairs)])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    message = result.stderr
    assert "gold.csv" in message and "'id' and 'cluster' columns" in message and "doc, group" in message
    assert "--id-field/--cluster-field" in message  # the flags, not the library's parameters
    one_missing = write_csv_gold(tmp_path / "half.csv", [{"id": "r0", "group": "A"}], ("id", "group"))
    result = CliRunner().invoke(main, ["eval", str(one_missing), str(pairs)])
    assert result.exit_code == 1 and "no 'cluster' column" in result.stderr


def test_records_then_eval_on_the_same_labelled_csv(tmp_path: Path) -> None:
    """The labelled-records workflow: dedup a CSV with a gold column, score against that CSV."""
    rows = [
        {"id": "p1", "cluster": "A", "name": "Zhang San", "city": "Guangzhou", "phone": "020 8888 1234"},
        {"id": "p2", "cluster": "A", "name": "zhang  san", "city": "Guangzhou", "phone": "020-8888-1234"},
        {"id": "p3", "cluster": "B", "name": "Mary Jones", "city": "Boston", "phone": "617 555 0100"},
        {"id": "p4", "cluster": "B", "name": "MARY JONES", "city": "Boston", "phone": "617 555 0100"},
        {"id": "p5", "cluster": "C", "name": "Li Si", "city": "Beijing", "phone": "010 6666 0000"},
    ]
    source = write_csv_gold(tmp_path / "people.csv", rows, ("id", "cluster", "name", "city", "phone"))
    groups = tmp_path / "groups.jsonl"
    args = [
        "records",
        str(source),
        "--key",
        "id",
        "--ignore",
        "cluster",
        "-k",
        "auto",
        "--clusters",
        str(groups),
    ]
    made = CliRunner().invoke(main, args)
    assert made.exit_code == 0, made.output
    result = CliRunner().invoke(main, ["eval", str(source), str(groups), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["gold_pairs"] == 2


def test_gold_conventions_match_the_dev_set_benchmarks() -> None:
    """The pairs scored here are exactly benchmarks/dev_separation.py's gold pairs."""
    path = shared_file("dev/zh_news.jsonl")
    rows = read_jsonl(path)
    _, gold = load_gold(path)
    gi, gj = gold.pairs()
    groups: dict[str, list[int]] = {}
    for position, row in enumerate(rows):
        if row["level"] in {"original", "light", "medium"}:
            groups.setdefault(row["cluster"], []).append(position)
    expected = {pair for members in groups.values() for pair in combinations(sorted(members), 2)}
    assert set(zip(gi.tolist(), gj.tolist(), strict=True)) == expected
    assert len(expected) == 694
    assert int(gold.related.sum()) == 70
    assert int((gold.derived_from >= 0).sum()) == 70

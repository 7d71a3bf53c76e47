"""neardup sweep: the grid, the ranking and the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup.cli.eval import sweep_summary
from neardup.cli.main import main
from neardup.dedup.pipeline import dedup_documents
from neardup.errors import ConfigError
from neardup.eval.metrics import Gold, Prediction, evaluate
from neardup.eval.sweep import (
    DEFAULT,
    DEFAULT_DESCRIPTION,
    Grid,
    check_grid,
    format_rows,
    recommended,
    run_sweep,
)
from neardup.io.read import read_records
from tests.test_baselines import BASE, EDITED, OTHER, ZH, ZH_EDITED

TEXTS = [BASE, OTHER, EDITED, ZH, ZH_EDITED, BASE + " Copyright 1987 Reuters."]
CLUSTERS = ["a", "o", "a", "z", "z", "a"]
LEVELS = ["original", "unique", "light", "original", "light", "light"]


def test_sweep_scores_every_setting_best_first() -> None:
    gold = Gold.from_labels(CLUSTERS, LEVELS)
    grid = Grid(["tf"], ["city64"], (64,), (3, 16), ["none", "jaccard"], ("vsm",))
    rows = run_sweep(TEXTS, gold, grid)
    assert len(rows) == grid.size == 6  # 4 of the grid, the baseline, the default search
    f1 = [row.scores.f1 for row in rows]
    assert f1 == sorted(f1, reverse=True)
    best = rows[0]
    assert best.scores.gold_pairs == 4 and best.scores.f1 > 0.8
    narrow = next(r for r in rows if r.setting.max_distance == 3 and r.setting.verify == "none")
    assert best.scores.f1 > narrow.scores.f1
    wide = next(r for r in rows if r.setting.max_distance == 16 and r.setting.verify == "jaccard")
    assert set(wide.seconds) == {"fingerprints", "pairs", "verify"}
    assert "--verify jaccard" in wide.setting.describe()
    table = format_rows(rows, top=2, markdown=True)
    assert table.count("\n") == 3 and table.startswith("| rank |")
    data = rows[0].as_dict()
    assert {"f1", "precision", "recall", "seconds", "options", "adjusted_rand_index"} <= set(data)


def test_sweep_leaves_out_distances_a_width_cannot_search() -> None:
    gold = Gold.from_labels(CLUSTERS, LEVELS)
    rows = run_sweep(TEXTS, gold, Grid(["tf"], ["city64"], (32,), (3, 40), ["none"]))
    assert [row.setting.max_distance for row in rows if row.setting.method == "neardup"] == [3]


def test_unknown_baseline_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown baseline"):
        check_grid(Grid(baselines=("nope",)))


def test_sweep_command(tmp_path: Path) -> None:
    source = _labelled(tmp_path / "docs.jsonl")
    args = ["sweep", str(source), str(source), "--weighting", "tf", "--hash", "city64", "-k", "3,16"]
    result = CliRunner().invoke(main, [*args, "--verify", "none,jaccard", "--output-format", "json"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 5 and lines[0]["f1"] >= lines[-1]["f1"]
    assert [line["options"] for line in lines].count(DEFAULT_DESCRIPTION) == 1
    table = CliRunner().invoke(main, [*args, "--top", "1"])
    assert table.exit_code == 0 and len(table.stdout.splitlines()) == 2
    bad = CliRunner().invoke(main, [*args, "--verify", "maybe"])
    assert bad.exit_code == 2 and "choose from" in bad.output
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "x", "text": "t"}) + "\n")
    mismatch = CliRunner().invoke(main, ["sweep", str(source), str(other)])
    assert mismatch.exit_code == 1 and "not in the gold file" in mismatch.output


def _labelled(path: Path) -> Path:
    rows = [
        {"id": f"d{i}", "text": t, "cluster": c, "level": lv}
        for i, (t, c, lv) in enumerate(zip(TEXTS, CLUSTERS, LEVELS, strict=True))
    ]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def test_the_default_search_is_a_row_scored_as_dedup_and_eval_score_it(tmp_path: Path) -> None:
    """The row is what ``neardup dedup`` with no options finds, scored as ``neardup eval`` does."""
    source = _labelled(tmp_path / "docs.jsonl")
    gold = Gold.from_labels(CLUSTERS, LEVELS)
    rows = run_sweep(TEXTS, gold, Grid(["tf"], ["city64"], (64,), (3,), ["none"]))
    [default] = [row for row in rows if row.setting.method == DEFAULT]
    result = dedup_documents(read_records(str(source)))
    expected = evaluate(gold, Prediction.from_pairs(result.pairs.i, result.pairs.j))
    assert default.scores == expected and default.scores.predicted_pairs == len(result.pairs)
    assert default.setting.describe() == DEFAULT_DESCRIPTION == default.as_dict()["options"]
    assert default.total_seconds > 0 and set(default.seconds) >= {"candidates", "clusters"}


def test_a_grid_below_the_default_recommends_the_default(tmp_path: Path) -> None:
    gold = Gold.from_labels(CLUSTERS, LEVELS)
    rows = run_sweep(TEXTS, gold, Grid(["tf"], ["city64"], (64,), (3,), ["none"], ("imatch",)))
    grid_best = max(row.scores.f1 for row in rows if row.setting.method != DEFAULT)
    best = recommended(rows)
    assert best is not None and best.setting.method == DEFAULT and best.scores.f1 > grid_best
    args = ["sweep", str(_labelled(tmp_path / "docs.jsonl")), str(tmp_path / "docs.jsonl")]
    run = CliRunner().invoke(
        main, [*args, "--weighting", "tf", "--hash", "city64", "-k", "3", "--verify", "none"]
    )
    assert run.exit_code == 0, run.output
    summary = run.stderr.splitlines()[-1]
    assert f"recommended: {DEFAULT_DESCRIPTION} (F1 1.0000; no setting of the grid beats it)" in summary
    assert run.stdout.splitlines()[1].split()[:2] == ["1", "default"]


def test_a_tie_with_the_default_ranks_the_default_first() -> None:
    """A grid setting must beat the default to be recommended; an equal F1 is not enough."""
    gold = Gold.from_labels(CLUSTERS, LEVELS)
    rows = run_sweep(TEXTS, gold, Grid(["tf"], ["city64"], (64,), (24,), ["none"]))
    [grid_row] = [row for row in rows if row.setting.method == "neardup"]
    assert grid_row.scores.f1 == rows[0].scores.f1 == 1.0
    assert rows[0].setting.method == DEFAULT and recommended(rows) is rows[0]


def test_a_grid_setting_that_beats_the_default_is_recommended() -> None:
    # Every record one cluster: the widest Simhash search, unchecked, pairs more of them than
    # the default's Jaccard 0.5, and so beats it.
    gold = Gold.from_labels(["a"] * len(TEXTS), ["original"] + ["light"] * (len(TEXTS) - 1))
    rows = run_sweep(TEXTS, gold, Grid(["tf"], ["city64"], (64,), (3, 32), ["none"]))
    default = next(row for row in rows if row.setting.method == DEFAULT)
    best = recommended(rows)
    assert best is rows[0] and best.setting.method == "neardup" and best.setting.max_distance == 32
    assert round(best.scores.f1, 4) > round(default.scores.f1, 4)
    summary = sweep_summary(rows, len(TEXTS), 1.0, 0)
    assert f"recommended: {best.setting.describe()} (F1 {best.scores.f1:.4f}; " in summary
    assert summary.endswith(f"above the default's F1 {default.scores.f1:.4f}); 0 skipped")

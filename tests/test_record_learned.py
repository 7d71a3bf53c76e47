"""The learned pipeline (neardup.records.learned), the default of ``neardup records``."""

from __future__ import annotations

import csv
import itertools
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from neardup.cli.main import main
from neardup.records.learned import guarded_pairs, learned_duplicate_records
from neardup.records.schema import RecordSchema, RowChunk

from .conftest import shared_file


def pairwise_f1(gold: dict[str, str], predicted: dict[str, str]) -> float:
    def pairs(labels: dict[str, str]) -> set[tuple[str, str]]:
        groups: dict[str, list[str]] = defaultdict(list)
        for key, label in labels.items():
            groups[label].append(key)
        return {pair for members in groups.values() for pair in itertools.combinations(sorted(members), 2)}

    truth, found = pairs(gold), pairs(predicted)
    hits = len(truth & found)
    precision, recall = hits / max(len(found), 1), hits / max(len(truth), 1)
    return 2 * precision * recall / (precision + recall) if hits else 0.0


def test_febrl1_with_no_options_through_the_cli(tmp_path: Path) -> None:
    source = shared_file("dev/records/febrl_dataset1.csv")
    out = tmp_path / "groups.jsonl"
    result = CliRunner().invoke(
        main, ["records", str(source), "--key", "id", "--ignore", "cluster", "--clusters", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "field weights" in result.output and "match probability" in result.output
    with source.open(encoding="utf-8", newline="") as handle:
        gold = {row["id"]: row["cluster"] for row in csv.DictReader(handle)}
    lines = map(json.loads, out.read_text(encoding="utf-8").splitlines())
    predicted = {row["id"]: row["cluster"] for row in lines}
    assert pairwise_f1(gold, predicted) >= 0.9


def people(rows: int = 400, seed: int = 5) -> tuple[list[str], list[list[object]]]:
    """Person rows with a duplicate of every fourth, a constant column and an id-like one."""
    rng = np.random.default_rng(seed)
    firsts = [f"given{k}" for k in range(60)]
    lasts = [f"family{k}" for k in range(150)]
    body: list[list[object]] = []
    for row in range(rows):
        body.append(
            [
                f"r{row}",
                str(rng.choice(firsts)),
                str(rng.choice(lasts)),
                f"19{rng.integers(10, 99)}-0{rng.integers(1, 9)}-1{rng.integers(0, 9)}",
                f"{rng.integers(2000, 2999)}",
                "same",
                f"serial-{rng.integers(10**9)}",
            ]
        )
    for row in range(0, rows, 4):
        copy = list(body[row])
        copy[0] = f"d{row}"
        copy[1] = str(copy[1])[:-1] + "x"  # a typo
        copy[6] = f"serial-{rng.integers(10**9)}"
        body.append(copy)
    header = ["id", "given", "surname", "born", "zip", "constant", "serial"]
    return header, body


def run(header: list[str], body: list[list[object]]):  # type: ignore[no-untyped-def]
    chunks = [RowChunk.from_rows(body[k : k + 100], len(header), k + 1) for k in range(0, len(body), 100)]
    return learned_duplicate_records(header, chunks, RecordSchema("id"))


def test_weights_are_reproducible_and_useless_columns_weigh_nothing() -> None:
    header, body = people()
    first, second = run(header, body), run(header, body)
    assert first.model == second.model
    assert np.array_equal(first.pairs.i, second.pairs.i) and np.array_equal(first.pairs.j, second.pairs.j)
    weights = first.model.weights
    names = [column.name for column in weights.columns]
    assert "constant" not in names or abs(weights.column("constant").exact) < 0.5
    serial = weights.column("serial")
    assert abs(serial.exact) < 0.5 and abs(serial.different) < 0.5
    assert weights.column("surname").exact > 1.0
    found = set(zip(first.pairs.i.tolist(), first.pairs.j.tolist(), strict=True))
    planted = {(row, 400 + row // 4) for row in range(0, 400, 4)}
    assert len(found & planted) >= 0.9 * len(planted)


def test_a_small_table_is_decided_by_column_agreement_not_by_an_empty_fit() -> None:
    header = ["id", "name", "city", "born"]
    rows = [
        ["1", "Ada Lovelace", "London", "1815-12-10"],
        ["2", "ada lovelace", "London", "1815-12-10"],
        ["3", "Charles Babbage", "London", "1791-12-26"],  # shares only the city with 1 and 2
        ["4", "Alan Turing", "Wilmslow", "1912-06-23"],
    ]
    result = learned_duplicate_records(header, [RowChunk.from_rows(rows, len(header), 1)], RecordSchema("id"))
    assert result.model is not None and not result.model.learned
    assert "too few to learn weights from" in result.model.describe()[0]
    assert {
        (result.keys[a], result.keys[b]) for a, b in zip(result.pairs.i, result.pairs.j, strict=True)
    } == {("1", "2")}
    assert len(result.candidates) >= 2  # the city key made 1-3 and 2-3 candidates, then refused


def _guard(pairs: dict[tuple[int, int], float], threshold: float = 0.99) -> set[tuple[int, int]]:
    ordered = sorted(pairs)
    i = np.array([a for a, _ in ordered], dtype=np.int64)
    j = np.array([b for _, b in ordered], dtype=np.int64)
    probability = np.array([pairs[pair] for pair in ordered])
    kept = guarded_pairs(i, j, probability, np.flatnonzero(probability >= threshold))
    return {ordered[k] for k in kept.tolist()}


def test_a_likely_pair_does_not_bridge_two_groups_whose_other_pairs_do_not_match() -> None:
    """Rows 0-2 and 3-5 are two groups; 2-3 is likely on its own, but the other compared pairs
    between the groups are unlikely, so 2-3 is left out and the groups stay apart."""
    pairs = {pair: 0.999 for pair in itertools.combinations(range(3), 2)}
    pairs |= {pair: 0.998 for pair in itertools.combinations(range(3, 6), 2)}
    pairs |= {(2, 3): 0.995, (0, 3): 0.01, (1, 4): 0.2, (2, 5): 0.3}
    assert _guard(pairs) == {pair for pair, p in pairs.items() if p >= 0.99} - {(2, 3)}
    # the same bridge between groups whose other compared pairs mostly match is kept
    pairs |= {(0, 3): 0.9, (1, 4): 0.8}
    assert (2, 3) in _guard(pairs)
    # a row joins a pair of rows when 1 of the 2 pairs between them is likely (one pair of
    # slack: small groups' shares are coarse), but not a trio when 1 of 3 is
    assert _guard({(0, 1): 0.999, (1, 2): 0.995, (0, 2): 0.3}) == {(0, 1), (1, 2)}
    trio = {(0, 1): 0.999, (0, 2): 0.999, (1, 2): 0.999, (2, 3): 0.995, (0, 3): 0.1, (1, 3): 0.1}
    assert _guard(trio) == {(0, 1), (0, 2), (1, 2)}
    # a chain of single likely pairs, with nothing else compared, stays one group
    chain = {(0, 1): 0.999, (1, 2): 0.999, (2, 3): 0.995}
    assert _guard(chain) == set(chain)
    assert (
        len(guarded_pairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)))
        == 0
    )

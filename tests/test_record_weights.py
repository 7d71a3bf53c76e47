"""Fellegi–Sunter field weights fitted by EM (neardup.records.weights) and the comparison
levels they learn from (neardup.records.compare)."""

from __future__ import annotations

import csv
import itertools
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neardup.records.compare import (
    LEVELS,
    PairLevels,
    compare_pairs,
    compare_values,
    comparison_kind,
    normalize_column,
    prepare_table,
    term_counts,
)
from neardup.records.weights import (
    FieldWeights,
    estimate_u_random,
    fit_weights,
    match_probability,
    match_weights,
)

RECORDS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "dev" / "records"
BLOCKS = ("surname", "postcode", "date_of_birth")


def levels_of(a: list[Any], b: list[Any], kind: str) -> list[int]:
    return compare_values(normalize_column(a, kind), normalize_column(b, kind), kind).tolist()


# -- (d) comparisons per kind ------------------------------------------------------------------


def test_names_with_typos() -> None:
    left = ["Smith ", "jonathan", "smith", "catherine", "smith", None, "anne"]
    right = ["smith", "jonathon", "smyth", "katherine", "jones", "smith", ""]
    assert levels_of(left, right, "name") == [3, 2, 1, 1, 0, -1, -1]


def test_numbers_transposed_and_one_digit() -> None:
    left = ["19800512", "19800512", "19800512", "19800512", "1,000", "123"]
    right = ["19800521", "19800513", "19800512", "19811512", "1000", "1234"]
    assert levels_of(left, right, "number") == [1, 2, 3, 0, 3, 0]
    assert levels_of(["5", "12", "12", "123"], ["6", "21", "13", "124"], "number") == [0, 0, 0, 2]


def test_dates_in_any_year_first_form() -> None:
    left = ["1980-05-12", "1980-05-12", "1980-05-12", "1980-05-12"]
    right = ["1980/05/12", "1980-05-21", "1980-06-12", "1999-01-01"]
    assert levels_of(left, right, "date") == [3, 1, 2, 0]


def test_phone_and_postcode_formats() -> None:
    left = ["+61 2 9876 5432", "(02) 9876-5432", "2600", "2600", "0800", "2600"]
    right = ["(02) 9876 5432", "02 9876 5499", "2612", "3600", "0800", "n/a"]
    assert levels_of(left, right, "code") == [2, 1, 1, 0, 2, -1]


def test_text_jaccard_bands() -> None:
    left = ["a b c d e f g h i j", "a b c d", "a b c d", "a b c d"]
    right = ["a b c d e f g h i j", "a b c e", "a b x y", "w x y z"]
    assert levels_of(left, right, "text") == [3, 2, 1, 0]


def test_close_values_with_other_numbers_are_different() -> None:
    """Numbers inside names and text must agree (as multisets); values without numbers on
    either side, and exact values, keep their levels."""
    left = ["4217 W. 18th St.", "1400 w augusta blvd", "smith street 21", "editorial 2003 notes", "pages 1 2"]
    right = ["4216 W. 19th St.", "1400 w augusta", "smith street", "editorial 2008 notes", "pages 2 1"]
    assert levels_of(left[:3], right[:3], "name") == [0, 2, 2]
    assert levels_of(left[3:], right[3:], "text") == [0, 3]
    assert levels_of(["editorial 2003"], ["editorial 2003"], "name") == [3]


def test_kinds_from_values() -> None:
    assert comparison_kind("phone", ["+61 2 9876 5432", "(02) 9876 5432", "0412 345 678"]) == "code"
    assert comparison_kind("postcode", ["2600", "4011", "3465"]) == "code"
    assert comparison_kind("zip", ["02134", "02139", "10001"]) == "code"
    assert comparison_kind("street_number", ["6", "69", "04"] + [str(n) for n in range(100)]) == "number"
    assert comparison_kind("dob", ["1980-05-12", "1999-01-01"]) == "date"
    assert comparison_kind("surname", ["smith", "jones", None]) == "name"
    assert comparison_kind("notes", ["the quick brown fox jumps", "over the lazy dog again"]) == "text"


# -- (a) recovery, (b) determinism -------------------------------------------------------------

TRUE_M = {"a": (0.05, 0.05, 0.1, 0.8), "b": (0.1, 0.2, 0.7), "c": (0.1, 0.1, 0.2, 0.6)}
TRUE_U = {"a": (0.85, 0.08, 0.04, 0.03), "b": (0.8, 0.15, 0.05), "c": (0.7, 0.15, 0.1, 0.05)}
KINDS = {"a": "name", "b": "code", "c": "text"}
TRUE_PRIOR = 0.25


def synthetic_pairs(count: int = 20_000, seed: int = 7) -> PairLevels:
    rng = np.random.default_rng(seed)
    match = rng.random(count) < TRUE_PRIOR
    columns = []
    for name in KINDS:
        m, u = np.asarray(TRUE_M[name]), np.asarray(TRUE_U[name])
        levels = np.where(match, rng.choice(len(m), count, p=m), rng.choice(len(u), count, p=u))
        levels[rng.random(count) < 0.1] = -1  # nulls carry no evidence
        columns.append(levels)
    empty = np.full(count, None, dtype=object)
    return PairLevels(
        tuple(KINDS), tuple(KINDS.values()), np.stack(columns, axis=1).astype(np.int8), (empty,) * 3
    )


def test_em_recovers_known_m_u_and_prior() -> None:
    fitted = fit_weights(synthetic_pairs())
    assert fitted.converged
    assert fitted.prior == pytest.approx(TRUE_PRIOR, abs=0.02)
    for name in KINDS:
        column = fitted.column(name)
        assert column.levels == LEVELS[KINDS[name]]
        np.testing.assert_allclose(column.m, TRUE_M[name], atol=0.05)
        np.testing.assert_allclose(column.u, TRUE_U[name], atol=0.05)
        np.testing.assert_allclose(column.weights, np.log2(np.divide(column.m, column.u)))


def test_fit_is_deterministic() -> None:
    pairs = synthetic_pairs()
    first, second = fit_weights(pairs), fit_weights(pairs)
    assert first == second
    assert first.describe() == second.describe()
    np.testing.assert_array_equal(match_weights(first, pairs), match_weights(second, pairs))


def test_fixed_u_is_kept() -> None:
    fitted = fit_weights(synthetic_pairs(), u={"b": TRUE_U["b"]})
    assert fitted.u_source == "random"
    np.testing.assert_allclose(fitted.column("b").u, TRUE_U["b"], atol=1e-6)
    np.testing.assert_allclose(fitted.column("b").m, TRUE_M["b"], atol=0.05)


def test_probability_is_the_logistic_of_the_weight() -> None:
    pairs = synthetic_pairs(2_000)
    fitted = fit_weights(pairs)
    bits = match_weights(fitted, pairs)
    np.testing.assert_allclose(match_probability(fitted, pairs), 1 / (1 + 2.0**-bits))
    assert isinstance(fitted, FieldWeights)
    lines = fitted.describe()
    assert len(lines) == 1 + len(KINDS) and all("exact" in line for line in lines[1:])


# -- (c) term frequencies ----------------------------------------------------------------------


def test_rare_value_agreement_outweighs_a_common_one() -> None:
    rng = np.random.default_rng(3)
    surnames = ["smith"] * 60 + [f"name{k}" for k in range(140)]
    given = [f"given{k % 90}" for k in range(200)]
    rows = {"surname": surnames, "given_name": given}
    table = prepare_table(rows)
    i = rng.integers(0, 200, 3000)
    j = (i + rng.integers(1, 200, 3000)) % 200
    fitted = fit_weights(compare_pairs(table, i, j))
    counts = term_counts(table)
    assert counts["surname"]["smith"] == 60
    common, rare = 0, 61  # both pairs below agree exactly on surname, differ on given name
    pairs = compare_pairs(table, [common, rare], [1, rare])
    pairs.levels[:, 1] = 0
    plain = match_weights(fitted, pairs)
    adjusted = match_weights(fitted, pairs, counts)
    assert plain[0] == pytest.approx(plain[1])
    assert adjusted[1] > adjusted[0] + 5  # 1/200 against 60/200: log2(60) ≈ 5.9 bits


def test_common_text_weighs_less_and_near_equal_text_keeps_the_column_weight() -> None:
    """Term frequencies for text: a title 30 rows share ("editorial") weighs less than a rare
    one; two near-equal titles (the top level, not one shared value) keep the column weight."""
    rng = np.random.default_rng(4)
    titles = ["editorial"] * 30 + [
        f"a long study of topic {k} in depth and detail with many words" for k in range(170)
    ]
    titles[199] = titles[31] + " today"  # near-equal to row 31: word Jaccard 13/14
    table = prepare_table({"title": titles}, {"title": "text"})
    i = rng.integers(0, 200, 3000)
    j = (i + rng.integers(1, 200, 3000)) % 200
    fitted = fit_weights(compare_pairs(table, i, j))
    pairs = compare_pairs(table, [0, 40, 31], [1, 40, 199])  # common equal, rare equal, near-equal
    assert pairs.levels[:, 0].tolist() == [3, 3, 3]
    assert pairs.left[0].tolist() == ["editorial", titles[40], None]
    plain = match_weights(fitted, pairs)
    adjusted = match_weights(fitted, pairs, term_counts(table))
    assert adjusted[1] > adjusted[0] + 4  # 1/200 against 30/200: log2(30) ≈ 4.9 bits
    assert adjusted[2] == pytest.approx(plain[2])


# -- (e) FEBRL ---------------------------------------------------------------------------------


def read_febrl(name: str) -> list[dict[str, str]]:
    path = RECORDS / f"{name}.csv"
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared FEBRL dev data is not mounted)")
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def blocked_pairs(rows: list[dict[str, str]]) -> tuple[np.ndarray, np.ndarray]:
    """All pairs sharing a surname, postcode or date of birth."""
    found: set[tuple[int, int]] = set()
    for column in BLOCKS:
        groups: dict[str, list[int]] = defaultdict(list)
        for row, record in enumerate(rows):
            if record[column].strip():
                groups[record[column].strip()].append(row)
        for members in groups.values():
            found.update(itertools.combinations(members, 2))
    ordered = np.asarray(sorted(found), dtype=np.int64)
    return ordered[:, 0], ordered[:, 1]


def pairwise_f1(rows: list[dict[str, str]], i: np.ndarray, j: np.ndarray, accepted: np.ndarray) -> float:
    clusters: dict[str, list[int]] = defaultdict(list)
    for row, record in enumerate(rows):
        clusters[record["cluster"]].append(row)
    gold = {pair for members in clusters.values() for pair in itertools.combinations(members, 2)}
    predicted = {(a, b) for a, b in zip(i[accepted].tolist(), j[accepted].tolist(), strict=True)}
    true = len(predicted & gold)
    if not true:
        return 0.0
    precision, recall = true / len(predicted), true / len(gold)
    return 2 * precision * recall / (precision + recall)


def features(rows: list[dict[str, str]]) -> dict[str, list[str]]:
    return {name: [row[name] for row in rows] for name in rows[0] if name not in ("id", "cluster")}


@pytest.mark.parametrize("u_source", ["em", "random"])
def test_febrl1_pairwise_f1(u_source: str) -> None:
    rows = read_febrl("febrl_dataset1")
    table = prepare_table(features(rows))
    i, j = blocked_pairs(rows)
    pairs = compare_pairs(table, i, j)
    fitted = fit_weights(pairs, u=estimate_u_random(table) if u_source == "random" else None)
    accepted = match_probability(fitted, pairs, term_counts(table)) >= 0.5
    assert pairwise_f1(rows, i, j, accepted) >= 0.9  # measured: 0.997 either way
    assert fitted.column("soc_sec_id").exact > 3 and fitted.column("given_name").exact > 3


def test_columns_that_never_discriminate_weigh_little() -> None:
    rows = read_febrl("febrl_dataset1")
    rng = np.random.default_rng(11)
    columns = features(rows)
    count = len(rows)
    columns["constant"] = ["au"] * count
    columns["mostly_null"] = [rng.choice(["x", "y"]) if rng.random() < 0.05 else "" for _ in range(count)]
    columns["row_id"] = [f"{value:032x}" for value in rng.integers(0, 2**62, count)]  # never agrees
    columns["source"] = ["b" if "-dup-" in row["id"] else "a" for row in rows]  # differs in duplicates
    table = prepare_table(columns)
    i, j = blocked_pairs(rows)
    pairs = compare_pairs(table, i, j)
    fitted = fit_weights(pairs)
    for name in ("constant", "mostly_null", "row_id"):
        assert max(abs(weight) for weight in fitted.column(name).weights) < 1.0, name
    source = fitted.column("source")
    assert source.different < 1.5 and source.exact < 0  # never lifts a pair much
    accepted = match_probability(fitted, pairs, term_counts(table)) >= 0.5
    assert pairwise_f1(rows, i, j, accepted) >= 0.9

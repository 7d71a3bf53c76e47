"""Fellegi–Sunter field weights fitted by EM (neardup.records.weights) and the comparison
levels they learn from (neardup.records.compare)."""

from __future__ import annotations

import csv
import itertools
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neardup.errors import StorageDamagedError
from neardup.records.compare import (
    LEVELS,
    PairLevels,
    compare_pairs,
    compare_values,
    comparison_kind,
    normalize_column,
    prepare_table,
    term_counts,
    word_weights,
)
from neardup.records.index_model import RecordsModel, stored_terms
from neardup.records.weights import (
    MIN_ANCHORS,
    ColumnWeights,
    FieldWeights,
    HashedCounts,
    TermFrequencies,
    bound_disagreement,
    estimate_u_random,
    fit_weights,
    match_probability,
    match_weights,
    source_columns,
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


def test_punctuation_is_no_difference_and_no_word() -> None:
    """Values that differ only in punctuation reach the top level; exact agreement itself
    (and so term frequencies) stays on the values as written."""
    left = ["1110 W. Belmont", "Smith-Jones"]
    assert levels_of(left, ["1110 W Belmont", "smith jones"], "name") == [3, 3]
    title = "Call for Bids - Evidence from Online Labor Markets"
    assert levels_of([title], ["Call for bids: evidence from online labor markets"], "text") == [3]


def test_abbreviated_names_are_close_unless_their_numbers_differ() -> None:
    left = ["600 W. Madison", "Dept. of Physics", "37 W 47TH ST", "600 W. Madison", "Ann"]
    right = [
        "600 West Madison Street",
        "Department of Physics",
        "37 West 47th Street",
        "610 West Madison St",
        "Ann Lee",
    ]
    assert levels_of(left, right, "name") == [1, 1, 1, 0, 0]


def test_common_words_count_less_in_text() -> None:
    """With word weights, two sites of one organisation share only its common words (level 0
    where plain Jaccard gave 2), and a value sharing the rare words rises."""
    people = ["maria", "rosa", "ana", "lucia", "carmen", "iris", "nora", "elsa"]
    rows = [f"erie house fcch {name} site" for name in people]
    idf = word_weights(rows, [1] * len(rows), len(rows))
    assert idf["maria"] > idf["erie"] > 0

    def text_levels(a: list[str], b: list[str], weights: dict[str, float] | None) -> list[int]:
        return compare_values(
            normalize_column(a, "text"), normalize_column(b, "text"), "text", weights
        ).tolist()

    left, right = (
        ["erie house fcch maria site", "erie house fcch maria site"],
        ["erie house fcch rosa site", "maria site"],
    )
    assert text_levels(left, right, None) == [2, 1]
    assert text_levels(left, right, idf) == [0, 3]
    table = prepare_table({"site": rows})
    assert table.idf == ()  # prepare_table keeps plain Jaccard; the learned path adds weights


def _anchor_weights(names: tuple[str, ...], kinds: tuple[str, ...]) -> FieldWeights:
    """Column 0 a near key (exact agreement rare among non-matches), the others ordinary."""
    columns = []
    for position, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        size = len(LEVELS[kind])
        if position == 0:
            m, u = (
                (0.1,) * (size - 1) + (1.0 - 0.1 * (size - 1),),
                (0.999 - 0.001 * (size - 2),) + (0.001,) * (size - 1),
            )
        else:
            m, u = (0.4, 0.1, 0.1, 0.4), (0.7, 0.1, 0.1, 0.1)
        columns.append(ColumnWeights(name, kind, LEVELS[kind], m, u))
    return FieldWeights(tuple(columns), 0.2, 10, True)


def _pair_levels(names: tuple[str, ...], kinds: tuple[str, ...], levels: np.ndarray) -> PairLevels:
    empty = np.full(len(levels), None, dtype=object)
    return PairLevels(names, kinds, levels.astype(np.int8), tuple(empty for _ in names))


def test_columns_duplicates_rarely_fill_are_source_columns() -> None:
    """Pairs agreeing on the near key (the first 100) never both fill ``flag``, which the
    other pairs always fill: ``flag`` comes with a source. ``city`` is filled alike."""
    names, kinds = ("doi", "flag", "city"), ("code", "name", "name")
    levels = np.zeros((200, 3), dtype=np.int64)
    levels[:100, 0] = 2  # anchored
    levels[:100, 1] = -1
    levels[100:, 1] = 3
    levels[:, 2] = np.tile([3, 0], 100)
    weights = _anchor_weights(names, kinds)
    assert source_columns(weights, _pair_levels(names, kinds, levels)) == ["flag"]
    few = levels.copy()
    few[MIN_ANCHORS - 1 :, 0] = 0  # too few anchored pairs to tell
    assert source_columns(weights, _pair_levels(names, kinds, few)) == []


def test_anchored_pairs_bound_the_disagreement_of_the_other_columns() -> None:
    names, kinds = ("doi", "title", "pages"), ("code", "text", "name")
    levels = np.zeros((300, 3), dtype=np.int64)
    levels[:100, 0] = 2  # anchored: title differs in 5 of them
    levels[:100, 1] = np.where(np.arange(100) < 5, 0, 3)
    levels[:100, 2] = np.where(np.arange(100) < 5, 0, 3)
    weights = _anchor_weights(names, kinds)
    out_of_model = ColumnWeights("pages", "name", LEVELS["name"], (0.25,) * 4, (0.25,) * 4)
    weights = FieldWeights((*weights.columns[:2], out_of_model), 0.2, 10, True)
    bounded = bound_disagreement(weights, _pair_levels(names, kinds, levels))
    title = bounded.column("title")
    assert title.m[0] == pytest.approx(5.5 / 102)
    assert sum(title.m) == pytest.approx(1.0)
    assert title.m[1] / title.m[3] == pytest.approx(0.1 / 0.4)  # the other levels keep proportions
    assert title.u == weights.column("title").u
    assert bounded.column("pages") == out_of_model  # out of the model: m = u stays
    assert bounded.column("doi") == weights.column("doi")  # no other near key anchors it
    levels[:100, 1] = 0  # anchors that disagree more than EM's m never raise it
    assert bound_disagreement(weights, _pair_levels(names, kinds, levels)).column("title") == weights.column(
        "title"
    )


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


def test_term_frequencies_by_hash_count_as_the_values_do() -> None:
    """A stored model keeps its term frequencies by hash (:class:`HashedCounts`): every value
    counts what the value counts held, a value not held counts 1, lone surrogates included."""
    held = {"smith": 40, "jones": 2, "li": 7, "\udc80x": 3, "": 5}
    frequencies = TermFrequencies(HashedCounts.of(held), 100, 0.2)
    asked = ["smith", "li", "nobody", "\udc80x", "", "Smith", "jones"]
    assert frequencies.counts_of(asked).tolist() == [held.get(value, 1) for value in asked]
    assert TermFrequencies({}, 0, 0.0).counts_of(["a"]).tolist() == [1.0]
    assert TermFrequencies(HashedCounts.of({}), 0, 0.0).counts_of(["a", "b"]).tolist() == [1.0, 1.0]


def test_a_model_stored_with_term_frequencies_as_an_object_reads_as_by_hash() -> None:
    """Stores written before the hashes keep each column's counts as a JSON object: read as
    the same model, and written back by hash."""
    counts = {"name": Counter({"ann": 3, "bo": 2, "cy": 1})}
    model = RecordsModel(
        key="id",
        columns=(("name", "name"),),
        specs=(),
        caps=(),
        weights=FieldWeights(
            (ColumnWeights("name", "name", (0, 1), (0.2, 0.8), (0.9, 0.1)),), 0.1, 3, True, "em"
        ),
        learned=True,
        threshold=0.9,
        idf=(None,),
        terms=stored_terms(counts),
        fitted=6,
    )
    meta = model.to_meta()
    assert RecordsModel.from_meta(meta, "here") == model
    old = {**meta, "terms": {"name": {"size": 6, "agreement": 14 / 36, "counts": {"ann": 3, "bo": 2}}}}
    assert RecordsModel.from_meta(old, "here") == model
    assert "hashes" in meta["terms"]["name"] and "ann" not in str(meta)
    damaged = {**meta, "terms": {"name": {**meta["terms"]["name"], "counts": "AAAA"}}}
    with pytest.raises(StorageDamagedError, match="damaged"):
        RecordsModel.from_meta(damaged, "here")

"""Candidate pairs by exact keys (neardup.records.candidates) against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from neardup.records.candidates import (
    MAX_CAP,
    KeyColumn,
    candidate_pairs,
    candidates_for,
    choose_caps,
    factorize,
    key_types,
)


def random_table(seed: int, rows: int = 300, width: int = 6) -> list[KeyColumn]:
    """Columns of few to many distinct values (so some keys exceed the cap), nulls, and
    planted duplicates that copy a row and change one or two columns."""
    rng = np.random.default_rng(seed)
    kinds = ["name", "text", "code", "name", "number", "name"][:width]
    spreads = [3, 40, 150, 600, 20, 1000][:width]
    data = [[f"v{int(x)} w{int(x) % 7} z" for x in rng.integers(0, spread, rows)] for spread in spreads]
    for column in data:
        for row in rng.choice(rows, rows // 10, replace=False):
            column[row] = None  # type: ignore[call-overload]
    for copy in range(0, rows // 5):
        source, target = int(rng.integers(rows)), int(rng.integers(rows))
        for column in data:
            column[target] = column[source]
        for column in rng.choice(width, int(rng.integers(1, 3)), replace=False):
            data[column][target] = f"edited {copy}"
    columns = []
    for name, kind, values in zip("abcdef", kinds, data, strict=False):
        lookup: dict[str, int] = {}
        codes = factorize(values, lookup)
        columns.append(KeyColumn(name, kind, codes, list(lookup)))
    return columns


def brute_force(keys: list[tuple[str, np.ndarray]], rows: int, caps: tuple[int, ...]) -> set[tuple[int, int]]:
    expected: set[tuple[int, int]] = set()
    for (_, codes), cap in zip(keys, caps, strict=True):
        sizes = np.bincount(codes[codes >= 0]) if (codes >= 0).any() else np.zeros(0, dtype=np.int64)
        for a, b in itertools.combinations(range(rows), 2):
            if codes[a] >= 0 and codes[a] == codes[b] and sizes[codes[a]] <= cap:
                expected.add((a, b))
    return expected


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("cap", [None, 2, 7])
def test_candidates_are_exactly_the_pairs_sharing_a_rare_key(seed: int, cap: int | None) -> None:
    columns = random_table(seed)
    keys = key_types(columns)
    found = candidate_pairs(keys, 300, cap)
    assert cap is None or set(found.caps) == {cap}
    pairs = set(zip(found.i.tolist(), found.j.tolist(), strict=True))
    assert pairs == brute_force(keys, 300, found.caps)
    assert all(i < j for i, j in pairs)
    order = list(zip(found.i.tolist(), found.j.tolist(), strict=True))
    assert order == sorted(order) and len(order) == len(pairs)


def test_rows_agreeing_on_a_rare_column_are_candidates() -> None:
    columns = random_table(4)
    found = candidates_for(columns, 300, cap=5)
    pairs = set(zip(found.i.tolist(), found.j.tolist(), strict=True))
    for column in columns:
        sizes = np.bincount(column.codes[column.codes >= 0])
        for a, b in itertools.combinations(range(300), 2):
            code = column.codes[a]
            if code >= 0 and code == column.codes[b] and sizes[code] <= 5:
                assert (a, b) in pairs


def test_typo_tolerant_and_pair_keys() -> None:
    names = ["smith", "smyth", "jones", "smith", "brown"]
    lookup: dict[str, int] = {}
    surname = KeyColumn("surname", "name", factorize(names, lookup), list(lookup))
    keys = dict(key_types([surname]))
    assert keys["surname~phonetic"][0] == keys["surname~phonetic"][1] != keys["surname~phonetic"][2]
    given: dict[str, int] = {}
    first = KeyColumn("given", "name", factorize(["ann", "bob", "ann", "ann", "cy"], given), list(given))
    combined = dict(key_types([surname, first]))["surname+given"]
    assert combined[0] == combined[3] and len(set(combined.tolist())) == 4


def test_common_values_make_no_pairs_and_cap_fits_the_budget() -> None:
    lookup: dict[str, int] = {}
    constant = KeyColumn("state", "name", factorize(["wa"] * 99 + ["nsw"], lookup), list(lookup))
    found = candidates_for([constant], 100, cap=50)
    assert len(found) == 0
    histogram = np.zeros(51, dtype=np.int64)
    histogram[3] = 10**6  # 3 M pairs from groups of 3, beyond the 2 M budget: the cap falls to 2
    assert choose_caps([histogram], 1000) == [2]


def test_caps_share_the_budget_so_selective_key_types_keep_large_groups() -> None:
    """One cap for all would fall to 2 here; the selective type keeps every group."""
    selective = np.zeros(MAX_CAP + 1, dtype=np.int64)
    selective[[2, 12, 40]] = [1000, 50, 3]  # one person's many records share its rare keys
    common = np.zeros(MAX_CAP + 1, dtype=np.int64)
    common[2:] = 100_000  # a state: groups of every size, far beyond the budget
    caps = choose_caps([selective, common], 100_000)
    assert caps[0] == MAX_CAP and 2 <= caps[1] < MAX_CAP
    sizes = np.arange(MAX_CAP + 1)
    pairs = sum(
        int((h[: c + 1] * sizes[: c + 1] * (sizes[: c + 1] - 1) // 2).sum())
        for h, c in zip([selective, common], caps, strict=True)
    )
    assert pairs <= 2_000_000
    # the next larger cap of the cut type would not fit
    one_more = pairs + int(common[caps[1] + 1] * (caps[1] + 1) * caps[1] // 2)
    assert one_more > 2_000_000
    assert choose_caps([], 10) == []


def test_many_rows_stay_within_the_budget() -> None:
    rng = np.random.default_rng(0)
    rows = 200_000
    columns = []
    for name, spread in (("a", 5000), ("b", 3000), ("c", 8)):
        values = [f"{name}{k}" for k in range(spread)]
        columns.append(KeyColumn(name, "code", rng.integers(0, spread, rows).astype(np.int64), values))
    found = candidates_for(columns, rows)
    assert min(found.caps) >= 2 and len(found) <= max(2_000_000, 5 * rows)

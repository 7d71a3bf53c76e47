"""Tests for :mod:`neardup.dedup.batch`: find_all_pairs against a brute-force scan written here
(planted neighbours at every distance, every kind of scheme, forced second hashing, skewed
and duplicated data), bucket statistics against direct counts, input checks and single_pass."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import ConfigError, InputError, to_array
from neardup.blocks import BlockScheme
from neardup.dedup import batch
from neardup.dedup.batch import (
    BucketStats,
    Pairs,
    brute_force_pairs,
    find_all_pairs,
    single_pass,
    split_size,
)

WIDTHS = (32, 64, 128)
Triple = tuple[int, int, int]


def uint(bits: int) -> st.SearchStrategy[int]:
    return st.integers(min_value=0, max_value=(1 << bits) - 1)


def flip(value: int, positions: list[int]) -> int:
    for position in positions:
        value ^= 1 << position
    return value


def brute(values: list[int], max_distance: int) -> list[Triple]:
    """Every (i, j, distance) with i < j within the distance, by scanning all pairs."""
    out = []
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            distance = (values[i] ^ values[j]).bit_count()
            if distance <= max_distance:
                out.append((i, j, distance))
    return out


def triples(pairs: Pairs) -> list[Triple]:
    assert pairs.i.dtype == np.int64
    assert pairs.j.dtype == np.int64
    assert pairs.distance.dtype == np.uint8
    assert pairs.i.shape == pairs.j.shape == pairs.distance.shape == (len(pairs),)
    return list(zip(pairs.i.tolist(), pairs.j.tolist(), pairs.distance.tolist(), strict=True))


def check_pairs(pairs: Pairs, values: list[int], max_distance: int) -> None:
    """``pairs`` is exactly the brute-force answer: same pairs, once each, i < j, sorted."""
    got = triples(pairs)
    assert got == brute(values, max_distance)
    assert all(i < j for i, j, _ in got)
    assert len(set(got)) == len(got)


@st.composite
def planted(draw: st.DrawFn, bits: int, max_distance: int) -> list[int]:
    """Random fingerprints plus neighbours planted at every distance 0 .. max_distance + 1,
    optionally skewed (many share their top 16 bits), in a random order."""
    values = draw(st.lists(uint(bits), min_size=1, max_size=20))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = random.Random(seed)
    values += [rng.getrandbits(bits) for _ in range(draw(st.integers(0, 20)))]
    if draw(st.booleans()):
        top = draw(uint(16)) << (bits - 16)
        low = (1 << (bits - 16)) - 1
        values = [top | (value & low) if rng.random() < 0.7 else value for value in values]
    for distance in range(max_distance + 2):
        for _ in range(draw(st.integers(1, 3))):
            source = values[draw(st.integers(0, len(values) - 1))]
            flips = draw(
                st.lists(st.integers(0, bits - 1), min_size=distance, max_size=distance, unique=True)
            )
            values.append(flip(source, flips))
    order = draw(st.permutations(range(len(values))))
    return [values[index] for index in order]


@st.composite
def scheme_for(draw: st.DrawFn, bits: int, k: int) -> BlockScheme | None:
    """None (auto), the plain pigeonhole scheme, a Manku (m, t) scheme or an auto-tuned one."""
    kind = draw(st.sampled_from(["none", "plain", "manku", "auto"]))
    if kind == "none":
        return None
    if kind == "plain":
        return BlockScheme(bits, k)
    if kind == "auto":
        return BlockScheme.auto(draw(st.sampled_from([10**6, 10**7, 10**9])), bits, k)
    m = draw(st.integers(k + 1, min(bits, k + 9)))
    choices = [t for t in range(1, m - k + 1) if math.comb(m, t) <= 40]
    return BlockScheme(bits, k, m, draw(st.sampled_from(choices)))


SPLITS = [
    {},
    {"split_threshold": 1},
    {"split_threshold": 2},
    {"mu": 0.0},
    {"mu": 0.0, "split_threshold": 3},
    {"split_threshold": float("inf")},
]


# --- the oracle ------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(data=st.data(), bits=st.sampled_from(WIDTHS), k=st.integers(0, 5))
def test_find_all_pairs_equals_brute_force(data: st.DataObject, bits: int, k: int) -> None:
    values = data.draw(planted(bits, k))
    scheme = data.draw(scheme_for(bits, k))
    # the query distance may be below the scheme's
    query = k if scheme is None else data.draw(st.integers(0, k))
    split = data.draw(st.sampled_from(SPLITS))
    pairs = find_all_pairs(to_array(values, bits), query, bits=bits, scheme=scheme, **split)
    check_pairs(pairs, values, query)
    # the planted neighbours make every distance 0 .. query appear, and query + 1 exist
    assert {distance for _, _, distance in triples(pairs)} == set(range(query + 1))
    assert any(distance == query + 1 for _, _, distance in brute(values, query + 1))


@settings(max_examples=50, deadline=None)
@given(data=st.data(), bits=st.sampled_from(WIDTHS), k=st.integers(0, 4))
def test_every_split_setting_gives_the_same_pairs(data: st.DataObject, bits: int, k: int) -> None:
    values = data.draw(planted(bits, k))
    scheme = data.draw(scheme_for(bits, k))
    expected = brute(values, k)
    array = to_array(values, bits)
    for split in SPLITS:
        assert triples(find_all_pairs(array, k, bits=bits, scheme=scheme, **split)) == expected, split
    assert triples(brute_force_pairs(array, k, bits=bits)) == expected


@pytest.mark.parametrize(
    ("bits", "k", "m", "t"),
    [(128, 1, 4, 3), (128, 1, 9, 8), (128, 2, 4, 2), (64, 1, 2, 1), (32, 1, 32, 31), (64, 0, 1, 1)],
)
@pytest.mark.parametrize("split", SPLITS)
def test_wide_keys_and_tiny_remainders(bits: int, k: int, m: int, t: int, split: dict) -> None:
    # keys wider than 64 bits are cut to a prefix; keys that leave <= k bits outside get one
    # empty sub-block; a 64-bit key (k = 0, m = 1) is cut to fit beside the index
    rng = random.Random(bits * 1000 + m * 10 + t)
    values = [rng.getrandbits(bits) for _ in range(30)]
    for _ in range(60):
        source = rng.choice(values)
        values.append(flip(source, rng.sample(range(bits), rng.randint(0, k + 1))))
    rng.shuffle(values)
    pairs = find_all_pairs(to_array(values, bits), k, bits=bits, scheme=BlockScheme(bits, k, m, t), **split)
    check_pairs(pairs, values, k)


# --- skewed and duplicated data --------------------------------------------------------------


def skewed(bits: int, k: int, seed: int, size: int = 300) -> list[int]:
    """``size`` fingerprints sharing their top 16 bits (32 at 128 bits: the first pigeonhole
    block), with neighbours at distances 0 .. k + 1, some of them flipping bits inside the
    shared block, plus a few unrelated ones."""
    rng = random.Random(seed)
    shared = max(16, bits // 4)
    top = (0xBEEF_0FF1 >> (32 - shared)) << (bits - shared)
    low = (1 << (bits - shared)) - 1
    values = [top | (rng.getrandbits(bits) & low) for _ in range(size // 2)]
    while len(values) < size:
        source = rng.choice(values)
        values.append(flip(source, rng.sample(range(bits), rng.randint(0, k + 1))))
    values += [rng.getrandbits(bits) for _ in range(20)]
    rng.shuffle(values)
    return values


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("split", SPLITS)
def test_skewed_block(bits: int, split: dict) -> None:
    values = skewed(bits, 3, seed=bits)
    scheme = BlockScheme(bits, 3)
    stats = BucketStats()
    pairs = find_all_pairs(to_array(values, bits), 3, bits=bits, scheme=scheme, stats=stats, **split)
    check_pairs(pairs, values, 3)
    assert stats.tables[0].largest >= 150
    if split.get("split_threshold") == float("inf"):
        assert stats.split == 0
    else:  # the default threshold is 32 entries here, far below the shared bucket
        assert stats.tables[0].split >= 1


@pytest.mark.parametrize(("bits", "m", "t"), [(64, 5, 2), (64, 7, 3), (128, 6, 2), (32, 6, 2)])
@pytest.mark.parametrize("split", [{}, {"split_threshold": 1}])
def test_skewed_block_manku(bits: int, m: int, t: int, split: dict) -> None:
    values = skewed(bits, 3, seed=m * t)
    pairs = find_all_pairs(to_array(values, bits), 3, bits=bits, scheme=BlockScheme(bits, 3, m, t), **split)
    check_pairs(pairs, values, 3)


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("split", SPLITS)
def test_many_exact_duplicates(bits: int, split: dict) -> None:
    rng = random.Random(7)
    first, second = rng.getrandbits(bits), rng.getrandbits(bits)
    values = [first] * 60 + [second] * 45 + [flip(first, [0, bits - 1])] * 5 + [flip(second, [3])] * 3
    values += [rng.getrandbits(bits) for _ in range(10)]
    rng.shuffle(values)
    pairs = find_all_pairs(to_array(values, bits), 3, bits=bits, **split)
    check_pairs(pairs, values, 3)
    assert Counter(distance for _, _, distance in triples(pairs))[0] == 60 * 59 // 2 + 45 * 44 // 2 + 10 + 3


def test_all_identical() -> None:
    values = [0xDEAD_BEEF] * 100
    pairs = find_all_pairs(to_array(values, 64), 3, split_threshold=1)
    assert len(pairs) == 100 * 99 // 2
    check_pairs(pairs, values, 3)


def test_small_verification_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    # candidates are verified in chunks of PAIR_CHUNK; make the chunks tiny to cross boundaries
    monkeypatch.setattr(batch.pairs_in_runs, "__defaults__", (5,))
    values = skewed(64, 3, seed=11, size=120)
    for split in ({}, {"split_threshold": 1}, {"split_threshold": float("inf")}):
        check_pairs(find_all_pairs(to_array(values, 64), 3, **split), values, 3)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1000])
def test_pairs_in_runs_chunks(chunk: int) -> None:
    starts = np.array([0, 5, 9, 20], dtype=np.int64)
    lengths = np.array([3, 2, 6, 4], dtype=np.int64)
    expected = [
        (start + x, start + y)
        for start, length in zip(starts.tolist(), lengths.tolist(), strict=True)
        for x in range(length)
        for y in range(x + 1, length)
    ]
    got = []
    for a, b in batch.pairs_in_runs(starts, lengths, chunk):
        got += list(zip(a.tolist(), b.tolist(), strict=True))
    assert sorted(got) == sorted(expected)
    assert len(got) == len(expected)


# --- edge cases and input checks -------------------------------------------------------------


@pytest.mark.parametrize("bits", WIDTHS)
def test_empty_single_and_two(bits: int) -> None:
    empty = np.empty((0, 2) if bits == 128 else 0, dtype=np.uint64)
    assert triples(find_all_pairs(empty, 3, bits=bits)) == []
    assert triples(find_all_pairs(to_array([5], bits), 3, bits=bits)) == []
    assert triples(find_all_pairs(to_array([5, 6], bits), 3, bits=bits)) == [(0, 1, 2)]
    assert triples(find_all_pairs(to_array([5, 6], bits), 1, bits=bits)) == []
    assert triples(find_all_pairs(to_array([7, 7], bits), 0, bits=bits)) == [(0, 1, 0)]


def test_empty_list_input() -> None:
    assert len(find_all_pairs([], 3)) == 0
    assert len(find_all_pairs([], 3, bits=32)) == 0


@pytest.mark.parametrize("bits", WIDTHS)
def test_max_distance_zero(bits: int) -> None:
    rng = random.Random(3)
    values = [rng.getrandbits(bits) for _ in range(20)]
    values += [values[3], values[3], values[8], flip(values[8], [1])]
    pairs = find_all_pairs(to_array(values, bits), 0, bits=bits)
    check_pairs(pairs, values, 0)
    assert [(i, j) for i, j, _ in triples(pairs)] == [(3, 20), (3, 21), (8, 22), (20, 21)]


def test_max_distance_below_the_scheme() -> None:
    values = skewed(64, 3, seed=5, size=100)
    for query in range(4):
        pairs = find_all_pairs(to_array(values, 64), query, scheme=BlockScheme(64, 3, 6, 3))
        check_pairs(pairs, values, query)


def test_max_distance_above_the_scheme_raises() -> None:
    with pytest.raises(ConfigError, match="build the scheme with max_distance=4"):
        find_all_pairs(to_array([1, 2], 64), 4, scheme=BlockScheme(64, 3))


@pytest.mark.parametrize("max_distance", [-1, 64])
def test_max_distance_out_of_range(max_distance: int) -> None:
    with pytest.raises(ConfigError):
        find_all_pairs(to_array([1, 2], 64), max_distance)
    with pytest.raises(ConfigError):
        find_all_pairs(to_array([1, 2], 64), max_distance, scheme=BlockScheme(64, 3))


@pytest.mark.parametrize(("bits", "scheme_bits"), [(64, 128), (32, 64), (128, 64), (64, 32)])
def test_scheme_bits_mismatch(bits: int, scheme_bits: int) -> None:
    with pytest.raises(ConfigError, match=f"for {scheme_bits}-bit fingerprints, not {bits}-bit"):
        find_all_pairs(to_array([1, 2], bits), 3, bits=bits, scheme=BlockScheme(scheme_bits, 3))


def test_bad_bits_and_mu() -> None:
    with pytest.raises(ConfigError, match="bits must be"):
        find_all_pairs(to_array([1, 2], 64), 3, bits=48)
    with pytest.raises(ConfigError, match="mu must be >= 0"):
        find_all_pairs(to_array([1, 2], 64), 3, mu=-0.5)


@pytest.mark.parametrize(
    ("fingerprints", "bits", "message"),
    [
        (np.zeros((3, 2), dtype=np.uint64), 64, "one-dimensional"),
        (np.zeros((3, 1), dtype=np.uint64), 32, "one-dimensional"),
        (np.zeros(3, dtype=np.uint64), 128, r"\(n, 2\)"),
        (np.zeros((3, 3), dtype=np.uint64), 128, r"\(n, 2\)"),
        (np.zeros((2, 2, 2), dtype=np.uint64), 128, r"\(n, 2\)"),
        (np.zeros(0, dtype=np.uint64), 128, r"\(n, 2\)"),
        (np.array([1.0, 2.0]), 64, "non-negative integers"),
        (np.array([True, False]), 64, "non-negative integers"),
        (np.array(["1", "2"]), 64, "non-negative integers"),
        (np.array([-1, 3], dtype=np.int64), 64, "non-negative integers"),
        (np.array([[1, -2]], dtype=np.int64), 128, "non-negative integers"),
        ([-1, 3], 64, "non-negative integers"),
        ([3, -1], 32, "non-negative integers"),
        ([1 << 64, 3], 64, "non-negative integers"),
        ([1.5, 3], 64, "non-negative integers"),
        (np.array([1 << 32, 3], dtype=np.uint64), 32, "does not fit in 32 bits"),
        (np.array([3, (1 << 64) - 1], dtype=np.uint64), 32, "does not fit in 32 bits"),
        ([1 << 32], 32, "does not fit in 32 bits"),
    ],
)
def test_bad_inputs_raise_input_error(fingerprints: object, bits: int, message: str) -> None:
    with pytest.raises(InputError, match=message):
        find_all_pairs(fingerprints, 3, bits=bits)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=message):
        single_pass(fingerprints, 3, bits=bits)  # type: ignore[arg-type]


def test_other_integer_dtypes_and_lists_are_accepted() -> None:
    values = [0, 1, 3, 1 << 20, (1 << 20) | 1]
    expected = brute(values, 2)
    for form in (values, np.array(values, dtype=np.int64), np.array(values, dtype=np.uint32)):
        assert triples(find_all_pairs(form, 2)) == expected
        assert triples(find_all_pairs(form, 2, bits=32)) == expected


def test_python_int_lists_straddling_two_to_the_63() -> None:
    # numpy reads [2**63, 3] as float64; valid 64-bit fingerprints must still be accepted exactly
    values = [1 << 63, 3, (1 << 64) - 1, (1 << 63) | 3, (1 << 64) - 2]
    assert triples(find_all_pairs(values, 3)) == brute(values, 3)
    assert single_pass(values, 3).tolist() == reference_single_pass(values, 3)
    wide = [[1 << 63, 1], [3, 1], [(1 << 64) - 1, 0]]  # 128-bit [low, high] rows
    as_ints = [low | (high << 64) for low, high in wide]
    assert triples(find_all_pairs(wide, 3)) == brute(as_ints, 3)


def test_bits_are_inferred_from_the_shape() -> None:
    values = [(1 << 100) | 5, (1 << 100) | 4, (0xF << 124) | 5]
    pairs = find_all_pairs(to_array(values, 128), 3)  # (n, 2) → 128 bits
    assert triples(pairs) == [(0, 1, 1)]
    assert triples(find_all_pairs(to_array([5, 4], 64), 3)) == [(0, 1, 1)]


# --- statistics ------------------------------------------------------------------------------


def table_keys(scheme: BlockScheme, key_bits: int, table: int, values: list[int]) -> list[int]:
    return [scheme.tables[table].prefix(key_bits).extract_int(value) for value in values]


@pytest.mark.parametrize(
    ("bits", "scheme", "split"),
    [
        (64, BlockScheme(64, 3), {}),
        (64, BlockScheme(64, 3), {"split_threshold": 1}),
        (64, BlockScheme(64, 3), {"split_threshold": float("inf")}),
        (64, BlockScheme(64, 3), {"mu": 0.0}),
        (32, BlockScheme(32, 3, 6, 2), {"split_threshold": 2}),
        (128, BlockScheme(128, 3, 5, 2), {}),
        (128, BlockScheme(128, 1, 4, 3), {"split_threshold": 1}),
    ],
)
def test_bucket_stats_match_direct_counts(bits: int, scheme: BlockScheme, split: dict) -> None:
    values = skewed(bits, scheme.max_distance, seed=bits + scheme.table_count, size=200)
    values += values[:10]  # exact duplicates
    stats = BucketStats()
    calls: list[int] = []
    pairs = find_all_pairs(
        to_array(values, bits),
        scheme.max_distance,
        bits=bits,
        scheme=scheme,
        stats=stats,
        progress=calls.append,
        **split,
    )
    check_pairs(pairs, values, scheme.max_distance)
    assert calls == [1] * scheme.table_count
    assert stats.scheme == scheme.describe()
    assert [table.table for table in stats.tables] == list(range(scheme.table_count))
    threshold = split.get("split_threshold")
    n = len(values)
    # each pair is reported by the first table whose key agrees
    keys = [table_keys(scheme, table.key_bits, t, values) for t, table in enumerate(stats.tables)]
    first_table = Counter(
        next(t for t in range(len(keys)) if keys[t][i] == keys[t][j]) for i, j, _ in triples(pairs)
    )
    for t, table in enumerate(stats.tables):
        # keys are cut to a prefix only when they would not fit in a word beside the index
        assert table.key_bits <= scheme.tables[t].bit_count
        assert table.key_bits >= min(scheme.tables[t].bit_count, 48)
        counts = np.array(list(Counter(keys[t]).values()))
        assert table.buckets == counts.size
        assert table.largest == counts.max()
        assert table.mean == pytest.approx(n / counts.size)
        limit = threshold if threshold is not None else split_size(n, table.key_bits, split.get("mu", 2.0))
        assert table.split == int(np.count_nonzero(counts > limit))
        assert table.pairs == first_table[t]
        assert table.candidates >= table.pairs
        if table.split == 0:  # every pair inside a bucket is a candidate
            assert table.candidates == sum(int(c) * (int(c) - 1) // 2 for c in counts)
    assert sum(table.pairs for table in stats.tables) == len(pairs)
    assert stats.candidates == sum(table.candidates for table in stats.tables) >= len(pairs)
    assert stats.largest == max(table.largest for table in stats.tables)
    assert stats.split == sum(table.split for table in stats.tables)
    if threshold is not None:
        assert stats.threshold == threshold
    if threshold == 1:
        assert stats.split > 0
    if threshold == float("inf"):
        assert stats.split == 0
    lines = stats.format().splitlines()
    assert lines[0] == f"scheme: {scheme.describe()}"
    assert len(lines) == 3 + scheme.table_count


def test_split_size() -> None:
    assert split_size(10, 16) == batch.MIN_SPLIT
    assert split_size(1 << 26, 16) == 3.0 * 1024
    assert split_size(1 << 26, 16, mu=0.0) == 1024.0
    assert split_size(1 << 26, 16, mu=1.0) == 2048.0


@pytest.mark.parametrize("n", [0, 1])
def test_stats_of_tiny_inputs(n: int) -> None:
    stats = BucketStats()
    find_all_pairs(to_array([9] * n, 64), 3, scheme=BlockScheme(64, 3), stats=stats)
    assert len(stats.tables) == 4
    assert all(table.buckets == n and table.largest == n and table.candidates == 0 for table in stats.tables)
    assert stats.largest == n
    assert stats.candidates == stats.split == 0


def test_stats_of_distinct_keys() -> None:
    values = [i << 48 | i << 32 | i << 16 | i for i in range(50)]  # every block distinct
    stats = BucketStats()
    assert len(find_all_pairs(to_array(values, 64), 3, scheme=BlockScheme(64, 3), stats=stats)) == 0
    assert all(table.buckets == 50 and table.largest == 1 and table.candidates == 0 for table in stats.tables)


# --- single_pass -----------------------------------------------------------------------------


def reference_single_pass(values: list[int], max_distance: int) -> list[int]:
    centres: list[int] = []
    labels = []
    for row, value in enumerate(values):
        label = next((c for c in centres if (values[c] ^ value).bit_count() <= max_distance), None)
        if label is None:
            centres.append(row)
            label = row
        labels.append(label)
    return labels


@settings(max_examples=60, deadline=None)
@given(data=st.data(), bits=st.sampled_from(WIDTHS), k=st.integers(0, 5))
def test_single_pass_matches_the_reference(data: st.DataObject, bits: int, k: int) -> None:
    values = data.draw(planted(bits, k))
    labels = single_pass(to_array(values, bits), k, bits=bits)
    assert labels.dtype == np.int64
    assert labels.tolist() == reference_single_pass(values, k)
    centres = sorted(set(labels.tolist()))
    for row, label in enumerate(labels.tolist()):
        assert (values[row] ^ values[label]).bit_count() <= k
        assert label <= row
    for centre in centres:
        assert labels[centre] == centre
        assert labels.tolist().index(centre) == centre  # the first record of its cluster
    for a in centres:  # centres are pairwise further apart than k
        for b in centres:
            assert a == b or (values[a] ^ values[b]).bit_count() > k


def test_single_pass_small_cases() -> None:
    assert single_pass(to_array([], 64), 3).tolist() == []
    assert single_pass(np.empty((0, 2), dtype=np.uint64), 3).tolist() == []
    assert single_pass(to_array([5], 64), 3).tolist() == [0]
    # 0b111 is 1 from the centre 0b1111 but joins the first centre within 3, which is 0
    values = [0, 0b1111, 0b111, 0b1111 << 8, 0]
    assert single_pass(to_array(values, 64), 3).tolist() == [0, 1, 0, 3, 0]
    assert single_pass(to_array(values, 64), 0).tolist() == [0, 1, 2, 3, 0]


@pytest.mark.parametrize(("bits", "m", "t"), [(64, 5, 2), (128, 6, 2), (64, 4, 1)])
def test_tables_searched_at_once_give_the_same_pairs_and_statistics(
    bits: int, m: int, t: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = []
    monkeypatch.setattr(batch, "partition_of", lambda *args: made.append(1) or real_partition_of(*args))
    values = skewed(bits, 3, seed=m + t, size=6000)  # enough keys for partitions of their top bits
    scheme = BlockScheme(bits, 3, m, t)
    answers = []
    for workers in (1, 2, 3):
        stats, ticks = BucketStats(), []
        pairs = find_all_pairs(
            to_array(values, bits),
            3,
            bits=bits,
            scheme=scheme,
            stats=stats,
            progress=ticks.append,
            workers=workers,
        )
        answers.append((triples(pairs), [vars(table) for table in stats.tables], stats.threshold, sum(ticks)))
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][0] == triples(brute_force_pairs(to_array(values, bits), 3, bits=bits))
    assert answers[0][3] == scheme.table_count
    # Tables whose keys begin with the same bits share one partition, made once a search
    # (unsplit buckets here: the second hash sorts its sub-keys by partitions of their own).
    made.clear()
    unsplit = find_all_pairs(
        to_array(values, bits), 3, bits=bits, scheme=scheme, split_threshold=float("inf")
    )
    assert triples(unsplit) == answers[0][0]
    assert len(made) == len({table.positions[: batch.partition_bits(len(values))] for table in scheme.tables})
    with pytest.raises(ConfigError, match="workers must be >= 1"):
        find_all_pairs(to_array(values, bits), 3, bits=bits, workers=0)


real_partition_of = batch.partition_of


def test_tables_run_at_once_only_while_they_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch.os, "cpu_count", lambda: 8)
    assert batch._table_workers(10**6, 10, None) == 2
    assert batch._table_workers(10**8, 10, None) == 1  # 4.8 GB a table: one at a time
    assert batch._table_workers(10**6, 1, None) == 1
    assert batch._table_workers(1000, 10, None) == 1  # small: threads cost more than they save
    assert batch._table_workers(10**6, 10, 4) == 4


@pytest.mark.parametrize("size", [0, 1, 2, 255, 4096, 70_000])
@pytest.mark.parametrize("high", [1, 7, 2**20, 2**63])
def test_sorted_keys_is_np_sort(size: int, high: int) -> None:
    values = np.random.default_rng(size + high % 97).integers(0, high, size, dtype=np.uint64)
    assert np.array_equal(batch.sorted_keys(values.copy()), np.sort(values))

"""The wide Hamming search (issue 32 item 2): find_all_pairs exact against a brute-force scan
for k up to 22 on 64 bits and 44 on 128 bits, whichever plan runs (scan, tuned blocks, or a
Manku scheme with hundreds of tables, whose pairs are each emitted once by their lowest equal
blocks); the distance profile against direct counts; and -k auto chosen from the data, which
narrows on templated text instead of exploding."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from neardup.blocks import BlockScheme, expected_work
from neardup.dedup import auto, batch
from neardup.dedup.auto import (
    CLASSIC_DISTANCE,
    MAX_AUTO_DISTANCE,
    choose_search,
    distance_for,
    resolve_search,
)
from neardup.dedup.batch import BucketStats, brute_force_pairs, find_all_pairs, search_plan
from neardup.distance import DistanceProfile, as_words, distance_profile


def clustered(bits: int, size: int, spread: int, seed: int) -> np.ndarray:
    """``size`` fingerprints around size // 8 centres, each 0..spread bits from its centre."""
    rng = np.random.default_rng(seed)
    words = 2 if bits == 128 else 1
    centres = rng.integers(0, 2**63, size=(max(size // 8, 1), words), dtype=np.uint64) << np.uint64(1)
    centres |= rng.integers(0, 2, size=centres.shape, dtype=np.uint64)
    out = centres[rng.integers(0, len(centres), size=size)].copy()
    for row in range(size):
        for position in rng.choice(bits, size=int(rng.integers(0, spread + 1)), replace=False):
            out[row, position // 64] ^= np.uint64(1) << np.uint64(position % 64)
    if bits == 32:
        out &= np.uint64(0xFFFFFFFF)
    return out if bits == 128 else out[:, 0]


def same(found: batch.Pairs, expected: batch.Pairs) -> bool:
    return (
        found.i.tolist() == expected.i.tolist()
        and found.j.tolist() == expected.j.tolist()
        and found.distance.tolist() == expected.distance.tolist()
    )


@pytest.mark.parametrize(
    ("bits", "k"), [(64, 8), (64, 12), (64, 16), (64, 20), (64, 22), (128, 24), (128, 40)]
)
def test_wide_distances_equal_brute_force_under_every_plan(bits: int, k: int) -> None:
    fingerprints = clustered(bits, 300, k + 4, seed=k)
    expected = brute_force_pairs(fingerprints, k, bits=bits)
    assert len(expected) > 100  # pairs at many distances, some beyond k
    plans = [None, BlockScheme.auto(10**6, bits, k), BlockScheme.auto(300, bits, k), BlockScheme(bits, k)]
    if k <= 16:
        plans.append(BlockScheme(bits, k, k + 2, 2))  # C(k + 2, 2) tables: 153 at k = 16
    for scheme in plans:
        stats = BucketStats()
        found = find_all_pairs(fingerprints, k, bits=bits, scheme=scheme, stats=stats)
        assert same(found, expected), (scheme, stats.scheme)
        assert sum(table.pairs for table in stats.tables) == len(expected)


@pytest.mark.parametrize("split", [{}, {"split_threshold": 1}, {"split_threshold": float("inf")}])
def test_many_tables_emit_each_pair_once(split: dict) -> None:
    fingerprints = clustered(64, 400, 14, seed=3)
    scheme = BlockScheme(64, 12, 15, 3)  # 455 tables
    stats = BucketStats()
    found = find_all_pairs(fingerprints, 12, scheme=scheme, stats=stats, **split)
    assert same(found, brute_force_pairs(fingerprints, 12))
    assert [table.pairs for table in stats.tables] == first_tables(fingerprints, scheme, found)


def first_tables(fingerprints: np.ndarray, scheme: BlockScheme, found: batch.Pairs) -> list[int]:
    """Pairs per table when each goes to the first table (in order) whose blocks it shares."""
    counts = [0] * scheme.table_count
    keys = [[table.extract_int(int(value)) for value in fingerprints] for table in scheme.tables]
    for i, j in zip(found.i.tolist(), found.j.tolist(), strict=True):
        counts[next(t for t in range(scheme.table_count) if keys[t][i] == keys[t][j])] += 1
    return counts


def test_earlier_blocks_name_the_blocks_of_earlier_tables() -> None:
    scheme = BlockScheme(64, 3, 6, 3)
    for table, combination in enumerate(scheme.combinations):
        earlier = {b.positions for b in scheme.earlier_blocks(table)}
        expected = {scheme.blocks[i].positions for i in range(combination[-1]) if i not in combination}
        assert earlier == expected
        # equal on the table's blocks and on any of these puts a pair in an earlier table
        for extra in range(combination[-1]):
            if extra in combination:
                continue
            shared = set(combination) | {extra}
            first = next(t for t, c in enumerate(scheme.combinations) if set(c) <= shared)
            assert first < table


@pytest.mark.parametrize("bits", [32, 64, 128])
def test_scan_handles_tiny_inputs(bits: int) -> None:
    for size in (0, 1, 2):
        fingerprints = clustered(bits, 8, 1, seed=size)[:size]
        assert same(find_all_pairs(fingerprints, 5, bits=bits), brute_force_pairs(fingerprints, 5, bits=bits))


def test_progress_sums_to_the_given_schemes_tables() -> None:
    fingerprints = clustered(64, 200, 6, seed=1)
    tuned = BlockScheme.auto(10**7, 64, 6)
    calls: list[int] = []
    find_all_pairs(clustered(64, batch.PLAN_MIN, 6, seed=1), 6, scheme=tuned, progress=calls.append)
    assert sum(calls) == tuned.table_count
    calls.clear()
    find_all_pairs(fingerprints, 6, scheme=tuned, progress=calls.append)
    assert sum(calls) == tuned.table_count
    calls.clear()
    find_all_pairs(fingerprints, 6, progress=calls.append)
    assert sum(calls) >= 1


def test_a_scheme_given_by_hand_is_searched_as_given() -> None:
    fingerprints = clustered(64, 200, 4, seed=2)
    stats = BucketStats()
    find_all_pairs(fingerprints, 3, scheme=BlockScheme(64, 3, 5, 2), stats=stats)
    assert stats.scheme == BlockScheme(64, 3, 5, 2).describe()
    stats = BucketStats()
    find_all_pairs(fingerprints, 3, scheme=BlockScheme.auto(10**7, 64, 3), stats=stats)
    assert stats.scheme == BlockScheme.auto(10**7, 64, 3).describe()  # too few to plan again
    many = clustered(64, batch.PLAN_MIN, 14, seed=2)
    stats = BucketStats()
    find_all_pairs(many, 12, scheme=BlockScheme.auto(10**7, 64, 12), stats=stats)
    assert stats.scheme.startswith("scan")  # a tuned scheme is tuned again: 1,000 records scan
    stats = BucketStats()
    find_all_pairs(many, 12, stats=stats)
    assert stats.scheme.startswith("scan")


def test_auto_tuner_prices_schemes_like_their_tables() -> None:
    for bits, m, t in [(64, 5, 2), (64, 18, 2), (128, 7, 3), (32, 9, 4)]:
        scheme = BlockScheme(bits, 1, m, t)
        n = 10**6
        direct = sum(n + 0.5 * n * (n - 1) / 2 * 2.0 ** -min(table.bit_count, 64) for table in scheme.tables)
        assert expected_work(bits, m, t, n) == pytest.approx(direct)


def test_large_random_inputs_keep_the_uniform_scheme() -> None:
    fingerprints = np.random.default_rng(5).integers(0, 2**64 - 1, size=200_000, dtype=np.uint64)
    plan = search_plan(as_words(fingerprints, 64), 64, 3)
    assert plan == BlockScheme.auto(200_000, 64, 3)


# --- the profile --------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [32, 64, 128])
def test_exact_profile_counts_every_pair(bits: int) -> None:
    fingerprints = clustered(bits, 120, 10, seed=bits)
    words = as_words(fingerprints, bits)
    lengths = np.arange(120) % 7 + 1
    profile = distance_profile(words, bits, lengths=lengths)
    assert profile.exact
    counts = np.zeros(bits + 1)
    text = np.zeros(bits + 1)
    for i, j in itertools.combinations(range(120), 2):
        d = int(np.bitwise_count(words[i] ^ words[j]).sum())
        counts[d] += 1
        text[d] += lengths[i] + lengths[j]
    assert np.allclose(profile.pairs, counts)
    assert np.allclose(profile.text, text)
    assert profile.within(bits) == pytest.approx(120 * 119 / 2)
    cut = distance_profile(words, bits, lengths=lengths, text_up_to=bits // 4)
    assert np.allclose(cut.text[: bits // 4 + 1], text[: bits // 4 + 1])
    assert not cut.text[bits // 4 + 1 :].any()


def test_sampled_profile_estimates_the_pairs() -> None:
    fingerprints = clustered(64, 3000, 12, seed=9)
    words = as_words(fingerprints, 64)
    exact = distance_profile(words, 64)
    sampled = distance_profile(words, 64, budget=600 * 3000)
    assert not sampled.exact and sampled.rows == 600
    for k in (12, 20, 32):
        assert sampled.within(k) == pytest.approx(exact.within(k), rel=0.2)


def test_collisions_of_uniform_pairs_are_two_to_minus_the_key() -> None:
    bits, pairs = 64, 1e9
    uniform = np.array([math.comb(bits, d) for d in range(bits + 1)], dtype=np.float64) / 2.0**bits * pairs
    profile = DistanceProfile(bits, 10**5, 10**5, uniform)
    for width in (8, 16, 25):
        assert profile.collisions(width) == pytest.approx(pairs * 2.0**-width, rel=1e-9)


# --- -k auto from the data -----------------------------------------------------------------------


def test_templated_text_gets_a_narrower_distance() -> None:
    diverse = clustered(64, 2000, 3, seed=1)
    templated = clustered(64, 2000, 3, seed=1)
    rng = np.random.default_rng(2)
    template = rng.integers(0, 2**63, dtype=np.uint64)
    for row in range(0, 2000, 2):  # half the records within 24 bits of one template
        flips = rng.choice(64, size=int(rng.integers(8, 25)), replace=False)
        templated[row] = template ^ np.bitwise_or.reduce(np.uint64(1) << flips.astype(np.uint64))
    wide, narrow = choose_search(diverse).max_distance, choose_search(templated).max_distance
    assert wide == MAX_AUTO_DISTANCE[64]
    assert CLASSIC_DISTANCE <= narrow < wide
    # the chosen distance keeps the candidates within the budget
    found = find_all_pairs(templated, narrow)
    assert len(found) <= auto.CHECK_PAIRS_PER_RECORD * 2000


def test_long_texts_get_fewer_candidates_than_short_ones() -> None:
    fingerprints = clustered(64, 1500, 20, seed=4)
    words = as_words(fingerprints, 64)
    short = distance_for(distance_profile(words, 64, lengths=np.full(1500, 100)))
    long = distance_for(distance_profile(words, 64, lengths=np.full(1500, 5000)))
    assert long < short


def test_resolve_search_reads_the_data_only_for_an_automatic_distance() -> None:
    templated = np.zeros(500, dtype=np.uint64)  # every record identical
    assert resolve_search(500, 64, None, "auto", fingerprints=templated).max_distance == CLASSIC_DISTANCE
    assert resolve_search(500, 64, None, "auto").max_distance == 16  # the size rule without data
    assert resolve_search(500, 64, 7, "auto", fingerprints=templated) == auto.Search(7, "none")
    assert choose_search(np.zeros(0, dtype=np.uint64)).max_distance == MAX_AUTO_DISTANCE[64]

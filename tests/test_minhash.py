"""MinHash: exact 61-bit modular arithmetic, signatures against a Python reference, Jaccard
estimates within the standard error, the combined score formula and the byte form."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import MinHasher
from neardup.errors import ConfigError, InputError
from neardup.similarity.minhash import (
    EMPTY,
    combined_score,
    estimate_jaccard,
    exact_jaccard,
    hash_elements,
    mod_prime,
    mul_mod_prime,
    signature_from_bytes,
    signature_to_bytes,
    standard_error,
    universal_hash,
)

P = (1 << 61) - 1
residues = st.integers(0, P - 1)


@given(st.lists(st.tuples(residues, residues), min_size=1, max_size=50))
def test_mul_mod_prime_is_exact(pairs: list[tuple[int, int]]) -> None:
    a = np.array([x for x, _ in pairs], dtype=np.uint64)
    x = np.array([y for _, y in pairs], dtype=np.uint64)
    assert mul_mod_prime(a, x).tolist() == [(p * q) % P for p, q in pairs]


@given(st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=50))
def test_mod_prime_is_exact(values: list[int]) -> None:
    assert mod_prime(np.array(values, dtype=np.uint64)).tolist() == [v % P for v in values]


@given(
    st.lists(residues, min_size=1, max_size=8),
    st.lists(st.integers(0, (1 << 32) - 1), min_size=1, max_size=20),
)
def test_universal_hash_is_a_x_plus_b_mod_p(coefficients: list[int], keys: list[int]) -> None:
    a = np.array(coefficients, dtype=np.uint64)
    b = np.array(coefficients[::-1], dtype=np.uint64)
    got = universal_hash(a, b, np.array(keys, dtype=np.uint64))
    want = [[(int(ai) * x + int(bi)) % P for ai, bi in zip(a, b, strict=True)] for x in keys]
    assert got.tolist() == want


def test_signature_matches_a_python_reference() -> None:
    hasher = MinHasher(num_perm=16, seed=7)
    elements = ["北京", "上海", "香港", "深圳"]
    keys = [int(h) >> 32 for h in hash_elements(elements)]
    want = [min((int(a) * x + int(b)) % P for x in keys) for a, b in zip(hasher._a, hasher._b, strict=True)]
    assert hasher.signature(elements).tolist() == want


def test_chunking_does_not_change_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    sets = [
        [f"w{i}" for i in range(start, start + size)] for start, size in ((0, 40), (5, 1), (30, 70), (0, 0))
    ]
    whole = MinHasher(num_perm=32).signatures(sets)
    monkeypatch.setattr("neardup.similarity.minhash.CHUNK_CELLS", 32 * 3)
    assert np.array_equal(MinHasher(num_perm=32).signatures(sets), whole)


def test_empty_sets_and_duplicates() -> None:
    hasher = MinHasher(num_perm=8)
    signatures = hasher.signatures([[], ["a", "a", "b"], ["b", "a"], []])
    assert (signatures[0] == EMPTY).all()
    assert np.array_equal(signatures[1], signatures[2])
    assert estimate_jaccard(signatures[0], signatures[3]) == 1.0  # equal (empty) sets
    assert estimate_jaccard(signatures[0], signatures[1]) == 0.0


def test_signatures_are_stable_across_instances_and_differ_by_seed() -> None:
    elements = ["a", "b", "c"]
    assert np.array_equal(MinHasher(seed=3).signature(elements), MinHasher(seed=3).signature(elements))
    assert not np.array_equal(MinHasher(seed=3).signature(elements), MinHasher(seed=4).signature(elements))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 60),
    st.integers(0, 60),
    st.integers(0, 60),
    st.randoms(use_true_random=False),
)
def test_estimate_is_within_the_standard_error(
    common: int, only_a: int, only_b: int, rnd: random.Random
) -> None:
    """|Ĵ − J| <= 4.5·sqrt(J(1 − J)/n) + 1/n: the estimate is a mean of n Bernoulli(J) draws
    (a 4.5 sigma bound fails once in ~150,000 sets; the seed is fixed, so runs repeat)."""
    tag = rnd.getrandbits(32)
    shared = [f"{tag}-s{i}" for i in range(common)]
    a = shared + [f"{tag}-a{i}" for i in range(only_a)]
    b = shared + [f"{tag}-b{i}" for i in range(only_b)]
    num_perm = 256
    jaccard = exact_jaccard(a, b)
    signatures = MinHasher(num_perm=num_perm, seed=11).signatures([a, b])
    estimate = float(estimate_jaccard(signatures[0], signatures[1]))
    assert abs(estimate - jaccard) <= 4.5 * float(standard_error(jaccard, num_perm)) + 1 / num_perm


def test_estimate_error_shrinks_with_num_perm() -> None:
    a = [f"x{i}" for i in range(300)]
    b = [f"x{i}" for i in range(150, 450)]  # J = 1/3
    errors = []
    for num_perm in (16, 1024):
        estimates = [
            float(estimate_jaccard(*MinHasher(num_perm=num_perm, seed=seed).signatures([a, b])))
            for seed in range(20)
        ]
        errors.append(math.sqrt(np.mean((np.array(estimates) - 1 / 3) ** 2)))
    assert errors[1] < errors[0] / 4
    assert errors[1] == pytest.approx(math.sqrt((1 / 3) * (2 / 3) / 1024), rel=0.6)


def test_estimate_broadcasts_one_query_against_many() -> None:
    hasher = MinHasher(num_perm=64)
    stored = hasher.signatures([["a", "b"], ["a", "b"], ["c"]])
    assert estimate_jaccard(stored, hasher.signature(["a", "b"])).tolist() == [1.0, 1.0, 0.0]
    with pytest.raises(InputError):
        estimate_jaccard(stored, stored[:, :10])


@given(st.integers(0, 128), st.floats(0, 1), st.floats(0, 1))
def test_combined_score_matches_the_formula(distance: int, jaccard: float, mu: float) -> None:
    assert float(combined_score(distance, jaccard, mu)) == pytest.approx(
        mu / (distance + 1) + (1 - mu) * jaccard
    )


def test_combined_score_defaults_and_vectorises() -> None:
    scores = combined_score(np.array([0, 1, 3]), np.array([1.0, 0.5, 0.0]))
    assert scores.tolist() == pytest.approx([1.0, 0.9 / 2 + 0.05, 0.9 / 4])
    with pytest.raises(ConfigError):
        combined_score(0, 1.0, mu=1.5)


def test_signature_bytes_round_trip() -> None:
    signature = MinHasher(num_perm=16).signature(["tag", "keyword"])
    data = signature_to_bytes(signature)
    assert len(data) == 128
    assert np.array_equal(signature_from_bytes(data, num_perm=16), signature)
    with pytest.raises(InputError):
        signature_from_bytes(data, num_perm=8)
    with pytest.raises(InputError):
        signature_from_bytes(data[:-1])


def test_bad_settings_and_inputs() -> None:
    with pytest.raises(ConfigError):
        MinHasher(num_perm=0)
    with pytest.raises(InputError):
        MinHasher(num_perm=4).signatures_of_hashes(np.array([1, 2], dtype=np.uint64), np.array([0]), 1)
    with pytest.raises(InputError):
        MinHasher(num_perm=4).signatures_of_hashes(np.array([1], dtype=np.uint64), np.array([3]), 2)

"""Property-based tests (hypothesis): order invariance of Simhash, Hamming distance as a metric,
and the round trips of the fingerprint array and hex forms."""

from __future__ import annotations

import string
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import Fingerprinter, from_hex, hamming, hamming_many, simhash, to_array, to_hex, to_ints

STOPWORDS_EN = Path(__file__).resolve().parents[1] / "src" / "neardup" / "text" / "stopwords" / "en.txt"
STOPWORDS = frozenset(
    line.strip()
    for line in STOPWORDS_EN.read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.lstrip().startswith("#")
)

WIDTHS = (32, 64, 128)


def uint(bits: int) -> st.SearchStrategy[int]:
    return st.integers(min_value=0, max_value=(1 << bits) - 1)


@st.composite
def features_and_bits(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int]:
    bits = draw(st.sampled_from([3, 8, 32, 64, 128]))
    features = draw(st.lists(st.tuples(uint(bits), st.integers(-20, 20)), max_size=40))
    return features, bits


def reference_simhash(features: list[tuple[int, int]], bits: int) -> int:
    sums = [0] * bits
    for feature_hash, weight in features:
        for i in range(bits):
            sums[i] += weight if (feature_hash >> i) & 1 else -weight
    return sum(1 << i for i, total in enumerate(sums) if total > 0)


# --- Simhash ---------------------------------------------------------------------------------


@settings(max_examples=150)
@given(data=st.data(), case=features_and_bits())
def test_simhash_ignores_feature_order(data: st.DataObject, case: tuple[list[tuple[int, int]], int]) -> None:
    features, bits = case
    permuted = data.draw(st.permutations(features))
    assert simhash(permuted, bits=bits) == simhash(features, bits=bits)


@settings(max_examples=150)
@given(case=features_and_bits())
def test_simhash_matches_the_definition(case: tuple[list[tuple[int, int]], int]) -> None:
    features, bits = case
    assert simhash(features, bits=bits) == reference_simhash(features, bits)


@settings(max_examples=100)
@given(case=features_and_bits(), factor=st.integers(1, 1000))
def test_simhash_is_scale_invariant(case: tuple[list[tuple[int, int]], int], factor: int) -> None:
    features, bits = case
    scaled = [(feature_hash, weight * factor) for feature_hash, weight in features]
    assert simhash(scaled, bits=bits) == simhash(features, bits=bits)


@pytest.fixture(scope="module")
def english_tf() -> Fingerprinter:
    return Fingerprinter(weighting="tf", lang="en")


WORDS = st.text(alphabet=string.ascii_lowercase, min_size=3, max_size=8).filter(lambda w: w not in STOPWORDS)


def test_stopword_list_was_read() -> None:
    assert {"the", "and", "about"} <= STOPWORDS
    assert not any(word.startswith("#") for word in STOPWORDS)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), words=st.lists(WORDS, min_size=1, max_size=30))
def test_tf_fingerprint_ignores_word_order(
    english_tf: Fingerprinter, data: st.DataObject, words: list[str]
) -> None:
    permuted = data.draw(st.permutations(words))
    original = english_tf.fingerprint(" ".join(words))
    assert english_tf.fingerprint(" ".join(permuted)) == original
    assert to_ints(english_tf.fingerprint_many([" ".join(permuted), " ".join(words)])) == [original, original]


# --- Hamming distance ------------------------------------------------------------------------


@settings(max_examples=200)
@given(bits=st.sampled_from([64, 128]), data=st.data())
def test_hamming_is_a_metric(bits: int, data: st.DataObject) -> None:
    a, b, c = (data.draw(uint(bits)) for _ in range(3))
    assert hamming(a, a) == 0
    assert hamming(a, b) == hamming(b, a)
    assert hamming(a, c) <= hamming(a, b) + hamming(b, c)
    assert (hamming(a, b) == 0) == (a == b)
    assert 0 <= hamming(a, b) <= bits


@settings(max_examples=200)
@given(a=uint(128), bit=st.integers(0, 127))
def test_flipping_one_bit_is_distance_one(a: int, bit: int) -> None:
    assert hamming(a, a ^ (1 << bit)) == 1


@settings(max_examples=100)
@given(pairs=st.lists(st.tuples(uint(64), uint(64)), max_size=50))
def test_hamming_many_agrees_with_hamming_64(pairs: list[tuple[int, int]]) -> None:
    left = to_array([a for a, _ in pairs], 64)
    right = to_array([b for _, b in pairs], 64)
    assert left.shape == (len(pairs),)
    assert hamming_many(left, right).tolist() == [hamming(a, b) for a, b in pairs]


@settings(max_examples=100)
@given(pairs=st.lists(st.tuples(uint(128), uint(128)), min_size=1, max_size=50))
def test_hamming_many_agrees_with_hamming_128(pairs: list[tuple[int, int]]) -> None:
    left = to_array([a for a, _ in pairs], 128)
    right = to_array([b for _, b in pairs], 128)
    assert left.shape == (len(pairs), 2)
    assert hamming_many(left, right).tolist() == [hamming(a, b) for a, b in pairs]
    # one row against many broadcasts
    assert hamming_many(left, right[0]).tolist() == [hamming(a, pairs[0][1]) for a, _ in pairs]


@settings(max_examples=100)
@given(values=st.lists(uint(64), max_size=50), query=uint(64))
def test_hamming_many_broadcasts_a_scalar(values: list[int], query: int) -> None:
    array = to_array(values, 64)
    expected = [hamming(value, query) for value in values]
    assert hamming_many(array, query).tolist() == expected
    assert hamming_many(query, array).tolist() == expected
    assert hamming_many(array, np.uint64(query)).tolist() == expected


# --- round trips -----------------------------------------------------------------------------


@settings(max_examples=200)
@given(bits=st.sampled_from(WIDTHS), data=st.data())
def test_hex_round_trip(bits: int, data: st.DataObject) -> None:
    value = data.draw(uint(bits))
    text = to_hex(value, bits)
    assert len(text) == bits // 4
    assert text == text.lower()
    assert set(text) <= set(string.hexdigits.lower())
    assert from_hex(text, bits) == value


@settings(max_examples=100)
@given(bits=st.sampled_from(WIDTHS), data=st.data())
def test_array_round_trip(bits: int, data: st.DataObject) -> None:
    values = data.draw(st.lists(uint(bits), max_size=50))
    array = to_array(values, bits)
    assert array.dtype == np.uint64
    assert array.shape == ((len(values), 2) if bits == 128 else (len(values),))
    assert to_ints(array) == values
    assert to_array(to_ints(array), bits).tolist() == array.tolist()

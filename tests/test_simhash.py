"""Simhash: the seed test vectors, bit order, ties and widths of ``neardup.simhash``, and the
agreement of :class:`neardup.Fingerprinter` with it (features, batches, widths, weightings)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import neardup
from neardup import Fingerprinter, simhash, to_ints

WEIGHTINGS = ("tf", "tfidf", "tfidf-len", "composite")
WIDTHS = (32, 64, 128)


def reference_sums(features: Sequence[tuple[int, int]], bits: int) -> list[int]:
    """Per-bit sums V[i] (index i = bit i), computed independently in pure Python."""
    sums = [0] * bits
    for feature_hash, weight in features:
        for i in range(bits):
            sums[i] += weight if (feature_hash >> i) & 1 else -weight
    return sums


def reference_simhash(features: Sequence[tuple[int, int]], bits: int) -> int:
    return sum(1 << i for i, total in enumerate(reference_sums(features, bits)) if total > 0)


# --- seed test vectors ------------------------------------------------------------------------


def test_seed_004_vector() -> None:
    # "CSDN" hashes to 100101 with weight 4, "博客" to 101011 with weight 5.
    features = [(0b100101, 4), (0b101011, 5)]
    assert (features[0][0], features[1][0]) == (37, 43)
    sums = reference_sums(features, 6)
    assert sums[::-1] == [9, -9, 1, -1, 1, 9]  # bit 5 down to bit 0, as printed in the seed
    assert simhash([(37, 4), (43, 5)], bits=6) == 0b101011 == 43


def test_seed_001_vector() -> None:
    # h(w1..w5) = (1,-1,1), (-1,1,1), (1,-1,-1), (-1,-1,1), (1,1,-1): the first component is the
    # leftmost digit of the signature, i.e. bit 2. d = (1, 2, 0, 3, 0); m = (-4, -2, 6); s = 001.
    features = [(0b101, 1), (0b011, 2), (0b100, 0), (0b001, 3), (0b110, 0)]
    assert [h for h, _ in features] == [5, 3, 4, 1, 6]
    assert reference_sums(features, 3)[::-1] == [-4, -2, 6]
    assert simhash([(5, 1), (3, 2), (4, 0), (1, 3), (6, 0)], bits=3) == 1


# --- bit order, ties, empty input -------------------------------------------------------------


@pytest.mark.parametrize(
    ("feature_hash", "bits"),
    [
        (0b110, 3),
        (0b100101, 6),
        (0x8000_0001, 32),
        (0xDEAD_BEEF_0123_4567, 64),
        (1 << 63, 64),
        (0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210, 128),
        (1 << 127 | 1, 128),
    ],
)
def test_single_feature_gives_its_hash_or_its_complement(feature_hash: int, bits: int) -> None:
    mask = (1 << bits) - 1
    assert simhash([(feature_hash, 1)], bits=bits) == feature_hash
    assert simhash([(feature_hash, 2.5)], bits=bits) == feature_hash
    assert simhash([(feature_hash, -1)], bits=bits) == ~feature_hash & mask


def test_bit_i_of_the_result_is_bit_i_of_the_integer() -> None:
    for i in range(64):
        assert simhash([(1 << i, 1)], bits=64) == 1 << i
    assert simhash([(1 << 100, 1)], bits=128) == 1 << 100


def test_only_the_low_bits_of_a_hash_count() -> None:
    assert simhash([(0b1111_0101, 1)], bits=3) == 0b101
    assert simhash([((1 << 64) | 5, 1)], bits=64) == 5


@pytest.mark.parametrize("bits", [3, 32, 64, 128])
def test_ties_give_zero(bits: int) -> None:
    mask = (1 << bits) - 1
    value = 0x5A5A_5A5A_5A5A_5A5A_5A5A_5A5A_5A5A_5A5A & mask
    assert simhash([(value, 1), (~value & mask, 1)], bits=bits) == 0  # every sum is exactly 0
    assert simhash([(value, 2), (value, -2)], bits=bits) == 0
    assert simhash([(value, 0.1), (value, 0.2), (value, -0.3)], bits=bits) == 0  # 0 up to rounding
    assert simhash([(value, 0)], bits=bits) == 0


def test_tie_on_some_bits_only() -> None:
    # bit 0: +1 +1 = 2; bit 1: +1 -1 = 0 (tie -> 0); bit 2: -1 -1 = -2
    assert simhash([(0b011, 1), (0b001, 1)], bits=3) == 0b001


@pytest.mark.parametrize("bits", [3, 32, 64, 128])
def test_empty_features_give_zero(bits: int) -> None:
    assert simhash([], bits=bits) == 0
    assert simhash(iter(()), bits=bits) == 0


@pytest.mark.parametrize("bits", [0, -1, True, 1.5, "64"])
def test_bad_bits_raise_config_error(bits: object) -> None:
    with pytest.raises(neardup.ConfigError):
        simhash([(1, 1)], bits=bits)  # type: ignore[arg-type]


def test_default_width_is_64() -> None:
    value = 0xFEDC_BA98_7654_3210
    assert simhash([(value | (1 << 70), 1)]) == value


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("seed", range(5))
def test_widths_match_the_reference(bits: int, seed: int) -> None:
    rng = random.Random(seed * 1000 + bits)
    features = [(rng.getrandbits(bits), rng.randint(-10, 30)) for _ in range(rng.randint(1, 40))]
    result = simhash(features, bits=bits)
    assert result == reference_simhash(features, bits)
    assert 0 <= result < 1 << bits


def test_numpy_inputs_are_accepted() -> None:
    hashes = np.array([37, 43], dtype=np.uint64)
    weights = np.array([4.0, 5.0])
    assert simhash(zip(hashes, weights, strict=True), bits=6) == 43


# --- Fingerprinter agrees with simhash() ------------------------------------------------------

TEXTS = {
    "zh": "北京大学是中国著名的高等学府，北京大学的学生来自全国各地，学习自然科学和人文科学。",
    "en": "The quick brown fox jumps over the lazy dog while the lazy dog sleeps in the warm sun.",
    "mixed": "Python是一种广泛使用的编程语言。Python supports multiple programming paradigms, 包括对象。",
}

FingerprinterFactory = Callable[[str, int], Fingerprinter]


@pytest.fixture(scope="module")
def fingerprinter() -> FingerprinterFactory:
    """One Fingerprinter per (weighting, bits), built on first use and kept for the module."""
    built: dict[tuple[str, int], Fingerprinter] = {}

    def get(weighting: str, bits: int) -> Fingerprinter:
        key = (weighting, bits)
        if key not in built:
            built[key] = Fingerprinter(bits=bits, weighting=weighting)
        return built[key]

    return get


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("weighting", WEIGHTINGS)
@pytest.mark.parametrize("lang", sorted(TEXTS))
def test_fingerprint_is_simhash_of_features(
    fingerprinter: FingerprinterFactory, lang: str, weighting: str, bits: int
) -> None:
    fp = fingerprinter(weighting, bits)
    text = TEXTS[lang]
    features = fp.features(text)
    assert features, "the test texts all have kept features"
    assert all(0 <= feature.hash < 1 << bits for feature in features)
    expected = simhash([(feature.hash, feature.weight) for feature in features], bits=bits)
    assert fp.fingerprint(text) == expected
    assert to_ints(fp.fingerprint_many([text])) == [expected]
    assert 0 < expected < 1 << bits


@pytest.mark.parametrize("bits", WIDTHS)
def test_array_form_of_fingerprint_many(fingerprinter: FingerprinterFactory, bits: int) -> None:
    array = fingerprinter("tf", bits).fingerprint_many(list(TEXTS.values()))
    assert array.dtype == np.uint64
    assert array.shape == ((len(TEXTS), 2) if bits == 128 else (len(TEXTS),))
    if bits == 32:
        assert int(array.max()) < 1 << 32


FEATURELESS = ["", "   \n\t ", "。。。！！！", "the and of"]
BATCH = [
    "北京大学是中国著名的高等学府。",
    "",
    "The quick brown fox jumps over the lazy dog.",
    "   \n\t ",
    "Python是一种编程语言 Python is a programming language",
    "。。。！！！",
    "中文 中文 中文 分词",
    "the and of",
    "Near-duplicate detection with Simhash fingerprints",
]


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_batches_are_independent(fingerprinter: FingerprinterFactory, weighting: str, bits: int) -> None:
    batch = to_ints(fingerprinter(weighting, bits).fingerprint_many(BATCH))
    # featureless documents (empty, whitespace, punctuation, stopwords only) fingerprint to 0
    assert [batch[i] for i, text in enumerate(BATCH) if text in FEATURELESS] == [0] * len(FEATURELESS)
    # every other document gets what it gets alone, from a fingerprinter with a cold cache
    fresh = Fingerprinter(bits=bits, weighting=weighting)
    for text, value in zip(BATCH, batch, strict=True):
        if text not in FEATURELESS:
            assert fresh.fingerprint(text) == value, text
            assert value != 0
    # and the order and company of the batch do not matter
    assert to_ints(fresh.fingerprint_many(BATCH[::-1]))[::-1] == batch
    assert to_ints(fresh.fingerprint_many(BATCH[::2])) == batch[::2]


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("text", FEATURELESS)
def test_featureless_document_alone_fingerprints_to_zero(
    fingerprinter: FingerprinterFactory, text: str, bits: int
) -> None:
    assert fingerprinter("tf", bits).fingerprint(text) == 0


def test_empty_batch_gives_an_empty_array(fingerprinter: FingerprinterFactory) -> None:
    assert fingerprinter("tf", 64).fingerprint_many([]).shape == (0,)


@pytest.mark.parametrize("bad", [None, 12, b"bytes", ["list"]])
def test_non_string_text_is_a_clear_error(bad: object) -> None:
    from neardup import InputError

    with pytest.raises(InputError, match=r"^text #1: text must be a string"):
        Fingerprinter().fingerprint_many(["fine", bad])  # type: ignore[list-item]
    if bad is not None:
        with pytest.raises(InputError, match=r"^title #1: title must be a string"):
            Fingerprinter().fingerprint_many(["fine", "also fine"], [None, bad])  # type: ignore[list-item]


@pytest.mark.parametrize("bits", [1, 7, 63, 65, 100, 200, 256])
def test_pure_simhash_any_width_matches_a_bit_by_bit_sum(bits: int) -> None:
    rng = random.Random(bits)
    features = [(rng.getrandbits(bits + 5), rng.uniform(-3, 5)) for _ in range(9)]
    expected = 0
    for bit in range(bits):
        total = sum(weight if hash_value >> bit & 1 else -weight for hash_value, weight in features)
        expected |= (total > 1e-6) << bit
    assert neardup.simhash(features, bits=bits) == expected


@pytest.mark.parametrize("bits", [64, 128])
def test_large_batches_are_encoded_in_chunks_with_the_same_result(
    bits: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [
        "第一篇新闻，今天天气很好。",
        "",
        "The second text, in English.",
        "third 第三",
        "4",
        "five five",
    ] * 2
    titles = ["标题", None, "Title", None, "x", None] * 2
    whole = Fingerprinter(bits=bits).encode_many(texts, titles)
    monkeypatch.setattr(neardup.fingerprint.fingerprinter, "ENCODE_CHUNK", 5)
    chunked = Fingerprinter(bits=bits).encode_many(texts, titles)
    assert np.array_equal(chunked.fingerprints, whole.fingerprints)
    assert np.array_equal(chunked.feature_counts, whole.feature_counts)
    assert chunked.fingerprints.shape == whole.fingerprints.shape

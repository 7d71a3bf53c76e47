"""Simhash fingerprints (Charikar): the pure reference function and the batch fingerprinter.

Simhash: every feature has a weight w and an f-bit hash h; V[i] += w where bit i of h is 1,
−w where it is 0; bit i of the fingerprint is 1 iff V[i] > 0 (so ties and empty documents
give 0 bits). Bit i is bit i of the integer, bit 0 the least significant.

For a batch this is sign(W · S): W the sparse document × token weight matrix, S the token ×
f matrix of ±1 hash bits. :class:`Fingerprinter` hashes each distinct token once (and keeps
it in a bounded cache across batches), builds W with numpy and multiplies once with scipy, so
no Python code runs per token occurrence beyond jieba's (see :mod:`neardup.fingerprint.token_cache`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from ..distance import MASK_64, FingerprintArray, check_bits, ints_to_array, to_ints
from ..errors import ConfigError, InputError
from ..text.normalize import Normalizer
from ..text.tokenize import AutoTokenizer, CharNgramTokenizer, ChineseTokenizer, TokenBatch, read_word_list
from .config import FingerprintConfig
from .hashing import get_hash_function, hash_tokens
from .idf import IdfModel, default_chinese_idf
from .token_cache import NewTokens, TokenCache, cache_keys, fmix64
from .weighting import FIELDS_ON_TEXT, TITLE_FACTOR, Weighting, dense_ranks, group_pairs, saturated_weights

DEFAULT_CACHE_SIZE = 2_000_000
TIE_TOLERANCE = 1e-9
#: Texts encoded per step by encode_many: large enough to amortise the per-call work,
#: small enough to bound memory (see benchmarks/fingerprint_speed.py --large-batch).
ENCODE_CHUNK = 4096


def simhash(features: Iterable[tuple[int, float]], bits: int = 64) -> int:
    """Simhash of ``(feature_hash, weight)`` pairs; only the low ``bits`` of each hash count.

    >>> simhash([(37, 4), (43, 5)], bits=6)  # seed 004: sums 9 -9 1 -1 1 9 (bit 5 .. bit 0)
    43
    """
    if not isinstance(bits, int) or isinstance(bits, bool) or bits < 1:
        raise ConfigError(f"bits must be a positive integer; got {bits!r}")
    pairs = list(features)
    if not pairs:
        return 0
    mask = (1 << bits) - 1
    hashes = [int(feature_hash) & mask for feature_hash, _ in pairs]
    weights = np.array([float(weight) for _, weight in pairs], dtype=np.float64)
    words = (bits + 63) // 64
    raw = np.array(
        [[(value >> (64 * word)) & MASK_64 for word in range(words)] for value in hashes], dtype="<u8"
    )
    signs = _sign_matrix(raw, bits)
    positive = weights @ signs > _tie_tolerance(np.abs(weights).sum())
    return sum(1 << int(bit) for bit in np.flatnonzero(positive))


def _tie_tolerance(absolute_weight_sum: Any) -> Any:
    """Sums within 1e-9 of the document's total weight Σ|w| count as ties (bit 0). That is
    well above the rounding error of any summation order (n·2^-53·Σ|w| for millions of
    features), so a fingerprint never depends on how a batch happened to add its features."""
    return absolute_weight_sum * TIE_TOLERANCE


@dataclass(frozen=True)
class Feature:
    """One weighted feature of a document, for explanations."""

    token: str
    hash: int
    weight: float


@dataclass(frozen=True)
class EncodedBatch:
    """Fingerprints of a batch and how many weighted features each document had (0 means the
    document had no usable text and its fingerprint is 0)."""

    fingerprints: FingerprintArray
    feature_counts: npt.NDArray[np.int64]


class Fingerprinter:
    """Text → Simhash fingerprints under one :class:`FingerprintConfig`.

    ``fingerprint_many`` returns uint64 for <= 64 bits and an (n, 2) uint64 array of
    ``[low, high]`` words for 128 bits; ``fingerprint`` returns a Python int in both cases.
    A Fingerprinter keeps a cache of hashed tokens; it is not thread-safe (use one per thread).
    """

    def __init__(
        self,
        bits: int = 64,
        weighting: str = "tfidf-len",
        hash: str = "city64",
        lang: str = "auto",
        *,
        config: FingerprintConfig | None = None,
        idf_model: IdfModel | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        **options: Any,
    ) -> None:
        if config is None:
            config = FingerprintConfig(bits=bits, weighting=weighting, hash=hash, lang=lang, **options)
        elif options:
            config = config.replace(**options)
        self.config = config
        self.bits = check_bits(config.bits)
        self._hash = get_hash_function(config.hash, config.bits)
        self.normalizer = Normalizer(to_simplified=config.to_simplified, version=config.normalizer_version)
        self.weighting = Weighting(
            name=config.weighting,
            idf=idf_model if idf_model is not None else _resolve_idf(config),
            stopwords=_stopwords(config),
            signal_words=_shipped_list("zh_signal.txt") if config.weighting == "composite" else frozenset(),
        )
        chinese = ChineseTokenizer(hmm=config.hmm, user_dictionary=config.user_dictionary)
        self.tokenizer: AutoTokenizer | CharNgramTokenizer = (
            CharNgramTokenizer(config.ngram) if config.ngram else AutoTokenizer(config.lang, chinese=chinese)
        )
        self._cache = TokenCache(describe=self._describe, bits=self.bits, capacity=cache_size)
        #: Whether repeats saturate or shares are capped: then a batch's weights are one per
        #: distinct (document, token), grouped by token (see _weighted_occurrences).
        self._saturates = config.term_frequency != "raw" or self.weighting.share_cap(config.max_share) < 1.0

    # -- public API -------------------------------------------------------------------------

    def fingerprint(self, text: str, title: str | None = None) -> int:
        """The fingerprint of one text as a Python int."""
        return to_ints(self.fingerprint_many([text], None if title is None else [title]))[0]

    def fingerprint_many(
        self, texts: Sequence[str], titles: Sequence[str | None] | None = None
    ) -> FingerprintArray:
        """Fingerprints of a batch (see the class docstring for the array form)."""
        return self.encode_many(texts, titles).fingerprints

    def encode_many(self, texts: Sequence[str], titles: Sequence[str | None] | None = None) -> EncodedBatch:
        """Fingerprints plus feature counts, so callers can flag documents without features.
        Batches over ``ENCODE_CHUNK`` texts are encoded a chunk at a time, which bounds the
        intermediate arrays by the chunk's size rather than the batch's (docs/fingerprints.md)."""
        if len(texts) <= ENCODE_CHUNK:
            return self._encode_chunk(texts, titles)
        parts = [
            self._encode_chunk(
                texts[start : start + ENCODE_CHUNK],
                None if titles is None else titles[start : start + ENCODE_CHUNK],
            )
            for start in range(0, len(texts), ENCODE_CHUNK)
        ]
        return EncodedBatch(
            np.concatenate([part.fingerprints for part in parts]),
            np.concatenate([part.feature_counts for part in parts]),
        )

    def _encode_chunk(self, texts: Sequence[str], titles: Sequence[str | None] | None) -> EncodedBatch:
        # tf's 1/Σ_k n_kd is left out: scaling a document's weights by a positive factor
        # changes no sign, so no fingerprint (ties are relative to Σ|w| too).
        columns, documents, weights = self._weighted_occurrences(texts, titles)
        unique, local = dense_ranks(columns)
        table = self._cache.hashes[unique]
        return self._product(local, documents, weights, table, len(texts), by_column=self._saturates)

    def features(self, text: str, title: str | None = None) -> list[Feature]:
        """The weighted features of one text, heaviest first (for explanations and debugging)."""
        columns, _, weights = self._weighted_occurrences([text], None if title is None else [title])
        totals: dict[int, float] = {}
        for column, weight in zip(columns.tolist(), weights.tolist(), strict=True):
            totals[column] = totals.get(column, 0.0) + weight
        cache = self._cache
        found = [Feature(cache.texts[c], cache.hash_of(c), w) for c, w in totals.items()]
        return sorted(found, key=lambda feature: (-feature.weight, feature.token))

    def word_tokens_many(self, texts: Sequence[str]) -> list[list[str]]:
        """The tokens of each text as this fingerprinter cuts them (normalized, segmented),
        without spaces and punctuation: the input of :meth:`IdfModel.fit`."""
        return self.tokenizer.tokenize_batch(self.normalizer.normalize_many(texts)).word_token_lists()

    def fingerprint_features_many(self, documents: Sequence[Sequence[tuple[str, float]]]) -> FingerprintArray:
        """Fingerprints of documents given as ``(feature, weight)`` lists — the hook for the
        ``fields`` weighting of database rows, where the caller decides features and weights."""
        index: dict[str, int] = {}
        flat = list(chain.from_iterable(documents))
        columns = np.fromiter(
            (index.setdefault(feature, len(index)) for feature, _ in flat), dtype=np.int64, count=len(flat)
        )
        weights = np.fromiter((float(weight) for _, weight in flat), dtype=np.float64, count=len(flat))
        lengths = np.fromiter((len(document) for document in documents), dtype=np.int64, count=len(documents))
        rows = np.repeat(np.arange(len(documents)), lengths)
        table = self._hash_table(list(index))
        return self._product(columns, rows, weights, table, len(documents)).fingerprints

    def encode_hashed(
        self,
        documents: npt.NDArray[np.int64],
        features: npt.NDArray[np.int64],
        weights: npt.NDArray[np.float64],
        hashes: FingerprintArray,
        count: int,
    ) -> EncodedBatch:
        """Fingerprints of ``count`` documents from weighted occurrences of caller-hashed
        features: occurrence k adds ``weights[k]`` of feature ``features[k]`` (a row of
        ``hashes``, e.g. from :func:`~neardup.fingerprint.hashing.hash_tokens`) to document
        ``documents[k]``; repeated occurrences sum. The array form of
        :meth:`fingerprint_features_many`, used by :mod:`neardup.records`."""
        order = np.argsort(documents, kind="stable")
        return self._product(features[order], documents[order], weights[order], hashes, count)

    # -- internals ---------------------------------------------------------------------------

    def _describe(self, new: NewTokens) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float64]]:
        hashes = hash_tokens(new.texts, self.config.hash, self.bits)
        weights = self.weighting.static_weights(
            new.texts, new.tags, new.lengths, new.has_word_character, new.has_han
        )
        return hashes, weights

    def _tokens(self, texts: Sequence[str]) -> TokenBatch:
        normalized = self.normalizer.normalize_many(texts)
        return self.tokenizer.tokenize_batch(normalized, tagged=self.weighting.needs_pos)

    def _weighted_occurrences(
        self, texts: Sequence[str], titles: Sequence[str | None] | None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """(cache column, document, weight) of every kept token occurrence, in document order,
        or of every distinct token of a document when repeats saturate, then grouped by column
        (:func:`~neardup.fingerprint.weighting.saturate`); a token's weights sum to its static
        weight times its saturated count. Every factor of a weight is a function of (document,
        column), so a repeated token is weighed once, after grouping."""
        if titles is not None and len(titles) != len(texts):
            raise ConfigError(f"got {len(texts)} texts but {len(titles)} titles; give one title per text")
        if self.weighting.name == "fields":
            raise ConfigError(FIELDS_ON_TEXT)
        _check_strings(texts, "text")
        if titles is not None:
            _check_strings(titles, "title", allow_none=True)
        batch = self._tokens(texts)
        columns = self._cache.columns(batch)
        kept = self._cache.kept[columns]
        columns, documents = columns[kept], batch.documents[kept]
        config, weighting = self.config, self.weighting
        counts = None
        if len(columns) and self._saturates:
            first, counts = group_pairs(documents, columns)
            columns, documents = columns[first], documents[first]
        weights = self._cache.static[columns]
        if weighting.uses_title and titles is not None:
            weights = self._boost_title_words(columns, documents, weights, titles)
        if weighting.name == "composite":
            weights = weights * _relative_length_factor(self._cache.lengths[columns], documents, len(texts))
        if counts is not None:
            cap = weighting.share_cap(config.max_share)
            weights = saturated_weights(weights, counts, documents, len(texts), config.term_frequency, cap)
        return columns, documents, weights

    def _hash_table(self, tokens: list[str]) -> FingerprintArray:
        return ints_to_array([self._hash(token) for token in tokens], self.bits)

    def _boost_title_words(
        self,
        columns: npt.NDArray[np.int64],
        documents: npt.NDArray[np.int64],
        weights: npt.NDArray[np.float64],
        titles: Sequence[str | None],
    ) -> npt.NDArray[np.float64]:
        """×TITLE_FACTOR for body words that occur in the document's title."""
        title_batch = self.tokenizer.tokenize_batch(self.normalizer.normalize_many([t or "" for t in titles]))
        title_keys = cache_keys(title_batch)
        with np.errstate(over="ignore"):
            # Keys are mixed before a document number goes in: packed keys are not (cache_keys).
            title_codes = fmix64(fmix64(title_keys) ^ title_batch.documents.astype(np.uint64))
            body_codes = fmix64(fmix64(self._cache.word_keys[columns]) ^ documents.astype(np.uint64))
        return np.where(np.isin(body_codes, title_codes), weights * TITLE_FACTOR, weights)

    def _product(
        self,
        columns: npt.NDArray[np.int64],
        documents: npt.NDArray[np.int64],
        weights: npt.NDArray[np.float64],
        table: FingerprintArray,
        count: int,
        by_column: bool = False,
    ) -> EncodedBatch:
        """sign(W · S) for the batch: W from (document, column, weight) triples with documents
        non-decreasing, or ``by_column`` with columns non-decreasing and documents increasing
        within each; S the ±1 bits of ``table`` (one hash per column). Either way each
        document's sums add its features in column order, so both give the same bits."""
        from scipy import sparse  # here, not at the top: importing scipy is slow

        feature_counts = np.bincount(documents, minlength=count).astype(np.int64)
        if by_column:
            indptr = np.concatenate([[0], np.cumsum(np.bincount(columns, minlength=len(table)))])
            matrix: Any = sparse.csc_matrix((weights, documents, indptr), shape=(count, len(table)))
        else:
            indptr = np.concatenate([[0], np.cumsum(feature_counts)])
            matrix = sparse.csr_matrix((weights, columns, indptr), shape=(count, len(table)))
        sums = np.asarray(matrix @ _sign_matrix(table, self.bits))
        magnitude = np.bincount(documents, weights=np.abs(weights), minlength=count)
        fingerprints = _pack_array(sums > _tie_tolerance(magnitude)[:, np.newaxis], self.bits)
        return EncodedBatch(fingerprints=fingerprints, feature_counts=feature_counts)


def _check_strings(values: Sequence[object], name: str, allow_none: bool = False) -> None:
    def valid(value: object) -> bool:
        return isinstance(value, str) or (allow_none and value is None)

    allowed = {str, type(None)} if allow_none else {str}
    if not set(map(type, values)) <= allowed and not all(map(valid, values)):
        position, value = next((i, v) for i, v in enumerate(values) if not valid(v))
        raise InputError(
            f"{name} must be a string, got {type(value).__name__} {str(value)[:40]!r}; "
            f"convert it (or leave the record out) before fingerprinting",
            f"{name} #{position}",
        )


def _sign_matrix(table: FingerprintArray, bits: int) -> npt.NDArray[np.float64]:
    """Hashes as (n,) uint64 or (n, words) uint64 rows, low word first → (n, bits) matrix of ±1."""
    words = (bits + 63) // 64
    raw = np.ascontiguousarray(table.astype("<u8").reshape(len(table), words))
    signs = _byte_signs()[raw.view(np.uint8)].reshape(len(table), 64 * words)
    return signs[:, :bits] if bits < 64 * words else signs


@lru_cache(maxsize=1)
def _byte_signs() -> npt.NDArray[np.float64]:
    """Byte value → the ±1 of its 8 bits, least significant first: one lookup per byte of
    the hashes instead of unpacking bits and converting them to floats."""
    values = np.arange(1 << 8, dtype=np.uint8)[:, np.newaxis]
    return np.unpackbits(values, axis=1, bitorder="little").astype(np.float64) * 2.0 - 1.0


def _pack_array(positive: npt.NDArray[np.bool_], bits: int) -> FingerprintArray:
    """(n, bits) booleans → uint64 (n,) for <= 64 bits or (n, 2) for 128."""
    count = len(positive)
    if bits == 32:
        positive = np.concatenate([positive, np.zeros((count, 32), dtype=bool)], axis=1)
    packed = np.ascontiguousarray(np.packbits(positive, axis=1, bitorder="little"))
    words = packed.view("<u8").astype(np.uint64)
    return words.reshape(count, 2) if bits == 128 else words.reshape(count)


def _relative_length_factor(
    lengths: npt.NDArray[np.float64], documents: npt.NDArray[np.int64], count: int
) -> npt.NDArray[np.float64]:
    """composite's 1 + (ℓ − ℓmin)/(ℓmax − ℓmin), ℓmin/ℓmax over the kept words of each document."""
    if not len(lengths):
        return lengths
    shortest = np.full(count, np.inf)
    longest = np.full(count, -np.inf)
    np.minimum.at(shortest, documents, lengths)
    np.maximum.at(longest, documents, lengths)
    spread = (longest - shortest)[documents]
    relative: npt.NDArray[np.float64] = np.divide(
        lengths - shortest[documents], spread, out=np.zeros_like(lengths), where=spread > 0
    )
    return relative + 1.0


def _shipped_list(name: str) -> frozenset[str]:
    return read_word_list(str(resources.files("neardup.text").joinpath("stopwords", name)))


def _stopwords(config: FingerprintConfig) -> frozenset[str]:
    words: set[str] = set()
    if config.stopwords:
        words |= _shipped_list("zh.txt") | _shipped_list("en.txt")
    for path in config.stopword_files:
        words |= read_word_list(path)
    return frozenset(words)


def _resolve_idf(config: FingerprintConfig) -> IdfModel | None:
    if config.weighting in ("tf", "fields") or config.idf == "none":
        return None
    if config.idf == "default":
        return default_chinese_idf()
    return IdfModel.load(config.idf)

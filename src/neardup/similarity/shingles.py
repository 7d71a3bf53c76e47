"""Shingle sets: the character n-grams of texts as one sparse set per text, made by one
shingler (:func:`shingles_of`), and their exact Jaccard.

Everything that compares texts by their shingles takes them from here: ``--verify jaccard``,
the sketches of the candidate search and of a band index (:mod:`neardup.similarity.sketches`),
the exact check of candidate pairs (:mod:`neardup.dedup.shingle_sets`, on :func:`compact_keys`)
and the Spark job, so an exact Jaccard and its estimates always count the same n-grams.

A shingle is keyed by a 40-bit hash of its code points: two shingles of one text share a key
with probability ~m²/2^41 for m shingles, far below what moves a Jaccard decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from ..arrays import unique_inverse
from ..fingerprint.token_cache import token_keys
from ..text.normalize import Normalizer
from ..text.tokenize import CharNgramTokenizer, contains_han, han_character_mask, word_letters

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
UInt64Array = npt.NDArray[np.uint64]
UInt32Array = npt.NDArray[np.uint32]

#: Shingle lengths: Chinese bigrams are word-like units; Latin 5-grams span about a word.
HAN_SHINGLE = 2
LATIN_SHINGLE = 5
#: Pairs compared per step: bounds the sparse temporaries.
PAIR_CHUNK = 1 << 18
_S8, _S24, _S40, _LOW40 = np.uint64(8), np.uint64(24), np.uint64(40), np.uint64((1 << 40) - 1)
#: The multiplier of the n-gram keys (an odd 64-bit constant; any odd one spreads n <= 5).
_NGRAM_BASE = np.uint64(0x100000001B3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
#: Packed words sorted at a time (whole texts): a run this long sorts within the caches.
SORT_RUN = 1 << 11
#: Texts shingled in one packed sort (the text number takes the top 24 bits of a word).
_SHINGLE_BATCH = 1 << 20
#: A text longer than this (normalized characters) is shingled in pieces of this size, its
#: repeated shingles dropped as it goes: one batch holds ~30 bytes per character, the pieces
#: a few times a piece and its distinct shingles.
LONG_TEXT = 1 << 22


@dataclass(frozen=True)
class Shingles:
    """The distinct shingles of a batch of texts as one sparse set per text: 40-bit keys
    (``hashes``), each text's sorted, and the text (``documents``) each belongs to."""

    hashes: UInt64Array
    documents: IntArray
    count: int
    _matrix: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, texts: Sequence[str], normalizer: Normalizer | None = None) -> Shingles:
        """The shingle sets of ``texts``: :func:`shingles_of`, the one shingler."""
        return shingles_of(texts, normalizer)

    @cached_property
    def sizes(self) -> IntArray:
        """Each text's shingle count (counted once: the search, the sketch and the
        densification each ask)."""
        return np.bincount(self.documents, minlength=self.count).astype(np.int64)

    def sets(self) -> list[set[int]]:
        """Each text's shingle hashes as a Python set (for tests and explanations)."""
        result: list[set[int]] = [set() for _ in range(self.count)]
        for document, value in zip(self.documents.tolist(), self.hashes.tolist(), strict=True):
            result[document].add(value)
        return result

    def matrix(self) -> Any:
        """The texts × distinct shingles 0/1 matrix (CSR), built once."""
        if self._matrix is None:
            from scipy import sparse  # loaded on use: `neardup --help` must stay fast

            _, columns = unique_inverse(self.hashes)
            data = np.ones(len(columns), dtype=np.float64)
            shape = (self.count, int(columns.max()) + 1 if len(columns) else 0)
            matrix = sparse.csr_matrix((data, (self.documents, columns.reshape(-1))), shape=shape)
            object.__setattr__(self, "_matrix", matrix)
        return self._matrix

    def jaccard(self, i: npt.ArrayLike, j: npt.ArrayLike) -> FloatArray:
        """Exact Jaccard of the shingle sets of texts i[t] and j[t], vectorised; two empty
        sets count as equal (1.0)."""
        left, right = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
        matrix, sizes = self.matrix(), self.sizes
        result = np.empty(len(left), dtype=np.float64)
        for low in range(0, len(left), PAIR_CHUNK):
            a, b = left[low : low + PAIR_CHUNK], right[low : low + PAIR_CHUNK]
            common = np.asarray(matrix[a].multiply(matrix[b]).sum(axis=1)).reshape(-1)
            union = sizes[a] + sizes[b] - common
            result[low : low + len(a)] = np.divide(
                common, union, out=np.ones(len(a), dtype=np.float64), where=union > 0
            )
        return result


def shingles_of(texts: Sequence[str], normalizer: Normalizer | None = None) -> Shingles:
    """The distinct shingles of each text, sorted by (text, key): the letters and digits of
    the normalized text, character bigrams if it has a Chinese character and 5-grams if not,
    a text shorter than n as one token, none for a text without letters or digits.

    Keys are made with n multiply-adds over the whole batch and one multiplicative hash, and
    deduplicated by one ``np.sort`` of packed (text, key) words: no Python call per text or
    shingle."""
    if len(texts) > _SHINGLE_BATCH:  # the packed sort holds 24 bits of text number
        parts = [
            shingles_of(texts[low : low + _SHINGLE_BATCH], normalizer)
            for low in range(0, len(texts), _SHINGLE_BATCH)
        ]
        offsets = np.arange(0, len(texts), _SHINGLE_BATCH, dtype=np.int64)
        return Shingles(
            np.concatenate([part.hashes for part in parts]),
            np.concatenate([part.documents + offset for part, offset in zip(parts, offsets, strict=True)]),
            len(texts),
        )
    normalized = (normalizer or Normalizer()).normalize_many(list(texts))
    if max(map(len, normalized), default=0) > LONG_TEXT:
        return _with_long_texts(normalized)
    return _shingles_of_normalized(normalized)


def _shingles_of_normalized(normalized: list[str]) -> Shingles:
    count = len(normalized)
    letters, owner = word_letters(normalized)
    per_text = np.bincount(owner, minlength=count)
    han = np.zeros(count, dtype=bool)
    han_letters = han_character_mask(letters)
    if han_letters.any():
        han[owner[han_letters]] = True
    values = letters.astype(np.uint64) + np.uint64(1)
    with np.errstate(over="ignore"):
        keys, owners = _window_keys(values, owner, han)
        _short_text_keys(values, per_text, han, keys, owners)
        if not keys:
            return Shingles(np.zeros(0, np.uint64), np.zeros(0, np.int64), count)
        # Multiplicative hashing: the top 40 bits of key·φ depend on every bit of the key.
        packed = keys[0] if len(keys) == 1 else np.concatenate(keys)
        packed *= _GOLDEN
        packed >>= _S24
        text_of = owners[0] if len(owners) == 1 else np.concatenate(owners)
        packed |= text_of.astype(np.uint64) << _S40
    _sort_by_text(packed, text_of)
    distinct = np.ones(len(packed), dtype=bool)
    np.not_equal(packed[1:], packed[:-1], out=distinct[1:])
    packed = packed[distinct]
    return Shingles(packed & _LOW40, (packed >> _S40).view(np.int64), count)  # < 2^24: no copy


def _sort_by_text(packed: UInt64Array, text_of: npt.NDArray[np.int32]) -> None:
    """Sort packed (text, key) words in place. Each text's words are contiguous once grouped
    (the window keys come per n-gram length, each part in text order, so a stable sort of the
    text numbers, a merge of a few runs, groups them), and then only the keys within a text
    are out of order: runs of whole texts of about :data:`SORT_RUN` words are sorted apart,
    each within the processor's caches, faster than one sort of the whole batch (docs/candidates.md)."""
    if len(text_of) > 1 and bool((text_of[1:] < text_of[:-1]).any()):
        order = np.argsort(text_of, kind="stable")
        packed[:] = packed[order]
        text_of = text_of[order]
    starts = np.flatnonzero(text_of[1:] != text_of[:-1]) + 1
    # Cut at the first text to start at or after each multiple of SORT_RUN.
    chosen = np.searchsorted(starts, np.arange(SORT_RUN, len(packed), SORT_RUN))
    cuts = np.unique(starts[chosen[chosen < len(starts)]]).tolist()
    for low, high in zip([0, *cuts], [*cuts, len(packed)], strict=True):
        packed[low:high].sort()


def _with_long_texts(normalized: list[str]) -> Shingles:
    """:func:`shingles_of` of normalized texts some of which are over :data:`LONG_TEXT`: the
    others in one batch, each long one by :func:`_long_text_hashes`; the same sets."""
    long = [i for i, text in enumerate(normalized) if len(text) > LONG_TEXT]
    rest = sorted(set(range(len(normalized))) - set(long))
    hashes: list[UInt64Array] = []
    documents: list[IntArray] = []
    if rest:
        batch = _shingles_of_normalized([normalized[i] for i in rest])
        hashes.append(batch.hashes)
        documents.append(np.asarray(rest, dtype=np.int64)[batch.documents])
    for i in long:
        hashes.append(_long_text_hashes(normalized[i]))
        documents.append(np.full(len(hashes[-1]), i, dtype=np.int64))
    flat_documents = np.concatenate(documents)
    order = np.argsort(flat_documents, kind="stable")  # each text's hashes stay sorted
    return Shingles(np.concatenate(hashes)[order], flat_documents[order], len(normalized))


def _long_text_hashes(text: str) -> UInt64Array:
    """The sorted distinct shingle hashes of one normalized text, as :func:`shingles_of`
    makes them, cut from pieces of :data:`LONG_TEXT` characters (each piece's n-grams begin
    with the last n - 1 letters of the one before) and deduplicated as they come."""
    starts = range(0, len(text), LONG_TEXT)
    # First pass: bigrams if the text has a Chinese letter anywhere, as in one batch.
    han = any(
        han_character_mask(word_letters([text[start : start + LONG_TEXT]])[0]).any() for start in starts
    )
    size = HAN_SHINGLE if han else LATIN_SHINGLE
    carry = np.zeros(0, dtype=np.uint64)
    distinct = np.zeros(0, dtype=np.uint64)
    found: list[UInt64Array] = []
    pending = 0
    for start in starts:
        values = word_letters([text[start : start + LONG_TEXT]])[0].astype(np.uint64)
        values += np.uint64(1)
        if carry.size:
            values = np.concatenate([carry, values])
        span = len(values) - size + 1
        if span > 0:
            with np.errstate(over="ignore"):
                key = values[:span].copy()
                for step in range(1, size):
                    key *= _NGRAM_BASE
                    key += values[step : step + span]
                key ^= np.uint64(size)
                key *= _GOLDEN
            key >>= _S24
            found.append(_sorted_distinct(key))
            pending += len(found[-1])
            if pending > max(len(distinct), LONG_TEXT):
                distinct, found, pending = _sorted_distinct(np.concatenate([distinct, *found])), [], 0
        carry = values[max(0, len(values) - (size - 1)) :]
    if found:
        distinct = _sorted_distinct(np.concatenate([distinct, *found]))
    if not len(distinct) and len(carry):  # fewer letters than n: one token, as _short_text_keys
        token = np.zeros(1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for value in carry:
                token = token * _NGRAM_BASE + value
            token ^= np.uint64(len(carry))
            token *= _GOLDEN
        token >>= _S24
        distinct = token
    return distinct


def _sorted_distinct(keys: UInt64Array) -> UInt64Array:
    """``keys`` sorted (in place) without repeats: ``np.unique`` hashes first in numpy 2,
    far slower on millions of 64-bit keys."""
    keys.sort()
    distinct = np.ones(len(keys), dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=distinct[1:])
    return keys[distinct]


def _window_keys(
    values: UInt64Array, owner: npt.NDArray[np.int32], han: npt.NDArray[np.bool_]
) -> tuple[list[UInt64Array], list[npt.NDArray[np.int32]]]:
    """The keys of every whole n-gram window (bigrams in texts with Chinese characters, 5-grams
    in the others) and the text each belongs to. Called with uint64 overflow warnings off."""
    keys: list[UInt64Array] = []
    owners: list[npt.NDArray[np.int32]] = []
    for size, members in ((HAN_SHINGLE, han), (LATIN_SHINGLE, ~han)):
        span = len(values) - size + 1
        if span <= 0 or not members.any():
            continue
        key = values[:span].copy()
        for step in range(1, size):  # Horner over the n code points of every window
            key *= _NGRAM_BASE
            key += values[step : step + span]
        first = owner[:span]
        whole = first == owner[size - 1 :]
        if not members.all():
            whole &= members[first]
        keys.append(key[whole] ^ np.uint64(size))
        owners.append(first[whole])
    return keys, owners


def _short_text_keys(
    values: UInt64Array,
    per_text: npt.NDArray[np.intp],
    han: npt.NDArray[np.bool_],
    keys: list[UInt64Array],
    owners: list[npt.NDArray[np.int32]],
) -> None:
    """Append the one token of each text shorter than its n, as the verifier's: Horner over its
    letters (contiguous, fewer than n), all such texts at once."""
    short = np.flatnonzero((per_text > 0) & (per_text < np.where(han, HAN_SHINGLE, LATIN_SHINGLE)))
    if short.size:
        lengths = per_text[short]
        starts = (np.cumsum(per_text) - per_text)[short]
        token_key = np.zeros(short.size, dtype=np.uint64)
        for step in range(LATIN_SHINGLE - 1):
            more = step < lengths
            token_key[more] = token_key[more] * _NGRAM_BASE + values[starts[more] + step]
        keys.append(token_key ^ lengths.astype(np.uint64))
        owners.append(short.astype(np.int32))


def compact_keys(hashes: UInt64Array) -> UInt32Array:
    """The 32-bit form of 40-bit shingle keys (their top 32 bits, so sorted keys stay sorted):
    for sets kept by the million (:class:`~neardup.dedup.shingle_sets.ShingleSets`) and for the
    32-bit keys of classic MinHash. Within one pair a collision (~m²/2^33 for m shingles)
    moves its Jaccard by 1/m at most."""
    return (np.asarray(hashes, dtype=np.uint64) >> _S8).astype(np.uint32)


def legacy_shingle_keys(
    texts: Sequence[str], normalizer: Normalizer | None = None
) -> tuple[UInt32Array, IntArray, int]:
    """The 32-bit shingle keys MinHash signatures of version 1 were made of (the same n-grams
    keyed by the token cache's 64-bit hash, top 32 bits), and the text each belongs to: what
    an index verified by ``minhash`` before :func:`shingles_of` became the one shingler
    compares its stored signatures with. Nothing else may use it."""
    normalized = (normalizer or Normalizer()).normalize_many(list(texts))
    han = [i for i, text in enumerate(normalized) if contains_han(text)]
    latin = sorted(set(range(len(normalized))) - set(han))
    keys: list[UInt64Array] = []
    owners: list[IntArray] = []
    for members, size in ((han, HAN_SHINGLE), (latin, LATIN_SHINGLE)):
        if members:
            batch = CharNgramTokenizer(size).tokenize_batch([normalized[i] for i in members])
            keys.append(token_keys(batch))
            owners.append(np.asarray(members, dtype=np.int64)[batch.documents])
    flat = np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64)
    documents = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
    return (flat >> np.uint64(32)).astype(np.uint32), documents, len(texts)

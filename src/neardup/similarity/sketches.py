"""The sketches of the default candidate search: shingle sets keyed for speed, one-permutation
MinHash with optimal densification, band keys (and classic MinHash for comparison). Every
function is pure and depends on its batch alone, so worker processes and Spark tasks run them
and get the same numbers (the search itself: :mod:`neardup.dedup.candidates`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..fingerprint.token_cache import fmix64
from ..text.normalize import Normalizer
from ..text.tokenize import han_character_mask, word_letters
from .minhash import MinHasher
from .shingles import HAN_SHINGLE, LATIN_SHINGLE, Shingles

IntArray = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]
UInt32Array = npt.NDArray[np.uint32]

EMPTY32 = np.uint32(0xFFFFFFFF)
_LOW32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_S24, _S40, _LOW40 = np.uint64(24), np.uint64(40), np.uint64((1 << 40) - 1)
#: The multiplier of the n-gram keys (an odd 64-bit constant; any odd one spreads n <= 5).
_NGRAM_BASE = np.uint64(0x100000001B3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
#: Texts shingled in one packed sort (the text number takes the top 24 bits of a word).
_SHINGLE_BATCH = 1 << 20
#: A text longer than this (normalized characters) is shingled in pieces of this size, its
#: repeated shingles dropped as it goes: one batch holds ~30 bytes per character (a 200 MB
#: text peaked at 6.6 GB there), the pieces a few times a piece and its distinct shingles.
LONG_TEXT = 1 << 22


# -- shingles ----------------------------------------------------------------------------------


def shingles_of(texts: Sequence[str], normalizer: Normalizer | None = None) -> Shingles:
    """The shingle sets the candidates are searched on: the n-grams of :meth:`Shingles.of`,
    which ``--verify jaccard`` compares (same normalizer, same letters, bigrams of texts with
    Chinese characters and 5-grams of the others, a text shorter than n as one token), so every
    Jaccard is the verifier's. Only the keys differ: a 40-bit hash of the n-gram's code points,
    made with n multiply-adds over the whole batch and one multiplicative hash, deduplicated by
    one ``np.sort`` of packed (text, key) words, about 4x cheaper than the verifier's keys and
    argsort. A sketch needs no more (a 40-bit collision inside one text: ~m²/2^41 of its m
    shingles)."""
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
        packed |= (owners[0] if len(owners) == 1 else np.concatenate(owners)).astype(np.uint64) << _S40
    packed.sort()
    distinct = np.ones(len(packed), dtype=bool)
    np.not_equal(packed[1:], packed[:-1], out=distinct[1:])
    packed = packed[distinct]
    return Shingles(packed & _LOW40, (packed >> _S40).astype(np.int64), count)


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
    20x slower on millions of 64-bit keys."""
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


# -- sketches and band keys --------------------------------------------------------------------


def oph_sketches(shingles: Shingles, bins: int, seed: int = 1) -> UInt32Array:
    """(count, bins) one-permutation MinHash sketches, densified; rows of documents without
    shingles stay :data:`EMPTY32`."""
    mixed = fmix64(shingles.hashes ^ fmix64(np.full(1, seed, dtype=np.uint64)))
    with np.errstate(over="ignore"):
        slot = ((mixed >> _S32) * np.uint64(bins)) >> _S32  # uniform in [0, bins)
    cell = shingles.documents.astype(np.int64) * bins + slot.astype(np.int64)
    flat = np.full(shingles.count * bins, EMPTY32, dtype=np.uint32)
    # The minimum per (document, bin): an unbuffered ufunc.at, 20x faster than sorting the
    # packed (cell, value) words (numpy >= 1.25).
    np.minimum.at(flat, cell, (mixed & _LOW32).astype(np.uint32))
    sketch: UInt32Array = flat.reshape(shingles.count, bins)
    _densify(sketch, shingles.sizes > 0, seed)
    return sketch


#: Probe targets precomputed per bin (attempts beyond are hashed as they come).
_PROBES = 64
#: Densification rounds done on whole rows before the bins left go one by one.
_WHOLE_ROUNDS = 3


def _probe_table(bins: int, seed: int, attempts: range) -> npt.NDArray[np.int64]:
    """(bins, len(attempts)) bins probed by empty bin j at each attempt: p(j, a)."""
    salt = np.uint64((seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
    columns = np.arange(bins, dtype=np.uint64)[:, None]
    tries = np.asarray(list(attempts), dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        keys = columns * np.uint64(1 << 20) + tries + salt
    return (fmix64(keys) % np.uint64(bins)).astype(np.int64)


def _densify(sketch: UInt32Array, nonempty: npt.NDArray[np.bool_], seed: int) -> None:
    """Optimal densification in place: empty bin j of a document copies the first non-empty
    bin of the probe sequence p(j, 1), p(j, 2), ... — the same sequence in every document.
    Attempt a probes the same column p(j, a) in every row, so the first rounds (where most
    empty bins end: a share (empty share)^a is left after a rounds) are whole-matrix column
    gathers; the few bins left go on one by one, on flat indices."""
    bins = sketch.shape[1]
    filled = sketch != EMPTY32
    # Only documents with an empty bin take part (long texts rarely have one).
    holed = np.flatnonzero(nonempty & ~filled.all(axis=1))
    if not holed.size:
        return
    table = _probe_table(bins, seed, range(1, _PROBES + 1))
    part, known = sketch[holed], filled[holed]
    need = ~known
    attempt = 0
    while attempt < _WHOLE_ROUNDS and need.any():
        probe = table[:, attempt]
        hit = need & np.take(known, probe, axis=1)
        part = np.where(hit, np.take(part, probe, axis=1), part)
        need &= ~hit
        attempt += 1
    sketch[holed] = part
    rows, columns = np.nonzero(need)
    flat, known_flat = sketch.reshape(-1), filled.reshape(-1)
    base = holed[rows] * bins
    by_attempt = np.ascontiguousarray(table.T)
    while base.size:
        attempt += 1
        if attempt <= _PROBES:
            probe = by_attempt[attempt - 1][columns]
        else:
            probe = _probe_table(bins, seed, range(attempt, attempt + 1))[columns, 0]
        source = base + probe
        hit = known_flat[source]
        flat[(base + columns)[hit]] = flat[source[hit]]
        miss = ~hit
        base, columns = base[miss], columns[miss]


def band_keys(sketch: npt.ArrayLike, rows: int, bands: int) -> UInt32Array:
    """(bands, count) 32-bit keys, one per band of ``rows`` consecutive sketch values. Two
    different bands collide by chance with probability 2^-32 per pair (harmless: verified)."""
    values = np.asarray(sketch).astype(np.uint64)
    count = values.shape[0]
    grouped = values[:, : rows * bands].reshape(count, bands, rows)
    key = np.zeros((count, bands), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for row in range(rows):  # a loop over the r rows of a band, not over shingles
            key = fmix64(key * np.uint64(0x100000001B3) + grouped[:, :, row] + np.uint64(1))
    return np.ascontiguousarray((key >> _S32).astype(np.uint32).T)


def minhash_sketches(shingles: Shingles, bins: int, seed: int = 1) -> UInt32Array:
    """(count, bins) classic MinHash sketches (``bins`` universal hash functions), as 32-bit."""
    signatures = MinHasher(bins, seed).signatures_of_hashes(
        shingles.hashes, shingles.documents, shingles.count
    )
    return (fmix64(signatures) >> _S32).astype(np.uint32)

"""Sketches of shingle sets (:mod:`neardup.similarity.shingles`): one-permutation MinHash with
optimal densification, its one-byte bins and their Jaccard estimate, the batch search's band
keys, the text sketch a band index stores (:func:`text_sketches`), and classic MinHash for
comparison.

The one definition of each for every mode: the batch search (:mod:`neardup.dedup.candidates`),
the stored sketch of a band index and the service (:func:`text_sketches`) and the Spark job
call these. Every function is pure and depends on its batch alone, so worker processes and
Spark tasks get the same numbers.

The stored sketch: 512 one-permutation MinHash bins of a record's shingles, one byte each
(:func:`byte_bins`), 512 bytes. One sketch does both jobs of the online search. Its first
bytes are the band keys the store's postings are keyed on
(:class:`~neardup.similarity.bands.BandScheme`), and all 512 bins estimate the shingle Jaccard
of a candidate pair without its texts (:func:`estimate_from_bins`; standard error about 0.022
near J = 0.5; figures in docs/storage.md). The shingles, the sketch and the estimate are the
batch search's (:func:`~neardup.similarity.shingles.shingles_of`, :func:`oph_sketches`), so a
text gets the same sketch in any batch, process or version that keeps these functions."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..errors import InputError
from ..fingerprint.token_cache import fmix64
from ..text.normalize import Normalizer
from .bands import SKETCH_BYTES
from .minhash import MinHasher
from .shingles import Shingles, compact_keys, shingles_of

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
UInt64Array = npt.NDArray[np.uint64]
UInt32Array = npt.NDArray[np.uint32]

EMPTY32 = np.uint32(0xFFFFFFFF)
_LOW32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
#: Values a one-byte bin takes: two bins of different minima agree by chance with 1/256.
BIN_VALUES = 256
#: The one sketch of a text, for every mode: one-permutation MinHash over this many bins with
#: this seed. The batch search's bands read all of them and more (:func:`band_sketches`); its
#: candidate check, and the sketch an index stores, read the first :data:`CHECK_BINS` at one
#: byte, so batch and online estimate a pair's Jaccard from the very same numbers.
TEXT_SKETCH_BINS = 730
TEXT_SKETCH_SEED = 1
#: Added to the seed of the sketch that extends the text sketch for more bands.
EXTENSION_SEED = 0x9E3779B9
#: One-byte bins a candidate check and a stored sketch read.
CHECK_BINS = 512
#: The band around the threshold where the texts decide, in batch and in an index that keeps
#: them: 3.5 standard errors of the estimate from :data:`CHECK_BINS` one-byte bins near
#: Jaccard 0.5 (docs/candidates.md). Outside it the estimate rejects (unrelated documents
#: sharing a band by chance) or accepts (copies) without reading a text.
CHECK_MARGIN = 0.08


# -- sketches and band keys --------------------------------------------------------------------


def oph_sketches(shingles: Shingles, bins: int, seed: int = 1) -> UInt32Array:
    """(count, bins) one-permutation MinHash sketches, densified; rows of documents without
    shingles stay :data:`EMPTY32`."""
    mixed = fmix64(shingles.hashes ^ fmix64(np.full(1, seed, dtype=np.uint64)))
    with np.errstate(over="ignore"):
        slot = ((mixed >> _S32) * np.uint64(bins)) >> _S32  # uniform in [0, bins)
    cell = shingles.documents.astype(np.int64) * bins + slot.astype(np.int64)
    flat = np.full(shingles.count * bins, EMPTY32, dtype=np.uint32)
    # The minimum per (document, bin): an unbuffered ufunc.at (numpy >= 1.25), far faster than
    # sorting the packed (cell, value) words.
    np.minimum.at(flat, cell, (mixed & _LOW32).astype(np.uint32))
    sketch: UInt32Array = flat.reshape(shingles.count, bins)
    _densify(sketch, shingles.sizes > 0, seed)
    return sketch


def band_columns(rows: int, bands: int, bins: int = TEXT_SKETCH_BINS) -> IntArray:
    """The sketch columns of ``bands`` bands of ``rows`` rows, band after band: the ``bins``
    bins of the text sketch in order (its bins // rows bands), then the same bins regrouped
    once, band k's row m being row m of band (k + stride·m) of the first grouping (stride =
    bands of it // rows), so that a new band shares at most one bin with any other band; then
    columns ``bins``, ``bins`` + 1, ... of an extension sketch. Regrouping costs no sketching,
    and a chance agreement of one band's rows makes no second band agree."""
    first = bins // rows
    columns = [np.arange(min(bands, first) * rows, dtype=np.int64)]
    regrouped = max(0, min(bands - first, first))
    if regrouped:
        stride = max(1, first // rows)
        band = (np.arange(regrouped)[:, None] + stride * np.arange(rows)[None, :]) % first
        columns.append((rows * band + np.arange(rows)[None, :]).reshape(-1))
    extension = max(0, bands - first - regrouped) * rows
    columns.append(bins + np.arange(extension, dtype=np.int64))
    return np.concatenate(columns)


def band_sketches(shingles: Shingles, rows: int, bands: int, seed: int = TEXT_SKETCH_SEED) -> UInt32Array:
    """(count, rows·bands) sketch values in band order (:func:`band_columns`): the text
    sketch of ``seed`` regrouped, and where the bands need more bins than two groupings, an
    independent sketch of the rest (seed + :data:`EXTENSION_SEED`). One wider sketch would
    move every bin (a shingle's bin depends on the width): its first bins would no longer be
    the check's or an index's."""
    sketch = oph_sketches(shingles, TEXT_SKETCH_BINS, seed)
    columns = band_columns(rows, bands)
    extension = int(columns.max(initial=0)) + 1 - TEXT_SKETCH_BINS
    if extension > 0:
        more = oph_sketches(shingles, extension, seed + EXTENSION_SEED)
        sketch = np.concatenate([sketch, more], axis=1)
    values: UInt32Array = sketch[:, columns]
    return values


#: Probe targets precomputed per bin, once per layout (attempts beyond are hashed as they
#: come, for the bins still empty).
_PROBES = 256
#: Densification rounds done on whole rows before the bins left go one by one.
_WHOLE_ROUNDS = 2
#: Rows densified at a time: their bins and flags stay in the processor's caches.
_BLOCK_ROWS = 64
#: Rows with at most this many filled bins (texts of a few shingles) take their values from
#: the first-hit table: probing would need about bins / filled attempts per empty bin.
_FEW_FILLED = 32
#: Attempts the first-hit table covers (every (bin, target) pair is met long before, in
#: practice; a pair that is not falls back to probing).
_TABLE_ATTEMPTS = 1 << 15
_NEVER = np.iinfo(np.int32).max


def _probes(
    columns: npt.NDArray[np.uint64], tries: npt.NDArray[np.uint64] | np.uint64, bins: int, seed: int
) -> IntArray:
    """The bin p(j, a) that empty bin j probes at attempt a, for columns j and attempts a
    (broadcast): the one definition of the probe sequence."""
    salt = np.uint64((seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        keys = columns * np.uint64(1 << 20) + tries + salt
    return (fmix64(keys) % np.uint64(bins)).astype(np.int64)


def _probe_table(bins: int, seed: int, attempts: range) -> npt.NDArray[np.int64]:
    """(bins, len(attempts)) bins probed by empty bin j at each attempt: p(j, a)."""
    columns = np.arange(bins, dtype=np.uint64)[:, None]
    return _probes(columns, np.asarray(list(attempts), dtype=np.uint64)[None, :], bins, seed)


@functools.lru_cache(maxsize=8)
def _first_probes(bins: int, seed: int) -> IntArray:
    """(:data:`_PROBES`, bins): the bin each empty bin probes at attempts 1 .. _PROBES,
    attempt by attempt; built once per layout."""
    table = np.ascontiguousarray(_probe_table(bins, seed, range(1, _PROBES + 1)).T)
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=4)
def _first_hits(bins: int, seed: int) -> npt.NDArray[np.int32]:
    """(bins, bins): the first attempt a >= 1 at which empty bin j probes bin b, p(j, a) = b
    (:data:`_NEVER` where that is beyond the table). Built once per layout: an empty bin's
    value is then the filled bin of smallest first attempt, whatever the number of attempts
    the probe sequence would need."""
    first = np.full((bins, bins), _NEVER, dtype=np.int32)
    step = max(1, (1 << 22) // bins)
    for low in range(1, _TABLE_ATTEMPTS + 1, step):
        attempts = range(low, min(low + step, _TABLE_ATTEMPTS + 1))
        probes = _probe_table(bins, seed, attempts)
        rows = np.repeat(np.arange(bins, dtype=np.int64), len(attempts))
        tries = np.tile(np.asarray(attempts, dtype=np.int32), bins)
        np.minimum.at(first, (rows, probes.reshape(-1)), tries)
        if (first[~np.eye(bins, dtype=bool)] < _NEVER).all():
            break
    first.flags.writeable = False
    return first


def _densify(sketch: UInt32Array, nonempty: npt.NDArray[np.bool_], seed: int) -> None:
    """Optimal densification in place: empty bin j of a document copies the first non-empty
    bin of the probe sequence p(j, 1), p(j, 2), ... — the same sequence in every document.
    Rows with few filled bins take it from the first-hit table (:func:`_first_hits`), the
    others by probing (:func:`_densify_by_probes`); both give the same values."""
    bins = sketch.shape[1]
    filled = sketch != EMPTY32
    # Only documents with an empty bin take part (long texts rarely have one).
    holed = np.flatnonzero(nonempty & ~filled.all(axis=1))
    if not holed.size:
        return
    counts = np.count_nonzero(filled[holed], axis=1)
    few = holed[counts <= _FEW_FILLED]
    rest = [holed[counts > _FEW_FILLED]]
    if few.size:
        first = _first_hits(bins, seed)
        unreached = []
        for row in few.tolist():
            sources = np.flatnonzero(filled[row])
            hits = first[:, sources]  # (bins, filled): the attempt each filled bin is met
            best = np.argmin(hits, axis=1)
            reached = hits[np.arange(bins), best] < _NEVER
            empty = ~filled[row]
            if not reached[empty].all():
                unreached.append(row)
                continue
            sketch[row, empty] = sketch[row, sources[best[empty]]]
        rest.append(np.asarray(unreached, dtype=np.int64))
    _densify_by_probes(sketch, filled, np.concatenate(rest), seed)


def _densify_by_probes(
    sketch: UInt32Array, filled: npt.NDArray[np.bool_], holed: IntArray, seed: int
) -> None:
    """:func:`_densify` of rows ``holed`` by following the probe sequences, :data:`_BLOCK_ROWS`
    rows at a time so that the random reads of a probe stay in the processor's caches.
    Attempt a probes the same column p(j, a) in every row, so the first rounds (where most
    empty bins end: a share (empty share)^a is left after a rounds) are whole-block column
    gathers; the few bins left go on one by one, on flat indices."""
    bins = sketch.shape[1]
    by_attempt = _first_probes(bins, seed)
    for low in range(0, holed.size, _BLOCK_ROWS):
        rows = holed[low : low + _BLOCK_ROWS]
        part, known = sketch[rows], filled[rows]
        need = ~known
        for attempt in range(_WHOLE_ROUNDS):
            probe = by_attempt[attempt]
            hit = known[:, probe]
            hit &= need
            np.copyto(part, part[:, probe], where=hit)
            need ^= hit
        rest, columns = np.nonzero(need)
        flat, known_flat = part.reshape(-1), known.reshape(-1)
        base = rest * bins
        attempt = _WHOLE_ROUNDS
        while base.size:
            attempt += 1
            if attempt <= _PROBES:
                probe = by_attempt[attempt - 1][columns]
            else:
                probe = _probes(columns.astype(np.uint64), np.uint64(attempt), bins, seed)
            source = base + probe
            hit = known_flat[source]
            flat[(base + columns)[hit]] = flat[source[hit]]
            miss = ~hit
            base, columns = base[miss], columns[miss]
        sketch[rows] = part


def byte_bins(sketch: npt.NDArray[np.uint32], bins: int) -> npt.NDArray[np.uint8]:
    """The first ``bins`` bins of (count, ≥ bins) sketches at one byte each (b-bit MinHash,
    Li and König 2010): what a candidate check and a stored sketch keep of a sketch."""
    return (sketch[:, :bins] & np.uint32(0xFF)).astype(np.uint8)


def estimate_from_bins(left: npt.ArrayLike, right: npt.ArrayLike) -> FloatArray:
    """The Jaccard estimate Ĵ of rows of one-byte bins (:func:`byte_bins`; last axis, any
    count of bins, numpy broadcasting: one row against many works).

    Two bins agree with probability J + (1 − J)/256 (equal minima, or different ones whose
    low bytes agree by chance), so Ĵ = (agree/bins − 1/256) / (1 − 1/256), clipped to [0, 1];
    standard error about sqrt(J(1 − J)/bins)."""
    a, b = np.asarray(left, dtype=np.uint8), np.asarray(right, dtype=np.uint8)
    bins = a.shape[-1]
    if b.shape[-1] != bins or bins == 0:
        raise InputError(f"bins of {a.shape[-1]} and {b.shape[-1]} values cannot be compared")
    agree = np.count_nonzero(a == b, axis=-1) / bins
    return np.asarray(np.clip(_estimate_of_agreement(agree), 0.0, 1.0), dtype=np.float64)


#: The low seven bits of each byte of a word (:func:`estimate_from_packed_bins`).
_LOW_SEVEN = np.uint64(0x7F7F7F7F7F7F7F7F)


def estimate_from_packed_bins(left: npt.ArrayLike, right: npt.ArrayLike) -> FloatArray:
    """:func:`estimate_from_bins` of one-byte bins packed eight to a uint64 word (rows of
    words, last axis; broadcasting as there): the agreeing bins are the zero bytes of the
    XOR, counted in the words without unpacking them (a byte is zero when neither its low
    seven bits, which carry into its top bit once 0x7F is added, nor its top bit are set)."""
    a, b = np.asarray(left, dtype=np.uint64), np.asarray(right, dtype=np.uint64)
    if b.shape[-1] != a.shape[-1] or a.shape[-1] == 0:
        raise InputError(f"bins of {8 * a.shape[-1]} and {8 * b.shape[-1]} values cannot be compared")
    differ = np.bitwise_xor(a, b)
    tops = np.bitwise_and(differ, _LOW_SEVEN)  # every pass in place: one array for all of them
    tops += _LOW_SEVEN
    tops |= differ
    tops |= _LOW_SEVEN
    np.invert(tops, out=tops)
    agree = np.bitwise_count(tops).sum(axis=-1, dtype=np.int64) / (8 * a.shape[-1])
    return np.asarray(np.clip(_estimate_of_agreement(agree), 0.0, 1.0), dtype=np.float64)


def _estimate_of_agreement(share: npt.ArrayLike) -> FloatArray:
    """Ĵ of the share of one-byte bins that agree: the chance agreements taken out."""
    chance = 1.0 / BIN_VALUES
    return np.asarray((np.asarray(share, dtype=np.float64) - chance) / (1.0 - chance))


def _agreement_chance(jaccard: float) -> float:
    """How often one-byte bins of a pair of Jaccard ``jaccard`` agree: equal minima, or
    different ones whose low bytes agree by chance."""
    return jaccard + (1.0 - jaccard) / BIN_VALUES


#: How often the band bins' prefilter may drop a pair at the lowest Jaccard a check accepts
#: (:func:`estimate_floor`); far below the bands' own miss rate at that Jaccard.
PREFILTER_MISS = 1e-4


def estimate_floor(bins: int, jaccard: float, miss: float = PREFILTER_MISS) -> float:
    """The estimate (:func:`estimate_from_bins`) from ``bins`` one-byte bins below which a pair
    of Jaccard ``jaccard`` or more falls with probability at most ``miss``.

    The band bins an index reads with its postings estimate a candidate's Jaccard before its
    stored sketch is read: most candidates of a large collection of related texts share one
    band by chance and agree on few other bins, and dropping those below this floor spares
    reading their sketches while a pair the check could accept is kept (a bin agrees with
    probability p = J + (1 − J)/256, so agreements are Binomial(bins, p))."""
    if bins < 1:
        raise InputError(f"an estimate floor needs one bin or more; got {bins!r}")
    p = _agreement_chance(min(1.0, max(0.0, jaccard)))
    below = 0.0
    for agree in range(bins + 1):  # the smallest count whose cumulative chance passes miss
        below += math.comb(bins, agree) * p**agree * (1.0 - p) ** (bins - agree)
        if below > miss:
            break
    return float(_estimate_of_agreement(agree / bins)) - 1e-9


def hashed_band_keys(sketch: npt.ArrayLike, rows: int, bands: int) -> UInt32Array:
    """(bands, count) 32-bit keys, one per band of ``rows`` consecutive sketch values: the
    rows combined with odd 64-bit multipliers (one per row, so row order counts), then one
    finalizer per band. The band layout of the batch search and the Spark job. (A band index
    keys its postings on the sketch's bytes themselves: :meth:`BandScheme.keys
    <neardup.similarity.bands.BandScheme.keys>`.) Two different bands collide by chance with
    probability about 2^-32 per pair (harmless: candidates are checked)."""
    values = np.asarray(sketch)
    count = values.shape[0]
    grouped = values[:, : rows * bands].reshape(count, bands, rows)
    key = np.zeros((count, bands), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for row in range(rows):  # a loop over the r rows of a band, not over shingles
            key += (grouped[:, :, row].astype(np.uint64) + np.uint64(1)) * _ROW_MULTIPLIERS[
                row % len(_ROW_MULTIPLIERS)
            ]
        key = fmix64(key)
    return np.ascontiguousarray((key >> _S32).astype(np.uint32).T)


#: Odd multipliers of a band's rows (golden-ratio and splitmix constants).
_ROW_MULTIPLIERS = tuple(
    np.uint64(value)
    for value in (
        0x9E3779B97F4A7C15,
        0xBF58476D1CE4E5B9,
        0x94D049BB133111EB,
        0xD6E8FEB86659FD93,
        0xC2B2AE3D27D4EB4F,
        0x165667B19E3779F9,
        0x27D4EB2F165667C5,
        0xFF51AFD7ED558CCD,
    )
)


def shingle_signatures(shingles: Shingles, minhasher: MinHasher) -> UInt64Array:
    """Classic MinHash signatures of shingle sets: ``minhasher`` over their 32-bit keys
    (:func:`~neardup.similarity.shingles.compact_keys`)."""
    return minhasher.signatures_of_keys(compact_keys(shingles.hashes), shingles.documents, shingles.count)


def minhash_sketches(shingles: Shingles, bins: int, seed: int = 1) -> UInt32Array:
    """(count, bins) classic MinHash sketches (``bins`` universal hash functions), as 32-bit."""
    signatures = shingle_signatures(shingles, MinHasher(bins, seed))
    return (fmix64(signatures) >> _S32).astype(np.uint32)


# -- the text sketch a band index stores ---------------------------------------------------

#: uint64 words of one stored sketch.
SKETCH_WORDS = SKETCH_BYTES // 8
#: The one-permutation sketches (bins, seed) a stored sketch is the first 512 bins of, by
#: version: stored sketches must be comparable forever, so an index records its version.
#: 2 is the text sketch of every mode (:data:`TEXT_SKETCH_BINS`),
#: whose first bins are the batch search's check bins; 1 is that of band indexes made before.
SKETCH_LAYOUTS: dict[int, tuple[int, int]] = {1: (512, 17), 2: (TEXT_SKETCH_BINS, TEXT_SKETCH_SEED)}
SKETCH_VERSION = 2
#: Texts sketched at a time (bounds the (n, 512) uint32 temporary).
_CHUNK = 8192


def text_sketches(
    texts: Sequence[str], normalizer: Normalizer | None = None, version: int = SKETCH_VERSION
) -> UInt64Array:
    """(n, 64) uint64: each text's first 512 sketch bins at one byte, packed in bin order,
    from the sketch of ``version`` (:data:`SKETCH_LAYOUTS`)."""
    if version not in SKETCH_LAYOUTS:
        known = sorted(SKETCH_LAYOUTS)
        raise InputError(f"unknown text sketch version {version!r}; this neardup knows {known}")
    width, seed = SKETCH_LAYOUTS[version]
    out = np.empty((len(texts), SKETCH_WORDS), dtype=np.uint64)
    for low in range(0, len(texts), _CHUNK):
        part = texts[low : low + _CHUNK]
        sketch = oph_sketches(shingles_of(part, normalizer), width, seed)
        bins = np.ascontiguousarray(byte_bins(sketch, SKETCH_BYTES))
        out[low : low + len(part)] = bins.view(np.uint64)
    return out


def sketch_similarity(left: npt.ArrayLike, right: npt.ArrayLike) -> FloatArray:
    """Ĵ of rows of ``left`` against rows of ``right`` (either may be one row), stored
    sketches: :func:`estimate_from_bins` of their bins."""
    return estimate_from_bins(_bins(left), _bins(right))


def _bins(sketches: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    array = np.ascontiguousarray(sketches, dtype=np.uint64)
    if array.shape[-1] != SKETCH_WORDS:
        raise InputError(
            f"a text sketch is {SKETCH_WORDS} uint64 words (Verifier('sketch').signatures); "
            f"got shape {array.shape}"
        )
    return array.view(np.uint8)

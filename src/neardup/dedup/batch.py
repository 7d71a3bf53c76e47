"""All near-duplicate pairs of a collection, exactly, by sorting on block keys.

For each table of a :class:`~neardup.blocks.BlockScheme` the fingerprints are sorted by key
(one ``np.sort`` of ``key << index_bits | index``), runs of equal keys give candidate pairs,
and candidates are verified by XOR and popcount in bulk. A pair is emitted by the first table
where its keys agree, so each pair appears once. Buckets larger than (1 + μ) × the mean
bucket are split by seed 000's second hash (sub-blocks of the bits outside the key), which
keeps skewed collections from degenerating into all-pairs scans of a bucket.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ..blocks import BlockScheme
from ..errors import ConfigError, InputError
from ..hashing import check_bits

IntArray = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]
#: Candidate pairs verified per step: bounds the temporary arrays to ~100 MB.
PAIR_CHUNK = 1 << 22
#: Seed 000's μ: a bucket above (1 + μ) × the average bucket is split again.
DEFAULT_MU = 2.0
#: Buckets up to this size are never split: verifying their ~size²/2 pairs costs less than
#: the k + 1 extra sorts of a split (with PAIR_COST = 0.25, the break-even is near 32).
MIN_SPLIT = 32


class Pairs(NamedTuple):
    """Every pair within the distance, once: ``i < j``, sorted by (i, j)."""

    i: IntArray
    j: IntArray
    distance: npt.NDArray[np.uint8]

    def __len__(self) -> int:
        return int(self.i.shape[0])


@dataclass
class TableStats:
    """Bucket statistics of one table (buckets are the non-empty key values)."""

    table: int
    key_bits: int
    buckets: int = 0
    largest: int = 0
    mean: float = 0.0
    split: int = 0
    candidates: int = 0
    pairs: int = 0


@dataclass
class BucketStats:
    """Per-table statistics of one :func:`find_all_pairs` run or one index."""

    scheme: str = ""
    threshold: float = 0.0
    tables: list[TableStats] = field(default_factory=list)

    @property
    def largest(self) -> int:
        return max((table.largest for table in self.tables), default=0)

    @property
    def split(self) -> int:
        return sum(table.split for table in self.tables)

    @property
    def candidates(self) -> int:
        return sum(table.candidates for table in self.tables)

    def format(self) -> str:
        """A printable table; the candidate and pair columns appear for a search (an index
        has buckets but no pairs)."""
        searched = any(table.candidates for table in self.tables)
        lines = [f"scheme: {self.scheme}", f"second-hash threshold: {self.threshold:.1f} entries"]
        lines.append("table key_bits buckets largest mean split" + (" candidates pairs" if searched else ""))
        for t in self.tables:
            row = f"{t.table:5d} {t.key_bits:8d} {t.buckets:7d} {t.largest:7d} {t.mean:4.1f} {t.split:5d}"
            lines.append(row + (f" {t.candidates:10d} {t.pairs:5d}" if searched else ""))
        return "\n".join(lines)


def as_words(fingerprints: npt.ArrayLike, bits: int) -> UInt64Array:
    """Check a fingerprint array against ``bits`` and view it as (n, words) uint64."""
    check_bits(bits)
    array = np.asarray(fingerprints)
    if array.dtype.kind in "fO" and not isinstance(fingerprints, np.ndarray):
        # numpy reads a list mixing ints >= 2**63 with smaller ones as float64: read such a
        # list as Python ints instead (anything else is refused below).
        exact = np.asarray(fingerprints, dtype=object)
        ints = (isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in exact.flat)
        if all(ints) and all(0 <= v < 1 << 64 for v in exact.flat):
            array = exact.astype(np.uint64)
    if array.dtype != np.uint64:
        if array.size and (not np.issubdtype(array.dtype, np.integer) or array.min() < 0):
            raise InputError(f"fingerprints must be non-negative integers (uint64); got dtype {array.dtype}")
        array = array.astype(np.uint64)
    words = 2 if bits == 128 else 1
    if bits == 128:
        if array.ndim != 2 or array.shape[1] != 2:
            raise InputError(
                f"128-bit fingerprints must be an (n, 2) [low, high] array; got shape {array.shape}"
            )
        return array
    if array.ndim != 1:
        raise InputError(f"{bits}-bit fingerprints must be a one-dimensional array; got shape {array.shape}")
    if bits == 32 and array.size and int(array.max()) >> 32:
        raise InputError("a fingerprint does not fit in 32 bits; pass bits=64 or bits=128")
    return array.reshape(-1, words)


def infer_bits(fingerprints: npt.ArrayLike, bits: int | None) -> int:
    """``bits`` if given, else 128 for (n, 2) arrays and 64 otherwise."""
    if bits is not None:
        return bits
    array = np.asarray(fingerprints)
    return 128 if array.ndim == 2 else 64


def row_distances(xor: UInt64Array) -> npt.NDArray[np.uint8]:
    """Popcount of each row of a (n, w) XOR array: the Hamming distances."""
    counts = np.bitwise_count(xor)
    if counts.shape[1] == 1:
        return np.asarray(counts[:, 0], dtype=np.uint8)
    return np.asarray(counts.sum(axis=1, dtype=np.uint8))


def find_all_pairs(
    fingerprints: npt.ArrayLike,
    max_distance: int = 3,
    *,
    bits: int | None = None,
    scheme: BlockScheme | None = None,
    mu: float = DEFAULT_MU,
    split_threshold: float | None = None,
    stats: BucketStats | None = None,
    progress: Callable[[int], object] | None = None,
) -> Pairs:
    """Every pair ``(i, j)`` with ``hamming(fingerprints[i], fingerprints[j]) <= max_distance``.

    Exact: the result equals a brute-force scan. ``scheme`` defaults to
    ``BlockScheme.auto(len(fingerprints), bits, max_distance)``; ``mu`` sets the second hash
    (buckets above :func:`split_size` entries are split; ``split_threshold`` sets that size
    directly, ``float("inf")`` turns splitting off). ``stats``, when given, is filled with
    per-table bucket statistics; ``progress`` is called with 1 after each table.
    """
    bits = infer_bits(fingerprints, bits)
    words = as_words(fingerprints, bits)
    n = words.shape[0]
    if scheme is None:
        scheme = BlockScheme.auto(n, bits, max_distance)
    _check_scheme(scheme, bits, max_distance)
    if mu < 0:
        raise ConfigError(f"mu must be >= 0; got {mu!r}")
    finder = _PairFinder(words, scheme, max_distance)
    if stats is not None:
        stats.scheme = scheme.describe()
    parts: list[tuple[IntArray, IntArray, npt.NDArray[np.uint8]]] = []
    for table in range(scheme.table_count):
        table_stats = finder.table_pairs(table, mu, split_threshold, parts)
        if stats is not None:
            stats.tables.append(table_stats)
            stats.threshold = finder.last_threshold
        if progress is not None:
            progress(1)
    return _sorted_pairs(parts, n)


def split_size(size: int, key_bits: int, mu: float = DEFAULT_MU) -> float:
    """Seed 000's threshold: (1 + μ) × the average bucket, size / 2^key_bits (the expected
    bucket under uniform fingerprints), but never below :data:`MIN_SPLIT`."""
    return max((1.0 + mu) * size / 2.0**key_bits, float(MIN_SPLIT))


def _check_scheme(scheme: BlockScheme, bits: int, max_distance: int) -> None:
    if scheme.bits != bits:
        raise ConfigError(f"the block scheme is for {scheme.bits}-bit fingerprints, not {bits}-bit ones")
    if max_distance > scheme.max_distance or max_distance < 0:
        raise ConfigError(
            f"max_distance={max_distance} is outside what the block scheme guarantees "
            f"(0 to {scheme.max_distance}); build the scheme with max_distance={max_distance}"
        )


class _PairFinder:
    """The per-table work of :func:`find_all_pairs` over one word array."""

    def __init__(self, words: UInt64Array, scheme: BlockScheme, max_distance: int) -> None:
        self.words = words
        self.scheme = scheme
        self.max_distance = max_distance
        n = words.shape[0]
        self.index_bits = max(1, (n - 1).bit_length())
        room = 64 - self.index_bits
        # Keys that do not fit beside the index are cut to a prefix (coarser, still exact).
        self.keys = [table.prefix(room) for table in scheme.tables]
        self.key_masks = [key.mask(scheme.words) for key in self.keys]
        self.last_threshold = 0.0

    def table_pairs(
        self,
        table: int,
        mu: float,
        split_threshold: float | None,
        out: list[tuple[IntArray, IntArray, npt.NDArray[np.uint8]]],
    ) -> TableStats:
        n = self.words.shape[0]
        key = self.keys[table]
        stats = TableStats(table=table, key_bits=key.bit_count)
        if n < 2:
            stats.buckets, stats.largest, stats.mean = n, n, float(n)
            return stats
        order, starts, lengths, buckets = _runs_by_key(key.extract(self.words), self.index_bits)
        stats.buckets = buckets
        stats.largest = int(lengths.max()) if lengths.size else 1
        stats.mean = n / buckets
        threshold = split_threshold if split_threshold is not None else split_size(n, key.bit_count, mu)
        self.last_threshold = threshold
        oversized = lengths > threshold
        stats.split = int(np.count_nonzero(oversized))
        plain_starts, plain_lengths = starts[~oversized], lengths[~oversized]
        for a, b in pairs_in_runs(plain_starts, plain_lengths):
            stats.candidates += a.size
            self._verify(order[a], order[b], table, (), out, stats)
        if stats.split:
            self._second_hash(order, starts[oversized], lengths[oversized], table, out, stats)
        return stats

    def _second_hash(
        self,
        order: IntArray,
        starts: IntArray,
        lengths: IntArray,
        table: int,
        out: list[tuple[IntArray, IntArray, npt.NDArray[np.uint8]]],
        stats: TableStats,
    ) -> None:
        """Seed 000: re-bucket oversized buckets on sub-blocks of the bits outside the key."""
        members = order[_expand_runs(starts, lengths)]
        bucket_of = np.repeat(np.arange(lengths.size, dtype=np.uint64), lengths)
        local_bits = max(1, (members.size - 1).bit_length())
        bucket_bits = max(1, (lengths.size - 1).bit_length())
        room = 64 - local_bits - bucket_bits
        sub_keys = [sub.prefix(room) for sub in self.scheme.sub_blocks(self.keys[table])]
        sub_masks = [sub.mask(self.scheme.words) for sub in sub_keys]
        member_words = self.words[members]
        for index, sub in enumerate(sub_keys):
            grouped = (bucket_of << np.uint64(sub.bit_count)) | sub.extract(member_words)
            local, sub_starts, sub_lengths, _ = _runs_by_key(grouped, local_bits)
            for a, b in pairs_in_runs(sub_starts, sub_lengths):
                stats.candidates += a.size
                self._verify(members[local[a]], members[local[b]], table, sub_masks[:index], out, stats)

    def _verify(
        self,
        a: IntArray,
        b: IntArray,
        table: int,
        earlier_sub_masks: list[UInt64Array] | tuple[()],
        out: list[tuple[IntArray, IntArray, npt.NDArray[np.uint8]]],
        stats: TableStats,
    ) -> None:
        """Keep pairs within the distance that no earlier table (or sub-block) already emitted."""
        xor = self.words[a] ^ self.words[b]
        dist = row_distances(xor)
        keep = dist <= self.max_distance
        if not keep.any():
            return
        a, b, dist, xor = a[keep], b[keep], dist[keep], xor[keep]
        fresh = np.ones(a.size, dtype=bool)
        for mask in [*self.key_masks[:table], *earlier_sub_masks]:
            fresh &= ~np.all((xor & mask) == 0, axis=1)
        if not fresh.all():
            a, b, dist = a[fresh], b[fresh], dist[fresh]
        stats.pairs += int(a.size)
        out.append((a, b, dist))


def _runs_by_key(keys: UInt64Array, index_bits: int) -> tuple[IntArray, IntArray, IntArray, int]:
    """Sort ``keys``; return (order, starts, lengths, buckets) for the runs of >= 2 equal keys.

    ``order[p]`` is the position in ``keys`` of the p-th smallest; within a run the
    positions ascend, so a pair from a run always has its smaller index first.
    """
    n = keys.shape[0]
    packed = (keys << np.uint64(index_bits)) | np.arange(n, dtype=np.uint64)
    packed.sort()
    order = (packed & np.uint64((1 << index_bits) - 1)).astype(np.int64)
    sorted_keys = packed >> np.uint64(index_bits)
    del packed
    same = sorted_keys[1:] == sorted_keys[:-1]
    equal_at = np.flatnonzero(same)
    buckets = n - int(equal_at.size)
    if equal_at.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return order, empty, empty, buckets
    # Consecutive "equal to the next" positions form one run.
    breaks = np.flatnonzero(np.diff(equal_at) != 1) + 1
    first = np.concatenate(([0], breaks))
    last = np.concatenate((breaks - 1, [equal_at.size - 1]))
    starts = equal_at[first]
    lengths = equal_at[last] - starts + 2
    return order, starts.astype(np.int64), lengths.astype(np.int64), buckets


def _expand_runs(starts: IntArray, lengths: IntArray) -> IntArray:
    """Every position covered by the runs, run by run."""
    total = int(lengths.sum())
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + offsets


def pairs_in_runs(
    starts: IntArray, lengths: IntArray, chunk: int = PAIR_CHUNK
) -> Iterator[tuple[IntArray, IntArray]]:
    """Yield (a, b) position arrays of all pairs inside runs, at most ~``chunk`` at a time."""
    if starts.size == 0:
        return
    positions = _expand_runs(starts, lengths)
    run_end = np.repeat(starts + lengths, lengths)
    partners = run_end - positions - 1
    cumulative = np.cumsum(partners)
    begin = 0
    while begin < positions.size:
        base = int(cumulative[begin - 1]) if begin else 0
        end = int(np.searchsorted(cumulative, base + chunk, side="right"))
        end = max(end, begin + 1)
        counts = partners[begin:end]
        total = int(counts.sum())
        if total:
            a = np.repeat(positions[begin:end], counts)
            step = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts) + 1
            yield a, a + step
        begin = end


def _sorted_pairs(parts: list[tuple[IntArray, IntArray, npt.NDArray[np.uint8]]], n: int) -> Pairs:
    if not parts:
        return Pairs(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.uint8))
    i = np.concatenate([part[0] for part in parts])
    j = np.concatenate([part[1] for part in parts])
    dist = np.concatenate([part[2] for part in parts])
    low, high = np.minimum(i, j), np.maximum(i, j)
    order = np.lexsort((high, low))
    return Pairs(low[order], high[order], dist[order])


def brute_force_pairs(
    fingerprints: npt.ArrayLike, max_distance: int = 3, *, bits: int | None = None
) -> Pairs:
    """The reference answer by scanning all n²/2 pairs (vectorised per row; for tests and
    small collections)."""
    bits = infer_bits(fingerprints, bits)
    words = as_words(fingerprints, bits)
    n = words.shape[0]
    parts = []
    for row in range(n - 1):
        dist = row_distances(words[row + 1 :] ^ words[row])
        hits = np.flatnonzero(dist <= max_distance)
        if hits.size:
            parts.append((np.full(hits.size, row, dtype=np.int64), hits + row + 1, dist[hits]))
    return _sorted_pairs(parts, n)


def single_pass(fingerprints: npt.ArrayLike, max_distance: int = 3, *, bits: int | None = None) -> IntArray:
    """Seed 002's baseline, Single-Pass clustering: each fingerprint joins the first cluster
    whose centre (first member) is within the distance, else starts a new one.

    O(n × clusters) comparisons; returns each record's cluster as its centre's index. Kept to
    reproduce the seed's time comparison, not for production use.
    """
    bits = infer_bits(fingerprints, bits)
    words = as_words(fingerprints, bits)
    n = words.shape[0]
    centres = np.empty_like(words)
    centre_index = np.empty(n, dtype=np.int64)
    labels = np.empty(n, dtype=np.int64)
    count = 0
    for row in range(n):
        if count:
            dist = row_distances(centres[:count] ^ words[row])
            hits = np.flatnonzero(dist <= max_distance)
            if hits.size:
                labels[row] = centre_index[hits[0]]
                continue
        centres[count] = words[row]
        centre_index[count] = row
        labels[row] = row
        count += 1
    return labels

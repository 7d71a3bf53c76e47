"""All near-duplicate pairs of a collection, exactly, by sorting on block keys or by a scan.

For each table of a :class:`~neardup.blocks.BlockScheme` the fingerprints are sorted by key
(one ``np.sort`` of ``key << index_bits | index``), runs of equal keys give candidate pairs,
and candidates are verified by XOR and popcount in bulk. A pair is emitted by the first table
where its keys agree (its lowest equal blocks, :meth:`~neardup.blocks.BlockScheme.earlier_blocks`),
so each pair appears once. Buckets larger than (1 + μ) × the mean bucket are split by seed
000's second hash (sub-blocks of the bits outside the key), which keeps skewed collections
from degenerating into all-pairs scans of a bucket.

A wide distance on a small collection is cheapest as a scan: every pair compared in tiles of
contiguous XOR and popcount, no sort, no gather. An auto-tuned scheme (or none) is tuned
again on the data: the scan, or the block scheme whose candidates the collection's own
:class:`~neardup.distance.DistanceProfile` predicts to be fewest (templated text collides
far more than uniform fingerprints), whichever costs less. A scheme given by hand is used
as given.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ..blocks import DEFAULT_MU as DEFAULT_MU
from ..blocks import MIN_SPLIT as MIN_SPLIT
from ..blocks import BitSelection, BlockScheme, expected_work, tuned_for
from ..blocks import BucketStats as BucketStats
from ..blocks import TableStats as TableStats
from ..blocks import split_size as split_size
from ..distance import SCAN_TILE, distance_profile, tile_distances
from ..distance import as_words as as_words
from ..distance import row_distances as row_distances
from ..errors import ConfigError

# DEFAULT_MU ... row_distances are re-exported ("X as X"): they moved below the index, to
# neardup.blocks and neardup.distance, and callers still import them from here.
IntArray = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]
#: Candidate pairs verified per step: bounds the temporary arrays to ~100 MB.
PAIR_CHUNK = 1 << 22
#: Cost of comparing one pair in a scan, in the unit of :func:`~neardup.blocks.expected_work`
#: (one sorted table entry): contiguous XOR and popcount, no gather (benchmarks/wide_search.py
#: fits it; docs/index.md).
SCAN_COST = 0.02
#: Below this many fingerprints a tuned scheme is searched as passed: every plan takes well
#: under a millisecond there, and the caller's statistics keep the tables it tuned.
PLAN_MIN = 1000
#: Share of a search's expected work spent measuring the data's distances to tune it.
PROFILE_SHARE = 0.05
#: The data are measured only while the scan is within this factor of the uniform tuning's
#: work: beyond it (k = 3 at 10^6: ~1,000×) no profile of real text brings the scan back.
SCAN_RANGE = 100.0
#: Bytes of temporary arrays one table's search holds per fingerprint (keys, packed keys, the
#: order and the runs), and the most that tables searched at once may hold together: tables
#: run side by side on threads (numpy's sort and arithmetic release the GIL) only while
#: they fit, so a collection of 10^8 is still searched one table at a time.
TABLE_BYTES_PER_FINGERPRINT = 48
PARALLEL_TABLE_BYTES = 1 << 30
#: Fewer fingerprints than this are searched one table at a time: a table takes well under a
#: millisecond there, less than starting the threads.
PARALLEL_MIN = 1 << 16


class Pairs(NamedTuple):
    """Every pair within the distance, once: ``i < j``, sorted by (i, j)."""

    i: IntArray
    j: IntArray
    distance: npt.NDArray[np.uint8]

    def __len__(self) -> int:
        return int(self.i.shape[0])


def infer_bits(fingerprints: npt.ArrayLike, bits: int | None) -> int:
    """``bits`` if given, else 128 for (n, 2) arrays and 64 otherwise."""
    if bits is not None:
        return bits
    array = np.asarray(fingerprints)
    return 128 if array.ndim == 2 else 64


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
    workers: int | None = None,
) -> Pairs:
    """Every pair ``(i, j)`` with ``hamming(fingerprints[i], fingerprints[j]) <= max_distance``.

    Exact: the result equals a brute-force scan. ``scheme`` None, or one from
    :meth:`BlockScheme.auto` for :data:`PLAN_MIN` or more fingerprints, is tuned on the data
    (:func:`search_plan`); a scheme built by hand is searched as given. ``mu`` sets the second hash
    (buckets above :func:`split_size` entries are split; ``split_threshold`` sets that size
    directly, ``float("inf")`` turns splitting off). ``stats``, when given, is filled with
    per-table bucket statistics; ``progress`` is called with the tables done since its last
    call, which sum to the table count of ``scheme`` (a tuned scheme may be searched with
    other tables, or by a scan, and reports in the given one's unit). ``workers`` tables are
    searched at once on threads (default: one per core, at most two, for large collections;
    :func:`_table_workers`); the answer is the same for any number.
    """
    bits = infer_bits(fingerprints, bits)
    words = as_words(fingerprints, bits)
    n = words.shape[0]
    if scheme is not None:
        _check_scheme(scheme, bits, max_distance)
    if mu < 0:
        raise ConfigError(f"mu must be >= 0; got {mu!r}")
    if scheme is not None and (not scheme.tuned or n < PLAN_MIN):
        plan: BlockScheme | None = scheme
    else:
        plan = search_plan(words, bits, max_distance)
    ticks = _Ticks(
        progress, scheme.table_count if scheme is not None else max(1, plan.table_count if plan else 1)
    )
    parts: list[tuple[IntArray, IntArray, npt.NDArray[np.uint8]]] = []
    if plan is None:
        table_stats = _scan(words, max_distance, parts)
        if stats is not None:
            stats.scheme = (
                f"scan: all {n * (n - 1) // 2:,} pairs compared, "
                f"exact to distance {max_distance} at {bits} bits"
            )
            stats.tables.append(table_stats)
        ticks.done(1, 1)
        return _sorted_pairs(parts, n)
    finder = _PairFinder(words, plan, max_distance)
    if stats is not None:
        stats.scheme = plan.describe()
    threads = _table_workers(n, plan.table_count, workers)
    _search_tables(finder, mu, split_threshold, threads, stats, ticks, parts)
    return _sorted_pairs(parts, n)


def _search_tables(
    finder: _PairFinder,
    mu: float,
    split_threshold: float | None,
    threads: int,
    stats: BucketStats | None,
    ticks: _Ticks,
    parts: list[tuple[IntArray, IntArray, npt.NDArray[np.uint8]]],
) -> None:
    """Every table of ``finder``'s scheme, ``threads`` at a time; pairs, statistics and
    progress are taken in table order, so the answer is the same for any number."""
    count = finder.scheme.table_count

    def search(table: int) -> tuple[TableStats, list[tuple[IntArray, IntArray, npt.NDArray[np.uint8]]]]:
        found: list[tuple[IntArray, IntArray, npt.NDArray[np.uint8]]] = []
        return finder.table_pairs(table, mu, split_threshold, found), found

    with ThreadPoolExecutor(threads) as pool:  # no thread starts unless it is given work
        searched = pool.map(search, range(count)) if threads > 1 else map(search, range(count))
        for table, (table_stats, found) in enumerate(searched):
            parts += found
            if stats is not None:
                stats.tables.append(table_stats)
                stats.threshold = finder.split_at(table, mu, split_threshold)
            ticks.done(table + 1, count)


def _table_workers(n: int, tables: int, workers: int | None) -> int:
    """How many tables to search at once: ``workers`` if given, else one per core (at most
    two) from :data:`PARALLEL_MIN` fingerprints while their temporary arrays fit in
    :data:`PARALLEL_TABLE_BYTES`."""
    if workers is not None:
        if workers < 1:
            raise ConfigError(f"workers must be >= 1; got {workers!r}")
        return min(workers, tables)
    if n < PARALLEL_MIN:
        return 1
    fits = PARALLEL_TABLE_BYTES // max(1, TABLE_BYTES_PER_FINGERPRINT * n)
    return max(1, min(2, os.cpu_count() or 1, fits, tables))


def search_plan(words: UInt64Array, bits: int, max_distance: int) -> BlockScheme | None:
    """The cheapest exact search of ``words`` within ``max_distance``: a block scheme, or None
    for the scan. The uniform tuning first; unless the scan wins at once, the data's own
    distances (sampled for at most :data:`PROFILE_SHARE` of the expected work) price the
    schemes again, so templated text gets wider keys or the scan."""
    n = words.shape[0]
    uniform = BlockScheme.auto(n, bits, max_distance)
    scan_work = SCAN_COST * n * (n - 1) / 2
    work = expected_work(bits, uniform.blocks_count, uniform.key_blocks, n)
    if scan_work <= work:
        return None
    budget = int(PROFILE_SHARE * work / SCAN_COST)
    if scan_work > SCAN_RANGE * work or budget < 4 * n:
        # The scan is out of reach (skewed buckets are the second hash's to split), or too
        # few rows could be sampled to say more than the uniform model.
        return uniform
    profile = distance_profile(words, bits, budget=budget)
    tuned = tuned_for(profile, max_distance)
    work = expected_work(bits, tuned.blocks_count, tuned.key_blocks, n, profile)
    return None if scan_work <= work else tuned


class _Ticks:
    """Progress in the caller's unit (the tables of the scheme it passed), whatever ran."""

    def __init__(self, progress: Callable[[int], object] | None, total: int) -> None:
        self.progress, self.total, self.reported = progress, total, 0

    def done(self, steps: int, of: int) -> None:
        if self.progress is None:
            return
        target = self.total * steps // of
        if target > self.reported:
            self.progress(target - self.reported)
            self.reported = target


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
        self.index = np.arange(n, dtype=np.uint64)
        self.partitions = _Partitions(words, self.keys)
        if all(key.bit_count == table.bit_count for key, table in zip(self.keys, scheme.tables, strict=True)):
            # Whole blocks: a pair was met before when an earlier-ordered block is equal too.
            self.seen_masks = [
                [block.mask(scheme.words) for block in scheme.earlier_blocks(t)]
                for t in range(scheme.table_count)
            ]
        else:
            # Cut keys are not unions of blocks: test every earlier table's key.
            key_masks = [key.mask(scheme.words) for key in self.keys]
            self.seen_masks = [key_masks[:t] for t in range(scheme.table_count)]

    def split_at(self, table: int, mu: float, split_threshold: float | None) -> float:
        """The bucket size above which ``table``'s buckets are split by the second hash."""
        if split_threshold is not None:
            return split_threshold
        return split_size(self.words.shape[0], self.keys[table].bit_count, mu)

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
        order, starts, lengths, buckets = _runs_by_key(
            key.extract(self.words), self.index_bits, self.index, self.partitions.take(key)
        )
        stats.buckets = buckets
        stats.largest = int(lengths.max()) if lengths.size else 1
        stats.mean = n / buckets
        threshold = self.split_at(table, mu, split_threshold)
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
        members = order[expand_runs(starts, lengths)]
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
        """Keep pairs within the distance that no earlier table (or sub-block) already emitted:
        a pair is stale when it is equal under any of ``seen_masks[table]``."""
        xor = self.words[a] ^ self.words[b]
        dist = row_distances(xor)
        keep = dist <= self.max_distance
        if not keep.any():
            return
        a, b, dist, xor = a[keep], b[keep], dist[keep], xor[keep]
        fresh = np.ones(a.size, dtype=bool)
        for mask in [*self.seen_masks[table], *earlier_sub_masks]:
            fresh &= ~np.all((xor & mask) == 0, axis=1)
        if not fresh.all():
            a, b, dist = a[fresh], b[fresh], dist[fresh]
        stats.pairs += int(a.size)
        out.append((a, b, dist))


def _scan(
    words: UInt64Array, max_distance: int, out: list[tuple[IntArray, IntArray, npt.NDArray[np.uint8]]]
) -> TableStats:
    """Every pair compared, in tiles of rows against all later rows (contiguous XOR and
    popcount); the statistics of one table whose key is empty."""
    n = words.shape[0]
    stats = TableStats(table=0, key_bits=0, buckets=min(n, 1), largest=n, mean=float(n))
    step = max(1, SCAN_TILE // max(n, 1))
    for start in range(0, n - 1, step):
        stop = min(n - 1, start + step)
        dist = tile_distances(words[start:stop], words[start + 1 :])
        hits = np.flatnonzero(dist <= max_distance)
        rows, cols = np.divmod(hits, dist.shape[1])
        upper = cols >= rows  # column c is record start + 1 + c, row r is start + r
        rows, cols = rows[upper], cols[upper]
        stats.candidates += (stop - start) * (n - stop) + (stop - start) * (stop - start - 1) // 2
        if rows.size:
            i = rows.astype(np.int64) + start
            j = cols.astype(np.int64) + start + 1
            out.append((i, j, np.asarray(dist[rows, cols], dtype=np.uint8)))
            stats.pairs += int(rows.size)
    return stats


def _runs_by_key(
    keys: UInt64Array, index_bits: int, index: UInt64Array | None = None, partition: Partition | None = None
) -> tuple[IntArray, IntArray, IntArray, int]:
    """Sort ``keys``; return (order, starts, lengths, buckets) for the runs of >= 2 equal keys.

    ``order[p]`` is the position in ``keys`` of the p-th smallest; within a run the
    positions ascend, so a pair from a run always has its smaller index first. ``index``
    is ``arange(n)`` as uint64, when the caller keeps one for many tables; ``partition``
    groups the keys by their top bits (:func:`sorted_keys`), when the caller shares one.
    """
    n = keys.shape[0]
    low = np.uint64((1 << index_bits) - 1)
    packed = keys << np.uint64(index_bits)
    packed |= np.arange(n, dtype=np.uint64) if index is None else index
    packed = sorted_keys(packed, partition)
    # Neighbours with equal keys differ in their index bits only.
    same = (packed[1:] ^ packed[:-1]) <= low
    packed &= low
    order = packed.view(np.int64)
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


#: Most top bits :func:`sorted_keys` partitions by (a Python loop visits each partition).
PARTITION_BITS = 14


class Partition(NamedTuple):
    """Positions grouped by the top bits of their keys (partition p holds the keys whose top
    bits are p), and the end of each group."""

    order: IntArray
    ends: list[int]


def partition_bits(n: int) -> int:
    """Top bits that cut ``n`` keys into partitions of ~256 (0: too few keys to partition)."""
    bits = min(PARTITION_BITS, (n >> 8).bit_length())
    return bits if bits >= 4 else 0


def partition_of(top: UInt64Array, bits: int) -> Partition:
    """The partition of keys whose top ``bits`` bits are ``top``: a counting sort (radix)."""
    order: IntArray = np.argsort(top.astype(np.uint16), kind="stable")
    return Partition(order, np.cumsum(np.bincount(top.astype(np.intp), minlength=1 << bits)).tolist())


def sorted_keys(packed: UInt64Array, partition: Partition | None = None) -> UInt64Array:
    """``packed`` in ascending order, the same as ``np.sort`` and faster on large arrays: a
    counting sort on the top bits cuts it into partitions of ~256 keys, each sorted in cache.
    ``partition``, when given, is that of ``packed``'s top bits, shared by tables whose keys
    begin with the same bits. May sort ``packed`` in place, or return a new array."""
    if partition is None:
        bits = partition_bits(packed.shape[0])
        width = int(packed.max()).bit_length() if bits else 0
        if width <= bits:
            packed.sort()
            return packed
        partition = partition_of(packed >> np.uint64(width - bits), bits)
    result = packed[partition.order]
    start = 0
    for stop in partition.ends:
        if stop - start > 1:
            result[start:stop].sort()
        start = stop
    return result


class _Partitions:
    """The partitions of tables whose keys begin with the same bits (of Manku's 10 tables at
    k = 3, four begin with the first block), made once and dropped after their last table;
    a table that needs one being made waits for it rather than making it again."""

    def __init__(self, words: UInt64Array, keys: list[BitSelection]) -> None:
        self.words = words
        self.bits = partition_bits(words.shape[0])
        heads = [key.positions[: self.bits] for key in keys if self.bits and key.bit_count > self.bits]
        self.left = Counter(heads)
        self.locks = {head: threading.Lock() for head in self.left}
        self.made: dict[tuple[int, ...], Partition] = {}

    def take(self, key: BitSelection) -> Partition | None:
        """The partition of ``key``'s top bits, or None when its keys are too few or too short."""
        head = key.positions[: self.bits]
        if key.bit_count <= self.bits or head not in self.locks:
            return None
        with self.locks[head]:
            made = self.made.get(head)
            if made is None:
                made = self.made[head] = partition_of(BitSelection(head).extract(self.words), self.bits)
            self.left[head] -= 1
            if not self.left[head]:
                del self.made[head]
        return made


def expand_runs(starts: IntArray, lengths: IntArray) -> IntArray:
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
    positions = expand_runs(starts, lengths)
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

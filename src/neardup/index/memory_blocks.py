"""The in-memory block index behind ``SimhashIndex(...)``: compact numpy arrays, no Python
object per entry.

It lives in the index layer, not among the stores: it is a block index itself, its buckets
keyed on the scheme's bits of the fingerprints, split on sub-blocks and screened on Hamming
distance, where a store (:mod:`neardup.storage`) only keeps what it is handed by key. It
implements :class:`~neardup.storage.base.Storage` all the same, so the layers above keep
their value maps in it as in any store; ``memory://`` names the plain store of
:mod:`neardup.storage.memory` instead.

Entries live in *slots* (rows of one fingerprint array). New slots first sit in a short
*tail* that queries scan linearly; a full tail becomes a static *segment*, and segments merge
geometrically (a segment is merged into its predecessor while it is at least a quarter of its
size), so there are O(log N) segments and every slot is re-sorted O(log N) times. A bulk
``add_many`` builds one segment directly.

A segment holds, per table, a directory over the first ``d`` bits of the table key
(d ≈ log2 of the segment size, a coarser key that only adds verified candidates): bucket
offsets and the members ordered by key, each a uint64 ``slot << 32 | low 32 fingerprint
bits``. A query screens a bucket on those 32 bits (sequential reads) and reads the full
fingerprint only for the few that pass: at 10 M entries that halves query latency.
Buckets above seed 000's threshold also get sub-indexes on the k + 1 sub-blocks of the bits
outside the directory key, so a query that lands in a skewed bucket looks at one
sub-bucket per sub-block instead of the whole bucket.

Removing marks a slot dead (queries skip it); when dead slots outnumber live ones the store
is rebuilt compactly. Keys (int or str) are found through 64-bit key hashes kept sorted per
segment, with a dict for the tail.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..blocks import DEFAULT_MU, BucketStats, split_size
from ..distance import row_distances
from ..similarity.bands import BandScheme, Scheme
from ..storage.base import (
    INT64_MAX,
    INT64_MIN,
    Candidates,
    Key,
    RecordBatch,
    Screen,
    Storage,
    StoredRecord,
    key_exists_error,
    key_hash,
    key_hashes,
    key_not_found_error,
    match_postings,
    plain_key,
    words_to_int,
)
from ..storage.memory import ValueMaps
from .memory_segments import _LOW_32, IntArray, UInt64Array, _Segment
from .meta import record_shape

TAIL_LIMIT = 1024
QUERY_CHUNK = 4096
_MASK_32 = (1 << 32) - 1
_MASK_64 = (1 << 64) - 1
MERGE_RATIO = 4


class MemoryBlockIndex(Storage):
    """Slots of (key, fingerprint words, alive) plus the segments and tail that index them,
    by ``scheme``: gone when the process ends (``SimhashIndex.save`` writes it to a file)."""

    name = "memory"

    def __init__(self, scheme: Scheme, mu: float = DEFAULT_MU) -> None:
        super().__init__()
        self.scheme = scheme
        self.meta: dict[str, Any] | None = None
        self.clusters: dict[Key, Key] = {}
        self.signatures: dict[Key, bytes] = {}
        self.digests: dict[Key, bytes] = {}
        #: The value maps (:meth:`put_values`), by name.
        self.values = ValueMaps()
        self.mu = mu
        self._empty(scheme.words)
        self.attach(record_shape(scheme))

    def _empty(self, width: int) -> None:
        self.width = width
        self.words = np.zeros((0, width), dtype=np.uint64)
        self.keys: npt.NDArray[Any] = np.zeros(0, dtype=np.int64)
        self.alive = np.zeros(0, dtype=bool)
        self.count = 0  # slots used
        self.live = 0
        self.segments: list[_Segment] = []
        self.tail_start = 0
        self.tail_keys: dict[Key, int] = {}

    # -- slots ---------------------------------------------------------------------------
    def _reserve(self, extra: int) -> None:
        need = self.count + extra
        if need <= self.alive.size:
            return
        capacity = max(need, 2 * self.alive.size, 1024)
        self.words = _grow(self.words, capacity)
        self.alive = _grow(self.alive, capacity)
        self.keys = _grow(self.keys, capacity)

    def _store_keys(self, start: int, keys: Sequence[Key] | npt.NDArray[Any]) -> None:
        array = np.asarray(keys) if isinstance(keys, np.ndarray) else None
        if self.keys.dtype != object:
            fits = array is not None and array.dtype.kind in "iu"
            if fits and array is not None and array.size and array.dtype == np.uint64:
                fits = int(array.max()) <= INT64_MAX
            if not fits and array is None:
                fits = all(type(key) is int and INT64_MIN <= key <= INT64_MAX for key in keys)
            if not fits:
                self.keys = self.keys.astype(object)
        if self.keys.dtype == object:
            self.keys[start : start + len(keys)] = [plain_key(key) for key in keys]
        else:
            self.keys[start : start + len(keys)] = np.asarray(keys, dtype=np.int64)

    def key_at(self, slot: int) -> Key:
        value = self.keys[slot]
        return value if isinstance(value, str) else int(value)

    def fingerprint_at(self, slot: int) -> int:
        words = self.words
        if self.scheme.fingerprint_words == 1:
            return int(words.item(slot, 0))
        return int(words.item(slot, 0)) | (int(words.item(slot, 1)) << 64)

    # -- keys ----------------------------------------------------------------------------
    def find(self, key: Key, hashed: int | None = None) -> int:
        """The live slot of a key, or -1."""
        slot = self.tail_keys.get(key)
        if slot is not None:
            return slot
        value = key_hash(key) if hashed is None else hashed
        for segment in self.segments:
            for candidate in segment.find_hash(value).tolist():
                if self.alive[candidate] and self.key_at(candidate) == key:
                    return int(candidate)
        return -1

    def find_many(self, keys: Sequence[Key] | npt.NDArray[Any], hashes: UInt64Array) -> IntArray:
        """Live slots of many keys (-1 where absent), vectorised over the segments."""
        out = np.full(len(keys), -1, dtype=np.int64)
        for segment in self.segments:
            if not segment.size:
                continue
            start = np.searchsorted(segment.hashes, hashes, side="left")
            stop = np.searchsorted(segment.hashes, hashes, side="right")
            for row in np.flatnonzero(stop > start).tolist():
                for candidate in segment.hash_slots[start[row] : stop[row]].tolist():
                    if self.alive[candidate] and self.key_at(candidate) == plain_key(keys[row]):
                        out[row] = candidate
        if self.tail_keys:
            for row, key in enumerate(keys):
                slot = self.tail_keys.get(plain_key(key))
                if slot is not None:
                    out[row] = slot
        return out

    # -- mutation ------------------------------------------------------------------------
    def append(self, keys: Sequence[Key] | npt.NDArray[Any], words: UInt64Array) -> None:
        """Store new (checked, distinct, absent) keys."""
        size = len(keys)
        self._reserve(size)
        start = self.count
        self.words[start : start + size] = words
        self.alive[start : start + size] = True
        self._store_keys(start, keys)
        self.count += size
        self.live += size
        if size >= TAIL_LIMIT:
            # A bulk batch: the old tail and the batch become one segment.
            self._seal()
        else:
            for offset, key in enumerate(keys):
                self.tail_keys[plain_key(key)] = start + offset
            if self.count - self.tail_start >= TAIL_LIMIT:
                self._seal()

    def kill(self, slots: IntArray) -> None:
        self.alive[slots] = False
        self.live -= int(slots.size)
        for slot in slots.tolist():
            if slot >= self.tail_start:
                self.tail_keys.pop(self.key_at(slot), None)
        if self.count - self.live > max(self.live, TAIL_LIMIT):
            self.rebuild()

    def _seal(self) -> None:
        """Turn the tail into a segment and merge segments geometrically."""
        slots = np.arange(self.tail_start, self.count, dtype=np.int64)
        slots = slots[self.alive[slots]]
        self.tail_start = self.count
        self.tail_keys = {}
        while self.segments and self.segments[-1].size < MERGE_RATIO * max(slots.size, 1):
            previous = self.segments.pop()
            merged = previous.hash_slots.astype(np.int64)
            slots = np.concatenate((merged[self.alive[merged]], slots))
        if slots.size:
            self.segments.append(self._segment(slots))

    def _segment(self, slots: IntArray) -> _Segment:
        keys = self.keys[slots]
        return _Segment(
            slots,
            self.words,
            key_hashes(keys if keys.dtype != object else keys.tolist()),
            self.scheme,
            self.mu,
        )

    def rebuild(self) -> None:
        """Drop dead slots and rebuild one segment over all live entries."""
        live = np.flatnonzero(self.alive[: self.count])
        self.words = self.words[live].copy()
        self.keys = self.keys[live].copy()
        self.alive = np.ones(live.size, dtype=bool)
        self.count = self.live = int(live.size)
        self.segments = []
        self.tail_start = self.count
        self.tail_keys = {}
        if self.count:
            self.segments.append(self._segment(np.arange(self.count, dtype=np.int64)))

    # -- search --------------------------------------------------------------------------
    def search_slot(self, value: int, max_distance: int) -> dict[int, tuple[int, int]]:
        """slot → (fingerprint, distance) of live entries within the distance of ``value``.

        Segment candidates are first filtered on the low 32 bits stored beside each slot, so
        only the few that pass are read from the (cache-cold) fingerprint array, one by one.
        """
        found: dict[int, tuple[int, int]] = {}  # a slot may be found by several tables
        parts = [part for segment in self.segments for part in segment.candidates_one(value)]
        if parts:
            entries = np.concatenate(parts) if len(parts) > 1 else parts[0]
            near = np.bitwise_count((entries ^ np.uint64(value & _MASK_32)).astype(np.uint32))
            for slot in (entries[near <= max_distance] >> np.uint64(32)).tolist():
                fingerprint = self.fingerprint_at(slot)
                distance = (fingerprint ^ value).bit_count()
                if distance <= max_distance and self.alive.item(slot):
                    found[slot] = (fingerprint, distance)
        if self.count > self.tail_start:
            tail = np.arange(self.tail_start, self.count)
            query = np.array([value & _MASK_64, value >> 64][: self.width], dtype=np.uint64)
            dist = row_distances(self.words[tail] ^ query)
            for slot in tail[(dist <= max_distance) & self.alive[tail]].tolist():
                fingerprint = self.fingerprint_at(slot)
                found[slot] = (fingerprint, (fingerprint ^ value).bit_count())
        return found

    def search_slots(
        self, queries: UInt64Array, max_distance: int, chunk: int = QUERY_CHUNK
    ) -> tuple[IntArray, IntArray, IntArray]:
        """(query rows, slots, distances), each (row, slot) once, sorted by row; queries go
        ``chunk`` at a time to bound the candidate arrays."""
        results = [
            self._search_chunk(queries[start : start + chunk], max_distance, start)
            for start in range(0, queries.shape[0], chunk)
        ]
        if not results:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty, empty
        rows, slots, dist = (np.concatenate(parts) for parts in zip(*results, strict=True))
        return rows, slots, dist

    def _search_chunk(
        self, queries: UInt64Array, max_distance: int, offset: int
    ) -> tuple[IntArray, IntArray, IntArray]:
        rows_parts, slot_parts = [], []
        low = queries[:, 0] & _LOW_32
        bands = self.scheme if isinstance(self.scheme, BandScheme) else None
        for segment in self.segments:
            rows, entries = segment.candidates_many(queries)
            near = np.bitwise_count((entries ^ low[rows]).astype(np.uint32)) <= max_distance
            rows, slots = rows[near], (entries[near] >> np.uint64(32)).astype(np.int64)
            if bands is not None:  # segment buckets are keyed on key prefixes: drop the misses
                shared = bands.shares_key(self.words[slots], queries[rows])
                rows, slots = rows[shared], slots[shared]
            rows_parts.append(rows)
            slot_parts.append(slots)
        tail = np.arange(self.tail_start, self.count, dtype=np.int64)
        if tail.size and bands is not None:  # the records sharing a band key, by sorted search
            query_rows, tail_rows = match_postings(bands.keys(queries), bands.keys(self.words[tail]))
            rows_parts.append(query_rows)
            slot_parts.append(tail[tail_rows])
        elif tail.size:
            rows_parts.append(np.repeat(np.arange(queries.shape[0], dtype=np.int64), tail.size))
            slot_parts.append(np.tile(tail, queries.shape[0]))
        if not rows_parts:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty, empty
        rows = np.concatenate(rows_parts)
        slots = np.concatenate(slot_parts)
        width = self.scheme.fingerprint_words
        dist = row_distances(self.words[slots, :width] ^ queries[rows, :width])
        keep = (dist <= max_distance) & self.alive[slots]
        rows, slots, dist = rows[keep], slots[keep], dist[keep]
        combined = rows * max(self.count, 1) + slots
        combined, first = np.unique(combined, return_index=True)
        return rows[first] + offset, slots[first], dist[first].astype(np.int64)

    # -- the Storage interface -----------------------------------------------------------
    def read_meta(self) -> dict[str, Any] | None:
        return self.meta

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.meta = meta

    def add_many(self, batch: RecordBatch) -> None:
        keys = batch.keys
        if not len(keys):
            return
        existing = self.find_many(keys, key_hashes(keys))
        taken = np.flatnonzero(existing >= 0)
        if taken.size:
            raise key_exists_error(plain_key(keys[int(taken[0])]), int(taken.size), "the index")
        self.append(keys, batch.words)
        for row in range(len(keys)):
            cluster, signature, digest = batch.cluster(row), batch.signature(row), batch.digest(row)
            if cluster is not None:
                self.clusters[plain_key(keys[row])] = cluster
            if signature is not None:
                self.signatures[plain_key(keys[row])] = signature
            if digest is not None:
                self.digests[plain_key(keys[row])] = digest

    def remove_many(self, keys: Sequence[Key]) -> None:
        if not len(keys):
            return
        slots = self.find_many(keys, key_hashes(keys))
        missing = np.flatnonzero(slots < 0)
        if missing.size:
            raise key_not_found_error(plain_key(keys[int(missing[0])]), int(missing.size), "the index")
        for key in keys:
            self.clusters.pop(plain_key(key), None)
            self.signatures.pop(plain_key(key), None)
            self.digests.pop(plain_key(key), None)
        self.kill(np.unique(slots))

    def put_values(self, name: str, keys: Sequence[Key], values: Sequence[bytes]) -> None:
        self.values.put(name, keys, values)

    def get_values(self, name: str, keys: Sequence[Key]) -> list[bytes | None]:
        return self.values.get(name, keys)

    def remove_values(self, name: str, keys: Sequence[Key]) -> None:
        self.values.remove(name, keys)

    def scan_values(self, name: str, batch_size: int = 10_000) -> Iterator[list[tuple[Key, bytes]]]:
        return self.values.scan(name, batch_size)

    def get_many(self, keys: Sequence[Key]) -> list[StoredRecord | None]:
        slots = self.find_many(keys, key_hashes(keys)).tolist()
        return [None if slot < 0 else self._record(slot) for slot in slots]

    def candidates(
        self, postings: UInt64Array, *, records: bool = False, screen: Screen | None = None
    ) -> Candidates:
        """The records sharing a posting key with each query, as a store answers (the index
        itself asks :meth:`search_many`, which screens on the fingerprint before it reads it):
        the members of each query's bucket of each table that have its key exactly."""
        rows_parts, slot_parts = [], []
        for segment in self.segments:
            for column, (table, selection) in enumerate(zip(segment.tables, self.scheme.tables, strict=True)):
                shift = np.uint64(min(selection.bit_count, 64) - table.key.bit_count)
                cells = (postings[:, column] >> shift).astype(np.int64)
                rows, entries = segment.bucket_members(table, cells, np.arange(cells.size, dtype=np.int64))
                slots = (entries >> np.uint64(32)).astype(np.int64)
                same = selection.extract(self.words[slots]) == postings[rows, column]
                rows_parts.append(rows[same])
                slot_parts.append(slots[same])
        tail = np.arange(self.tail_start, self.count, dtype=np.int64)
        query_rows, tail_rows = match_postings(postings, self.scheme.keys(self.words[tail]))
        rows = np.concatenate([*rows_parts, query_rows])
        slots = np.concatenate([*slot_parts, tail[tail_rows]])
        keep = self.alive[slots]
        rows, slots = rows[keep], slots[keep]
        found = Candidates(rows, [self.key_at(slot) for slot in slots.tolist()], self.words[slots])
        return found.screened(screen)

    def search_many(self, words: UInt64Array, max_distance: int) -> tuple[IntArray, list[Key], UInt64Array]:
        rows, slots, _ = self.search_slots(words, max_distance)
        return rows, [self.key_at(slot) for slot in slots.tolist()], self.words[slots]

    def search_one(self, value: int, max_distance: int) -> list[tuple[Key, int, int]]:
        key_at = self.key_at
        return [
            (key_at(slot), found, distance)
            for slot, (found, distance) in self.search_slot(value, max_distance).items()
        ]

    def size(self) -> int:
        return self.live

    def scan(self, batch_size: int = 10_000) -> Iterator[list[StoredRecord]]:
        live = np.flatnonzero(self.alive[: self.count]).tolist()
        for start in range(0, len(live), batch_size):
            yield [self._record(slot) for slot in live[start : start + batch_size]]

    def drop(self) -> None:
        self._empty(self.width)
        self.clusters, self.signatures, self.digests, self.meta = {}, {}, {}, None
        self.values = ValueMaps()

    def _record(self, slot: int) -> StoredRecord:
        key = self.key_at(slot)
        return StoredRecord(
            key,
            words_to_int(self.words[slot], self.scheme.fingerprint_words),
            self.clusters.get(key),
            self.signatures.get(key),
            self.digests.get(key),
        )

    # -- facts ---------------------------------------------------------------------------
    def stats(self) -> BucketStats:
        stats = BucketStats(scheme=self.scheme.describe())
        if self.segments:
            largest = max(self.segments, key=lambda segment: segment.size)
            stats.tables = largest.table_stats()
            stats.threshold = split_size(largest.size, largest.tables[0].key.bit_count, self.mu)
        return stats

    def nbytes(self) -> int:
        """Bytes held by the arrays (and, for str keys, the key objects)."""
        total = self.words.nbytes + self.alive.nbytes + self.keys.nbytes
        total += sum(segment.nbytes() for segment in self.segments)
        if self.keys.dtype == object:
            total += sum(len(str(key)) + 49 for key in self.keys[: self.count])
        return total


def _grow(array: npt.NDArray[Any], capacity: int) -> npt.NDArray[Any]:
    shape = (capacity, *array.shape[1:])
    grown = np.zeros(shape, dtype=array.dtype)
    grown[: array.shape[0]] = array
    return grown

"""The sealed segments of the in-memory block index: per table, fingerprints sorted by their
table key with a directory over the key's top bits, and the split buckets of seed 000."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..blocks import BitSelection, TableStats, split_size
from ..errors import StorageFullError
from ..similarity.bands import Scheme

IntArray = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]
_LOW_32 = np.uint64((1 << 32) - 1)
#: The directory over a table's sorted keys has at most 2^26 entries.
MAX_DIRECTORY_BITS = 26


@dataclass
class _SplitBucket:
    """Sub-indexes of one oversized bucket: per sub-block, sorted sub-keys and their slots."""

    sub_keys: list[UInt64Array]
    entries: list[UInt64Array]


@dataclass
class _Table:
    key: BitSelection
    offsets: npt.NDArray[np.signedinteger[Any]]  # int32 unless the segment has >= 2^31 slots
    entries: UInt64Array  # (slot << 32) | filter, ordered by key
    split: dict[int, _SplitBucket] = field(default_factory=dict)
    subs: tuple[BitSelection, ...] = ()


class _Segment:
    """A static block index over a set of slots."""

    def __init__(
        self, slots: IntArray, words: UInt64Array, hashes: UInt64Array, scheme: Scheme, mu: float
    ) -> None:
        """Index ``slots`` (rows of ``words``); ``hashes`` are their key hashes."""
        if words.shape[0] > 1 << 32:
            raise StorageFullError("an in-memory index holds at most 2^32 entries; use a persistent store")
        slots = slots.astype(np.int32 if words.shape[0] < 1 << 31 else np.int64)
        order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[order]
        # The members in key-hash order; also the segment's slot set when it is merged.
        self.hash_slots = slots[order]
        size = slots.size
        member_words = words[slots]
        entries = (slots.astype(np.uint64) << np.uint64(32)) | (member_words[:, 0] & _LOW_32)
        directory_bits = min(MAX_DIRECTORY_BITS, max(1, math.ceil(math.log2(max(size, 2)))))
        self.tables: list[_Table] = []
        for selection in scheme.tables:
            key = selection.prefix(min(selection.bit_count, directory_bits, 64))
            cells = key.extract(member_words)
            counts = np.bincount(cells.astype(np.intp), minlength=1 << key.bit_count)
            offsets: npt.NDArray[np.signedinteger[Any]] = np.zeros(
                counts.size + 1, dtype=np.int32 if size < 1 << 31 else np.int64
            )
            np.cumsum(counts, out=offsets[1:])
            table = _Table(key, offsets, entries[_order_by(cells, key.bit_count)])
            threshold = split_size(size, key.bit_count, mu)
            big = np.flatnonzero(counts > threshold)
            if big.size:
                table.subs = scheme.sub_blocks(key)
                for cell in big.tolist():
                    members = table.entries[offsets[cell] : offsets[cell + 1]]
                    table.split[cell] = _split_bucket(members, words, table.subs)
            self.tables.append(table)

    @property
    def size(self) -> int:
        return int(self.hash_slots.size)

    def find_hash(self, value: int) -> IntArray:
        target = np.uint64(value)
        start = int(np.searchsorted(self.hashes, target, side="left"))
        stop = int(np.searchsorted(self.hashes, target, side="right"))
        return self.hash_slots[start:stop]

    def candidates_one(self, value: int) -> list[UInt64Array]:
        """Entries ((slot << 32) | filter) sharing a (sub-)bucket with one fingerprint."""
        found = []
        for table in self.tables:
            cell = table.key.extract_int(value)
            bucket = table.split.get(cell)
            if bucket is None:
                start = table.offsets.item(cell)
                stop = table.offsets.item(cell + 1)
                if stop > start:
                    found.append(table.entries[start:stop])
                continue
            for sub, keys, slots in zip(table.subs, bucket.sub_keys, bucket.entries, strict=True):
                sub_key = np.uint64(sub.extract_int(value))
                start = int(np.searchsorted(keys, sub_key, side="left"))
                stop = int(np.searchsorted(keys, sub_key, side="right"))
                found.append(slots[start:stop])
        return found

    def candidates_many(self, queries: UInt64Array) -> tuple[IntArray, UInt64Array]:
        """(query row, entry) candidate pairs for a (q, w) query array."""
        rows: list[IntArray] = []
        slots: list[UInt64Array] = []
        for table in self.tables:
            cells = table.key.extract(queries).astype(np.int64)
            plain = np.ones(cells.size, dtype=bool)
            if table.split:
                in_split = np.isin(cells, np.fromiter(table.split, dtype=np.int64))
                plain &= ~in_split
                for row in np.flatnonzero(in_split).tolist():
                    bucket = table.split[int(cells[row])]
                    for sub, keys, members in zip(table.subs, bucket.sub_keys, bucket.entries, strict=True):
                        sub_key = sub.extract(queries[row : row + 1])[0]
                        start = int(np.searchsorted(keys, sub_key, side="left"))
                        stop = int(np.searchsorted(keys, sub_key, side="right"))
                        found = members[start:stop]
                        rows.append(np.full(found.size, row, dtype=np.int64))
                        slots.append(found)
            query_rows = np.flatnonzero(plain)
            found_rows, entries = self.bucket_members(table, cells[query_rows], query_rows)
            rows.append(found_rows)
            slots.append(entries)
        if not rows:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
        return np.concatenate(rows), np.concatenate(slots)

    @staticmethod
    def bucket_members(table: _Table, cells: IntArray, rows: IntArray) -> tuple[IntArray, UInt64Array]:
        """(row, entry) of every member of bucket ``cells[i]`` of ``table``, for each ``rows[i]``
        (split buckets whole)."""
        lo = table.offsets[cells].astype(np.int64)
        counts = table.offsets[cells + 1] - lo
        total = int(counts.sum())
        steps = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        return np.repeat(rows, counts), table.entries[np.repeat(lo, counts) + steps]

    def table_stats(self) -> list[TableStats]:
        out = []
        for index, table in enumerate(self.tables):
            counts = np.diff(table.offsets)
            live = counts[counts > 0]
            out.append(
                TableStats(
                    table=index,
                    key_bits=table.key.bit_count,
                    buckets=int(live.size),
                    largest=int(live.max()) if live.size else 0,
                    mean=float(live.mean()) if live.size else 0.0,
                    split=len(table.split),
                )
            )
        return out

    def nbytes(self) -> int:
        total = self.hashes.nbytes + self.hash_slots.nbytes
        for table in self.tables:
            total += table.offsets.nbytes + table.entries.nbytes
            for bucket in table.split.values():
                total += sum(a.nbytes for a in bucket.sub_keys) + sum(a.nbytes for a in bucket.entries)
        return total


def _order_by(keys: UInt64Array, key_bits: int) -> npt.NDArray[np.intp]:
    """Stable argsort of keys: one ``np.sort`` of key and position packed into a uint64 when
    they fit (twice as fast as ``np.argsort``)."""
    index_bits = max(1, (keys.size - 1).bit_length())
    if key_bits + index_bits > 64:
        return np.argsort(keys, kind="stable")
    packed = (keys << np.uint64(index_bits)) | np.arange(keys.size, dtype=np.uint64)
    packed.sort()
    return (packed & np.uint64((1 << index_bits) - 1)).astype(np.intp)


def _split_bucket(members: UInt64Array, words: UInt64Array, subs: tuple[BitSelection, ...]) -> _SplitBucket:
    member_words = words[(members >> np.uint64(32)).astype(np.intp)]
    sub_keys, slots = [], []
    for sub in subs:
        keys = sub.extract(member_words)
        order = np.argsort(keys, kind="stable")
        sub_keys.append(keys[order])
        slots.append(members[order])
    return _SplitBucket(sub_keys, slots)

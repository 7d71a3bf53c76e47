"""``memory://``: a store in this process's dicts, gone when the process ends.

Records by key (their stored words, posting keys, cluster, signature and digest), one dict
per posting column from posting key to the keys that have it, and the value maps. It is the
plain key → value store of :mod:`neardup.storage.base` without a server, so an index over it
searches exactly as over SQLite or Redis (the in-memory block index of ``SimhashIndex(...)``,
:mod:`neardup.index.memory_blocks`, is an index of its own). One process's threads share it
under the store's lock.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult

import numpy as np

from ..errors import KeyExistsError
from . import check_options
from .base import (
    Candidates,
    Key,
    PostingCounts,
    RecordBatch,
    RecordShape,
    Screen,
    Storage,
    StoredRecord,
    UInt64Array,
    check_keys,
    check_value_map,
    key_exists_error,
    key_not_found_error,
    no_candidates,
    plain_key,
    plain_keys,
    words_to_int,
)


class ValueMaps:
    """Named maps of key → bytes held in this process: the value maps of the in-memory stores
    (:meth:`Storage.put_values <neardup.storage.base.Storage.put_values>`)."""

    def __init__(self) -> None:
        self.maps: dict[str, dict[Key, bytes]] = {}

    def put(self, name: str, keys: Sequence[Key], values: Sequence[bytes]) -> None:
        check_value_map(name, keys, values)
        plain = plain_keys(keys)
        check_keys(plain)
        if set(map(type, values)) - {bytes}:
            values = [bytes(value) for value in values]
        self.maps.setdefault(name, {}).update(zip(plain, values, strict=True))

    def get(self, name: str, keys: Sequence[Key]) -> list[bytes | None]:
        check_value_map(name, keys)
        held = self.maps.get(name, {})
        return [held.get(key) for key in plain_keys(keys)]

    def remove(self, name: str, keys: Sequence[Key]) -> None:
        check_value_map(name, keys)
        held = self.maps.get(name, {})
        for key in plain_keys(keys):
            held.pop(key, None)

    def scan(self, name: str, batch_size: int) -> Iterator[list[tuple[Key, bytes]]]:
        check_value_map(name, [])
        held = list(self.maps.get(name, {}).items())
        for start in range(0, len(held), batch_size):
            yield held[start : start + batch_size]


@dataclass(frozen=True, slots=True)
class _Held:
    """One stored record: what :meth:`MemoryStorage.get_many` answers, its stored words and
    the posting keys it is listed under."""

    record: StoredRecord
    words: UInt64Array
    postings: tuple[int, ...]


class MemoryStorage(Storage):
    """Records, postings, values and meta in dicts of this process."""

    name = "memory"
    reads_records = True

    def __init__(self) -> None:
        super().__init__()
        self.meta: dict[str, Any] | None = None
        self.records: dict[Key, _Held] = {}
        #: Per posting column: posting key → the keys listed under it (in insertion order).
        self.postings: list[dict[int, dict[Key, None]]] = []
        self.values = ValueMaps()

    def attach(self, shape: RecordShape) -> None:
        super().attach(shape)
        with self._local_lock:
            if not self.records:
                self.postings = [{} for _ in range(shape.columns)]

    # -- meta ----------------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any] | None:
        return self.meta

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.meta = meta

    # -- records -------------------------------------------------------------------------
    def add_many(self, batch: RecordBatch) -> None:
        if not len(batch):
            return
        postings = batch.posting_keys().tolist()
        keys = [plain_key(key) for key in batch.keys]
        with self._local_lock:
            stored = [key for key in keys if key in self.records]
            if stored:
                raise key_exists_error(stored[0], len(stored), "the index")
            seen: set[Key] = set()
            for key in keys:
                if key in seen:
                    raise KeyExistsError(f"key {key!r} appears twice in the batch; nothing was added")
                seen.add(key)
            width = self.shape.fingerprint_words
            for row, key in enumerate(keys):
                words = batch.words[row].copy()
                record = StoredRecord(
                    key,
                    words_to_int(words, width),
                    batch.cluster(row),
                    batch.signature(row),
                    batch.digest(row),
                )
                self.records[key] = _Held(record, words, tuple(postings[row]))
                for column, posting in enumerate(postings[row]):
                    self.postings[column].setdefault(posting, {})[key] = None

    def remove_many(self, keys: Sequence[Key]) -> None:
        unique = list(dict.fromkeys(plain_key(key) for key in keys))
        with self._local_lock:
            missing = [key for key in unique if key not in self.records]
            if missing:
                raise key_not_found_error(missing[0], len(missing), "the index")
            for key in unique:
                for column, posting in enumerate(self.records.pop(key).postings):
                    listed = self.postings[column][posting]
                    del listed[key]
                    if not listed:
                        del self.postings[column][posting]

    def get_many(self, keys: Sequence[Key]) -> list[StoredRecord | None]:
        with self._local_lock:
            held = [self.records.get(plain_key(key)) for key in keys]
        return [None if entry is None else entry.record for entry in held]

    def candidates(
        self, postings: UInt64Array, *, records: bool = False, screen: Screen | None = None
    ) -> Candidates:
        rows: list[int] = []
        keys: list[Key] = []
        with self._local_lock:
            for row, query in enumerate(postings.tolist()):
                for column, posting in enumerate(query):
                    listed = self.postings[column].get(posting, ())
                    rows += [row] * len(listed)
                    keys += listed
            held = [self.records[key] for key in keys]
        if not keys:
            return no_candidates(self.shape.words)
        read = {entry.record.key: entry.record for entry in held} if records else {}
        words = np.stack([entry.words for entry in held])
        return Candidates(np.asarray(rows, dtype=np.int64), keys, words, read).screened(screen)

    def size(self) -> int:
        return len(self.records)

    def scan(self, batch_size: int = 10_000) -> Iterator[list[StoredRecord]]:
        with self._local_lock:
            records = [entry.record for entry in self.records.values()]
        for start in range(0, len(records), batch_size):
            yield records[start : start + batch_size]

    # -- values --------------------------------------------------------------------------
    def put_values(self, name: str, keys: Sequence[Key], values: Sequence[bytes]) -> None:
        with self._local_lock:
            self.values.put(name, keys, values)

    def get_values(self, name: str, keys: Sequence[Key]) -> list[bytes | None]:
        return self.values.get(name, keys)

    def remove_values(self, name: str, keys: Sequence[Key]) -> None:
        with self._local_lock:
            self.values.remove(name, keys)

    def scan_values(self, name: str, batch_size: int = 10_000) -> Iterator[list[tuple[Key, bytes]]]:
        with self._local_lock:
            batches = list(self.values.scan(name, batch_size))
        yield from batches

    # -- facts ---------------------------------------------------------------------------
    def posting_counts(self) -> list[PostingCounts]:
        with self._local_lock:
            sizes = [[len(listed) for listed in column.values()] for column in self.postings]
        return [PostingCounts.of_sizes(lengths) for lengths in sizes]

    def drop(self) -> None:
        with self._local_lock:
            self.meta, self.records, self.values = None, {}, ValueMaps()
            self.postings = [{} for _ in self.postings]


def from_url(url: str, parts: SplitResult, options: dict[str, str]) -> MemoryStorage:
    check_options(options, set(), url)
    return MemoryStorage()

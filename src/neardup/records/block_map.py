"""Where a records index keeps its blocks: a map of 64-bit block keys to the JSON list of
the stored rows holding each (:mod:`neardup.records.incremental`), in one of two layouts
behind one interface (:class:`BlockMap`), chosen when the index is made.

- **runs** (the SQL stores: SQLite, PostgreSQL, MariaDB/MySQL): the map is a few immutable
  runs, each a sorted array
  of block keys in parts of :data:`PART_ENTRIES`, with their lists; a batch writes the blocks
  it changed as a new run, and a newer run's entry hides an older one's. Runs merge
  geometrically (a run is merged into the one before it while it is at least
  1/:data:`MERGE_RATIO` of its size), so there are O(log N) runs and an entry is rewritten
  O(log N) times. Why: a new row changes a block per key type, each on a random page of a
  large store; a value per block made every batch read and write again most of a store's
  pages, where a run is written once, in order, and read whole.
- **documents** (MongoDB, seed 002's ``{"blockName", "info": [...]}`` layout; Redis, whose
  hash fields are read and written in place, where runs only added the reading of whole
  parts; and stores made before runs): one value per block.

Both live in the store's ``blocks`` value map: a document under its block key (an int), a
run's parts under ``run<id>.<part>`` and the list of runs under :data:`DIRECTORY` (texts).
A part is ``count`` (uint64), the sorted keys (uint64), the end of each entry's bytes
(uint32), then the bytes; the directory names each run's id, size and the first key of each
of its parts, so a lookup reads only the parts its keys fall in, and a process keeps the
parts it has read (they never change). A writer holds the store's writer lock: a new run's
parts, then the directory, then what a merge retired, in the caller's transaction on SQL
stores; elsewhere a crash leaves at worst parts no directory names, which the next run
overwrites. A reader that finds a part retired by a merge since it read the directory reads
the directory again.
"""

from __future__ import annotations

import base64
import itertools
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import StorageDamagedError
from ..storage.base import Key, Storage

BLOCKS_MAP = "blocks"
#: The key of the list of runs in the blocks map.
DIRECTORY = "runs"
#: Entries per part of a run: a check of one row reads a part per key type (tens of KB each),
#: and a batch's lookups pay a few numpy calls per part.
PART_ENTRIES = 1024
#: A run is merged into the one before it while it holds at least 1/MERGE_RATIO of its entries.
MERGE_RATIO = 8
#: The stores whose indexes keep seed 002's layout of a document per block.
DOCUMENT_STORES = frozenset({"mongodb", "redis"})
#: The bytes of parts a process keeps, the least recently used let go first: a long-lived
#: service keeps what its checks read, within this.
CACHE_BYTES = 1 << 30
#: Reads of the directory before a reader gives up on a part retired under it.
READ_ATTEMPTS = 5

UInt64Array = npt.NDArray[np.uint64]
Int64Array = npt.NDArray[np.int64]


class BlockMap(ABC):
    """Block key -> the bytes of its list; written only under the store's writer lock."""

    def __init__(self, store: Storage) -> None:
        self.store = store

    @abstractmethod
    def get(self, keys: Sequence[int]) -> list[bytes | None]:
        """The stored bytes of each block (None: not stored)."""

    @abstractmethod
    def put(self, blocks: Mapping[int, bytes]) -> None:
        """Store these blocks' bytes, replacing what each held."""

    @abstractmethod
    def clear(self) -> None:
        """Remove every block."""

    @abstractmethod
    def items(self) -> Iterator[tuple[int, bytes]]:
        """Every stored block and its bytes, in key order."""


def open_block_map(store: Storage, rows_stored: int) -> BlockMap:
    """The blocks of ``store`` in the layout they were made in; a new index (no rows stored)
    gets runs, unless its store keeps seed 002's documents."""
    if store.get_values(BLOCKS_MAP, [DIRECTORY])[0] is not None:
        return BlockRuns(store)
    if rows_stored or store.name in DOCUMENT_STORES:
        return BlockDocuments(store)
    return BlockRuns(store)


def new_block_map(store: Storage) -> BlockMap:
    """The layout a rebuild of the blocks (a refit) writes on ``store``."""
    return BlockDocuments(store) if store.name in DOCUMENT_STORES else BlockRuns(store)


def stored_blocks(store: Storage) -> dict[int, bytes]:
    """Every block of a records index and its bytes, whatever its layout (for checks)."""
    return dict(open_block_map(store, rows_stored=1).items())  # an index with rows: as made


class BlockDocuments(BlockMap):
    """A value per block (seed 002's layout)."""

    def get(self, keys: Sequence[int]) -> list[bytes | None]:
        return self.store.get_values(BLOCKS_MAP, list(keys))

    def put(self, blocks: Mapping[int, bytes]) -> None:
        keys = sorted(blocks)
        self.store.put_values(BLOCKS_MAP, keys, [blocks[key] for key in keys])

    def clear(self) -> None:
        gone = [key for key, _ in self._entries()]
        for start in range(0, len(gone), 100_000):
            self.store.remove_values(BLOCKS_MAP, gone[start : start + 100_000])

    def items(self) -> Iterator[tuple[int, bytes]]:
        yield from sorted(self._entries())

    def _entries(self) -> Iterator[tuple[int, bytes]]:
        for batch in self.store.scan_values(BLOCKS_MAP):
            for key, data in batch:
                if isinstance(key, int):
                    yield key, data


@dataclass(frozen=True)
class _Part:
    """One part of a run: sorted keys, the end of each entry's bytes, the bytes (from
    ``data[base]`` on: a part read from a store is a view of its stored value, not a copy)."""

    keys: UInt64Array
    ends: npt.NDArray[np.uint32]
    data: bytes
    base: int = 0

    def encode(self) -> bytes:
        count = np.asarray([len(self.keys)], dtype="<u8").tobytes()
        keys = self.keys.astype("<u8").tobytes()
        return count + keys + self.ends.astype("<u4").tobytes() + self.data[self.base :]

    @classmethod
    def decode(cls, name: str, value: bytes) -> _Part:
        """The part stored as ``value``, its size checked; its order is checked by
        :func:`_decoded`, for all the parts a read brings at once."""
        count = int.from_bytes(value[:8], "little") if len(value) >= 8 else -1
        head = 8 + 12 * count
        if count < 0 or len(value) < head:
            raise _damaged(name)
        # views: the keys start 8 bytes in, aligned as the value's bytes are
        keys = np.frombuffer(value, dtype="<u8", count=count, offset=8).astype(np.uint64, copy=False)
        ends = np.frombuffer(value, dtype="<u4", count=count, offset=8 + 8 * count)
        ends = ends.astype(np.uint32, copy=False)
        if count and int(ends[-1]) != len(value) - head:
            raise _damaged(name)
        return cls(keys, ends, value, head)


def _decoded(names: Sequence[str], values: Sequence[bytes]) -> list[_Part]:
    """The parts stored as ``values`` (:meth:`_Part.decode`), each one's keys checked to
    ascend and its ends not to fall, in one pass over them all (a check reads thousands)."""
    parts = [_Part.decode(name, value) for name, value in zip(names, values, strict=True)]
    if not parts:
        return parts
    keys = np.concatenate([part.keys for part in parts])
    ends = np.concatenate([part.ends for part in parts])
    sizes = np.fromiter((len(part.keys) for part in parts), dtype=np.int64, count=len(parts))
    wrong = np.zeros(len(keys), dtype=bool)
    wrong[1:] = (keys[1:] <= keys[:-1]) | (ends[1:] < ends[:-1])
    wrong[np.cumsum(sizes)[:-1]] = False  # a part's first entry follows another part's last
    if wrong.any():
        first = int(np.flatnonzero(wrong)[0])
        raise _damaged(names[int(np.searchsorted(np.cumsum(sizes), first, side="right"))])
    return parts


@dataclass(frozen=True)
class _Run:
    """A run as the directory lists it."""

    id: int
    entries: int
    fences: UInt64Array  # the first key of each part

    def part_name(self, part: int) -> str:
        return _part_name(self.id, part)

    def to_json(self) -> dict[str, Any]:
        fences = base64.b64encode(self.fences.astype("<u8").tobytes()).decode()
        return {"id": self.id, "entries": self.entries, "fences": fences}

    @classmethod
    def from_json(cls, data: Any) -> _Run:
        fences = np.frombuffer(base64.b64decode(data["fences"]), dtype="<u8").astype(np.uint64)
        return cls(int(data["id"]), int(data["entries"]), fences)


@dataclass(frozen=True)
class _Directory:
    runs: tuple[_Run, ...]
    next: int

    def encode(self) -> bytes:
        return json.dumps({"next": self.next, "runs": [run.to_json() for run in self.runs]}).encode()

    @classmethod
    def decode(cls, value: bytes | None) -> _Directory:
        if value is None:
            return cls((), 0)
        try:
            data = json.loads(value)
            return cls(tuple(_Run.from_json(run) for run in data["runs"]), int(data["next"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise _damaged(DIRECTORY) from exc


def _part_name(run_id: int, part: int) -> str:
    """The key of a run's part in the blocks map."""
    return f"run{run_id}.{part}"


class _PartGone(Exception):
    """A part the directory named was retired by a merge since it was read."""


class BlockRuns(BlockMap):
    """Immutable sorted runs, newest first on lookup (module docstring)."""

    def __init__(self, store: Storage) -> None:
        super().__init__(store)
        #: The parts read so far by (run id, part), least recently used first (runs never
        #: change; a retired run's are dropped, and the oldest past :data:`CACHE_BYTES`).
        self._parts: dict[tuple[int, int], _Part] = {}
        self._cached = 0
        #: The stored list of runs last read, and what it says.
        self._listed: tuple[bytes | None, _Directory] = (None, _Directory((), 0))

    # -- reads ---------------------------------------------------------------------------
    def get(self, keys: Sequence[int]) -> list[bytes | None]:
        for _ in range(READ_ATTEMPTS):
            directory = self._directory()
            try:
                return self._lookup(directory, keys)
            except _PartGone:
                continue
            finally:
                self._trim()
        raise StorageDamagedError(
            "the records index's blocks keep changing under this reader (a part its list of runs "
            "names is gone each time); the store is damaged or rewritten without its writer lock"
        )

    def _lookup(self, directory: _Directory, keys: Sequence[int]) -> list[bytes | None]:
        """Each key's entry in the newest run holding it: per run, one search over the keys of
        the parts the pending keys fall in, laid end to end (they are in order, and a key
        searched for lies in its own part's range, so it cannot land in another part)."""
        out: list[bytes | None] = [None] * len(keys)
        wanted = np.asarray(keys, dtype=np.uint64)
        pending = np.arange(len(keys), dtype=np.int64)
        for run in reversed(directory.runs):
            if not len(pending):
                break
            # in key order: each search then starts where the one before ended, in cache
            pending = pending[np.argsort(wanted[pending], kind="stable")]
            part_of = np.searchsorted(run.fences, wanted[pending], side="right") - 1
            inside = part_of >= 0
            pending_in, part_of = pending[inside], part_of[inside]
            if not len(pending_in):
                continue
            numbers, local_part = np.unique(part_of, return_inverse=True)
            loaded = self._load(run, numbers.tolist())
            sizes = np.fromiter((len(part.keys) for part in loaded), dtype=np.int64, count=len(loaded))
            firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            laid = np.concatenate([part.keys for part in loaded])
            if not len(laid):
                raise _damaged(run.part_name(int(numbers[0])))  # a part the directory names is empty
            asked = wanted[pending_in]
            index = np.searchsorted(laid, asked)
            # past its own part (or the end): a miss, whatever the next part's first key is
            inside_part = index < firsts[local_part] + sizes[local_part]
            index = np.minimum(index, len(laid) - 1)
            found = inside_part & (laid[index] == asked)
            hits, part_hit = index[found], local_part[found]
            local = hits - firsts[part_hit]
            ends = np.concatenate([part.ends for part in loaded])
            begins = np.where(local > 0, ends[np.maximum(hits - 1, 0)], 0).tolist()
            datas = [(part.data, part.base) for part in loaded]
            for position, number, begin, stop in zip(
                pending_in[found].tolist(), part_hit.tolist(), begins, ends[hits].tolist(), strict=True
            ):
                data, base = datas[number]
                out[position] = data[base + begin : base + stop]
            pending = np.setdiff1d(pending, pending_in[found], assume_unique=True)
        return out

    def _load(self, run: _Run, parts: list[int]) -> list[_Part]:
        wanted = [(run.id, part) for part in parts]
        cache = self._parts
        found = {key: cache.pop(key) for key in wanted if key in cache}
        missing = [key for key in wanted if key not in found]
        if missing:
            names = [_part_name(*key) for key in missing]
            values = self.store.get_values(BLOCKS_MAP, names)
            read = [value for value in values if value is not None]
            if len(read) < len(values):
                raise _PartGone(names[values.index(None)])
            found.update(zip(missing, _decoded(names, read), strict=True))
            self._cached += sum(map(len, read))
        cache.update(found)  # the most recently used last
        return [found[key] for key in wanted]

    def _trim(self) -> None:
        """Let go of the least recently used parts past :data:`CACHE_BYTES` (after a call:
        the parts a call reads are kept while it runs)."""
        while self._cached > CACHE_BYTES and self._parts:
            self._forget(next(iter(self._parts)))

    def _forget(self, key: tuple[int, int]) -> None:
        part = self._parts.pop(key, None)
        if part is not None:
            self._cached -= len(part.data)

    def _directory(self) -> _Directory:
        """The list of runs as stored now (parsed again only when it changed)."""
        value = self.store.get_values(BLOCKS_MAP, [DIRECTORY])[0]
        if value is not None and value == self._listed[0]:
            return self._listed[1]
        directory = _Directory.decode(value)
        self._listed = (value, directory)
        live = {run.id for run in directory.runs}
        for key in [key for key in self._parts if key[0] not in live]:
            self._forget(key)
        return directory

    def items(self) -> Iterator[tuple[int, bytes]]:
        for _ in range(READ_ATTEMPTS):
            directory = self._directory()
            try:
                keys, ends, data = self._merged(directory.runs)
            except _PartGone:
                continue
            finally:
                self._trim()
            bounds = [0, *ends.tolist()]
            yield from zip(keys.tolist(), (data[a:b] for a, b in itertools.pairwise(bounds)), strict=True)
            return
        raise StorageDamagedError("the records index's blocks keep changing under this reader")

    # -- writes (under the writer lock) ---------------------------------------------------
    def put(self, blocks: Mapping[int, bytes]) -> None:
        if not blocks:
            if self.store.get_values(BLOCKS_MAP, [DIRECTORY])[0] is None:  # the layout is known
                self.store.put_values(BLOCKS_MAP, [DIRECTORY], [_Directory((), 0).encode()])
            return
        directory = self._directory()
        keys = np.fromiter(blocks, dtype=np.uint64, count=len(blocks))
        keys.sort()
        values = [blocks[key] for key in keys.tolist()]
        ends = np.cumsum([len(value) for value in values], dtype=np.int64)
        runs = [*directory.runs, self._write_run(directory.next, keys, ends, b"".join(values))]
        retired: list[_Run] = []
        next_id = directory.next + 1
        while len(runs) >= 2 and runs[-1].entries * MERGE_RATIO >= runs[-2].entries:
            older, newer = runs[-2], runs[-1]
            merged = self._write_run(next_id, *self._merged((older, newer)))
            next_id += 1
            retired += [older, newer]
            runs[-2:] = [merged]
        self.store.put_values(BLOCKS_MAP, [DIRECTORY], [_Directory(tuple(runs), next_id).encode()])
        self._retire(retired)
        self._trim()

    def clear(self) -> None:
        """Every run, and any part a crash left behind that no list of runs names."""
        directory = self._directory()
        self.store.put_values(BLOCKS_MAP, [DIRECTORY], [_Directory((), directory.next).encode()])
        self._parts.clear()
        self._cached = 0
        left = [key for batch in self.store.scan_values(BLOCKS_MAP) for key, _ in batch if key != DIRECTORY]
        self._remove(left)

    def _retire(self, runs: list[_Run]) -> None:
        keys = [(run.id, part) for run in runs for part in range(len(run.fences))]
        for key in keys:
            self._forget(key)
        self._remove([_part_name(*key) for key in keys])

    def _remove(self, names: Sequence[Key]) -> None:
        for start in range(0, len(names), 10_000):
            self.store.remove_values(BLOCKS_MAP, names[start : start + 10_000])

    def _write_run(self, run_id: int, keys: UInt64Array, ends: Int64Array, data: bytes) -> _Run:
        """Store sorted entries as run ``run_id``'s parts; the run as the directory lists it."""
        names, values, fences = [], [], []
        for number, first in enumerate(range(0, len(keys), PART_ENTRIES)):
            last = min(first + PART_ENTRIES, len(keys))
            base = int(ends[first - 1]) if first else 0
            part_ends = (ends[first:last] - base).astype(np.uint32)
            part = _Part(keys[first:last], part_ends, data[base : int(ends[last - 1])])
            names.append(_part_name(run_id, number))
            values.append(part.encode())
            fences.append(int(keys[first]))
            self._forget((run_id, number))
            self._parts[run_id, number] = part
            self._cached += len(part.data)
        self.store.put_values(BLOCKS_MAP, names, values)
        return _Run(run_id, len(keys), np.asarray(fences, dtype=np.uint64))

    def _merged(self, runs: Sequence[_Run]) -> tuple[UInt64Array, Int64Array, bytes]:
        """The entries of ``runs`` (oldest first) as one sorted run, the newest entry of each key."""
        merged = _Entries.of([])
        for run in runs:
            merged = merged.overlaid(_Entries.of(self._load(run, list(range(len(run.fences))))))
        return merged.keys, merged.ends, merged.data.tobytes()


@dataclass(frozen=True)
class _Entries:
    """Sorted entries laid end to end: a run's, whole, as a merge reads them."""

    keys: UInt64Array
    ends: Int64Array  # the end of each entry's bytes in ``data``
    data: npt.NDArray[np.uint8]

    @classmethod
    def of(cls, parts: Sequence[_Part]) -> _Entries:
        """The entries of a run's parts, in order."""
        if not parts:
            return cls(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8))
        sizes = np.fromiter((len(part.data) - part.base for part in parts), dtype=np.int64, count=len(parts))
        offsets = np.repeat(np.cumsum(sizes) - sizes, [len(part.keys) for part in parts])
        ends = np.concatenate([part.ends for part in parts]).astype(np.int64) + offsets
        data = b"".join([memoryview(part.data)[part.base :] for part in parts])
        return cls(np.concatenate([part.keys for part in parts]), ends, np.frombuffer(data, dtype=np.uint8))

    def overlaid(self, newer: _Entries) -> _Entries:
        """These entries with ``newer``'s laid over them: a key in both keeps ``newer``'s
        bytes. Each side's entries keep their order in the result, so their bytes move by
        two masked copies, with no index per byte (a merge moves hundreds of MB)."""
        if not len(self.keys):
            return newer
        at = np.searchsorted(self.keys, newer.keys)
        replaced = at[self.keys[np.minimum(at, len(self.keys) - 1)] == newer.keys]
        lengths = np.diff(self.ends, prepend=0)
        keys, data = self.keys, self.data
        if len(replaced):
            kept = np.ones(len(keys), dtype=bool)
            kept[replaced] = False
            keys, data, lengths = keys[kept], data[np.repeat(kept, lengths)], lengths[kept]
        slots = np.searchsorted(keys, newer.keys) + np.arange(len(newer.keys))  # newer's places
        is_newer = np.zeros(len(keys) + len(newer.keys), dtype=bool)
        is_newer[slots] = True
        merged_keys = np.empty(len(is_newer), dtype=np.uint64)
        merged_keys[is_newer], merged_keys[~is_newer] = newer.keys, keys
        merged_lengths = np.empty(len(is_newer), dtype=np.int64)
        merged_lengths[is_newer], merged_lengths[~is_newer] = np.diff(newer.ends, prepend=0), lengths
        from_newer = np.repeat(is_newer, merged_lengths)
        merged = np.empty(len(from_newer), dtype=np.uint8)
        merged[from_newer], merged[~from_newer] = newer.data, data
        return _Entries(merged_keys, np.cumsum(merged_lengths), merged)


def _damaged(name: str) -> StorageDamagedError:
    return StorageDamagedError(
        f"block map entry {name!r} of the records index is not readable; the store is damaged: "
        "build a new index or refit it (`neardup records SOURCE --index URL --refit`)"
    )

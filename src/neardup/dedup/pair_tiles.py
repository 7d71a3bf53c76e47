"""The candidate pairs of a batch run, gathered band by band and checked tile by tile.

Pairs arrive as pair keys (i·2^32 + j, i < j) from every band, many of them found by several
bands, and a pair is a candidate once ``hits`` bands have found it (each band gives a pair at
most once). Held in memory they are merged as they come, each key kept at most ``hits`` times
(a sort: enough to count to ``hits``); past their share of the run's memory budget each
buffer is merged so and split by tile, ``(i // span, j // span)``, into a file per tile. A
tile's pairs read the check bins and texts of two spans of documents only, so the check reads
a tile with a bounded working set; tiles are given back sorted and unique, the keys found
``hits`` times, and together they are exactly the pairs held in memory would have been.
Pairs that are candidates by themselves (the exact prefix search's) are added ``sure``.

Every sort here is of sorted runs (a band's keys arrive sorted; a tile file is appended a
sorted piece at a time), so it is numpy's stable sort, a timsort that merges the runs, where
its default quicksort would sort them again from scratch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .workspace import Workspace, give_back_freed_memory, unbounded

IntArray = npt.NDArray[np.int64]
#: Buffers merged into one at a time while the pairs are held in memory.
MERGE_PARTS = 16
#: Merging the held buffers (:func:`_capped`) holds about twice their bytes: they spill at the
#: share divided by this, so the merge stays within the share.
MERGE_COPIES = 2
#: At most this many spans along each side (so at most about 2,100 tile files).
MAX_SPANS = 64


def _capped(parts: list[IntArray], hits: int) -> IntArray:
    """The keys of ``parts``, sorted, each kept at most ``hits`` times. Empties ``parts`` (the
    caller's buffers go as soon as they are joined: at most twice the keys are held)."""
    if not parts:
        return np.empty(0, dtype=np.int64)
    keys = np.concatenate(parts)
    parts.clear()
    keys.sort(kind="stable")  # sorted parts: a timsort merges their runs, several times faster
    if keys.size <= hits:
        return keys
    keep = np.ones(keys.size, dtype=bool)
    np.not_equal(keys[hits:], keys[:-hits], out=keep[hits:])
    return keys[keep]


def _found(keys: IntArray, hits: int) -> IntArray:
    """The distinct keys of sorted ``keys`` that occur at least ``hits`` times."""
    if keys.size < hits:
        return keys[:0]
    if hits > 1:  # the key that ends a run of ``hits`` equal keys, once per run and more
        keys = keys[hits - 1 :][keys[hits - 1 :] == keys[: keys.size - hits + 1]]
    first = np.ones(keys.size, dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    found: IntArray = keys[first]
    return found


class PairTiles:
    """Pair keys of ``documents`` documents; ``span`` documents per tile side when spilled;
    a pair is kept once ``hits`` bands found it."""

    def __init__(self, documents: int, span: int, workspace: Workspace | None = None, hits: int = 1) -> None:
        self.workspace = workspace or unbounded()
        self.hits = hits
        self.span = max(1, span, -(-documents // MAX_SPANS))
        self.sides = max(1, -(-documents // self.span))
        self._parts: list[IntArray] = []
        self._held = 0
        self._files: dict[int, Path] = {}
        self.count = 0
        self._finished = False

    @property
    def spilled(self) -> bool:
        return bool(self._files)

    def add(self, keys: IntArray, sure: bool = False) -> None:
        """More pair keys (any order): one band's, each once, or with ``sure`` pairs that are
        candidates whatever the bands find."""
        if not keys.size:
            return
        if sure and self.hits > 1:
            keys = np.repeat(keys, self.hits)
        self._parts.append(keys)
        self._held += keys.nbytes
        if len(self._parts) >= MERGE_PARTS:
            self._parts = [_capped(self._parts, self.hits)]
            self._held = self._parts[0].nbytes
        if self._held > self.workspace.share("pairs") // MERGE_COPIES:
            self._write(_capped(self._parts, self.hits))
            self._held = 0
            give_back_freed_memory()

    def _write(self, keys: IntArray) -> None:
        """Append sorted ``keys`` to their tiles' files, a row of tiles (one span of ``i``, a
        stretch of the sorted keys) at a time, so the temporaries are a row's, not all the
        keys' (an argsort and a copy of every key would be several times the share)."""
        rows = np.searchsorted(keys, (np.arange(self.sides + 1, dtype=np.int64) * self.span) << 32)
        for row, (low, high) in enumerate(zip(rows[:-1].tolist(), rows[1:].tolist(), strict=True)):
            if low == high:
                continue
            part = keys[low:high]
            column = ((part & 0xFFFFFFFF) // self.span).astype(np.int16)
            order = np.argsort(column, kind="stable")  # a radix sort of 16-bit values
            counts = np.bincount(column, minlength=self.sides)
            start = 0
            for side in np.flatnonzero(counts).tolist():
                stop = start + int(counts[side])
                tile = row * self.sides + side
                if tile not in self._files:
                    self._files[tile] = self.workspace.file(f"pairs-{tile}")
                with open(self._files[tile], "ab") as out:
                    out.write(part[order[start:stop]].tobytes())
                start = stop

    def finish(self) -> None:
        """Keep the pairs found ``hits`` times, sorted and unique, of what is held (and of
        every tile file, in place), and count them."""
        held = _capped(self._parts, self.hits)
        if self._files:
            self._write(held)
            self._held = 0
            self.count = 0
            for path in self._files.values():
                keys = _found(np.sort(np.fromfile(path, dtype=np.int64), kind="stable"), self.hits)
                keys.tofile(path)
                self.count += len(keys)
        else:
            found = _found(held, self.hits)
            self._parts, self._held = [found], found.nbytes
            self.count = len(found)
        self._finished = True

    def tiles(self) -> Iterator[IntArray]:
        """Each tile's pair keys, sorted and unique (one tile, all the pairs, when held)."""
        for row in self.rows():
            yield from row

    def rows(self) -> Iterator[list[IntArray]]:
        """The tiles a row at a time, in order: the pairs whose first record lies in one span
        (one row of one tile, all the pairs, when held)."""
        assert self._finished, "finish() first"
        if not self._files:
            yield [self._parts[0] if self._parts else np.empty(0, dtype=np.int64)]
            return
        tiles = sorted(self._files)
        for row in sorted({tile // self.sides for tile in tiles}):
            chosen = [tile for tile in tiles if tile // self.sides == row]
            yield [np.fromfile(self._files[tile], dtype=np.int64) for tile in chosen]

    def all(self) -> IntArray:
        """Every pair key, sorted and unique (all in memory: for callers that want them all)."""
        return np.sort(np.concatenate([np.empty(0, dtype=np.int64), *self.tiles()]), kind="stable")

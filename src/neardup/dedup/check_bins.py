"""The 8-bit check bins of every sketched document, in fixed blocks of rows.

A million documents hold 512 MB of them. Kept as one array they would be concatenated from the
batches once, doubling that for a moment just before the check forks its workers (whose
resident size counts every page they inherit); in blocks they are filled in place as batches
arrive and never copied. Past their share of the run's memory budget the full blocks move to
a file, and reads keep the blocks they last used (the check reads candidates tile by tile, so
a few blocks serve many pairs).
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .workspace import Workspace, unbounded

IntArray = npt.NDArray[np.int64]
#: Rows per block at most (32 MB of 512 bins); fewer when the budget's share is smaller.
BLOCK_ROWS = 1 << 16


class CheckBins:
    """Rows of ``width`` uint8 bins, appended batch by batch, read by row number."""

    def __init__(self, width: int, workspace: Workspace | None = None) -> None:
        self.width = width
        self.count = 0
        self.workspace = workspace or unbounded()
        share = self.workspace.share("check_bins")
        fitting = share // (4 * max(width, 1))  # a block is at most a quarter of the share
        self.block_rows = max(64, min(BLOCK_ROWS, 1 << max(0, fitting.bit_length() - 1)))
        self._blocks: list[npt.NDArray[np.uint8] | None] = []
        self._file: Path | None = None
        self._cache: OrderedDict[int, npt.NDArray[np.uint8]] = OrderedDict()
        self._cache_blocks = max(4, share // max(1, self.block_rows * width))
        #: Blocks read back from the file so far.
        self.reads = 0

    @property
    def span(self) -> int:
        """Documents per side of a tile of candidate pairs (:class:`~.pair_tiles.PairTiles`)
        whose bins the cache holds whole: a side's rows lie in at most span / block_rows + 1
        blocks, so a tile's two sides fit, and a tile reads each block once. (Sides that
        overflow it would read every block again at every chunk of pairs: the cache is
        least-recently used and the reads go in block order.)"""
        return self.block_rows * max(1, self._cache_blocks // 2 - 1)

    def extend(self, rows: npt.NDArray[np.uint8]) -> None:
        """Append (n, width) rows."""
        done = 0
        while done < len(rows):
            offset = self.count % self.block_rows
            if offset == 0:
                self._spill_full_blocks()
                self._blocks.append(np.empty((self.block_rows, self.width), dtype=np.uint8))
            block = self._blocks[-1]
            assert block is not None
            take = min(len(rows) - done, self.block_rows - offset)
            block[offset : offset + take] = rows[done : done + take]
            done += take
            self.count += take

    def _spill_full_blocks(self) -> None:
        """Write the full blocks held in memory to the file once they exceed the share."""
        held = sum(block is not None for block in self._blocks)
        if held * self.block_rows * self.width <= self.workspace.share("check_bins"):
            return
        if self._file is None:
            self._file = self.workspace.file("check-bins")
        with open(self._file, "ab") as out:  # the held blocks follow those written before
            for number, block in enumerate(self._blocks):
                if block is not None:
                    out.write(block.tobytes())
                    self._blocks[number] = None

    def take(self, rows: IntArray) -> npt.NDArray[np.uint8]:
        """The bins of ``rows`` (each < count), (len(rows), width)."""
        result = np.empty((len(rows), self.width), dtype=np.uint8)
        block_of = rows // self.block_rows
        for block in np.flatnonzero(np.bincount(block_of, minlength=len(self._blocks))).tolist():
            chosen = np.flatnonzero(block_of == block)
            result[chosen] = self._block(block)[rows[chosen] % self.block_rows]
        return result

    def _block(self, number: int) -> npt.NDArray[np.uint8]:
        held = self._blocks[number]
        if held is not None:
            return held
        cached = self._cache.get(number)
        if cached is None:
            assert self._file is not None
            size = self.block_rows * self.width
            cached = np.fromfile(self._file, dtype=np.uint8, count=size, offset=number * size)
            self.reads += 1
            cached = cached.reshape(self.block_rows, self.width)
            self._cache[number] = cached
            while len(self._cache) > self._cache_blocks:
                self._cache.popitem(last=False)
        self._cache.move_to_end(number)
        return cached

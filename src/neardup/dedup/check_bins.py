"""The 8-bit check bins of every sketched document, in fixed blocks of rows.

A million documents hold 512 MB of them. Kept as one array they would be concatenated from the
batches once, doubling that for a moment just before the check forks its workers (whose
resident size counts every page they inherit); in blocks of :data:`BLOCK_ROWS` rows they are
filled in place as batches arrive and never copied.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
#: Rows per block (32 MB of 512 bins).
BLOCK_ROWS = 1 << 16


class CheckBins:
    """Rows of ``width`` uint8 bins, appended batch by batch, read by row number."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.count = 0
        self._blocks: list[npt.NDArray[np.uint8]] = []

    def extend(self, rows: npt.NDArray[np.uint8]) -> None:
        """Append (n, width) rows."""
        done = 0
        while done < len(rows):
            offset = self.count % BLOCK_ROWS
            if offset == 0:
                self._blocks.append(np.empty((BLOCK_ROWS, self.width), dtype=np.uint8))
            take = min(len(rows) - done, BLOCK_ROWS - offset)
            self._blocks[-1][offset : offset + take] = rows[done : done + take]
            done += take
            self.count += take

    def take(self, rows: IntArray) -> npt.NDArray[np.uint8]:
        """The bins of ``rows`` (each < count), (len(rows), width)."""
        result = np.empty((len(rows), self.width), dtype=np.uint8)
        block_of = rows // BLOCK_ROWS
        for block in np.flatnonzero(np.bincount(block_of, minlength=len(self._blocks))).tolist():
            chosen = np.flatnonzero(block_of == block)
            result[chosen] = self._blocks[block][rows[chosen] % BLOCK_ROWS]
        return result

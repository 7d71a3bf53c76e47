"""The band keys of the sketched documents, held until the candidate pairs are taken.

At 235 bands a document holds 940 bytes of keys, 9.4 GB at 10^7 documents. They arrive a
batch at a time as a (bands, n) matrix and are read a band at a time (each band's column over
all documents is what pairs them), so past their share of the run's memory budget the held
batches are written as one run, band-major: a band's keys of a run are one contiguous read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from .workspace import Workspace, unbounded

UInt32Array = npt.NDArray[np.uint32]


class BandKeys:
    """(bands, n) uint32 band keys appended batch by batch, read back a band at a time."""

    def __init__(self, workspace: Workspace | None = None) -> None:
        self.workspace = workspace or unbounded()
        self.count = 0
        self._held: list[UInt32Array] = []
        self._held_bytes = 0
        #: (offset in the file, documents) of each run written.
        self._runs: list[tuple[int, int]] = []
        self._file: Path | None = None
        self._written = 0

    def append(self, keys: UInt32Array) -> None:
        self._held.append(keys)
        self.count += keys.shape[1]
        self._held_bytes += keys.nbytes
        if self._held_bytes > self.workspace.share("band_keys"):
            self._write_run()

    def _write_run(self) -> None:
        """Write the held batches as one band-major run, a band's row of each batch at a time:
        no copy of the held keys is made (a concatenated copy, and its bytes, would triple
        the share for a moment)."""
        if self._file is None:
            self._file = self.workspace.file("band-keys")
        size = sum(keys.shape[1] for keys in self._held)
        with open(self._file, "ab") as out:
            for band in range(self._held[0].shape[0]):
                for keys in self._held:
                    out.write(np.ascontiguousarray(keys[band], dtype=np.uint32).data)
        self._runs.append((self._written, size))
        self._written += 4 * size * self._held[0].shape[0]
        self._held, self._held_bytes = [], 0

    def column(self, band: int) -> UInt32Array:
        """Band ``band``'s keys of every document, in arrival order."""
        parts = [
            np.fromfile(str(self._file), dtype=np.uint32, count=size, offset=offset + 4 * band * size)
            for offset, size in self._runs
        ]
        parts.extend(keys[band] for keys in self._held)
        return np.concatenate(parts) if parts else np.zeros(0, np.uint32)

    def clear(self) -> None:
        """Free the keys (the file goes with the workspace)."""
        self._held, self._held_bytes, self._runs = [], 0, []

    def __bool__(self) -> bool:
        return self.count > 0

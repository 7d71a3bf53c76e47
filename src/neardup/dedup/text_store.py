"""The texts of a batch run by record number, for the checks made once every record is read.

The exact check needs the texts of the candidates, which are known only at the end; past
:data:`PLAIN_TEXTS` records the rest are kept compressed a batch to a block, by Zstandard at a
fast level (compressing is on the sketch workers' path, so its speed counts more than its
ratio). A block is compressed where the batch is sketched (a worker process), not by the
reader, in groups of :data:`GROUP_TEXTS` texts: a group costs a fraction of compressing each
text alone, and a read inflates only the group that holds its text, since once the
candidates of a large run are spread thin a read wants a text or two of a group. Reads go
through a one-group cache, since the checks read their texts in record order. Past their
share of the run's memory budget the compressed blocks move to a file, read back a group at
a time.
"""

from __future__ import annotations

import os
import weakref
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, overload

import numpy as np
import numpy.typing as npt
import zstandard

from .workspace import Workspace, unbounded

#: Texts kept as they are before the store starts compressing (fast access for small inputs).
PLAIN_TEXTS = 50_000
#: The smallest text share of the budget that keeps the first texts plain (50,000 news texts).
PLAIN_SHARE = 256 << 20
#: Texts compressed together, and inflated together by a read: once a large run's candidates
#: are spread thin the check reads one text of a group, and inflating the others is wasted
#: work (most of the cost of a read at 16 a group), while groups of 4 still compress nearly as
#: well (docs/candidates.md).
GROUP_TEXTS = 4
#: Zstandard's level for the packed texts: its fastest regular level.
COMPRESSION_LEVEL = 1


class PackedTexts(NamedTuple):
    """A batch of texts as Zstandard frames of :data:`GROUP_TEXTS` texts' UTF-8 bytes each, one
    after another in ``block``; where each text ends among the batch's bytes, and where each
    group's stream ends in ``block``."""

    block: bytes
    ends: npt.NDArray[np.int64]
    groups: npt.NDArray[np.int64]


def pack_texts(texts: Sequence[str]) -> PackedTexts:
    encoded = [text.encode("utf-8", "surrogatepass") for text in texts]
    ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
    compressor = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL)
    streams = [
        compressor.compress(b"".join(encoded[low : low + GROUP_TEXTS]))
        for low in range(0, len(encoded), GROUP_TEXTS)
    ]
    groups = np.cumsum(np.fromiter(map(len, streams), dtype=np.int64, count=len(streams)))
    return PackedTexts(b"".join(streams), ends, groups)


class TextStore(Sequence[str]):
    """Texts by record number: whole batches as str until :data:`PLAIN_TEXTS` records are
    held, compressed blocks after (:meth:`packs_next` says which the next batch is)."""

    def __init__(self, plain: int | None = None, workspace: Workspace | None = None) -> None:
        self.workspace = workspace or unbounded()
        self._share = self.workspace.share("texts")
        if plain is None:
            plain = PLAIN_TEXTS if self._share >= PLAIN_SHARE else 0
        self._plain_limit = plain
        self._plain: list[str] = []
        #: Each block's compressed bytes, or where they lie in the file once written there.
        self._blocks: list[bytes | tuple[int, int]] = []
        self._ends: list[npt.NDArray[np.int64]] = []
        self._groups: list[npt.NDArray[np.int64]] = []
        self._starts: list[int] = []  # record number of each block's first text
        self._count = 0
        self._held = 0  # compressed bytes held in memory
        self._file: Path | None = None
        self._reader = -1  # the file's descriptor, opened at its first read and kept
        self._written = 0
        self._cached: tuple[int, int, bytes] = (-1, -1, b"")
        self._decompressor = zstandard.ZstdDecompressor()

    def packs_next(self, already: int | None = None) -> bool:
        """Whether a batch that follows ``already`` records (default: those held) is packed."""
        return (self._count if already is None else already) >= self._plain_limit

    def extend(self, texts: Sequence[str]) -> None:
        """Add a batch, plain or packed as :meth:`packs_next` says."""
        if self.packs_next():
            self.extend_packed(pack_texts(texts))
            return
        if self._blocks:
            raise ValueError("plain texts cannot follow packed ones")
        self._plain.extend(texts)
        self._count += len(texts)

    def extend_packed(self, packed: PackedTexts) -> None:
        """Add a batch packed elsewhere (:func:`pack_texts`, e.g. in a worker process)."""
        self._starts.append(self._count)
        self._blocks.append(packed.block)
        self._ends.append(packed.ends)
        self._groups.append(packed.groups)
        self._count += len(packed.ends)
        self._held += len(packed.block)
        if self._held > self._share:
            self._spill()

    def _spill(self) -> None:
        """Move the blocks held in memory to the file."""
        if self._file is None:
            self._file = self.workspace.file("texts")
        with open(self._file, "ab") as out:
            for number, block in enumerate(self._blocks):
                if isinstance(block, bytes):
                    out.write(block)
                    self._blocks[number] = (self._written, len(block))
                    self._written += len(block)
        self._held = 0

    def _group(self, number: int, group: int) -> bytes:
        """Group ``group`` of block ``number``, inflated."""
        groups = self._groups[number]
        start, stop = (int(groups[group - 1]) if group else 0), int(groups[group])
        block = self._blocks[number]
        if isinstance(block, bytes):
            return self._decompressor.decompress(block[start:stop])
        if self._reader < 0:
            assert self._file is not None
            self._reader = os.open(self._file, os.O_RDONLY)
            weakref.finalize(self, os.close, self._reader)
        # pread: no shared offset, so forked workers reading through the inherited descriptor agree.
        return self._decompressor.decompress(os.pread(self._reader, stop - start, block[0] + start))

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(f"text {index} is not among the {self._count} held")
        if index < len(self._plain):
            return self._plain[index]
        number = bisect_right(self._starts, index) - 1
        row = index - self._starts[number]
        group = row // GROUP_TEXTS
        if self._cached[:2] != (number, group):
            self._cached = (number, group, self._group(number, group))
        ends = self._ends[number]
        base = int(ends[group * GROUP_TEXTS - 1]) if group else 0
        start = int(ends[row - 1]) if row else 0
        return self._cached[2][start - base : int(ends[row]) - base].decode("utf-8", "surrogatepass")

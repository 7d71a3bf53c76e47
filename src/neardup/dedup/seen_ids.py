"""The ids a batch run has read, each checked against every earlier one as it arrives.

Pairs and clusters name records by id, so a repeated id is refused at the record that repeats
it, naming where the first was read. A dict of id → location costs ~110 bytes a record (1 GB
at 10^7); here a record costs ~24: a 64-bit hash of its id in sorted levels merged as they
double (as an LSM tree merges), its record number, and its location as a line number within
a source (``path:line``, the form readers give), the ids themselves being the list the run
keeps for its output anyway. A hash found again is confirmed on the ids before it is an error.

That list is :class:`PackedIds`: it is held from the first record to the output, and a
Python string object per id costs several times the id's own bytes (figures in
docs/candidates.md).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import numpy as np
import numpy.typing as npt

from ..errors import InputError
from ..io.record import Record, RecordId

IntArray = npt.NDArray[np.int64]

#: How a packed id reads back: text, or an integer (JSON ids may be either).
_TEXT, _INTEGER = 0, 1


def _unpacked(raw: bytearray, kind: int) -> RecordId:
    return int(raw) if kind == _INTEGER else raw.decode("utf-8", "surrogatepass")


class PackedIds(Sequence[RecordId]):
    """Record ids by record number, packed: each id's UTF-8 bytes (an integer id's digits)
    one after another, where each ends and whether it was an integer. Reads make the id
    again, equal to and of the type of the one added."""

    def __init__(self, ids: Iterable[RecordId] = ()) -> None:
        self._bytes = bytearray()
        self._ends = array("q")
        self._kinds = bytearray()
        self.extend(ids)

    def append(self, record_id: RecordId) -> None:
        self.extend((record_id,))

    def extend(self, ids: Iterable[RecordId]) -> None:
        data, ends, kinds = self._bytes, self._ends, self._kinds
        for record_id in ids:
            if isinstance(record_id, str):
                data += record_id.encode("utf-8", "surrogatepass")
                kinds.append(_TEXT)
            else:
                data += str(int(record_id)).encode("ascii")
                kinds.append(_INTEGER)
            ends.append(len(data))

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> RecordId: ...
    @overload
    def __getitem__(self, index: slice) -> list[RecordId]: ...
    def __getitem__(self, index: int | slice) -> RecordId | list[RecordId]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self._ends)
        if not 0 <= index < len(self._ends):
            raise IndexError(f"id {index} is not among the {len(self._ends)} held")
        start = self._ends[index - 1] if index else 0
        return _unpacked(self._bytes[start : self._ends[index]], self._kinds[index])

    def __iter__(self) -> Iterator[RecordId]:
        start = 0
        for index, end in enumerate(self._ends):
            yield _unpacked(self._bytes[start:end], self._kinds[index])
            start = end

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedIds | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        shown = ", ".join(repr(record_id) for record_id in self[:3])
        return f"PackedIds([{shown}{', ...' if len(self) > 3 else ''}], {len(self)} ids)"


class SeenIds:
    """Ids by record number (``ids``, the run's own list), checked for repeats batch by batch."""

    def __init__(self, ids: Sequence[RecordId]) -> None:
        self.ids = ids
        #: Sorted (hashes, record numbers) levels, largest first.
        self._levels: list[tuple[npt.NDArray[np.int64], IntArray]] = []
        self._sources: dict[str, int] = {}
        self._source_of: list[npt.NDArray[np.int32]] = []
        self._line_of: list[IntArray] = []
        self._other_locations: dict[int, str] = {}

    def check(self, group: Sequence[Record], first: int) -> None:
        """Refuse a repeated id in ``group`` (records ``first`` .. of the run), then remember
        them; ``self.ids`` must hold them from ``first`` on once this returns."""
        batch: dict[RecordId, int] = {}
        for offset, record in enumerate(group):
            earlier = batch.setdefault(record.id, first + offset)
            if earlier != first + offset:
                raise _repeated(record, group[earlier - first].location)
        hashes = np.fromiter((hash(record.id) for record in group), dtype=np.int64, count=len(group))
        for level, rows in self._levels:
            low = np.searchsorted(level, hashes, side="left")
            high = np.searchsorted(level, hashes, side="right")
            for position in np.flatnonzero(high > low).tolist():
                for row in rows[low[position] : high[position]].tolist():
                    if self.ids[row] == group[position].id:
                        raise _repeated(group[position], self._location(row))
        self._remember(group, hashes, first)

    def _remember(self, group: Sequence[Record], hashes: npt.NDArray[np.int64], first: int) -> None:
        order = np.argsort(hashes, kind="stable")
        level, rows = hashes[order], (np.arange(len(group), dtype=np.int64) + first)[order]
        while self._levels and len(self._levels[-1][0]) <= len(level):
            below, below_rows = self._levels.pop()
            merged = np.concatenate([below, level])
            order = np.argsort(merged, kind="stable")
            level, rows = merged[order], np.concatenate([below_rows, rows])[order]
        self._levels.append((level, rows))
        sources = np.empty(len(group), dtype=np.int32)
        lines = np.zeros(len(group), dtype=np.int64)
        for offset, record in enumerate(group):
            source, _, line = record.location.rpartition(":")
            if source and line.isdigit() and len(line) < 18:
                sources[offset] = self._sources.setdefault(source, len(self._sources))
                lines[offset] = int(line)
            else:
                sources[offset] = -1
                self._other_locations[first + offset] = record.location
        self._source_of.append(sources)
        self._line_of.append(lines)

    def _location(self, row: int) -> str:
        if row in self._other_locations:
            return self._other_locations[row]
        for sources, lines in zip(self._source_of, self._line_of, strict=True):
            if row < len(sources):
                names = {number: name for name, number in self._sources.items()}
                return f"{names[int(sources[row])]}:{int(lines[row])}"
            row -= len(sources)
        raise IndexError(row)


def _repeated(record: Record, first: str) -> InputError:
    return InputError(
        f"duplicate id {record.id!r}, first seen at {first}; pairs and clusters name records by "
        f"id, so ids must be unique (choose another field as id_field)",
        record.location,
    )

"""Spark tasks that verify the fingerprint groups of one table key: the plan (which bits key
the table and its sub-blocks) and the exact check of every pair within a group."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from ..blocks import BitSelection, BlockScheme
from ..dedup.batch import pairs_in_runs, row_distances

#: Rows of sorted block keys verified per step: bounds a task's temporary arrays.
VERIFY_CHUNK = 1 << 18

IntArray = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]
#: (order of a, order of b, distance, table) with a before b in the input
PairRow = tuple[int, int, int, int]
#: (table, sub-block or -1, key, sub-block key, order, low word, high word), sorted in that order
GroupRow = tuple[int, int, int, int, int, int, int]


@dataclass(frozen=True)
class VerifyPlan:
    """The masks that decide which table (and sub-block) emits a pair, from one scheme.

    Keys are the tables' first 64 bits (``prefix(64)``), the same bits the job groups on; a
    pair is emitted by the first table whose key it agrees on, and inside a split bucket by
    the first sub-block it agrees on, so every pair is emitted exactly once.
    """

    scheme: BlockScheme
    max_distance: int

    @cached_property
    def keys(self) -> tuple[BitSelection, ...]:
        return tuple(table.prefix(64) for table in self.scheme.tables)

    def sub_blocks(self, table: int) -> tuple[BitSelection, ...]:
        return self.scheme.sub_blocks(self.keys[table])

    def table_masks(self) -> list[UInt64Array]:
        return [key.mask(self.scheme.words) for key in self.keys]

    def sub_masks(self) -> list[list[UInt64Array]]:
        return [[sub.mask(self.scheme.words) for sub in self.sub_blocks(t)] for t in range(len(self.keys))]


def verify_groups(
    rows: Iterable[GroupRow], plan: VerifyPlan, candidates: Callable[[int, int], object] | None = None
) -> Iterator[PairRow]:
    """All pairs within the distance among rows sorted by (table, sub, key, sub key, order).

    Rows come in chunks that end at a group boundary, so a group is never cut (a group larger
    than a chunk is held whole). ``candidates(table, count)`` is told how many pairs were
    compared, for the bucket statistics.
    """
    table_masks, sub_masks = plan.table_masks(), plan.sub_masks()
    pending: list[GroupRow] = []
    for row in rows:
        if len(pending) >= VERIFY_CHUNK and row[:4] != pending[-1][:4]:
            yield from _verify_chunk(pending, plan.max_distance, table_masks, sub_masks, candidates)
            pending = []
        pending.append(row)
    if pending:
        yield from _verify_chunk(pending, plan.max_distance, table_masks, sub_masks, candidates)


def _verify_chunk(
    rows: list[GroupRow],
    max_distance: int,
    table_masks: list[UInt64Array],
    sub_masks: list[list[UInt64Array]],
    candidates: Callable[[int, int], object] | None,
) -> Iterator[PairRow]:
    array = np.array(rows, dtype=np.int64).reshape(-1, 7)
    table, sub, group = array[:, 0], array[:, 1], array[:, :4]
    orders = array[:, 4]
    width = table_masks[0].size
    words = np.ascontiguousarray(array[:, 5 : 5 + width]).view(np.uint64)
    # Segments of one (table, sub-block): each has its own masks.
    change = np.flatnonzero((table[1:] != table[:-1]) | (sub[1:] != sub[:-1])) + 1
    bounds = np.concatenate(([0], change, [len(rows)]))
    same = np.all(group[1:] == group[:-1], axis=1)
    for begin, end in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        t, s = int(table[begin]), int(sub[begin])
        earlier = [*table_masks[:t], *(sub_masks[t][:s] if s > 0 else [])]
        starts, lengths = _runs(same[begin : end - 1], begin)
        for a, b in pairs_in_runs(starts, lengths):
            if candidates is not None:
                candidates(t, int(a.size))
            xor = words[a] ^ words[b]
            distance = row_distances(xor)
            keep = distance <= max_distance
            for mask in earlier:
                keep &= ~np.all((xor & mask) == 0, axis=1)
            for i, j, d in zip(
                orders[a[keep]].tolist(), orders[b[keep]].tolist(), distance[keep].tolist(), strict=True
            ):
                yield i, j, d, t


def _runs(same: npt.NDArray[np.bool_], offset: int) -> tuple[IntArray, IntArray]:
    """(starts, lengths) of runs of >= 2 equal rows, from "row p equals row p + 1" flags."""
    equal_at = np.flatnonzero(same)
    if equal_at.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    breaks = np.flatnonzero(np.diff(equal_at) != 1) + 1
    first = np.concatenate(([0], breaks))
    last = np.concatenate((breaks - 1, [equal_at.size - 1]))
    starts = equal_at[first]
    return (starts + offset).astype(np.int64), (equal_at[last] - starts + 2).astype(np.int64)

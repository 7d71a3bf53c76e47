"""One process's copy of the recent postings of a runs-layout store (:mod:`.runs`).

The recent postings (``<prefix>_postings``: those of the records added since the last cut)
change with every add. Kept in a B-tree by posting key they would cost each commit one random
leaf page per posting, most of a small add's time (docs/service.md). So the table is indexed
by record id only (appends), and each process holds the
postings in memory, searched by numpy: it adds its own after they commit, reads another
process's by id range (``id >= next_id seen``), and reads them all again after a cut (the
meta row's ``stamp`` is new at every cut) or when the store's ``next_id`` went back (a
rollback in another process).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import IntArray

#: In-memory pieces merged into one once there are this many (a piece per batch).
MAX_PIECES = 8


class RecentPostings:
    """The recent postings of one state of a store: sorted pieces of (key, id)."""

    def __init__(self) -> None:
        self.stamp: str | None = None
        self.next_id = 0
        self._pieces: list[tuple[IntArray, IntArray]] = []

    def usable_for(self, state: dict[str, Any]) -> str:
        """How these postings relate to a store's ``state``: ``"current"`` (the same),
        ``"behind"`` (the same cut, more records since: read ids from :attr:`next_id`) or
        ``"stale"`` (another cut, a store without stamps, or ids gone back: read them all)."""
        stamp, next_id = state.get("stamp"), int(state["next_id"])
        if stamp is None or stamp != self.stamp or next_id < self.next_id:
            return "stale"
        return "current" if next_id == self.next_id else "behind"

    def reset(self, state: dict[str, Any], keys: IntArray, ids: IntArray) -> None:
        """Exactly ``keys``/``ids``: the recent postings of ``state``."""
        self.stamp, self.next_id, self._pieces = state.get("stamp"), int(state["next_id"]), []
        self._add(keys, ids)

    def extend(self, keys: IntArray, ids: IntArray, next_id: int) -> None:
        """The postings of the records from :attr:`next_id` up to ``next_id`` (excluded)."""
        self._add(keys, ids)
        self.next_id = next_id

    def keys(self) -> list[IntArray]:
        """Every recent posting's key, in parts."""
        return [piece[0] for piece in self._pieces]

    def find(self, keys: IntArray) -> tuple[IntArray, IntArray]:
        """(key, id) of every recent posting whose key is one of the sorted, distinct ``keys``."""
        found_keys, found_ids = [], []
        for stored, ids in self._pieces:
            # Few keys are found: the right ends are searched for those alone.
            low = np.searchsorted(stored, keys, side="left")
            hit = np.flatnonzero(stored[np.minimum(low, stored.size - 1)] == keys)
            if not hit.size:
                continue
            sizes = np.searchsorted(stored, keys[hit], side="right") - low[hit]
            starts = np.repeat(low[hit] - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))
            found_keys.append(np.repeat(keys[hit], sizes))
            found_ids.append(ids[starts])
        if not found_keys:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return np.concatenate(found_keys), np.concatenate(found_ids)

    def _add(self, keys: IntArray, ids: IntArray) -> None:
        if keys.size:
            order = np.argsort(keys, kind="stable")
            self._pieces.append((np.asarray(keys, np.int64)[order], np.asarray(ids, np.int64)[order]))
        if len(self._pieces) > MAX_PIECES:
            merged_keys = np.concatenate([piece[0] for piece in self._pieces])
            merged_ids = np.concatenate([piece[1] for piece in self._pieces])
            order = np.argsort(merged_keys, kind="stable")
            self._pieces = [(merged_keys[order], merged_ids[order])]

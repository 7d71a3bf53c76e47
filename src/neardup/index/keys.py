"""The keys of a Simhash index: what a query returns (:class:`Match`, :class:`Matches`), how
many it may return (``max_matches``), and how keys are checked and kept as arrays."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..distance import row_distances, word_ints
from ..errors import ConfigError, InputError, KeyExistsError
from ..storage.base import Candidates, Key, StoredRecord, key_order, plain_key


@dataclass(frozen=True, slots=True)
class Match:
    """One verified near-duplicate of a query."""

    key: Key
    fingerprint: int
    distance: int


class Matches(list[Match]):
    """One query's matches by (distance, key): a plain list, with ``truncated`` True when a
    ``max_matches`` cap left farther matches out (the nearest are the ones kept), so a
    caller can say that the list is not all there is."""

    __slots__ = ("truncated",)

    def __init__(self, matches: Iterable[Match] = (), truncated: bool = False) -> None:
        super().__init__(matches)
        self.truncated = truncated


#: Which candidates count, for queries that verify: (query rows, keys, Hamming distances, the
#: stored records read with them) → one bool per candidate.
Keep = Callable[
    [npt.NDArray[np.int64], list[Key], npt.NDArray[np.int64], Mapping[Key, StoredRecord]],
    npt.NDArray[np.bool_],
]


def match_order(match: Match) -> tuple[int, bool, Key]:
    """(distance, key) with int keys before str keys, so mixed keys still sort."""
    return (match.distance, isinstance(match.key, str), match.key)


def check_max_matches(max_matches: int | None) -> int | None:
    """``max_matches`` checked: None (every match) or a positive integer."""
    if max_matches is None:
        return None
    if isinstance(max_matches, bool) or not isinstance(max_matches, int | np.integer) or max_matches < 1:
        raise ConfigError(
            f"max_matches must be a positive integer or None (every match); got {max_matches!r}"
        )
    return int(max_matches)


def capped(matches: list[Match], max_matches: int | None) -> Matches:
    """The first ``max_matches`` of matches already in (distance, key) order, flagged if cut."""
    if max_matches is None or len(matches) <= max_matches:
        return Matches(matches)
    return Matches(matches[:max_matches], truncated=True)


def matches_of(
    words: npt.NDArray[np.uint64],
    found: Candidates,
    width: int,
    *,
    max_matches: int | None = None,
    keep: Keep | None = None,
) -> list[Matches]:
    """One list of matches per query row of ``words``, by (distance, key), from a store's
    search (distances over the first ``width`` words, the fingerprint's). With
    ``max_matches``, only the nearest that many per row become matches, and ``keep`` (a
    verifier) is asked about candidates nearest first, only until a row has one more than
    the cap: 3,000 near-identical stored records cost a query 101 checks, not 3,000."""
    out = [Matches() for _ in range(words.shape[0])]
    if not found.keys:
        return out
    prints = found.words[:, :width]
    distances = row_distances(prints ^ words[found.rows, :width]).astype(np.int64)
    if max_matches is None and keep is None:
        values, listed = word_ints(prints), distances.tolist()
        for position, row in enumerate(found.rows.tolist()):
            out[row].append(Match(found.keys[position], values[position], listed[position]))
        for matches in out:
            if len(matches) > 1:
                matches.sort(key=match_order)
        return out
    rows = np.asarray(found.rows, dtype=np.int64)
    chosen, truncated = _nearest(rows, found, distances, len(out), max_matches, keep)
    values = word_ints(prints[chosen])
    for position, (row, candidate) in enumerate(zip(rows[chosen].tolist(), chosen.tolist(), strict=True)):
        out[row].append(Match(found.keys[candidate], values[position], int(distances[candidate])))
    for row in np.flatnonzero(truncated).tolist():
        out[row].truncated = True
    return out


def _nearest(
    rows: npt.NDArray[np.int64],
    found: Candidates,
    distances: npt.NDArray[np.int64],
    count: int,
    max_matches: int | None,
    keep: Keep | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """The candidates that become matches, grouped by row and in (distance, key) order
    within each, and which rows were cut. Candidates are checked in rounds, each asking
    ``keep`` about just as many per row as that row still needs (the cap plus one, which
    tells whether the cap cut anything)."""
    order = np.lexsort((_key_ranks(found.keys), distances, rows))
    ordered_rows = rows[order]
    starts = np.searchsorted(ordered_rows, np.arange(count), "left")
    ends = np.searchsorted(ordered_rows, np.arange(count), "right")
    limit = np.iinfo(np.int64).max if max_matches is None else max_matches + 1
    accepted = np.zeros(order.size, dtype=bool)
    have = np.zeros(count, dtype=np.int64)
    cursor = starts.astype(np.int64)
    while True:
        need = np.clip(np.minimum(limit - have, ends - cursor), 0, None)
        total = int(need.sum())
        if not total:
            break
        row_of = np.repeat(np.arange(count), need)
        positions = cursor[row_of] + np.arange(total) - np.repeat(np.cumsum(need) - need, need)
        candidates = order[positions]
        if keep is None:
            ok = np.ones(total, dtype=bool)
        else:
            keys = [found.keys[candidate] for candidate in candidates.tolist()]
            ok = np.asarray(keep(rows[candidates], keys, distances[candidates], found.records), dtype=bool)
        accepted[positions] = ok
        have += np.bincount(row_of[ok], minlength=count)
        cursor += need
    positions = np.flatnonzero(accepted)
    if max_matches is None:
        return order[positions], np.zeros(count, dtype=bool)
    kept_rows = ordered_rows[positions]
    first = np.searchsorted(kept_rows, np.arange(count), "left")
    positions = positions[np.arange(positions.size) - first[kept_rows] < max_matches]
    return order[positions], have > max_matches


def _key_ranks(keys: list[Key]) -> npt.NDArray[np.int64]:
    """Each key's place in key order (int keys before str keys), for sorting in numpy."""
    ordered = sorted(dict.fromkeys(keys), key=key_order)
    rank = {key: place for place, key in enumerate(ordered)}
    return np.fromiter((rank[key] for key in keys), dtype=np.int64, count=len(keys))


def _key_array(keys: list[Key]) -> npt.NDArray[Any]:
    if all(type(key) is int and -(1 << 63) <= key < 1 << 63 for key in keys):
        return np.asarray(keys, dtype=np.int64)
    array = np.empty(len(keys), dtype=object)
    array[:] = keys
    return array


def _check_key(key: Any) -> Key:
    if isinstance(key, bool) or not isinstance(key, int | str | np.integer | np.str_):
        raise InputError(f"key {key!r} is a {type(key).__name__}; keys must be int or str")
    return plain_key(key)


def _check_keys(keys: Sequence[Key] | npt.NDArray[Any]) -> Sequence[Key] | npt.NDArray[Any]:
    if isinstance(keys, np.ndarray) and keys.dtype.kind in "iu":
        return keys
    return [_check_key(key) for key in keys]


def _check_distinct(keys: Sequence[Key] | npt.NDArray[Any], hashes: npt.NDArray[np.uint64]) -> None:
    ordered = np.sort(hashes)  # np.unique hashes its input, 10x slower than a sort here
    if not np.any(ordered[1:] == ordered[:-1]):
        return
    seen: dict[Key, int] = {}
    for position, key in enumerate(keys):
        plain = plain_key(key)
        if plain in seen:
            raise KeyExistsError(
                f"key {plain!r} appears twice in the batch (positions {seen[plain]} and {position}); "
                "keys must be unique"
            )
        seen[plain] = position

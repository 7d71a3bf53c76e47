"""The keys of a Simhash index: what a query returns (:class:`Match`), and how keys are
checked and kept as arrays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..distance import row_distances, word_ints
from ..errors import InputError, KeyExistsError
from ..storage.base import Candidates
from ..storage.memory import Key
from ..storage.memory import plain_key as _plain


@dataclass(frozen=True, slots=True)
class Match:
    """One verified near-duplicate of a query."""

    key: Key
    fingerprint: int
    distance: int


def match_order(match: Match) -> tuple[int, bool, Key]:
    """(distance, key) with int keys before str keys, so mixed keys still sort."""
    return (match.distance, isinstance(match.key, str), match.key)


def matches_of(words: npt.NDArray[np.uint64], found: Candidates, width: int) -> list[list[Match]]:
    """One list of matches per query row of ``words``, by (distance, key), from a store's
    search (distances over the first ``width`` words, the fingerprint's)."""
    out: list[list[Match]] = [[] for _ in range(words.shape[0])]
    if not found.keys:
        return out
    prints = found.words[:, :width]
    distances = row_distances(prints ^ words[found.rows, :width]).tolist()
    values = word_ints(prints)
    for position, row in enumerate(found.rows.tolist()):
        out[row].append(Match(found.keys[position], values[position], distances[position]))
    for matches in out:
        if len(matches) > 1:
            matches.sort(key=match_order)
    return out


def _key_array(keys: list[Key]) -> npt.NDArray[Any]:
    if all(type(key) is int and -(1 << 63) <= key < 1 << 63 for key in keys):
        return np.asarray(keys, dtype=np.int64)
    array = np.empty(len(keys), dtype=object)
    array[:] = keys
    return array


def _check_key(key: Any) -> Key:
    if isinstance(key, bool) or not isinstance(key, int | str | np.integer | np.str_):
        raise InputError(f"key {key!r} is a {type(key).__name__}; keys must be int or str")
    return _plain(key)


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
        plain = _plain(key)
        if plain in seen:
            raise KeyExistsError(
                f"key {plain!r} appears twice in the batch (positions {seen[plain]} and {position}); "
                "keys must be unique"
            )
        seen[plain] = position

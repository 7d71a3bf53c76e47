"""Pairs of the documents that share a key: the bucket rule of band keys and prefix tokens.

Keys are sorted once (packed with their positions, one ``np.sort``) and each run of equal
keys gives the pairs of its documents; a key shared by more than ``max_bucket`` documents
(boilerplate, templates, mass copies) yields only the pairs of each member with the bucket's
first ``hub`` members, kept for connectivity but not expanded quadratically.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ..arrays import sorted_unique
from ..errors import InputError
from .batch import _runs_by_key, pairs_in_runs

IntArray = npt.NDArray[np.int64]


def keyed_pairs(
    keys: npt.ArrayLike,
    owners: IntArray,
    max_bucket: int,
    hub: int,
    admit: Callable[[IntArray, IntArray], npt.NDArray[np.bool_]] | None = None,
) -> IntArray:
    """Pair keys (i·2^32 + j, i < j) of the owners that share a key; a key held by more than
    ``max_bucket`` entries pairs each entry with the bucket's first ``hub`` entries only.
    ``admit(left, right)``, given the two entries' positions in ``keys``, drops the pairs
    that cannot qualify (the prefix search's positional bound) before they are collected."""
    values = np.asarray(keys, dtype=np.uint64)
    if values.size < 2:
        return np.empty(0, dtype=np.int64)
    index_bits = max(1, int(values.size - 1).bit_length())
    if int(values.max(initial=0)).bit_length() + index_bits > 64:
        raise InputError(f"{values.size} keys do not fit the packed sort; split the batch")
    order, starts, lengths, _ = _runs_by_key(values, index_bits)
    big = lengths > max_bucket
    parts: list[IntArray] = []

    def collect(left: IntArray, right: IntArray) -> None:
        if admit is not None:
            chosen = admit(left, right)
            left, right = left[chosen], right[chosen]
        parts.append(pair_keys(owners[left], owners[right]))

    for a, b in pairs_in_runs(starts[~big], lengths[~big]):
        collect(order[a], order[b])
    for start, length in zip(starts[big].tolist(), lengths[big].tolist(), strict=True):
        members = order[start : start + length]
        heads = members[:hub]
        collect(np.repeat(heads, length), np.tile(members, len(heads)))
    return unique_keys(parts)


def pair_keys(a: IntArray, b: IntArray) -> IntArray:
    low, high = np.minimum(a, b), np.maximum(a, b)
    distinct = low != high
    return np.asarray((low[distinct] << 32) | high[distinct], dtype=np.int64)


def unique_keys(parts: Sequence[IntArray]) -> IntArray:
    if not parts:
        return np.empty(0, dtype=np.int64)
    keys: IntArray = np.asarray(sorted_unique(np.concatenate(parts)), dtype=np.int64)
    return keys


def as_pairs(keys: IntArray) -> IntArray:
    """(m, 2) int64 pairs (i < j) from pair keys, each column written in place: no temporary
    columns, since a large run's kept pairs are the largest array it holds at its end."""
    pairs: IntArray = np.empty((len(keys), 2), dtype=np.int64)
    np.right_shift(keys, 32, out=pairs[:, 0])
    np.bitwise_and(keys, 0xFFFFFFFF, out=pairs[:, 1])
    return pairs

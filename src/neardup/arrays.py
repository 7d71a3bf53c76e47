"""Array helpers where numpy's own is slow: ``np.unique`` without ``return_counts`` hashes its
input (numpy >= 2.3), far slower than a sort on large int64 key arrays (docs/candidates.md)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


def sorted_unique(values: npt.ArrayLike) -> npt.NDArray[np.generic]:
    """The distinct values, ascending (``np.unique(values)``, by one sort)."""
    ordered = np.sort(np.asarray(values).reshape(-1))
    if ordered.size < 2:
        return ordered
    first = np.empty(ordered.size, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]


def unique_inverse(values: npt.ArrayLike) -> tuple[npt.NDArray[np.generic], IntArray]:
    """The distinct values, ascending, and where each value sits among them
    (``np.unique(values, return_inverse=True)`` for flat input, by one argsort)."""
    flat = np.asarray(values).reshape(-1)
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    first = np.ones(ordered.size, dtype=bool)
    if ordered.size > 1:
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    inverse = np.empty(flat.size, dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse

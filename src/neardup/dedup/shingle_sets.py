"""Exact shingle Jaccard for many pairs among many documents, each document shingled once.

The LSH stage leaves a band of candidates whose sketch estimate is too close to the threshold
to decide; their texts decide. Checking them pair by pair re-shingles a document once per pair
(or per chunk of pairs) it is in, and a sparse-matrix product costs far more per pair. Here the
documents of those pairs are shingled once each by the one shingler
(:func:`~neardup.similarity.shingles.shingles_of`) into one CSR of their compact 32-bit keys
(:func:`~neardup.similarity.shingles.compact_keys`: half the memory of the 40-bit keys, the
order within a document kept), and a pair's intersection is found by one vectorised
``np.searchsorted`` of the smaller set's keys among the larger set's, tagged with the larger
document's row.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import suppress
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt

from ..similarity.shingles import compact_keys, shingles_of
from ..text.normalize import Normalizer

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: Documents shingled at a time (bounds the temporaries of one call).
DOCUMENT_CHUNK = 4096
#: Pairs below which one process checks them all (a pool costs a fork).
PARALLEL_PAIRS = 1 << 16
#: Query keys looked up at a time. Small, so that the targets' keys they are looked up among
#: (a chunk's pairs are ordered by target) stay within the processor's caches: the binary
#: searches, most of an exact check's time, are 1.5× faster than at 1 << 22 on news texts.
QUERY_CHUNK = 1 << 18
_S32 = np.uint64(32)


class ShingleSets:
    """The shingle sets of a fixed list of documents as distinct compact (32-bit) keys, rows
    in that order: what the exact check of many pairs reads."""

    def __init__(self, offsets: IntArray, keys: npt.NDArray[np.uint32]) -> None:
        self.offsets = offsets
        self.keys = keys

    @classmethod
    def of(
        cls,
        count: int,
        text_of: Callable[[int], str],
        normalizer: Normalizer | None = None,
        workers: int = 1,
    ) -> ShingleSets:
        """Shingle documents 0 .. count - 1 (``text_of(row)`` gives each text), in chunks,
        spread over ``workers`` forked processes (which inherit ``text_of``)."""
        chunks = [(low, min(count, low + DOCUMENT_CHUNK)) for low in range(0, count, DOCUMENT_CHUNK)]
        workers = workers if len(chunks) > 1 else 1  # one chunk is not worth a fork
        parts = list(forked_map(_shingle_rows, chunks, (text_of, normalizer), workers))
        sizes = np.concatenate([part[0] for part in parts]) if parts else np.zeros(0, dtype=np.int64)
        offsets = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        keys = np.concatenate([part[1] for part in parts]) if parts else np.zeros(0, dtype=np.uint32)
        return cls(offsets, keys)

    @property
    def sizes(self) -> IntArray:
        return np.diff(self.offsets)

    def jaccard(
        self, left: IntArray, right: IntArray, workers: int = 1, other: ShingleSets | None = None
    ) -> FloatArray:
        """Exact Jaccard of row left[t] and row right[t] of ``other`` (of these sets when None:
        a check that holds one side's sets across many pairs shingles the other side apart);
        two empty sets count as equal (1.0). With ``workers`` > 1, slices of the pairs go to
        forked processes (which inherit the sets)."""
        left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
        rights = self if other is None else other
        if workers > 1 and len(left) > PARALLEL_PAIRS:
            bounds = np.linspace(0, len(left), 4 * workers + 1).astype(np.int64)
            slices = [(left[a:b], right[a:b]) for a, b in pairwise(bounds.tolist())]
            return np.concatenate(list(forked_map(_jaccard_slice, slices, (self, rights), workers)))
        left_sizes, right_sizes = self.sizes[left], rights.sizes[right]
        common = np.zeros(len(left), dtype=np.int64)
        # Look the smaller set up in the larger one.
        swap = left_sizes > right_sizes
        for chosen, queries, targets, query, target in (
            (np.flatnonzero(~swap), self, rights, left, right),
            (np.flatnonzero(swap), rights, self, right, left),
        ):
            if chosen.size:
                common[chosen] = _common_counts(queries, targets, query[chosen], target[chosen])
        union = left_sizes + right_sizes - common
        result: FloatArray = np.divide(
            common, union, out=np.ones(len(left), dtype=np.float64), where=union > 0
        )
        return result


def _common_counts(queries: ShingleSets, targets: ShingleSets, query: IntArray, target: IntArray) -> IntArray:
    """|query row ∩ target row| of each pair, the pairs ordered by target row so that each
    chunk of lookups reads one stretch of the targets' keys."""
    common = np.zeros(len(query), dtype=np.int64)
    order = np.argsort(target, kind="stable")
    lengths = queries.sizes[query[order]]
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    low = 0
    while low < len(order):
        high = int(np.searchsorted(bounds, bounds[low] + QUERY_CHUNK, side="right")) - 1
        high = max(high, low + 1)
        _count_common(queries, targets, order[low:high], query, target, lengths[low:high], common)
        low = high
    return common


def _count_common(
    queries: ShingleSets,
    targets: ShingleSets,
    chosen: IntArray,
    query: IntArray,
    target: IntArray,
    lengths: IntArray,
    common: IntArray,
) -> None:
    """Add the intersection sizes of pairs ``chosen`` (sorted by target row) to ``common``."""
    total = int(lengths.sum())
    if not total:
        return
    rows = target[chosen]
    first, last = int(rows[0]), int(rows[-1])
    # The targets' keys tagged with their row (sorted: rows ascend, keys ascend within one).
    span = slice(int(targets.offsets[first]), int(targets.offsets[last + 1]))
    counts = np.diff(targets.offsets[first : last + 2])
    owner = np.repeat(np.arange(first, last + 1, dtype=np.uint64), counts)
    tagged = (owner << _S32) | targets.keys[span].astype(np.uint64)
    # Each pair's query keys, tagged with its target's row.
    starts = queries.offsets[query[chosen]]
    pair_of = np.repeat(np.arange(len(chosen)), lengths)
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    position = np.arange(total) + shift
    probes = (rows[pair_of].astype(np.uint64) << _S32) | queries.keys[position].astype(np.uint64)
    found = np.searchsorted(tagged, probes)
    hit = tagged[np.minimum(found, len(tagged) - 1)] == probes if len(tagged) else np.zeros(total, bool)
    common[chosen] += np.bincount(pair_of[hit], minlength=len(chosen))


def _shingle_rows(bounds: tuple[int, int]) -> tuple[IntArray, npt.NDArray[np.uint32]]:
    """Sizes and keys of rows low .. high - 1 (in a worker: the source is the forked state)."""
    text_of, normalizer = _STATE
    low, high = bounds
    texts: Sequence[str] = [text_of(row) for row in range(low, high)]
    shingles = shingles_of(texts, normalizer)
    packed = (shingles.documents.astype(np.uint64) << _S32) | compact_keys(shingles.hashes).astype(np.uint64)
    distinct = np.ones(len(packed), dtype=bool)
    distinct[1:] = packed[1:] != packed[:-1]
    packed = packed[distinct]
    sizes = np.bincount((packed >> _S32).astype(np.int64), minlength=len(texts))
    return sizes, (packed & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def _jaccard_slice(pairs: tuple[IntArray, IntArray]) -> FloatArray:
    lefts, rights = _STATE
    result: FloatArray = lefts.jaccard(*pairs, other=rights)
    return result


#: prctl's option that sends a signal to this process when its parent ends.
_PR_SET_PDEATHSIG = 1
#: What forked workers read (set before the fork, so it is inherited, never pickled).
_STATE: Any = None
_STATE_LOCK = threading.RLock()


def forked_state() -> Any:
    """The state :func:`forked_map` handed to this worker."""
    return _STATE


def die_with_parent(parent: int) -> None:
    """In a forked worker: end it when the process that forked it ends (Linux's
    PR_SET_PDEATHSIG). A parent killed outright (SIGKILL, the out-of-memory killer) cannot
    stop its pool, and its workers would wait on their result pipes forever, each holding the
    memory it shared with the dead parent."""
    if sys.platform.startswith("linux"):
        with suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent ended before the line above took effect
        os._exit(1)


def forked_map(
    function: Callable[[Any], Any], items: Iterable[Any], state: Any, workers: int
) -> Iterator[Any]:
    """``map(function, items)`` in order, over ``workers`` forked processes that inherit
    ``state`` (read by ``function`` through the module's ``_STATE``); in this process when
    ``workers`` <= 1 or fork is not available. One map at a time per process (a lock), so
    threads never hand each other's state to a worker."""
    global _STATE
    with _STATE_LOCK:
        previous, _STATE = _STATE, state
        try:
            if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
                yield from map(function, items)
                return
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(workers, context, die_with_parent, (os.getpid(),)) as pool:
                yield from pool.map(function, items)
        finally:
            _STATE = previous

"""Exact shingle Jaccard for many pairs among many documents, each document shingled once.

The LSH stage leaves a band of candidates whose sketch estimate is too close to the threshold
to decide; their texts decide. Checking them pair by pair re-shingles a document once per pair
(or per chunk of pairs) it is in, and a sparse-matrix product costs far more per pair. Here the
documents of those pairs are shingled once each by the one shingler
(:func:`~neardup.similarity.shingles.shingles_of`) into one CSR of their compact 32-bit keys
(:func:`~neardup.similarity.shingles.compact_keys`: half the memory of the 40-bit keys, the
order within a document kept), and the intersections of a chunk of pairs are found by
merging sorted rows: each side's sets gathered into a 0/1 sparse matrix, multiplied
elementwise by scipy (a merge of two sorted rows in C, where binary searches of one set's
keys among the other's cost a cache miss a key; docs/candidates.md has the figures).
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
from pathlib import Path
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
#: Pairs intersected at a time: their sets, gathered into two small matrices, stay within the
#: processor's caches.
PAIR_CHUNK = 1 << 11
#: Columns of a set matrix: every 32-bit key.
_KEY_COLUMNS = 1 << 32
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
        parts = [part for _, part in _shingled_chunks(count, text_of, normalizer, workers)]
        sizes = np.concatenate([part[0] for part in parts]) if parts else np.zeros(0, dtype=np.int64)
        offsets = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        keys = np.concatenate([part[1] for part in parts]) if parts else np.zeros(0, dtype=np.uint32)
        return cls(offsets, keys)

    @classmethod
    def written(
        cls,
        path: Path,
        count: int,
        text_of: Callable[[int], str],
        normalizer: Normalizer | None = None,
        workers: int = 1,
    ) -> ShingleSets:
        """:meth:`of`, the keys written to ``path`` a chunk at a time as they come and mapped
        back read-only: memory holds the offsets, and the keys are the page cache's (for more
        texts than a run's budget holds)."""
        offsets = np.zeros(count + 1, dtype=np.int64)
        with open(path, "wb") as out:
            for (low, high), (sizes, keys) in _shingled_chunks(count, text_of, normalizer, workers):
                offsets[low + 1 : high + 1] = sizes
                out.write(keys.tobytes())
        np.cumsum(offsets, out=offsets)
        if not offsets[-1]:
            return cls(offsets, np.zeros(0, dtype=np.uint32))
        return cls(offsets, np.memmap(path, dtype=np.uint32, mode="r", shape=(int(offsets[-1]),)))

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
        common = _common_counts(self, rights, left, right)
        union = left_sizes + right_sizes - common
        result: FloatArray = np.divide(
            common, union, out=np.ones(len(left), dtype=np.float64), where=union > 0
        )
        return result


def _common_counts(queries: ShingleSets, targets: ShingleSets, query: IntArray, target: IntArray) -> IntArray:
    """|query row ∩ target row| of each pair, :data:`PAIR_CHUNK` pairs at a time, the pairs
    ordered by target row so that each chunk reads one stretch of the targets' keys."""
    from scipy import sparse  # loaded on use: `neardup --help` must stay fast

    common = np.zeros(len(query), dtype=np.int64)
    order = np.argsort(target, kind="stable")
    for low in range(0, len(order), PAIR_CHUNK):
        chosen = order[low : low + PAIR_CHUNK]
        left = _rows_matrix(sparse, queries, query[chosen])
        right = _rows_matrix(sparse, targets, target[chosen])
        common[chosen] = np.diff(left.multiply(right).indptr)
    return common


def _rows_matrix(sparse: Any, sets: ShingleSets, rows: IntArray) -> Any:
    """The sets of ``rows`` as the rows of a 0/1 CSR matrix whose columns are the keys
    (sorted within each row, so that scipy multiplies two such matrices by merging rows)."""
    lengths = sets.sizes[rows]
    ends = np.cumsum(lengths)
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = ends
    total = int(indptr[-1])
    position = np.arange(total) + np.repeat(sets.offsets[rows] - (ends - lengths), lengths)
    keys = sets.keys[position].astype(np.int64)
    matrix = sparse.csr_matrix((np.ones(total, dtype=np.int8), keys, indptr), shape=(len(rows), _KEY_COLUMNS))
    matrix.has_sorted_indices = True
    return matrix


def _shingled_chunks(
    count: int, text_of: Callable[[int], str], normalizer: Normalizer | None, workers: int
) -> Iterator[tuple[tuple[int, int], tuple[IntArray, npt.NDArray[np.uint32]]]]:
    """Each chunk of :data:`DOCUMENT_CHUNK` rows, ``(low, high)``, with its sizes and keys
    (:func:`_shingle_rows`), in order, over ``workers`` forked processes."""
    chunks = [(low, min(count, low + DOCUMENT_CHUNK)) for low in range(0, count, DOCUMENT_CHUNK)]
    workers = workers if len(chunks) > 1 else 1  # one chunk is not worth a fork
    yield from zip(chunks, forked_map(_shingle_rows, chunks, (text_of, normalizer), workers), strict=True)


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

"""The stages of the default (LSH) search of the batch pipeline: sketch the records as they
stream in (:class:`Sketcher`, keeping the texts, compressed past a size), pair the records that
share a band (:func:`band_candidates`), confirm each candidate by its sketch estimate or, near
the threshold, the exact shingle Jaccard of its two texts (:func:`confirm`), and compute the
Simhash distances of the kept pairs only (:func:`pair_distances`).

Why lazy fingerprints: the LSH finds candidates from shingles, so the Simhash of a record is
needed only for the ``distance`` of the pairs it is in; on news hidden among 10^5-10^6 other
documents that is a few percent of the records, and fingerprinting (word segmentation,
weighting) was half the run. The texts are kept for the exact check, compressed past a size
(:mod:`~neardup.dedup.text_store`).
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ..arrays import unique_inverse
from ..distance import hamming_many
from ..fingerprint.fingerprinter import Fingerprinter
from ..io.record import Record
from ..similarity.shingles import shingles_of
from ..similarity.sketches import CHECK_MARGIN
from ..similarity.verify import Explanation, shared_features
from ..text.normalize import Normalizer
from . import shingle_sets
from .batch import Pairs
from .candidates import CandidateSearch, CandidateSettings, sketch_long, split_short
from .clusters import components
from .key_buckets import as_pairs
from .pair_tiles import PairTiles
from .shingle_sets import ShingleSets, die_with_parent, forked_map
from .text_store import PackedTexts, TextStore, pack_texts
from .workspace import Workspace, give_back_freed_memory

IntArray = npt.NDArray[np.int64]

#: Candidates checked on the sketch at a time, and confirmed on their texts at a time.
SKETCH_CHUNK = 1 << 20
TEXT_CHUNK = 1 << 16
#: Pairs whose distances are taken at a time.
PAIR_DISTANCE_CHUNK = 1 << 22
#: Texts whose shingle sets an exact check holds in memory at once (~1-2 GB of news); past
#: it they are written to a file and mapped.
EXACT_DOCUMENTS = 1 << 19
#: Pairs near the threshold intersected at a time once they spilled (one pool of workers
#: each): the pages of mapped shingle sets a worker touches stay a block's.
EXACT_BLOCK = 1 << 19


def default_workers() -> int:
    """Processes that sketch batches: the cores this process may use, at most 4 (the reader
    feeds about that many), 1 where fork is not available."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))


def _chunks(pairs: IntArray, size: int) -> list[IntArray]:
    return [pairs[low : low + size] for low in range(0, len(pairs), size)]


class Sketched(NamedTuple):
    """What one batch of texts contributes to the search (chunk-local document numbers)."""

    documents: int
    empty: int
    short_hashes: npt.NDArray[np.uint64]
    short_documents: IntArray
    long: IntArray
    keys: npt.NDArray[np.uint32]
    checks: npt.NDArray[np.uint8] | None
    packed: PackedTexts | None


def sketch_texts(
    texts: Sequence[str], normalizer: Normalizer, settings: CandidateSettings, pack: bool = False
) -> Sketched:
    """Shingles, band keys and check bins of one batch, and with ``pack`` the batch's texts
    compressed for the store: pure, so a worker process may run it."""
    shingles = shingles_of(texts, normalizer)
    short_hashes, short_documents, long = split_short(shingles, settings)
    keys, checks = sketch_long(shingles, long, settings)
    empty = int(np.count_nonzero(shingles.sizes == 0))
    packed = pack_texts(texts) if pack else None
    return Sketched(len(texts), empty, short_hashes, short_documents, long, keys, checks, packed)


#: The worker processes' normalizer and settings, inherited through fork (never pickled).
_WORKER: tuple[Normalizer, CandidateSettings] | None = None


def _start_worker(normalizer: Normalizer, settings: CandidateSettings, parent: int) -> None:
    global _WORKER
    die_with_parent(parent)
    _WORKER = (normalizer, settings)


def _sketch_in_worker(texts: list[str], pack: bool) -> Sketched:
    assert _WORKER is not None
    return sketch_texts(texts, *_WORKER, pack=pack)


def _similarities(keys: IntArray) -> npt.NDArray[np.float64]:
    """``CandidateSearch.similarities`` of pair keys in a forked worker (the search is its
    inherited state)."""
    search: CandidateSearch = shingle_sets.forked_state()
    return search.similarities(as_pairs(keys))


@dataclass
class Sketches:
    """What the LSH search keeps of every record once the input is read: band keys and check
    bins (:class:`CandidateSearch`), the texts and titles the check and the distances read,
    and how many texts had no shingles. Plain data: the stages below are functions of it."""

    search: CandidateSearch
    texts: TextStore
    titles: list[str | None]
    empty: int
    workers: int


class Sketcher:
    """Sketches records as :func:`~neardup.dedup.pipeline.collect` reads them; :meth:`finish`
    gives the :class:`Sketches`.

    From the second batch on, batches are sketched by ``workers`` processes (forked, so the
    normalizer is shared, not pickled) while the reader goes on; results are taken in input
    order, so the outcome is the same as one process's."""

    def __init__(
        self,
        settings: CandidateSettings,
        normalizer: Normalizer,
        workers: int | None = None,
        workspace: Workspace | None = None,
    ) -> None:
        workers = default_workers() if workers is None else workers
        search, texts = CandidateSearch(settings, workspace), TextStore(workspace=workspace)
        self.sketches = Sketches(search, texts, [], 0, workers)
        self.normalizer = normalizer
        self._pool: ProcessPoolExecutor | None = None
        self._pending: deque[Future[Sketched]] = deque()
        self._batches = 0
        self._added = 0

    def add(self, group: Sequence[Record]) -> None:
        """Shingle and sketch one batch; keep its texts (plain, or packed where it is
        sketched: batches are taken in order) and titles for the checks."""
        sketches = self.sketches
        texts = [record.text for record in group]
        pack = sketches.texts.packs_next(self._added)
        if not pack:
            sketches.texts.extend(texts)
        self._added += len(texts)
        sketches.titles.extend(record.title for record in group)
        self._batches += 1
        settings = sketches.search.settings
        if self._batches >= 2 and sketches.workers > 1 and self._pool is None:
            context = multiprocessing.get_context("fork")
            initargs = (self.normalizer, settings, os.getpid())
            self._pool = ProcessPoolExecutor(sketches.workers, context, _start_worker, initargs)
        if self._pool is None:
            self._take(sketch_texts(texts, self.normalizer, settings, pack))
            return
        self._pending.append(self._pool.submit(_sketch_in_worker, texts, pack))
        while len(self._pending) > 2 * sketches.workers:
            self._take(self._pending.popleft().result())

    def _take(self, sketched: Sketched) -> None:
        sketches = self.sketches
        offset = sketches.search.count
        if sketched.packed is not None:
            sketches.texts.extend_packed(sketched.packed)
        sketches.empty += sketched.empty
        short = sketched.short_documents + offset
        sketches.search.add_short(sketched.short_hashes, short, sketched.documents)
        if sketched.long.size:
            sketches.search.add_sketches(sketched.long + offset, sketched.keys, sketched.checks)

    def finish(self) -> Sketches:
        """Take every batch still being sketched, stop the workers, and give the sketches."""
        try:
            while self._pending:
                self._take(self._pending.popleft().result())
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel_futures=True)
                self._pool = None
        give_back_freed_memory()
        return self.sketches

    def close(self) -> None:
        """Stop the workers without waiting for their batches (after an error)."""
        self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def band_candidates(sketches: Sketches, done: Callable[[int], object] | None = None) -> PairTiles:
    """The candidate pairs: the records sharing a band key (or, short texts, enough
    shingles), by tile. Once: the band keys are freed after. ``done(1)`` after the short
    texts and after each band."""
    found = sketches.search.pair_tiles(done, sketches.workers)
    sketches.search.drop_band_keys()
    give_back_freed_memory()
    return found


def confirm(
    sketches: Sketches,
    candidates: PairTiles,
    mode: str,
    normalizer: Normalizer,
    done: Callable[[int], object] | None = None,
) -> IntArray:
    """The candidates kept, (m, 2), sorted. ``jaccard``: those whose sketch estimate lies
    more than :data:`CHECK_MARGIN` from the threshold are decided by it, the rest by the exact
    shingle Jaccard of their texts (as ``normalizer`` sees them); ``sketch``: the estimate
    decides alone (as an index without texts decides); ``none``: every candidate is kept.

    The estimates go a row of tiles at a time (in forked workers when there are several, one
    pool a row), so memory stays bounded however many candidates there are; the pairs they
    leave to the texts are gathered over every row (:class:`_NearPairs`) and checked at the
    end, so that each text in them is shingled once for the whole run (a row at a time met a
    text again in every row that pairs it). ``done(n)`` as ``n`` candidates are decided."""
    kept: list[IntArray] = []  # pair keys (8 bytes a pair, against 16 as rows of pairs)
    sketches.search.prepare()  # before the workers fork
    near = _NearPairs(sketches.search.count, sketches.search.workspace, candidates.spilled)
    for row in candidates.rows():
        checked = sum(len(tile) for tile in row)
        if mode == "none":
            kept.extend(row)
            unsure = np.empty(0, dtype=np.int64)
        else:
            sure, unsure = _estimate_row(sketches, row, mode)
            kept.append(sure)
        row.clear()
        near.add(unsure)
        give_back_freed_memory()  # before the next row's workers fork
        if done is not None:
            done(checked - len(unsure))
    if near.count:
        kept.extend(_confirmed_near(sketches, near, normalizer, done))
    keys = np.concatenate(kept) if kept else np.empty(0, dtype=np.int64)
    kept.clear()
    keys.sort(kind="stable")  # by (i, j), the pair key being i·2^32 + j; sorted runs: a merge
    return as_pairs(keys)


def _estimate_row(sketches: Sketches, tiles: list[IntArray], mode: str) -> tuple[IntArray, IntArray]:
    """The pair keys of a row of tiles that the sketch estimate accepts, and those it leaves
    to the texts (none under ``sketch``). The row's tiles go to the forked workers
    together, in chunks: one pool a row (a tile is rarely more than one chunk, and estimated
    alone it would run in this process while the workers wait)."""
    margin = CHECK_MARGIN if mode == "jaccard" else 0.0
    search = sketches.search
    threshold = search.settings.threshold
    sure: list[IntArray] = []
    unsure: list[IntArray] = []
    chunks = [chunk for tile in tiles for chunk in _chunks(tile, SKETCH_CHUNK)]
    workers = sketches.workers if len(chunks) > 1 else 1
    for chunk, similarity in zip(chunks, forked_map(_similarities, chunks, search, workers), strict=True):
        sure.append(chunk[similarity >= threshold + margin])
        unsure.append(chunk[(similarity >= threshold - margin) & (similarity < threshold + margin)])
    none = np.empty(0, dtype=np.int64)
    return (np.concatenate(sure) if sure else none), (np.concatenate(unsure) if unsure else none)


class _NearPairs:
    """The pair keys the estimates leave to the texts, in the order found, and which records
    they involve: held, or appended to a file of the workspace when the candidates spilled
    (there can be as many as a few per record)."""

    def __init__(self, records: int, workspace: Workspace, spill: bool) -> None:
        self.involved = np.zeros(records, dtype=bool)
        self.count = 0
        self._held: list[IntArray] = []
        self._file = workspace.file("near-pairs") if spill else None

    @property
    def spilled(self) -> bool:
        return self._file is not None

    def add(self, keys: IntArray) -> None:
        if not keys.size:
            return
        pairs = as_pairs(keys)
        self.involved[pairs[:, 0]] = True
        self.involved[pairs[:, 1]] = True
        self.count += len(keys)
        if self._file is None:
            self._held.append(keys)
            return
        with open(self._file, "ab") as out:
            out.write(keys.tobytes())

    def blocks(self, size: int) -> Iterator[IntArray]:
        """The keys, at most ``size`` at a time."""
        if self._file is None:
            for keys in self._held:
                yield from _chunks(keys, size)
            return
        for low in range(0, self.count, size):
            yield np.fromfile(self._file, dtype=np.int64, count=size, offset=8 * low)


def _confirmed_near(
    sketches: Sketches, near: _NearPairs, normalizer: Normalizer, done: Callable[[int], object] | None
) -> Iterator[IntArray]:
    """The keys of the near pairs whose exact shingle Jaccard reaches the threshold. Their
    records are shingled once each: held in memory when the candidates fitted the budget and
    they are at most :data:`EXACT_DOCUMENTS`, else written to a file of the workspace and
    mapped back (:meth:`ShingleSets.written`: the page cache holds them, not the budget)."""
    threshold = sketches.search.settings.threshold
    documents = np.flatnonzero(near.involved)
    near.involved = np.zeros(0, dtype=bool)
    texts_of, workers = _texts_of(sketches.texts, documents), sketches.workers
    if not near.spilled and len(documents) <= EXACT_DOCUMENTS:
        sets = ShingleSets.of(len(documents), texts_of, normalizer, workers)
    else:
        path = sketches.search.workspace.file("shingle-sets")
        sets = ShingleSets.written(path, len(documents), texts_of, normalizer, workers)
    for keys in near.blocks(EXACT_BLOCK if near.spilled else max(1, near.count)):
        pairs = as_pairs(keys)
        rows = np.searchsorted(documents, pairs)
        yield keys[sets.jaccard(rows[:, 0], rows[:, 1], workers) >= threshold]
        if done is not None:
            done(len(keys))


def exact_jaccard(sketches: Sketches, pairs: IntArray, normalizer: Normalizer) -> npt.NDArray[np.float64]:
    """The exact shingle Jaccard of each pair (m, 2): the pairs in runs that involve at most
    :data:`EXACT_DOCUMENTS` texts, each text shingled once per run (:class:`ShingleSets`), so
    the sets held stay bounded however many pairs a large collection has near the threshold.
    Where they do not fit one run the pairs go by connected component (near-duplicates come
    in groups), so that a text is rarely shingled in two runs."""
    involved, inverse = unique_inverse(pairs)
    order = np.arange(len(pairs))
    if len(involved) > EXACT_DOCUMENTS:
        rows = inverse.reshape(-1, 2)
        group = components(len(involved), rows[:, 0], rows[:, 1])
        order = np.argsort(group[rows[:, 0]], kind="stable")
    result = np.empty(len(pairs), dtype=np.float64)
    texts, workers = sketches.texts, sketches.workers
    pending = [(0, len(pairs))]
    while pending:
        low, high = pending.pop()
        chosen = order[low:high]
        documents, local = unique_inverse(pairs[chosen])
        if len(documents) > EXACT_DOCUMENTS and high - low > 1:
            middle = (low + high) // 2
            pending += [(middle, high), (low, middle)]
            continue
        rows = local.reshape(-1, 2)
        sets = ShingleSets.of(len(documents), _texts_of(texts, documents), normalizer, workers)
        result[chosen] = sets.jaccard(rows[:, 0], rows[:, 1], workers)
    return result


def _fingerprints(members: npt.NDArray[np.generic]) -> npt.NDArray[np.uint64]:
    """The Simhash fingerprints of records ``members`` (in a worker: the sketches and the
    fingerprinter are the forked state)."""
    sketches, fingerprinter = shingle_sets.forked_state()
    chosen = members.tolist()
    texts, titles = sketches.texts, sketches.titles
    words = fingerprinter.fingerprint_many([texts[k] for k in chosen], [titles[k] for k in chosen])
    return np.asarray(words, dtype=np.uint64)


def _texts_of(texts: TextStore, documents: npt.NDArray[np.generic]) -> Callable[[int], str]:
    """The text of row ``r`` of ``documents`` (for :meth:`ShingleSets.of`)."""
    return lambda row: texts[int(documents[row])]


def explain_candidates(sketches: Sketches, pairs: Pairs, fingerprinter: Fingerprinter) -> list[Explanation]:
    """The evidence of each kept pair: the estimate the check read (sketch bins, or the exact
    sets of two short texts), the exact shingle Jaccard and the heaviest shared features."""
    found = np.stack([pairs.i, pairs.j], axis=1).astype(np.int64)
    sketches.search.prepare()
    estimate = sketches.search.similarities(found)
    exact = exact_jaccard(sketches, found, fingerprinter.normalizer)
    involved, inverse = unique_inverse(found)
    chosen = [sketches.texts[int(k)] for k in involved.tolist()]
    rows = inverse.reshape(-1, 2)
    shared = shared_features(fingerprinter, chosen, rows[:, 0].tolist(), rows[:, 1].tolist())
    return [
        Explanation(int(d), float(jac), None, None, words, estimate=float(est))
        for d, jac, est, words in zip(
            pairs.distance.tolist(), exact.tolist(), estimate.tolist(), shared, strict=True
        )
    ]


def pair_distances(
    sketches: Sketches, fingerprinter: Fingerprinter, i: IntArray, j: IntArray
) -> npt.NDArray[np.uint8]:
    """Hamming distances of the pairs' Simhash fingerprints, fingerprinting only their records
    (in chunks, in forked workers when there are several). The records are found by a mask
    and the distances taken :data:`PAIR_DISTANCE_CHUNK` pairs at a time, so memory holds the
    pairs and their records' fingerprints, never a copy of every pair."""
    result = np.zeros(len(i), dtype=np.uint8)
    if not len(i):
        return result
    count = int(max(i.max(), j.max())) + 1
    in_pairs = np.zeros(count, dtype=bool)
    in_pairs[i] = in_pairs[j] = True
    involved = np.flatnonzero(in_pairs)
    del in_pairs
    chunks = [involved[low : low + TEXT_CHUNK] for low in range(0, len(involved), TEXT_CHUNK)]
    workers = sketches.workers if len(chunks) > 1 else 1
    words = np.concatenate(list(forked_map(_fingerprints, chunks, (sketches, fingerprinter), workers)))
    row = np.empty(count, dtype=np.int64)
    row[involved] = np.arange(len(involved))
    for low in range(0, len(i), PAIR_DISTANCE_CHUNK):
        left, right = row[i[low : low + PAIR_DISTANCE_CHUNK]], row[j[low : low + PAIR_DISTANCE_CHUNK]]
        result[low : low + len(left)] = hamming_many(words[left], words[right], fingerprinter.bits)
    return result

"""Exact prefix filtering of shingle sets (Bayardo et al. 2007), with the positional filter of
PPJoin (Xiao et al. 2008): the search of short texts, whose sketches fill too few bins for
bands to mean anything.

With keys ordered by document frequency, two sets of Jaccard >= t share a key among the first
|A| − ⌈t·|A|⌉ + 1 of each, and their first common key comes early enough in both to leave room
for the overlap t needs. The search is two steps, :func:`prefix_entries` (per document) and
:func:`shared_prefix_pairs` (per key), so that it can run in partitions of documents and of
keys when the sets do not fit in memory (:mod:`~neardup.dedup.short_texts`) and in Spark
(:mod:`neardup.spark.keyed`) with the same answer.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..arrays import unique_inverse
from .key_buckets import keyed_pairs

IntArray = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]


def prefix_pairs(
    hashes: UInt64Array,
    documents: IntArray,
    threshold: float,
    max_bucket: int = 1 << 62,
    hub: int = 1,
) -> IntArray:
    """Pair keys of every two documents whose shingle Jaccard may reach ``threshold``
    (exact prefix filtering; documents are global numbers, ascending, each document's
    ``hashes`` together). A prefix token held by more than ``max_bucket`` documents pairs
    each with the first ``hub`` of them only, as band keys do: thousands of copies of one
    short text (a stock reply, a template) would otherwise give millions of pairs; the copies
    still join one cluster through the hub. The steps are :func:`prefix_entries` and
    :func:`shared_prefix_pairs`, which the out-of-memory search
    (:class:`~neardup.dedup.short_texts.ShortTexts`) runs in partitions."""
    if hashes.size == 0:
        return np.empty(0, dtype=np.int64)
    _, token = unique_inverse(hashes)
    frequency = np.bincount(token)[token]
    prefix = prefix_entries(hashes, documents, frequency, threshold)
    return shared_prefix_pairs(*prefix, threshold, max_bucket, hub)


def prefix_entries(
    keys: UInt64Array, documents: IntArray, frequency: IntArray, threshold: float
) -> tuple[UInt64Array, IntArray, IntArray, IntArray]:
    """Each document's prefix: its keys ordered by (document frequency, key), the first
    :func:`prefix_lengths` of them, as (key, document, the document's size, the key's rank),
    in document order. ``keys``, ``documents`` and ``frequency`` hold every key of each
    document they name."""
    order = np.lexsort((keys, frequency, documents))
    key, owner = keys[order], documents[order]
    heads = np.flatnonzero(np.concatenate([[True], owner[1:] != owner[:-1]]))
    sizes = np.diff(np.append(heads, owner.size))
    rank = np.arange(owner.size) - np.repeat(heads, sizes)
    keep = rank < np.repeat(prefix_lengths(sizes, threshold), sizes)
    return key[keep], owner[keep], np.repeat(sizes, sizes)[keep], rank[keep]


def shared_prefix_pairs(
    keys: UInt64Array,
    documents: IntArray,
    sizes: IntArray,
    ranks: IntArray,
    threshold: float,
    max_bucket: int,
    hub: int,
) -> IntArray:
    """Pair keys of the documents whose prefixes share a key and whose sizes and positions
    allow ``threshold`` (:func:`sizes_fit`, :func:`positions_fit`), by :func:`keyed_pairs`'
    bucket rule. Entries in document order (a big bucket's hubs are its first documents);
    every entry of each key they hold."""
    if keys.size == 0:
        return np.empty(0, dtype=np.int64)
    _, token = unique_inverse(keys)

    def admit(left: IntArray, right: IntArray) -> npt.NDArray[np.bool_]:
        size_a, size_b = sizes[left], sizes[right]
        return sizes_fit(size_a, size_b, threshold) & positions_fit(
            size_a, ranks[left], size_b, ranks[right], threshold
        )

    return keyed_pairs(token.astype(np.uint64), documents, max_bucket, hub, admit)


def prefix_lengths(sizes: IntArray, threshold: float) -> IntArray:
    """How many of each document's ``sizes`` tokens prefix filtering keeps: one definition
    for the local search and the Spark job, in the same float64 arithmetic."""
    lengths: IntArray = sizes - np.ceil(threshold * sizes - 1e-9).astype(np.int64) + 1
    return lengths


def positions_fit(
    size_a: IntArray, rank_a: IntArray, size_b: IntArray, rank_b: IntArray, threshold: float
) -> npt.NDArray[np.bool_]:
    """Whether a pair that shares the token at 0-based ``rank_a`` of one document's ordered
    tokens and ``rank_b`` of the other's may still reach ``threshold`` (PPJoin's positional
    filter, Xiao et al. 2008): Jaccard >= t needs an overlap of ⌈t·(|a|+|b|)/(1+t)⌉, and
    from their first common token on at most 1 + min(|a|−rank_a−1, |b|−rank_b−1) more tokens
    can be shared. The first common token gives the largest bound of all the tokens a pair
    shares, so keeping a pair if any of them passes drops only pairs below ``threshold``."""
    needed = np.ceil(threshold * (size_a + size_b) / (1.0 + threshold) - 1e-9)
    fits: npt.NDArray[np.bool_] = np.minimum(size_a - rank_a, size_b - rank_b) >= needed
    return fits


def sizes_fit(low: IntArray, high: IntArray, threshold: float) -> npt.NDArray[np.bool_]:
    """Whether two documents' sizes allow a Jaccard of ``threshold`` (the prefix search's
    last filter)."""
    fits: npt.NDArray[np.bool_] = np.minimum(low, high) >= threshold * np.maximum(low, high) - 1e-9
    return fits

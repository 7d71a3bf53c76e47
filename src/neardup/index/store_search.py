"""The index's side of a search in a store: the store finds records by posting key, the index
decides which of them are near.

A store is a key → value container (:mod:`neardup.storage.base`): it is handed each record's
posting keys and answers which records share one with a query. What the keys are (the block
keys of a Simhash scheme, the band keys of a sketch) and which candidates count (those within
``max_distance`` Hamming bits) are the index's, here: :func:`record_shape` tells a store the
sizes of a scheme's records, :func:`search` asks the store batch by batch and keeps the
candidates :func:`verified` finds within the distance, and :func:`bucket_stats` names a
store's posting columns after the scheme's tables.
"""

from __future__ import annotations

import numpy as np

from ..blocks import BucketStats, TableStats
from ..distance import row_distances
from ..similarity.bands import Scheme
from ..storage.base import Candidates, PostingCounts, RecordShape, Storage, UInt64Array, no_candidates


def record_shape(scheme: Scheme) -> RecordShape:
    """What a store must know of the records of an index of ``scheme``."""
    return RecordShape(
        words=scheme.words,
        fingerprint_words=scheme.fingerprint_words,
        columns=scheme.table_count,
        posting_bits=max(table.bit_count for table in scheme.tables),
        postings_of=scheme.keys,
    )


def search(
    storage: Storage, scheme: Scheme, words: UInt64Array, max_distance: int, *, records: bool = False
) -> Candidates:
    """Every stored record within ``max_distance`` of each query row of ``words`` (each
    (row, key) once), found through the store's postings :attr:`Storage.query_batch` queries
    at a time. ``records``: with the stored record of every key found (their signatures
    verify the matches, their cluster ids place a new record), read with the postings where
    the store can (one statement fewer per batch), else by :meth:`Storage.get_many`."""
    width = scheme.fingerprint_words
    postings = scheme.keys(words)
    with_postings = records and storage.reads_records
    parts, read = [], {}
    for start in range(0, words.shape[0], storage.query_batch):
        found = storage.candidates(postings[start : start + storage.query_batch], records=with_postings)
        read.update(found.records)
        parts.append(verified(found, words, max_distance, start, width))
    if not parts:
        return no_candidates(width)
    result = Candidates(
        np.concatenate([part.rows for part in parts]),
        [key for part in parts for key in part.keys],
        np.concatenate([part.words[:, :width] for part in parts]),
        read,
    )
    if records and not with_postings:
        stored = storage.get_many(list(dict.fromkeys(result.keys)))
        result.records = {record.key: record for record in stored if record is not None}
    return result


def verified(
    found: Candidates, queries: UInt64Array, max_distance: int, offset: int = 0, width: int | None = None
) -> Candidates:
    """Keep candidates within ``max_distance`` of their query, once per (query, key);
    ``offset`` is added to the rows (queries handed to the store in slices). Distances are
    taken over the first ``width`` words (the fingerprint's; a band index stores keys after)."""
    if not found.keys:
        return Candidates(found.rows + offset, [], found.words)
    width = queries.shape[1] if width is None else width
    distance = row_distances(found.words[:, :width] ^ queries[found.rows + offset, :width])
    within = np.flatnonzero(distance <= max_distance)
    # The first position of each (row, key), in numpy: near-identical records by the
    # thousand put millions of (row, key) hits here, too many for a set of tuples.
    everything = within.size == len(found.keys)
    keys = found.keys if everything else [found.keys[position] for position in within.tolist()]
    number = {key: place for place, key in enumerate(dict.fromkeys(keys))}
    ids = np.fromiter(map(number.__getitem__, keys), dtype=np.int64, count=len(keys))
    pairs = found.rows[within].astype(np.int64) * max(len(number), 1) + ids
    firsts = np.sort(np.unique(pairs, return_index=True)[1])
    chosen = within[firsts]
    return Candidates(found.rows[chosen] + offset, [keys[i] for i in firsts.tolist()], found.words[chosen])


def bucket_stats(scheme: Scheme, counts: list[PostingCounts]) -> BucketStats:
    """A store's posting statistics as bucket statistics: column t is the scheme's table t."""
    stats = BucketStats(scheme=scheme.describe())
    for table, column in enumerate(counts):
        bits = scheme.tables[table].bit_count
        stats.tables.append(TableStats(table, bits, column.keys, column.largest, column.mean))
    return stats

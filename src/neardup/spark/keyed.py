"""Pairs of documents that share a key, distributed: the buckets of band keys, and the prefix
search of short documents with no document on the driver.

A bucket is paired as ``keyed_pairs`` pairs it (:func:`bucket_pairs`). For the short
documents, :func:`~neardup.dedup.prefix_search.prefix_pairs` (exact prefix filtering) orders each
document's tokens by their document frequency among all short documents (ties by hash
value), keeps the first ``size − ⌈t·size⌉ + 1``, pairs the documents that keep a common
token (a token kept by more than ``max_bucket`` documents pairs each with the first ``hub``
of them only) and drops pairs whose sizes are more than a factor ``t`` apart or whose first
common token comes too late to reach ``t``. The hub rule makes the candidates depend on the
whole collection, so the same steps run here, each as a Spark operation, and give the same
set:

1. one row per (document, token), with the document's size and prefix length (per task);
2. document frequencies by a grouped count (an aggregate: nothing per record reaches the
   driver);
3. the rows ranked within their document by (frequency, token as unsigned), and those past
   the prefix dropped;
4. the prefix tokens grouped like band keys and each group paired by :func:`bucket_pairs`
   (members in order key order, which is the local numbering's order), sizes and the
   positional bound (``positions_fit``) checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from pyspark import RDD
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ..dedup.candidates import CandidateSettings
from ..dedup.pipeline import DedupSettings
from ..dedup.prefix_search import positions_fit, prefix_lengths, sizes_fit

#: The LSH of ``neardup dedup``'s default settings.
LSH_SETTINGS = DedupSettings().lsh_settings()

#: One row per (document, token): the token is the shingle hash's bits as a signed long.
TOKEN_SCHEMA = "order long, token long, size int, prefix int"
#: Flipping the sign bit makes signed order the unsigned order ``prefix_pairs`` sorts by.
_SIGN_BIT = -(1 << 63)


def bucket_pairs(
    members: Iterable[int], settings: CandidateSettings = LSH_SETTINGS
) -> Iterator[tuple[int, int]]:
    """The pairs ``keyed_pairs`` makes of one bucket, each once: all of them, or, above
    ``max_bucket`` members, those of each of the first ``hub`` members (in input order)."""
    ordered = sorted(members)
    for place, head in enumerate(ordered[: pairing_heads(len(ordered), settings)]):
        for member in ordered[place + 1 :]:
            yield head, member


def pairing_heads(size: int, settings: CandidateSettings = LSH_SETTINGS) -> int:
    """How many of a bucket's first members (in input order) are paired with every later
    one: ``keyed_pairs``' pairs are exactly those with a member among them."""
    return size if size <= settings.max_bucket else min(size, settings.hub)


def bucket_pair_column(ordered: Column, settings: CandidateSettings = LSH_SETTINGS) -> Column:
    """:func:`bucket_pairs` as a Spark SQL expression over a sorted array of a bucket's
    members: an array of (a, b) structs, so buckets are paired in the JVM."""
    size = F.size(ordered)
    heads = F.when(size <= settings.max_bucket, size).otherwise(F.least(size, F.lit(settings.hub)))
    return F.flatten(
        F.transform(
            F.sequence(F.lit(0), heads - 1),
            lambda place: F.transform(
                F.slice(ordered, place + 2, size - place - 1),
                lambda member: F.struct(F.element_at(ordered, place + 1).alias("a"), member.alias("b")),
            ),
        )
    )


def prefix_length(size: int, threshold: float) -> int:
    """How many of a document's ``size`` tokens prefix filtering keeps (``prefix_lengths``)."""
    return int(prefix_lengths(np.array([size], dtype=np.int64), threshold)[0])


def size_fits(a: int, b: int, threshold: float) -> bool:
    """Whether two sizes allow a Jaccard of ``threshold`` (``sizes_fit``)."""
    return bool(sizes_fit(np.array([a]), np.array([b]), threshold)[0])


def token_rows(rows: Iterable[tuple[int, bytes]], threshold: float) -> Iterator[tuple[int, int, int, int]]:
    """(order, token, size, prefix length) for each shingle of (order, shingle hashes) rows."""
    for order, hashes in rows:
        tokens = np.frombuffer(hashes, dtype=np.uint64)
        size = int(tokens.size)
        prefix = prefix_length(size, threshold)
        for token in tokens.view(np.int64).tolist():
            yield order, token, size, prefix


def prefix_bucket_pairs(
    members: Iterable[tuple[int, tuple[int, int]]], settings: CandidateSettings = LSH_SETTINGS
) -> Iterator[tuple[int, int]]:
    """The pairs of the (order, (size, rank)) documents that keep one token, as
    ``prefix_pairs`` makes them: ``keyed_pairs``' rule, then the size and positional checks
    (``rank`` is the token's 1-based place in the document's order)."""
    places = dict(members)
    threshold = settings.threshold
    for a, b in bucket_pairs(places, settings):
        (size_a, rank_a), (size_b, rank_b) = places[a], places[b]
        if size_fits(size_a, size_b, threshold) and position_fits(
            size_a, rank_a - 1, size_b, rank_b - 1, threshold
        ):
            yield a, b


def position_fits(size_a: int, rank_a: int, size_b: int, rank_b: int, threshold: float) -> bool:
    """Whether a pair sharing a token at these 0-based ranks may reach ``threshold``
    (``positions_fit``)."""
    sizes = np.array([size_a, size_b], dtype=np.int64)
    ranks = np.array([rank_a, rank_b], dtype=np.int64)
    return bool(positions_fit(sizes[:1], ranks[:1], sizes[1:], ranks[1:], threshold)[0])


def prefix_candidates(
    spark: SparkSession, shorts: DataFrame, partitions: int, settings: CandidateSettings = LSH_SETTINGS
) -> RDD[tuple[int, int]]:
    """Candidate pairs (a, b), a < b, possibly repeated, of the (order, short) rows: the
    pairs ``prefix_pairs`` gives over the same documents, lazily."""
    threshold = settings.threshold

    def rows(partition: Iterable[Any]) -> Iterator[tuple[int, int, int, int]]:
        return token_rows(((int(row[0]), bytes(row[1])) for row in partition), threshold)

    tokens = spark.createDataFrame(shorts.rdd.mapPartitions(rows), TOKEN_SCHEMA, verifySchema=False)
    frequencies = tokens.groupBy("token").agg(F.count(F.lit(1)).alias("frequency"))
    unsigned = F.col("token").bitwiseXOR(F.lit(_SIGN_BIT))
    within = Window.partitionBy("order").orderBy(F.col("frequency"), unsigned)
    kept = (
        tokens.join(frequencies, "token")
        .withColumn("rank", F.row_number().over(within))
        .where(F.col("rank") <= F.col("prefix"))
    )
    keyed = kept.select("token", "order", "size", "rank").rdd.map(
        lambda row: (row[0], (row[1], (row[2], row[3])))
    )
    return keyed.groupByKey(partitions).flatMap(lambda item: prefix_bucket_pairs(item[1], settings))

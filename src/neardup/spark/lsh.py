"""The default search of the Spark job: ``neardup dedup``'s shingle LSH, distributed.

The same candidates and the same decisions as :func:`neardup.dedup.pipeline.dedup_documents`
with default settings, because every number comes from the same functions:

1. per document, in the fingerprint task (:func:`lsh_features`): ``shingles_of`` → the
   one-permutation sketch → its band keys and 512 check bins (``sketch_long``, as the batch
   search), and the shingles of short documents; each depends on the document alone (and
   the seed);
2. (band, key) → order key, grouped in the JVM (:func:`band_candidates`): the buckets of one
   member are dropped there, the others' members ordered by order key (the input order, as
   the local document numbers) and paired by the ``max_bucket``/``hub`` rule of
   ``keyed_pairs`` (:func:`~neardup.spark.keyed.bucket_pair_column`); a pair found by ``hits``
   bands is a candidate (a grouped count, as ``PairTiles`` counts them). No band key becomes a
   Python row: there are ``bands`` of them per document, and nearly all are alone;
3. the short documents (fewer than ``short_shingles / threshold`` shingles) are searched by
   :func:`~neardup.spark.keyed.prefix_candidates`, the steps of ``prefix_pairs`` as Spark
   operations: the same candidates, with no document on the driver;
4. candidates deduplicated; each is pre-filtered on the sketch (exact for two short
   documents, the b-bit estimate otherwise: :func:`pair_similarity`) with
   the batch check's margin, then confirmed by the exact Jaccard of :class:`ShingleSets` on
   the texts joined to the pair, as :func:`~neardup.dedup.lsh.confirm` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ..dedup.candidates import CandidateSettings, sketch_long
from ..dedup.shingle_sets import ShingleSets
from ..fingerprint.fingerprinter import Fingerprinter
from ..similarity.shingles import shingles_of
from ..similarity.sketches import CHECK_MARGIN, estimate_from_bins
from ..text.normalize import Normalizer
from .keyed import LSH_SETTINGS, bucket_pair_column, prefix_candidates
from .pairs import PAIR_SCHEMA

#: (band keys, check bins, short shingles) per document, each None when absent: the band keys
#: as ``band << 32 | key`` (one long names a bucket), the others raw bytes.
Features = tuple[list[int] | None, bytes | None, bytes | None]
#: Candidate pairs joined to both documents' sketch features: (a, b, w0a, w1a, w0b, w1b,
#: check a, check b, short a, short b).
SketchedPair = tuple[Any, ...]
#: Pairs verified per call of ``verify_texts`` in a task.
VERIFY_CHUNK = 4096
_WORD = (1 << 64) - 1


def lsh_features(
    texts: Sequence[str], normalizer: Normalizer, settings: CandidateSettings = LSH_SETTINGS
) -> list[Features]:
    """What ``CandidateSearch.add`` keeps of each text: the band keys (:func:`band_key_values`) and the first
    ``check_bins`` sketch bins at 8 bits of documents with >= ``short_shingles`` shingles,
    and the shingle hashes (uint64) of documents with fewer than ``short_shingles /
    threshold`` (some have both)."""
    shingles = shingles_of(texts, normalizer)
    sizes = shingles.sizes
    count = len(texts)
    starts = np.searchsorted(shingles.documents, np.arange(count + 1))
    short = (sizes > 0) & (sizes < settings.short_shingles / settings.threshold)
    shorts: list[bytes | None] = [
        shingles.hashes[starts[k] : starts[k + 1]].tobytes() if short[k] else None for k in range(count)
    ]
    bands: list[list[int] | None] = [None] * count
    checks: list[bytes | None] = [None] * count
    long = np.flatnonzero(sizes >= settings.short_shingles)
    if long.size:
        keys, check = sketch_long(shingles, long, settings)
        values = band_key_values(keys).tolist()
        for row, document in enumerate(long.tolist()):
            bands[document] = values[row]
            checks[document] = check[row].tobytes() if check is not None else None
    return list(zip(bands, checks, shorts, strict=True))


def band_key_values(keys: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
    """(documents, bands) longs ``band << 32 | key`` of (bands, documents) band keys: a bucket
    of the JVM's grouping is one long, and a list of them crosses to the JVM as ``array<long>``
    (the grouping then needs no Python row per key)."""
    bands = np.arange(keys.shape[0], dtype=np.int64) << 32
    values: npt.NDArray[np.int64] = keys.T.astype(np.int64) | bands
    return values


def pair_similarity(
    check_a: bytes | None,
    check_b: bytes | None,
    short_a: bytes | None,
    short_b: bytes | None,
) -> float:
    """``CandidateSearch.similarities`` of one pair: the exact Jaccard of two short
    documents, else the b-bit estimate of two sketched ones, else 0."""
    if short_a is not None and short_b is not None:
        a, b = np.frombuffer(short_a, dtype=np.uint64), np.frombuffer(short_b, dtype=np.uint64)
        common = int(np.intersect1d(a, b, assume_unique=True).size)
        union = a.size + b.size - common
        return float(np.float64(common) / np.float64(union)) if union > 0 else 1.0
    if check_a is None or check_b is None:
        return 0.0
    return float(estimate_from_bins(np.frombuffer(check_a, np.uint8), np.frombuffer(check_b, np.uint8)))


def check_threshold(exact: bool, settings: CandidateSettings = LSH_SETTINGS) -> float:
    """The sketch threshold of ``_lsh_checked``: with a margin when the texts decide."""
    return settings.threshold - CHECK_MARGIN if exact else settings.threshold


def sketch_checked(
    rows: Iterable[SketchedPair], exact: bool, settings: CandidateSettings = LSH_SETTINGS
) -> Iterator[tuple[int, int, int, bool]]:
    """(a, b, distance, sure) of the candidates that pass the sketch check; ``sure`` when the
    sketch decides alone (always without ``exact``), else the texts decide (as
    :func:`~neardup.dedup.lsh.confirm`), so only those pairs need their texts."""
    threshold = check_threshold(exact, settings)
    for a, b, w0a, w1a, w0b, w1b, check_a, check_b, short_a, short_b in rows:
        similarity = pair_similarity(check_a, check_b, short_a, short_b)
        if similarity < threshold:
            continue
        distance = int(((w0a ^ w0b) & _WORD).bit_count() + ((w1a ^ w1b) & _WORD).bit_count())
        yield a, b, distance, not exact or similarity >= settings.threshold + CHECK_MARGIN


def verified_pairs(
    rows: Iterable[tuple[int, int, int, str, str]], fingerprinter: Callable[[], Fingerprinter]
) -> Iterator[tuple[int, int, int, int]]:
    """(a, b, distance, 0) of the (a, b, distance, text a, text b) pairs whose exact shingle
    Jaccard reaches the threshold, ``VERIFY_CHUNK`` pairs at a time."""
    pending: list[tuple[int, int, int, str, str]] = []
    for row in rows:
        pending.append(row)
        if len(pending) >= VERIFY_CHUNK:
            yield from _verified(pending, fingerprinter())
            pending = []
    if pending:
        yield from _verified(pending, fingerprinter())


def _verified(
    pending: list[tuple[int, int, int, str, str]], fingerprinter: Fingerprinter
) -> Iterator[tuple[int, int, int, int]]:
    """The pairs whose exact shingle Jaccard reaches the threshold, texts seen by the
    fingerprinter's normalizer (:class:`ShingleSets`, as :func:`~neardup.dedup.lsh.confirm`)."""
    texts = [text for *_, text_a, text_b in pending for text in (text_a, text_b)]
    left = np.arange(0, len(texts), 2)
    sets = ShingleSets.of(len(texts), texts.__getitem__, fingerprinter.normalizer)
    similarity = sets.jaccard(left, left + 1)
    for row, value in zip(pending, similarity.tolist(), strict=True):
        if value >= LSH_SETTINGS.threshold:
            yield row[0], row[1], row[2], 0


# -- the Spark plumbing -------------------------------------------------------------------------


def band_candidates(records: DataFrame, settings: CandidateSettings = LSH_SETTINGS) -> DataFrame:
    """(a, b) pairs found by at least ``hits`` bands, all in the JVM: one (key, order) row per
    band key, buckets grouped with their sizes, the buckets of one member (nearly all) dropped
    before their members are listed, the others paired by :func:`bucket_pair_column` (each
    pair once per band, as ``keyed_pairs``) and the pairs counted across bands."""
    keyed = records.where(F.col("bands").isNotNull()).select("order", F.explode("bands").alias("key"))
    # A window counts each bucket after one shuffle and sort; an aggregate's map-side partial
    # would sort every key row once more for nothing (nearly every key is alone).
    sized = keyed.withColumn("size", F.count(F.lit(1)).over(Window.partitionBy("key")))
    buckets = sized.where(F.col("size") >= 2).groupBy("key").agg(F.collect_list("order").alias("members"))
    paired = buckets.select(F.inline(bucket_pair_column(F.array_sort("members"), settings)))
    found = paired.groupBy("a", "b").agg(F.count(F.lit(1)).alias("bands"))
    return found.where(F.col("bands") >= settings.hits).select("a", "b")


def lsh_candidates(spark: SparkSession, records: DataFrame, partitions: int) -> tuple[DataFrame, int]:
    """The distinct candidate pairs (a, b) of ``records`` (FINGERPRINT_SCHEMA rows with their
    LSH features), persisted, and their number: the band candidates and the short documents'."""
    banded = band_candidates(records)
    shorts = records.where(F.col("short").isNotNull()).select("order", "short")
    prefixed = spark.createDataFrame(prefix_candidates(spark, shorts, partitions), "a long, b long")
    candidates = banded.union(prefixed).distinct().persist()
    return candidates, candidates.count()


def _both_sides(pairs: DataFrame, records: DataFrame, columns: list[str]) -> DataFrame:
    """``pairs`` with ``columns`` of document a (suffix _a) and of document b (suffix _b)."""
    side = records.select("order", *columns)
    left = side.select(*[F.col(c).alias(f"{c}_a") for c in ["order", *columns]])
    right = side.select(*[F.col(c).alias(f"{c}_b") for c in ["order", *columns]])
    return pairs.join(left, F.col("a") == F.col("order_a")).join(right, F.col("b") == F.col("order_b"))


def lsh_check(
    spark: SparkSession,
    records: DataFrame,
    candidates: DataFrame,
    exact: bool,
    fingerprinter: Callable[[], Fingerprinter],
) -> DataFrame:
    """The verified pairs (PAIR_SCHEMA, table 0) of the ``candidates``, persisted: each
    candidate joined to both documents' sketch features and checked (:func:`sketch_checked`);
    only the pairs the sketch leaves unsure are joined to their texts (a text is many times a
    sketch) and confirmed on them (:func:`verified_pairs`)."""
    features = ["w0", "w1", "check", "short"]
    joined = _both_sides(candidates, records, features).select(
        "a", "b", "w0_a", "w1_a", "w0_b", "w1_b", "check_a", "check_b", "short_a", "short_b"
    )

    def sketch_task(rows: Iterable[Any]) -> Iterator[tuple[int, int, int, bool]]:
        return sketch_checked((tuple(row) for row in rows), exact)

    judged = spark.createDataFrame(
        joined.rdd.mapPartitions(sketch_task),
        "a long, b long, distance int, sure boolean",
        verifySchema=False,
    ).persist()
    table = F.lit(0).cast("int").alias("table")
    sure = judged.where(F.col("sure")).select("a", "b", "distance", table)
    unsure = _both_sides(judged.where(~F.col("sure")).drop("sure"), records, ["text"])

    def verify_task(rows: Iterable[Any]) -> Iterator[tuple[int, int, int, int]]:
        return verified_pairs(((r[0], r[1], r[2], r[3], r[4]) for r in rows), fingerprinter)

    texts = unsure.select("a", "b", "distance", "text_a", "text_b")
    verified = spark.createDataFrame(texts.rdd.mapPartitions(verify_task), PAIR_SCHEMA, verifySchema=False)
    pairs = sure.unionByName(verified).persist()
    pairs.count()
    judged.unpersist()
    return pairs

"""``neardup dedup`` as a Spark job: the same fingerprints, pairs and clusters, distributed.

Stages, each materialised once so its time and progress can be reported
(:mod:`neardup.spark.progress`):

1. *fingerprints* — input rows (Spark's text or Parquet source, with each row's file and
   split) go through :mod:`neardup.spark.tasks` in ``mapPartitions``: the record checks of
   :mod:`neardup.io` and :meth:`Fingerprinter.encode_many` over batches. An IDF file is
   loaded once on the driver and broadcast; user dictionaries and stopword lists are shipped
   with ``addFile``.
2. *buckets* — (table, block key) rows from the same :class:`BlockScheme` (computed in the
   JVM), bucket sizes, and the buckets of two or more records; for the default search, the
   LSH candidates (:func:`~neardup.spark.lsh.lsh_candidates`).
3. *pairs* — group rows (crowded buckets split by the second hash), partitioned and sorted
   by group, verified in Python by :func:`~neardup.spark.groups.verify_groups`; for the
   default search, the candidates checked (:func:`~neardup.spark.lsh.lsh_check`).
4. *clusters* — connected components by large-star/small-star over DataFrames, then the
   keep policy.
5. *output* — lines built in SQL exactly as ``write_jsonl`` writes them, written by the
   executors (:mod:`neardup.spark.output`).

Only counts and a few aggregate rows reach the driver; nothing per record.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import SparkContext, SparkFiles
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..blocks import BlockScheme
from ..dedup.batch import BucketStats
from ..errors import ConfigError, InputError
from ..fingerprint.config import IDF_CHOICES, FingerprintConfig
from ..fingerprint.fingerprinter import Fingerprinter
from ..fingerprint.idf import IdfModel
from ..io.record import Record
from .components import connected_components
from .groups import VerifyPlan
from .lsh import lsh_candidates, lsh_check
from .output import Outputs, write_outputs
from .pairs import PairSearch, pair_stats
from .progress import Report, Stages
from .tasks import (
    POSITION_BITS,
    POSITION_MASK,
    ReadSettings,
    canonical_path,
    fingerprint_records,
    jsonl_records,
    parquet_records,
)

FINGERPRINT_SCHEMA = T.StructType(
    [
        T.StructField("order", T.LongType(), False),
        T.StructField("id", T.StringType(), True),
        T.StructField("length", T.LongType(), False),
        T.StructField("empty", T.BooleanType(), False),
        T.StructField("w0", T.LongType(), False),
        T.StructField("w1", T.LongType(), False),
        T.StructField("row", T.StringType(), True),
        T.StructField("error", T.StringType(), True),
        T.StructField("text", T.StringType(), True),
        T.StructField("bands", T.ArrayType(T.LongType(), False), True),
        T.StructField("check", T.BinaryType(), True),
        T.StructField("short", T.BinaryType(), True),
    ]
)
#: Messages kept for skipped records, as :class:`neardup.io.record.ErrorReport` keeps.
SKIPPED_MESSAGES = 5


@dataclass(frozen=True)
class DedupJob:
    """What to compute: the settings of ``neardup dedup`` plus the Spark partition count;
    ``max_distance`` None is ``neardup dedup``'s default search (the verified shingle LSH)."""

    input: str
    read: ReadSettings
    config: FingerprintConfig
    max_distance: int | None = 3
    scheme: BlockScheme | None = None
    mu: float = 2.0
    keep: str = "first"
    batch_size: int = 2048
    batch_characters: int = 8_000_000
    on_error: str = "fail"
    partitions: int | None = None


@dataclass
class DedupResult:
    """The summary ``neardup dedup`` prints, the bucket statistics and the stage times."""

    records: int = 0
    empty: int = 0
    skipped: int = 0
    messages: list[str] = field(default_factory=list)
    pairs: int = 0
    exact: int = 0
    clusters: int = 0
    largest: int = 0
    dropped: int = 0
    rounds: int = 0
    scheme: BlockScheme | None = None
    verify: str = "none"
    rejected: int = 0
    method: str = "simhash"
    stats: BucketStats = field(default_factory=BucketStats)
    seconds: dict[str, float] = field(default_factory=dict)
    #: The time the session took to start (set by :func:`neardup.spark.dedup.dedup`).
    session_seconds: float = 0.0


def run_dedup(
    spark: SparkSession,
    job: DedupJob,
    outputs: Outputs,
    *,
    stats: bool = False,
    progress: Report | None = None,
) -> DedupResult:
    """Run the job and write ``outputs``; raises :class:`InputError` for bad records
    (``on_error="fail"``) and repeated ids, naming file and line as ``neardup dedup`` does.
    ``progress`` receives each stage's progress (:class:`~neardup.spark.progress.Stages`)."""
    result = DedupResult()
    stages = Stages(spark.sparkContext, result.seconds, progress)
    try:
        _run(spark, job, outputs, stats, stages, result)
    finally:
        stages.close()
    return result


def _run(
    spark: SparkSession, job: DedupJob, outputs: Outputs, stats: bool, stages: Stages, result: DedupResult
) -> None:
    stages.begin("fingerprints")
    partitions = job.partitions or int(spark.conf.get("spark.sql.shuffle.partitions") or 200)
    try:
        source, read = _source(spark, job)
    except AnalysisException as exc:  # a missing path or an unreadable file, as Spark words it
        raise InputError(f"cannot read {job.input}: {str(exc).splitlines()[0]}") from exc
    workers = _Workers.of(spark.sparkContext, job.config)
    counter = spark.sparkContext.accumulator(0)
    stages.records = lambda: int(counter.value)
    fingerprints = _fingerprints(spark, source, job, read, workers, counter).persist()
    _check_records(spark, fingerprints, job, read, result)
    total = result.records + result.skipped
    stages.records = lambda: total

    records = fingerprints.where(F.col("error").isNull()).drop("error")
    if job.max_distance is None:
        stages.begin("buckets")
        pairs = _lsh_pairs(spark, records, workers, result, partitions, lambda: stages.begin("pairs"))
    else:
        stages.begin("buckets")
        pairs = _simhash_pairs(spark, records, job, result, partitions, stats, lambda: stages.begin("pairs"))

    stages.begin("clusters")
    rounds: list[int] = []
    labels = connected_components(pairs.select(F.col("a").alias("u"), F.col("b").alias("v")), rounds=rounds)
    clusters = _clusters(records, labels, job.keep).persist()
    _cluster_summary(clusters, result)
    result.rounds = rounds[0] if rounds else 0

    stages.begin("output")
    write_outputs(records, pairs, clusters, outputs)
    stages.end()
    for frame in (fingerprints, pairs, clusters):
        frame.unpersist()


def _simhash_pairs(
    spark: SparkSession,
    records: DataFrame,
    job: DedupJob,
    result: DedupResult,
    partitions: int,
    stats: bool,
    on_buckets: Callable[[], object],
) -> DataFrame:
    """The pairs within ``-k`` bits, by block keys (persisted), as ``neardup dedup -k K``.

    As locally, records without features (fingerprint 0, counted as "empty") are not
    searched: they pair with nothing, not with each other nor with any fingerprint within
    ``-k`` bits of 0. The scheme follows all records and the split threshold the searched
    ones, as ``search_candidates`` and ``find_all_pairs`` size them."""
    assert job.max_distance is not None
    scheme = job.scheme or BlockScheme.auto(result.records, job.config.bits, job.max_distance)
    result.scheme = scheme
    searched = records.where(~F.col("empty"))
    count = result.records - result.empty
    search = PairSearch(VerifyPlan(scheme, job.max_distance), count, job.mu, partitions)
    pairs = search.run(spark, searched, result.stats if stats else None, on_buckets).persist()
    _pair_totals(pairs, result)
    if stats:
        pair_stats(result.stats, pairs, search.candidates)
    search.release()
    return pairs


def _lsh_pairs(
    spark: SparkSession,
    records: DataFrame,
    workers: _Workers,
    result: DedupResult,
    partitions: int,
    on_candidates: Callable[[], object],
) -> DataFrame:
    """The pairs of ``neardup dedup``'s default search (persisted): shingle LSH candidates
    (the buckets stage; ``on_candidates`` is called once they are counted) pre-filtered on
    their sketches and confirmed on their texts. As locally, "empty" counts the records
    without shingles."""
    found, candidates = lsh_candidates(spark, records, partitions)
    on_candidates()
    pairs = lsh_check(spark, records, found, True, workers.fingerprinter)
    found.unpersist()
    result.empty = records.where(F.col("bands").isNull() & F.col("short").isNull()).count()
    _pair_totals(pairs, result)
    result.verify, result.method = "jaccard", "lsh"
    result.rejected = candidates - result.pairs
    return pairs


def _pair_totals(pairs: DataFrame, result: DedupResult) -> None:
    totals = _first(pairs.agg(F.count(F.lit(1)), F.sum((F.col("distance") == 0).cast("long"))))
    result.pairs, result.exact = int(totals[0]), int(totals[1] or 0)


@dataclass(frozen=True)
class _Workers:
    """What the executors need to build the job's Fingerprinter: the settings, the shipped
    files, the broadcast IDF model and a token naming this job in the workers' cache."""

    config: FingerprintConfig
    shipped: dict[str, str]
    idf: Any
    token: str

    @classmethod
    def of(cls, context: SparkContext, config: FingerprintConfig) -> _Workers:
        idf = None if config.idf in IDF_CHOICES else context.broadcast(IdfModel.load(config.idf))
        return cls(config, _ship_files(context, config), idf, uuid.uuid4().hex)

    def fingerprinter(self) -> Fingerprinter:
        return _worker_fingerprinter(self.config, self.shipped, self.idf, self.token)


# -- input and fingerprints ---------------------------------------------------------------------


def _source(spark: SparkSession, job: DedupJob) -> tuple[DataFrame, ReadSettings]:
    """Input rows with their file and position, and the read settings with the file list."""
    settings = job.read
    if settings.format == "jsonl":
        frame = spark.read.option("lineSep", "\n").text(job.input)
        rows = frame.select(
            F.col("_metadata.file_path"), F.col("_metadata.file_block_start"), F.col("value").cast("binary")
        )
    elif settings.format == "parquet":
        frame = spark.read.parquet(job.input)
        names = frame.columns
        for column, option in ((settings.id_field, "id_field"), (settings.text_field, "text_field")):
            if column not in names:
                raise InputError(
                    f"the Parquet schema has no column {column!r} (columns: {', '.join(names)}); "
                    f"name the column with {option}",
                    job.input,
                )
        wanted = [settings.id_field, settings.text_field]
        wanted += [settings.title_field] if settings.title_field in names else []
        rows = frame.select(
            F.col("_metadata.file_path"), F.col("_metadata.row_index"), *[F.col(f"`{c}`") for c in wanted]
        )
    else:
        raise ConfigError(
            f"the Spark job reads JSONL or Parquet, not {settings.format}; convert the input first"
        )
    files = tuple(sorted(canonical_path(path) for path in frame.inputFiles()))
    if len(files) >= 1 << (63 - POSITION_BITS):
        raise InputError(f"{len(files):,} input files are more than the order key can number", job.input)
    return rows, dataclasses.replace(settings, files=files)


def _fingerprints(
    spark: SparkSession, rows: DataFrame, job: DedupJob, read: ReadSettings, workers: _Workers, counter: Any
) -> DataFrame:
    """One row per input record (FINGERPRINT_SCHEMA), computed in ``mapPartitions``; each
    task adds its row count to the accumulator ``counter`` (for progress) as it ends."""
    batch_size, characters, lsh = job.batch_size, job.batch_characters, job.max_distance is None
    parse = jsonl_records if read.format == "jsonl" else parquet_records

    def task(partition: Iterable[Any]) -> Iterator[Any]:
        fingerprinter = workers.fingerprinter()
        records: Iterator[tuple[int, Record | InputError]] = parse((tuple(row) for row in partition), read)
        count = 0
        for row in fingerprint_records(records, fingerprinter, read, batch_size, characters, lsh):
            count += 1
            yield row
        counter.add(count)

    return spark.createDataFrame(rows.rdd.mapPartitions(task), FINGERPRINT_SCHEMA, verifySchema=False)


def _ship_files(context: SparkContext, config: FingerprintConfig) -> dict[str, str]:
    """Add the user dictionary and stopword files to the job so every executor has them;
    returns the setting → file name map the workers resolve with SparkFiles."""
    shipped: dict[str, str] = {}
    names: set[str] = set()
    paths = [("user_dictionary", config.user_dictionary)] if config.user_dictionary else []
    paths += [(f"stopword_files.{i}", path) for i, path in enumerate(config.stopword_files)]
    for setting, path in paths:
        name = Path(path).name
        if name in names:
            raise ConfigError(f"two input files are both named {name}; rename one for the Spark job")
        names.add(name)
        context.addFile(str(Path(path).resolve()))
        shipped[setting] = name
    return shipped


_FINGERPRINTERS: dict[Any, Fingerprinter] = {}


def _worker_fingerprinter(
    config: FingerprintConfig, shipped: dict[str, str], idf: Any, token: str
) -> Fingerprinter:
    """One Fingerprinter per Python worker and settings (workers are reused across tasks, so
    jieba's dictionary and the token cache are loaded once, not once per task)."""
    key = (config, tuple(sorted(shipped.items())), None if idf is None else token)
    found = _FINGERPRINTERS.get(key)
    if found is None:
        changes: dict[str, Any] = {}
        if "user_dictionary" in shipped:
            changes["user_dictionary"] = SparkFiles.get(shipped["user_dictionary"])
        stopwords = [SparkFiles.get(name) for setting, name in shipped.items() if setting.startswith("stop")]
        if stopwords:
            changes["stopword_files"] = tuple(stopwords)
        found = Fingerprinter(config=config.replace(**changes), idf_model=None if idf is None else idf.value)
        _FINGERPRINTERS[key] = found
    return found


def _check_records(
    spark: SparkSession, fingerprints: DataFrame, job: DedupJob, read: ReadSettings, result: DedupResult
) -> None:
    """Counts, then the errors ``neardup dedup`` would raise: the first bad record (with
    ``--on-error fail``) or the first repeated id, whichever comes first in the input."""
    counts = _first(
        fingerprints.agg(
            F.count(F.lit(1)),
            F.sum(F.col("error").isNotNull().cast("long")),
            F.sum(F.col("empty").cast("long")),
        )
    )
    total, bad = int(counts[0]), int(counts[1] or 0)
    result.records, result.skipped, result.empty = total - bad, bad, int(counts[2] or 0)
    errors: list[tuple[int, Callable[[], InputError]]] = []
    if bad and job.on_error == "fail":
        first = _first(fingerprints.where(F.col("error").isNotNull()).orderBy("order"))
        order, reason = int(first["order"]), str(first["error"])
        errors.append((order, lambda: InputError(reason, _locations(spark, job, read, [order])[order])))
    records = fingerprints.where(F.col("error").isNull())
    repeated = (
        records.groupBy("id")
        .agg(F.min("order").alias("first"), F.count(F.lit(1)).alias("n"))
        .where(F.col("n") > 1)
        .drop("n")
    )
    if not repeated.isEmpty():
        row = _first(
            records.join(repeated, "id")
            .where(F.col("order") > F.col("first"))
            .groupBy("id", "first")
            .agg(F.min("order").alias("order"))
            .orderBy("order")
        )
        again, first_seen, record_id = int(row["order"]), int(row["first"]), str(row["id"])
        errors.append((again, lambda: _repeated_id(spark, job, read, record_id, first_seen, again)))
    if errors:
        raise min(errors, key=lambda item: item[0])[1]()
    if bad:
        rows = (
            fingerprints.where(F.col("error").isNotNull()).orderBy("order").limit(SKIPPED_MESSAGES).collect()
        )
        places = _locations(spark, job, read, [int(row["order"]) for row in rows])
        result.messages = [str(InputError(str(row["error"]), places[int(row["order"])])) for row in rows]


def _repeated_id(
    spark: SparkSession, job: DedupJob, read: ReadSettings, record_id: str, first: int, again: int
) -> InputError:
    """The error ``neardup dedup`` raises at the second record with an id."""
    places = _locations(spark, job, read, [first, again])
    return InputError(
        f"duplicate id {_shown(record_id)}, first seen at {places[first]}; pairs and clusters name "
        f"records by id, so ids must be unique (choose another field as id_field)",
        places[again],
    )


def _shown(id_json: str) -> str:
    """An id as ``neardup dedup`` shows it (its Python repr)."""
    return repr(json.loads(id_json))


def _locations(spark: SparkSession, job: DedupJob, read: ReadSettings, orders: list[int]) -> dict[int, str]:
    """``file:line`` (JSONL) or ``file:row N`` (Parquet) of records named by order key. For
    JSONL the lines of earlier splits are counted, one cheap job, on this error path only."""
    # A single input file is named as the user wrote it, as neardup dedup names it.
    single = len(read.files) == 1 and read.files[0].endswith("/" + Path(job.input).name)
    names = [job.input if single else _display(path) for path in read.files]
    if read.format == "parquet":
        return {o: f"{names[o >> POSITION_BITS]}:row {(o & POSITION_MASK) + 1}" for o in orders}
    splits = (
        spark.read.option("lineSep", "\n")
        .text(job.input)
        .groupBy(
            F.col("_metadata.file_path").alias("path"), F.col("_metadata.file_block_start").alias("start")
        )
        .count()
        .collect()
    )
    starts: dict[int, list[tuple[int, int]]] = {}
    for row in splits:
        starts.setdefault(read.rank(str(row["path"])), []).append((int(row["start"]), int(row["count"])))
    found = {}
    for order in orders:
        rank, offset = order >> POSITION_BITS, order & POSITION_MASK
        before, line = 0, offset + 1
        for start, count in sorted(starts.get(rank, [])):
            if start > offset:
                break
            line = before + offset - start + 1
            before += count
        found[order] = f"{names[rank]}:{line}"
    return found


def _display(uri: str) -> str:
    return uri[len("file:") :] if uri.startswith("file:/") else uri


# -- clusters -----------------------------------------------------------------------------------


def _clusters(records: DataFrame, labels: DataFrame, keep: str) -> DataFrame:
    """(order, cluster, representative, keep) per record, as :func:`cluster_records` gives.

    Records without a pair are their own cluster; only the members of clusters of two or
    more (the labelled nodes) are grouped to find sizes and representatives.
    """
    members = (
        records.select("order", "length")
        .join(labels, F.col("order") == F.col("node"))
        .select("order", "length", "root")
    )
    if keep == "longest":
        best = F.max(F.struct(F.col("length"), (-F.col("order")).alias("earliest")))
        info = members.groupBy("root").agg(F.count(F.lit(1)).alias("size"), best.alias("best"))
        info = info.select("root", "size", (-F.col("best.earliest")).alias("chosen"))
    else:
        info = (
            members.groupBy("root").agg(F.count(F.lit(1)).alias("size")).withColumn("chosen", F.col("root"))
        )
    joined = (
        records.select("order")
        .join(labels, F.col("order") == F.col("node"), "left")
        .join(info, "root", "left")
        .select(
            "order",
            F.coalesce("root", "order").alias("cluster"),
            F.coalesce("chosen", "order").alias("representative"),
            F.coalesce("size", F.lit(1).cast("long")).alias("size"),
        )
    )
    kept = F.col("size") == 1 if keep == "drop-all" else F.col("representative") == F.col("order")
    return joined.withColumn("keep", kept)


def _cluster_summary(clusters: DataFrame, result: DedupResult) -> None:
    row = _first(
        clusters.agg(
            F.sum(((F.col("cluster") == F.col("order")) & (F.col("size") >= 2)).cast("long")),
            F.max("size"),
            F.sum((~F.col("keep")).cast("long")),
        )
    )
    result.clusters = int(row[0] or 0)
    result.largest = int(row[1] or 0)
    result.dropped = int(row[2] or 0)


def _first(frame: DataFrame) -> Row:
    """The first row of a frame that has one (an aggregate, or a filter known to match)."""
    row = frame.first()
    if row is None:  # pragma: no cover - callers only ask where a row exists
        raise RuntimeError("expected a row")
    return row


def describe_seconds(seconds: dict[str, float], records: int) -> str:
    """The stage times on one line, with the overall documents per second."""
    total = sum(seconds.values())
    parts = ", ".join(f"{stage} {value:.2f}" for stage, value in seconds.items())
    rate = records / total if total > 0 else 0.0
    return f"seconds: {total:.2f} ({parts}); {rate:,.0f} records/s"

"""The pair search of the Spark job: block keys, bucket sizes, the second hash, verification.

:class:`PairSearch` is the distributed twin of :func:`~neardup.dedup.batch.find_all_pairs`:
the same scheme, the same split threshold and the same verification
(:func:`~neardup.spark.groups.verify_groups`), with the buckets formed by a shuffle instead
of a sort. It works on any DataFrame of (order, w0, w1) rows, which is how tests drive it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..dedup.batch import BucketStats, TableStats
from .groups import VerifyPlan, verify_groups
from .keys import bucket_sizes, by_table, group_rows, split_limits, table_keys

PAIR_SCHEMA = "a long, b long, distance int, table int"


# -- pairs --------------------------------------------------------------------------------------


class _ListSum(AccumulatorParam[list[int]]):
    """Element-wise sums of per-table candidate counts."""

    def zero(self, value: list[int]) -> list[int]:
        return [0] * len(value)

    def addInPlace(self, value1: list[int], value2: list[int]) -> list[int]:
        for index, value in enumerate(value2):
            value1[index] += value
        return value1


@dataclass
class PairSearch:
    """Every pair within the distance among (order, w0, w1) rows, by block keys.

    ``run`` returns the pairs lazily once the shared buckets are materialised (kept until
    ``release``); ``candidates`` holds the per-table candidate counts after the pairs are.
    """

    plan: VerifyPlan
    records: int
    mu: float
    partitions: int
    _shared: DataFrame | None = None
    _counter: Any = None

    @property
    def limits(self) -> list[float]:
        return split_limits(self.plan, self.records, self.mu)

    def groups(self, fingerprints: DataFrame, stats: BucketStats | None = None) -> DataFrame:
        """The group rows to verify (see :func:`neardup.spark.keys.group_rows`)."""
        keyed = table_keys(fingerprints, self.plan)
        sizes = bucket_sizes(keyed)
        if stats is not None:
            filled = _bucket_stats(sizes, self.plan, self.limits, self.records)
            stats.scheme, stats.threshold, stats.tables = filled.scheme, filled.threshold, filled.tables
        self._shared = sizes.where(F.col("size") >= 2).persist()
        self._shared.count()
        return group_rows(keyed, self._shared, self.plan, self.limits)

    def run(
        self,
        spark: SparkSession,
        fingerprints: DataFrame,
        stats: BucketStats | None = None,
        on_buckets: Callable[[], object] | None = None,
    ) -> DataFrame:
        """The pairs (PAIR_SCHEMA: a, b, distance, table; a before b), lazily; ``on_buckets``
        is called once the shared buckets are counted (for stage timings)."""
        groups = self.groups(fingerprints, stats)
        if on_buckets is not None:
            on_buckets()
        ordered = groups.repartition(self.partitions, "table", "sub", "key", "subkey").sortWithinPartitions(
            "table", "sub", "key", "subkey", "order"
        )
        plan, tables = self.plan, self.plan.scheme.table_count
        counter = self._counter = spark.sparkContext.accumulator([0] * tables, _ListSum())

        def task(partition: Iterable[Any]) -> Iterator[Any]:
            seen = [0] * tables

            def count(table: int, candidates: int) -> None:
                seen[table] += candidates

            yield from verify_groups((tuple(row) for row in partition), plan, count)
            counter.add(seen)

        return spark.createDataFrame(ordered.rdd.mapPartitions(task), PAIR_SCHEMA, verifySchema=False)

    @property
    def candidates(self) -> list[int]:
        return list(self._counter.value) if self._counter is not None else []

    def release(self) -> None:
        if self._shared is not None:
            self._shared.unpersist()


def _bucket_stats(sizes: DataFrame, plan: VerifyPlan, limits: list[float], records: int) -> BucketStats:
    rows = {
        int(row["table"]): row
        for row in sizes.groupBy("table")
        .agg(
            F.count(F.lit(1)).alias("buckets"),
            F.max("size").alias("largest"),
            F.sum((F.col("size") > by_table([F.lit(x) for x in limits])).cast("long")).alias("split"),
        )
        .collect()
    }
    stats = BucketStats(scheme=plan.scheme.describe(), threshold=limits[-1] if limits else 0.0)
    for table, key in enumerate(plan.keys):
        row = rows.get(table)
        buckets = int(row["buckets"]) if row else 0
        stats.tables.append(
            TableStats(
                table=table,
                key_bits=key.bit_count,
                buckets=buckets,
                largest=int(row["largest"]) if row else 0,
                mean=records / buckets if buckets else 0.0,
                split=int(row["split"]) if row else 0,
            )
        )
    return stats


def pair_stats(stats: BucketStats, pairs: DataFrame, candidates: list[int]) -> None:
    found = {int(row["table"]): int(row["count"]) for row in pairs.groupBy("table").count().collect()}
    for table in stats.tables:
        table.candidates = candidates[table.table]
        table.pairs = found.get(table.table, 0)

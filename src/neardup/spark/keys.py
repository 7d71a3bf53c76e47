"""Block keys as Spark columns, and the (table, block key) rows of the pair search.

Keys are computed by the JVM from the same :class:`~neardup.blocks.BitSelection` runs that
:meth:`BitSelection.extract` reads (tested equal), so a billion fingerprints × tables never
travel to Python just to be cut into keys. Only records that share a bucket with another
record go on to Python for verification; crowded buckets are first split by seed 000's
second hash, so no task has to compare a skewed bucket's members all against all.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..blocks import BitSelection
from ..dedup.batch import split_size
from .groups import VerifyPlan

#: Column names of the group rows handed to :func:`neardup.spark.groups.verify_groups`.
GROUP_COLUMNS = ("table", "sub", "key", "subkey", "order", "w0", "w1")


def selection_column(selection: BitSelection, words: list[Column]) -> Column:
    """The key of ``selection`` over the fingerprint word columns, as a signed long: the same
    bits, in the same order, as :meth:`BitSelection.extract` (first 64 bits kept)."""
    key: Column | None = None
    used = 0
    for word, shift, length in selection.segments:
        kept = min(length, 64 - used)
        if kept <= 0:
            break
        part = F.shiftrightunsigned(words[word], shift + length - kept)
        if kept < 64:
            part = part.bitwiseAND(F.lit((1 << kept) - 1))
        key = part if key is None else F.shiftleft(key, kept).bitwiseOR(part)
        used += kept
    return key if key is not None else F.lit(0).cast("long")


def by_table(values: list[Column]) -> Column:
    """``values[table]`` as one column expression."""
    expression = F.when(F.col("table") == 0, values[0])
    for table, value in enumerate(values[1:], start=1):
        expression = expression.when(F.col("table") == table, value)
    return expression


def table_keys(fingerprints: DataFrame, plan: VerifyPlan) -> DataFrame:
    """(table, key, order, w0, w1): one row per record and table."""
    words = [F.col("w0"), F.col("w1")]
    keys = F.array(*[selection_column(key, words) for key in plan.keys])
    return fingerprints.select("order", "w0", "w1", F.posexplode(keys).alias("table", "key"))


def bucket_sizes(keyed: DataFrame) -> DataFrame:
    """(table, key, size) of every bucket."""
    return keyed.groupBy("table", "key").agg(F.count(F.lit(1)).alias("size"))


def split_limits(plan: VerifyPlan, records: int, mu: float) -> list[float]:
    """Per table, the bucket size above which the bucket is split (the core's threshold)."""
    return [split_size(records, key.bit_count, mu) for key in plan.keys]


def group_rows(keyed: DataFrame, shared: DataFrame, plan: VerifyPlan, limits: list[float]) -> DataFrame:
    """The rows to verify: members of buckets of two or more, with crowded buckets split.

    A bucket within its table's limit is one group (sub = -1). A crowded bucket is cut by
    seed 000's second hash: each member appears once per sub-block of the bits outside the
    key, keyed on it (sub = 0 .. k), so its pairs spread over many smaller groups and tasks.
    """
    words = [F.col("w0"), F.col("w1")]
    tagged = keyed.join(shared, ["table", "key"]).withColumn("limit", by_table([F.lit(x) for x in limits]))
    plain = tagged.where(F.col("size") <= F.col("limit")).select(
        "table", F.lit(-1).alias("sub"), "key", F.lit(0).cast("long").alias("subkey"), "order", "w0", "w1"
    )
    sub_keys = [
        F.array(*[selection_column(sub, words) for sub in plan.sub_blocks(table)])
        for table in range(len(plan.keys))
    ]
    crowded = tagged.where(F.col("size") > F.col("limit")).select(
        "table", "key", "order", "w0", "w1", F.posexplode(by_table(sub_keys)).alias("sub", "subkey")
    )
    return plain.unionByName(crowded.select(*GROUP_COLUMNS))

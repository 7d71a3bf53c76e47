"""``neardup records`` as library calls: :func:`dedup_records` finds the duplicate rows of an
opened source (:func:`~neardup.records.sources.open_source`: a database table or query, a CSV
or Parquet file), and :func:`write_group_table` writes the groups back to its database. The
command only turns its options into these calls' arguments and prints.

By default the learned field weights decide (:mod:`neardup.records.learned`); a
:class:`SimhashSearch` asks for the Simhash path of seed 002 instead
(:func:`~neardup.records.dedup.find_duplicate_records`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..fingerprint.config import FingerprintConfig
from ..io.record import ErrorReport
from .dedup import AUTO, RecordsResult, Verification, find_duplicate_records
from .learned import DEFAULT_THRESHOLD, learned_duplicate_records
from .schema import RecordSchema, ResolvedSchema
from .sources import GroupRows, RowSource, SqlSource, read_only_needed, write_groups


@dataclass(frozen=True)
class SimhashSearch:
    """The Simhash path's settings: fingerprint settings (``fields`` weighting), the
    distance (None: by row count) and the check of each candidate (``"auto"``: by row count;
    a :class:`~neardup.records.dedup.Verification`; None: Simhash alone)."""

    config: FingerprintConfig = field(default_factory=lambda: FingerprintConfig(weighting="fields"))
    max_distance: int | None = None
    check: Verification | str | None = AUTO


def dedup_records(
    source: RowSource,
    schema: RecordSchema,
    *,
    simhash: SimhashSearch | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    keep: str = "first",
    on_error: str = "fail",
    report: ErrorReport | None = None,
    progress: Callable[[int], object] | None = None,
    on_schema: Callable[[ResolvedSchema], object] | None = None,
) -> RecordsResult:
    """The duplicate rows of ``source`` under ``schema``: by learned weights and their match
    probability ``threshold``, or by ``simhash``. Only the key and the columns the schema
    does not ignore are read. ``on_schema`` hears the columns and kinds chosen before any
    row is compared; ``progress`` the rows read."""
    schema = read_only_needed(source, schema)
    common: dict[str, Any] = {
        "keep": keep,
        "on_error": on_error,
        "report": report,
        "source_name": source.name,
        "on_schema": on_schema,
        "progress": progress,
    }
    if simhash is None:
        return learned_duplicate_records(
            source.columns, source.chunks(), schema, threshold=threshold, **common
        )
    return find_duplicate_records(
        source.columns,
        source.chunks(),
        schema,
        config=simhash.config,
        max_distance=simhash.max_distance,
        check=simhash.check,
        **common,
    )


def pair_rows(result: RecordsResult) -> Iterator[dict[str, Any]]:
    """The duplicate pairs as ``{"a": key, "b": key, "distance": d}`` rows (``neardup records
    --pairs``), the earlier row first."""
    keys, pairs = result.keys, result.pairs
    for a, b, distance in zip(pairs.i.tolist(), pairs.j.tolist(), pairs.distance.tolist(), strict=True):
        yield {"a": keys[a], "b": keys[b], "distance": distance}


def group_rows(result: RecordsResult) -> GroupRows:
    """The rows of the groups table: groups numbered 1, 2, ... in order of their first row."""
    cluster = result.clusters.cluster
    _, first_index, inverse = np.unique(cluster, return_index=True, return_inverse=True)
    rank = np.empty(len(first_index), dtype=np.int64)
    rank[np.argsort(first_index)] = np.arange(1, len(first_index) + 1)
    keys = result.keys
    return GroupRows(
        keys=keys,
        groups=rank[inverse].tolist() if len(cluster) else [],
        representatives=[keys[index] for index in result.clusters.representative.tolist()],
        distances=result.distances().tolist(),
    )


def write_group_table(
    result: RecordsResult, source: SqlSource, table: str, *, schema: str | None = None, replace: bool = False
) -> int:
    """Write the groups of ``result`` to ``table`` in the source's database (never a table
    the source reads; an existing one only with ``replace``); returns the row count."""
    return write_groups(
        source.engine,
        table,
        group_rows(result),
        schema=schema,
        replace=replace,
        source_table=source.table,
        source_query=source.query,
    )

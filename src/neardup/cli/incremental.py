"""``neardup dedup INPUT --index URL``: dedup new records against a stored index and add them.

Seed 002's incremental mode on the command line: each batch of INPUT is checked against what
the store holds (and against the batch's earlier records), given a stable cluster id and
added, in one locked transaction per batch (:mod:`neardup.dedup.documents`). The outputs
are those of ``neardup dedup``: pairs name the earlier record as ``a``, once (a re-run over
stored records repeats no pair reversed, :meth:`~neardup.dedup.documents.Index.dedup`); clusters
name the record that started the cluster, which may be a record stored by an earlier run;
``--emit kept`` writes the records that started a cluster (``--keep first`` semantics).
"""

from __future__ import annotations

import contextlib

import click

from ..errors import ConfigError
from ..io.output import jsonl_writer
from ..io.record import ErrorReport, record_row
from ..storage.urls import redacted
from .common import open_records, progress_bar, report_skipped
from .index import TYPED, open_index, requested_config, storable_ids


def run_incremental(
    ctx: click.Context,
    *,
    url: str,
    input_path: str,
    pairs_path: str | None,
    clusters_path: str | None,
    emit: str | None,
    output: str,
    keep: str,
    batch_size: int,
    progress: bool | None,
) -> None:
    """The adapter behind ``dedup --index``: :meth:`Index.dedup` over INPUT, its outcome written."""
    if keep != "first":
        raise ConfigError(
            f"--keep {keep} needs the whole input at once; with --index each record is decided "
            "when it arrives (the earliest record keeps its cluster): drop --keep or --index"
        )
    fields = (ctx.params["id_field"], ctx.params["text_field"], ctx.params["title_field"])
    counts = {"records": 0, "added": 0, "replaced": 0, "duplicates": 0, "pairs": 0, "stored": 0, "empty": 0}
    report = ErrorReport()
    typed = ctx.get_parameter_source("max_distance") in TYPED
    with open_index(url, requested_config(ctx, ctx.params["max_distance"] if typed else None)) as index:
        index.fingerprinter  # noqa: B018 - refuse an index of bare fingerprints before reading
        records = storable_ids(open_records(ctx, input_path, report), ctx.params["on_error"], report)
        with contextlib.ExitStack() as outputs, progress_bar(progress, "dedup --index") as bar:
            sinks = {
                name: outputs.enter_context(jsonl_writer(path))
                for name, path in (("pairs", pairs_path), ("clusters", clusters_path), ("emit", output))
                if path is not None and (name != "emit" or emit is not None)
            }
            existing = ctx.params.get("existing") or "skip"
            run = index.dedup(records, existing=existing, batch_size=batch_size, hint="--existing replace")
            for batch in run:
                counts["empty"] += batch.empty
                counts["pairs"] += len(batch.pairs)
                if "pairs" in sinks:
                    for row in batch.pairs:
                        sinks["pairs"].write(row)
                for record, result in zip(batch.records, batch.assignments, strict=True):
                    counts["records"] += 1
                    counts["added"] += result.added and not result.replaced
                    counts["replaced"] += result.replaced
                    counts["duplicates"] += result.duplicate
                    if "clusters" in sinks:
                        sinks["clusters"].write({"id": record.id, "cluster": result.cluster})
                    started_cluster = result.cluster == record.id
                    if "emit" in sinks and started_cluster == (emit == "kept"):
                        sinks["emit"].write(record_row(record, fields))
                bar.update(len(batch.records))
        counts["stored"] = len(index)
    click.echo(_summary(counts, url, report), err=True)
    report_skipped(report, counts["records"], input_path)


def _summary(counts: dict[str, int], url: str, report: ErrorReport) -> str:
    """The line printed on stderr; texts without letters or digits are counted as empty."""
    replaced = f", replaced {counts['replaced']}" if counts["replaced"] else ""
    return (
        f"neardup: {counts['records']} records, {counts['duplicates']} with a near-duplicate, "
        f"{counts['pairs']} pairs; added {counts['added']} to {redacted(url)}{replaced} "
        f"(it holds {counts['stored']}); {counts['empty']} empty; {report.count} skipped"
    )

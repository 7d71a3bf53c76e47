"""``neardup index rebuild OLD_URL NEW_URL INPUT``: the command an index of an earlier neardup
is refused with (store format 1), a thin adapter over :func:`neardup.dedup.rebuild.rebuild_index`.

INPUT is read with the options of ``index add``, so the texts an index was filled from can be
given the same way again.
"""

from __future__ import annotations

from typing import Any

import click

from ..dedup.rebuild import RebuildReport, rebuild_index
from ..io.record import ErrorReport
from ..storage.base import shown_key
from ..storage.urls import redacted
from .common import (
    batch_size_option,
    input_options,
    open_records,
    progress_bar,
    progress_option,
    report_skipped,
)
from .index import DEFAULT_STORE_BATCH, TYPED, storable_ids


@click.command(
    "rebuild",
    short_help="Rebuild an earlier neardup's index from its texts, keeping cluster ids.",
)
@click.argument("old_url", metavar="OLD_URL")
@click.argument("new_url", metavar="NEW_URL")
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@input_options
@batch_size_option
@progress_option
@click.pass_context
def rebuild(
    ctx: click.Context,
    /,
    old_url: str,
    new_url: str,
    input_path: str,
    batch_size: int,
    progress: bool | None,
    **_: Any,
) -> None:
    """Write a new index at NEW_URL from the records of INPUT whose ids the index at OLD_URL
    holds, each with the cluster id OLD_URL gave it.

    The new index searches by text sketches (as `index add` creates it) with the old index's
    fingerprint settings; OLD_URL is only read. Records whose id OLD_URL lacks are skipped;
    stored ids INPUT gives no text for are not carried over (the summary names a few).
    NEW_URL must hold no index yet. Ids match with their type: the text "7" is not the number 7.

    \b
    Example:
      neardup index rebuild news.db news-v2.db docs.jsonl
    """
    report = ErrorReport()
    size = batch_size if ctx.get_parameter_source("batch_size") in TYPED else DEFAULT_STORE_BATCH
    with progress_bar(progress, "index rebuild") as bar:
        records = storable_ids(open_records(ctx, input_path, report), ctx.params["on_error"], report)
        result = rebuild_index(old_url, new_url, records, batch_size=size, on_batch=bar.update)
    click.echo(summary(result, redacted(old_url), redacted(new_url), input_path, report), err=True)
    report_skipped(report)


def summary(result: RebuildReport, old_url: str, new_url: str, input_path: str, report: ErrorReport) -> str:
    """The one line printed on stderr."""
    source = "stdin" if input_path == "-" else input_path
    line = (
        f"neardup: rebuilt {result.carried} records into {new_url} (cluster ids kept); "
        f"{result.skipped_unknown} ids of the input are not in {old_url} (skipped)"
    )
    if result.carried == 0 and result.skipped_unknown:
        line += ' (ids match with their type: the text "7" is not the number 7)'
    line += f"; {result.missing} stored ids had no text in {source}"
    if result.missing:
        examples = ", ".join(shown_key(key) for key in result.missing_examples)
        more = ", ..." if result.missing > len(result.missing_examples) else ""
        line += f" (not carried: e.g. {examples}{more})"
    if result.repeated:
        line += f"; {result.repeated} repeated an earlier id of the input (the first text kept)"
    if report.count:
        line += f"; {report.count} bad records skipped"
    return line

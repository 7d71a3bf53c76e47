"""``neardup fingerprint``: records in, one ``{"id", "fingerprint"}`` JSON line out per record."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import click

from ..distance import hex_many
from ..fingerprint.fingerprinter import Fingerprinter
from ..io.output import write_jsonl
from ..io.read import batches
from ..io.record import ErrorReport, Record
from .common import (
    batch_size_option,
    check_outputs_not_inputs,
    fingerprint_options,
    input_options,
    jsonl_output_option,
    open_records,
    progress_bar,
    progress_option,
    report_skipped,
    text_config,
    tokenizer_options,
)


@click.command(short_help="Fingerprint records: JSONL/CSV/Parquet in, {id, fingerprint} JSON lines out.")
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@jsonl_output_option
@fingerprint_options
@tokenizer_options
@input_options
@batch_size_option
@progress_option
@click.pass_context
def fingerprint(
    ctx: click.Context, /, input_path: str, output: str, batch_size: int, progress: bool | None, **_: Any
) -> None:
    """Fingerprint every record of INPUT (JSONL, CSV or Parquet; '-' is stdin).

    Writes one JSON line per record, in input order:
    {"id": <id as given>, "fingerprint": "<hex, bits/4 digits>"}. A record whose
    text yields no features (empty, only stopwords or punctuation) gets the
    all-zero fingerprint and "empty": true, since it matches every other empty one.

    \b
    Example:
      neardup fingerprint docs.jsonl -o fingerprints.jsonl
      neardup fingerprint rows.csv --id-field doc_id --text-field body --bits 128
      cat docs.jsonl | neardup fingerprint - --lang zh --idf my_idf.json > out.jsonl
    """
    check_outputs_not_inputs(ctx, {"-o/--output": output})
    config = text_config(ctx)
    fingerprinter = Fingerprinter(config=config)
    report = ErrorReport()
    counts = {"written": 0, "empty": 0}
    records = open_records(ctx, input_path, report)
    with progress_bar(progress, "fingerprint") as bar:
        rows = _rows(fingerprinter, batches(records, batch_size), counts, bar)
        write_jsonl(output, rows)
    click.echo(
        f"neardup: wrote {counts['written']} fingerprints; {counts['empty']} empty (no features, "
        f'flagged "empty": true); {report.count} skipped',
        err=True,
    )
    report_skipped(report)


def _rows(
    fingerprinter: Fingerprinter, groups: Iterable[list[Record]], counts: dict[str, int], bar: Any
) -> Iterator[dict[str, Any]]:
    """Output rows batch by batch, so the input streams through in bounded memory."""
    bits = fingerprinter.bits
    for group in groups:
        encoded = fingerprinter.encode_many([r.text for r in group], [r.title for r in group])
        hexes = hex_many(encoded.fingerprints, bits)
        for record, text, features in zip(group, hexes, encoded.feature_counts.tolist(), strict=True):
            row: dict[str, Any] = {"id": record.id, "fingerprint": text}
            if features == 0:
                row["empty"] = True
                counts["empty"] += 1
            counts["written"] += 1
            yield row
        bar.update(len(group))

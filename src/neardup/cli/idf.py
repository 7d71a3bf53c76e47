"""``neardup idf fit``: an IDF table fitted on the user's own corpus, for ``--idf PATH``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click

from ..fingerprint.fingerprinter import Fingerprinter
from ..fingerprint.idf import IdfModel
from ..io.read import batches
from ..io.record import ErrorReport, Record
from .common import (
    TOKENIZER_SETTINGS,
    batch_size_option,
    build_config,
    check_outputs_not_inputs,
    input_options,
    open_records,
    output_error,
    progress_bar,
    progress_option,
    report_skipped,
    tokenizer_options,
)


@click.group(short_help="Fit IDF tables on your own corpus (neardup idf fit).")
def idf() -> None:
    """Inverse document frequency tables.

    \b
    Example:
      neardup idf fit corpus.jsonl -o idf.json
      neardup fingerprint corpus.jsonl --idf idf.json
    """


@idf.command(short_help="Fit an IDF table on a corpus, for --idf PATH.")
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    help="The IDF file to write (JSON).",
)
@tokenizer_options
@input_options
@batch_size_option
@progress_option
@click.pass_context
def fit(
    ctx: click.Context, /, input_path: str, output: str, batch_size: int, progress: bool | None, **_: Any
) -> None:
    """Fit an IDF table on the records of INPUT and save it as OUTPUT.

    Tokenize with the same settings you will fingerprint with (--lang, --ngram,
    --user-dict, --to-simplified, or the same --config), so the table's tokens
    are the ones the fingerprinter looks up.

    \b
    Example:
      neardup idf fit corpus.jsonl -o idf.json
      neardup idf fit corpus.csv --text-field body --lang zh -o idf.json
      neardup fingerprint corpus.jsonl --idf idf.json -o fingerprints.jsonl
    """
    check_outputs_not_inputs(ctx, {"-o/--output": output})
    # Only the tokenizer matters here; tf weighting skips loading the default IDF table.
    config = build_config(ctx, TOKENIZER_SETTINGS, weighting="tf", idf="none")
    fingerprinter = Fingerprinter(config=config)
    report = ErrorReport()
    records = open_records(ctx, input_path, report)
    name = "stdin" if input_path == "-" else Path(input_path).name
    with progress_bar(progress, "idf fit") as bar:
        model = IdfModel.fit(_token_lists(fingerprinter, batches(records, batch_size), bar), name=name)
    try:
        model.save(output)
    except OSError as exc:
        raise output_error(output, exc) from exc
    click.echo(
        f"neardup: fitted IDF on {model.documents} documents ({len(model)} distinct tokens) "
        f"into {output}; {report.count} skipped",
        err=True,
    )
    report_skipped(report)


def _token_lists(
    fingerprinter: Fingerprinter, groups: Iterable[list[Record]], bar: Any
) -> Iterator[list[str]]:
    """Each record's word tokens as the fingerprinter cuts them."""
    for group in groups:
        yield from fingerprinter.word_tokens_many([record.text for record in group])
        bar.update(len(group))

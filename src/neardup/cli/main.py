"""The ``neardup`` command group: version, ``--verbose``, and the error policy.

Errors neardup raises on purpose (:class:`~neardup.errors.NeardupError`) already say what is
wrong and how to fix it, so they are printed as one line and exit 1; a traceback would only
bury the message, and is shown with ``--verbose`` for bug reports. Usage errors stay click's
(exit 2).
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from typing import Any

import click

from .. import __version__
from ..errors import NeardupError
from .dedup import dedup
from .fingerprint import fingerprint
from .idf import idf
from .index import index
from .records import records
from .serve import serve
from .spark import spark

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


class NeardupGroup(click.Group):
    """A group that turns neardup errors into one-line messages and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NeardupError as exc:
            if ctx.params.get("verbose"):
                traceback.print_exc(file=sys.stderr)
            click.echo(f"neardup: error: {exc}", err=True)
            raise click.exceptions.Exit(EXIT_ERROR) from exc
        except BrokenPipeError as exc:
            # The reader of stdout went away (e.g. `| head`): stop quietly, like other tools,
            # and point stdout at /dev/null so the final flush at exit cannot fail again.
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise click.exceptions.Exit(EXIT_ERROR) from exc
        except KeyboardInterrupt as exc:
            click.echo("neardup: interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from exc


@click.group(
    cls=NeardupGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, "--version", "-V", prog_name="neardup")
@click.option("-v", "--verbose", is_flag=True, help="Show the traceback of errors (for bug reports).")
def main(verbose: bool) -> None:
    """Find near-duplicate Chinese and English documents and database rows with Simhash
    fingerprints.

    Input is JSONL (one {"id", "text", "title"?} object per line), CSV or Parquet;
    '-' reads stdin or writes stdout. Machine output goes to stdout or files,
    progress and summaries to stderr. Exit status: 0 ok, 1 error, 2 bad usage.

    \b
    Example:
      neardup dedup docs.jsonl --pairs pairs.jsonl --clusters clusters.jsonl
      neardup dedup docs.jsonl --emit kept -o deduplicated.jsonl
      neardup fingerprint docs.jsonl -o fingerprints.jsonl
      neardup idf fit docs.jsonl -o idf.json
      neardup fingerprint docs.jsonl --idf idf.json --bits 128 > fingerprints.jsonl
      neardup index add news.db docs.jsonl && neardup dedup new.jsonl --index news.db --clusters c.jsonl
      neardup records sqlite:///crm.db --table people --key id --clusters groups.jsonl
      neardup eval gold.jsonl pairs.jsonl
      neardup spark dedup docs.jsonl --pairs pairs.jsonl --master 'local[*]'
      neardup serve news.db --port 8000
    """


main.add_command(dedup)
main.add_command(fingerprint)
main.add_command(idf)
main.add_command(index)
main.add_command(records)
main.add_command(serve)
main.add_command(spark)
main.add_command(__import__("neardup.cli.eval", fromlist=["eval_command"]).eval_command)
main.add_command(__import__("neardup.cli.eval", fromlist=["baseline"]).baseline)
main.add_command(__import__("neardup.cli.eval", fromlist=["sweep"]).sweep)
main.add_command(__import__("neardup.cli.eval", fromlist=["report"]).report)
index.add_command(__import__("neardup.cli.index_rebuild", fromlist=["rebuild"]).rebuild)

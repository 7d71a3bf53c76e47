"""The ``neardup`` command group: version, ``--verbose``, and the error policy.

Errors neardup raises on purpose (:class:`~neardup.errors.NeardupError`) already say what is
wrong and how to fix it, so they are printed as one line and exit 1; a traceback would only
bury the message, and is shown with ``--verbose`` for bug reports. Usage errors stay click's
(exit 2). A reader that closes stdout early (``| head``) ends the command quietly with exit 0.

Commands are imported when they run, not when the group is built: their modules pull in
numpy, scipy and the rest, which ``neardup --help`` and ``neardup --version`` never need.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from importlib import import_module
from typing import Any, NamedTuple

import click

from ..errors import NeardupError

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(BaseException):
    """SIGTERM arrived: the command stops as Ctrl-C stops it, so what it made (spill files,
    partial outputs) is removed instead of left behind by a killed interpreter. A
    BaseException, as KeyboardInterrupt is, so that no ``except Exception`` swallows it."""


class LazyCommand(NamedTuple):
    """Where a command lives (module relative to this package, attribute) and the short help
    ``neardup --help`` lists without importing it (a test keeps it equal to the command's)."""

    module: str
    attribute: str
    short_help: str


COMMANDS: dict[str, LazyCommand] = {
    "baseline": LazyCommand(
        ".eval", "baseline", "Run a baseline method (evaluation only) with dedup's outputs."
    ),
    "dedup": LazyCommand(
        ".dedup", "dedup", "Find near-duplicates: pairs, clusters and the deduplicated records."
    ),
    "eval": LazyCommand(".eval", "eval_command", "Score a PAIRS or CLUSTERS file against labelled data."),
    "fingerprint": LazyCommand(
        ".fingerprint",
        "fingerprint",
        "Fingerprint records: JSONL/CSV/Parquet in, {id, fingerprint} JSON lines out.",
    ),
    "idf": LazyCommand(".idf", "idf", "Fit IDF tables on your own corpus (neardup idf fit)."),
    "index": LazyCommand(
        ".index",
        "index",
        "A persistent index: add, query, remove, stats, rebuild (SQLite, Redis, SQL servers, MongoDB).",
    ),
    "records": LazyCommand(
        ".records", "records", "Find duplicate rows of a database table, a query, or a CSV/Parquet file."
    ),
    "report": LazyCommand(
        ".eval", "report", "Write an HTML report of plots on labelled data and synthetic scaling runs."
    ),
    "serve": LazyCommand(".serve", "serve", "Serve an index over HTTP: check, add and query documents."),
    "spark": LazyCommand(".spark", "spark", "Run neardup on Apache Spark (needs neardup[spark])."),
    "sweep": LazyCommand(".eval", "sweep", "Score a grid of settings on labelled data, best F1 first."),
}
#: Subcommands registered on a group once it is loaded (kept apart to avoid an import cycle).
SUBCOMMANDS: dict[str, tuple[tuple[str, str], ...]] = {"index": ((".index_rebuild", "rebuild"),)}


@contextlib.contextmanager
def _closed_pipe_ends_quietly() -> Iterator[None]:
    """Stop with exit 0 and no message when the reader of stdout went away (``| head``), as
    other tools do; stdout goes to /dev/null so the flush at exit cannot fail again."""
    try:
        yield
    except BrokenPipeError as exc:
        with contextlib.suppress(OSError, ValueError, AttributeError):  # e.g. no real stdout
            stdout = sys.stdout.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout)
            os.close(devnull)
        raise click.exceptions.Exit(0) from exc


class NeardupGroup(click.Group):
    """A group that loads its commands on first use and turns neardup errors into one-line
    messages and exit code 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            spec = COMMANDS[cmd_name]
            command = _load(spec.module, spec.attribute)
            if isinstance(command, click.Group):
                for module, attribute in SUBCOMMANDS.get(cmd_name, ()):
                    command.add_command(_load(module, attribute))
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from :data:`COMMANDS`, so ``--help`` imports no command module."""
        rows = [
            (
                name,
                COMMANDS[name].short_help if name in COMMANDS else self.commands[name].get_short_help_str(),
            )
            for name in self.list_commands(ctx)
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with _closed_pipe_ends_quietly():  # --help and --version write to stdout here
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with _closed_pipe_ends_quietly(), _terminated_by_sigterm():
                return super().invoke(ctx)
        except NeardupError as exc:
            if ctx.params.get("verbose"):
                traceback.print_exc(file=sys.stderr)
            message = in_flags(str(exc), _flags(self, ctx, ctx.invoked_subcommand))
            click.echo(f"neardup: error: {message}", err=True)
            raise click.exceptions.Exit(EXIT_ERROR) from exc
        except KeyboardInterrupt as exc:
            click.echo("neardup: interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from exc
        except Terminated as exc:
            click.echo("neardup: terminated", err=True)
            raise click.exceptions.Exit(EXIT_TERMINATED) from exc


@contextlib.contextmanager
def _terminated_by_sigterm() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` in the main thread while a command runs (a command
    that handles SIGTERM itself, as ``serve`` does, sets its own handler inside)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: Library messages name parameters, the command line's own name flags (docs/errors.md): the
#: parameters a library error may name as its fix, and the flag each stands for. A name in
#: quotes (a column called ``id_field``) is a value, not a parameter, and is left alone.
LIBRARY_WORDS = {
    "replace=True": "--replace-table",
    'existing="replace"': "--existing replace",
    'existing="skip"': "--existing skip",
    'on_error="skip"': "--on-error skip",
    "max_bytes": "--max-bytes",
    "id_field": "--id-field",
    "text_field": "--text-field",
    "title_field": "--title-field",
    "cluster_field": "--cluster-field",
    "key='COLUMN'": "--key COLUMN",
    "tmp_dir": "--tmp-dir",
    "memory budget": "--memory budget",
}


def in_flags(message: str, flags: frozenset[str]) -> str:
    """``message`` with each parameter of :data:`LIBRARY_WORDS` named as its flag, where the
    command that raised it has that flag (else the parameter stays, as in the library)."""
    for word, flag in LIBRARY_WORDS.items():
        if flag.split()[0] in flags and word in message:
            message = re.sub(rf"(?<![\w'\"-]){re.escape(word)}(?![\w'\"])", flag, message)
    return message


def _flags(group: click.Group, ctx: click.Context, name: str | None) -> frozenset[str]:
    """The flags of the subcommand ``name`` ran (of all its own subcommands, for a group)."""
    command = group.get_command(ctx, name) if name else None
    found: set[str] = set()
    pending = [command] if command is not None else []
    while pending:
        current = pending.pop()
        found.update(opt for param in current.params for opt in param.opts)
        if isinstance(current, click.Group):
            pending.extend(current.commands.values())
    return frozenset(found)


def _load(module: str, attribute: str) -> click.Command:
    command = getattr(import_module(module, __package__), attribute)
    assert isinstance(command, click.Command)
    return command


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """--version, reading the version only when asked (importlib.metadata is slow to load)."""
    if not value or ctx.resilient_parsing:
        return
    from .. import __version__

    click.echo(f"neardup, version {__version__}")
    ctx.exit()


@click.group(
    cls=NeardupGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.option(
    "--version",
    "-V",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
@click.option("-v", "--verbose", is_flag=True, help="Show the traceback of errors (for bug reports).")
def main(verbose: bool) -> None:
    """Find near-duplicate Chinese and English documents (every pair of shingle Jaccard
    >= 0.5, by LSH over MinHash sketches; Simhash on request) and database rows.

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

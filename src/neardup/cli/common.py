"""Options and helpers shared by the commands: input options, fingerprint settings, batching,
progress bars and the end-of-run summary.

Fingerprint settings come from ``FingerprintConfig`` defaults, then a ``--config`` TOML file,
then flags the user typed. Only typed flags override the file, which is why the settings are
read through click's parameter source rather than by comparing values with defaults.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar
from urllib.parse import unquote

import click
from click.core import ParameterSource

from ..distance import BITS_CHOICES
from ..errors import ConfigError, NeardupError
from ..fingerprint.config import MAX_NGRAM, FingerprintConfig
from ..fingerprint.hashing import HASH_NAMES
from ..fingerprint.weighting import FIELDS_ON_TEXT, WEIGHTINGS
from ..io.output import OutputIsInputError, check_outputs_distinct
from ..io.read import BATCH_RECORDS, FORMATS, read_records
from ..io.record import ErrorReport, Record
from ..text.tokenize import LANGUAGES

F = TypeVar("F", bound=Callable[..., Any])

#: Seconds between progress lines when stderr is not a terminal (a log, a pipe, CI): often
#: enough to show a long run is alive, rarely enough to keep the log readable.
PROGRESS_INTERVAL = 10.0
_DEFAULTS = FingerprintConfig()
_EXPLICIT = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
# CLI parameter name → FingerprintConfig field, for the settings a flag can override.
TOKENIZER_SETTINGS = {
    "lang": "lang",
    "ngram": "ngram",
    "user_dict": "user_dictionary",
    "to_simplified": "to_simplified",
    "hmm": "hmm",
}
FINGERPRINT_SETTINGS = {
    **TOKENIZER_SETTINGS,
    "bits": "bits",
    "weighting": "weighting",
    "hash_name": "hash",
    "idf": "idf",
    "stopword_files": "stopword_files",
    "no_stopwords": "stopwords",
}


_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50, "e": 1 << 60}
# ASCII digits only, and few of them: int() of thousands of digits is slow, and Python
# refuses more than 4,300.
_SIZE = re.compile(r"^\s*([0-9]{1,30})\s*([kmgtpe]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(ctx: click.Context, param: click.Parameter, value: str | int) -> int:
    """A size in bytes from ``67108864``, ``64M``, ``64MiB``, ``1G`` or ``1T`` (powers of
    1024); any size above what memory can hold means "no limit". A callback rather than a
    ParamType subclass, which is generic only in click >= 8.2."""
    if isinstance(value, int):
        return value
    match = _SIZE.match(value)
    if not match or int(match.group(1)) == 0:
        raise click.BadParameter(f"{value!r} is not a size; use e.g. 67108864, 64M or 1G", ctx, param)
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]


def _apply(decorators: list[Callable[[F], F]]) -> Callable[[F], F]:
    def wrap(function: F) -> F:
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return wrap


def input_options(function: F) -> F:
    """Where records come from and what to do with bad ones."""
    return _apply(
        [
            click.option(
                "--format",
                "input_format",
                type=click.Choice(FORMATS),
                default="auto",
                show_default=True,
                help="Input format; auto goes by the extension (stdin: jsonl).",
            ),
            click.option(
                "--id-field", default="id", show_default=True, help="Field or column holding the id."
            ),
            click.option(
                "--text-field", default="text", show_default=True, help="Field or column holding the text."
            ),
            click.option(
                "--title-field",
                default="title",
                show_default=True,
                help="Field or column holding the optional title.",
            ),
            click.option(
                "--on-error",
                type=click.Choice(["fail", "skip"]),
                default="fail",
                show_default=True,
                help="Stop at the first bad record, or skip bad records and count them.",
            ),
            click.option(
                "--max-bytes",
                callback=parse_size,
                metavar="SIZE",
                default="64M",
                show_default=True,
                help="Largest record accepted (e.g. 64M, 1G).",
            ),
        ]
    )(function)


def tokenizer_options(function: F) -> F:
    """Settings that decide the tokens (shared by ``fingerprint`` and ``idf fit``)."""
    return _apply(
        [
            click.option(
                "--config",
                "config_file",
                type=click.Path(exists=True, dir_okay=False),
                help="TOML file of fingerprint settings ([fingerprint] table); flags override it.",
            ),
            click.option(
                "--lang",
                type=click.Choice(LANGUAGES),
                default=_DEFAULTS.lang,
                show_default=True,
                help="Tokenizer: auto picks jieba for text with Chinese characters, words otherwise.",
            ),
            click.option(
                "--ngram",
                type=click.IntRange(min=0, max=MAX_NGRAM),
                default=_DEFAULTS.ngram,
                show_default=True,
                help="Use character n-grams of this length instead of words (0: words).",
            ),
            click.option(
                "--user-dict",
                type=click.Path(exists=True, dir_okay=False),
                help="jieba user dictionary: one 'word [freq] [tag]' per line.",
            ),
            click.option(
                "--hmm/--no-hmm",
                default=_DEFAULTS.hmm,
                show_default=True,
                help="jieba's HMM discovery of words missing from its dictionary (changes tokens).",
            ),
            click.option(
                "--to-simplified/--no-to-simplified",
                default=_DEFAULTS.to_simplified,
                show_default=True,
                help="Convert traditional to simplified Chinese first (needs opencc).",
            ),
        ]
    )(function)


def fingerprint_options(function: F) -> F:
    """Settings that decide the fingerprint beyond the tokens."""
    return _apply(
        [
            click.option(
                "--bits",
                type=click.Choice([str(bits) for bits in BITS_CHOICES]),
                default=str(_DEFAULTS.bits),
                show_default=True,
                help="Fingerprint width.",
            ),
            click.option(
                "--weighting",
                type=click.Choice([w for w in WEIGHTINGS if w != "fields"]),
                default=_DEFAULTS.weighting,
                show_default=True,
                help="Feature weighting scheme.",
            ),
            click.option(
                "--hash",
                "hash_name",
                type=click.Choice(HASH_NAMES),
                default=_DEFAULTS.hash,
                show_default=True,
                help="Feature hash function.",
            ),
            click.option(
                "--idf",
                default=_DEFAULTS.idf,
                show_default=True,
                metavar="default|none|PATH",
                help="IDF table: jieba's Chinese default, none (idf = 1), or a file from `neardup idf fit`.",
            ),
            click.option(
                "--stopwords",
                "stopword_files",
                multiple=True,
                type=click.Path(exists=True, dir_okay=False),
                help="Extra stopword list, one word per line (repeatable).",
            ),
            click.option(
                "--no-stopwords",
                is_flag=True,
                default=False,
                help="Do not drop the shipped Chinese and English stopwords.",
            ),
        ]
    )(function)


def build_config(ctx: click.Context, settings: dict[str, str], **fixed: Any) -> FingerprintConfig:
    """The config file (or defaults) with the flags the user typed applied on top, then
    ``fixed`` values the command needs regardless."""
    path = ctx.params.get("config_file")
    config = FingerprintConfig.from_toml(path) if path else FingerprintConfig()
    changes: dict[str, Any] = {}
    for param, name in settings.items():
        if ctx.get_parameter_source(param) in _EXPLICIT:
            changes[name] = _setting_value(param, ctx.params[param])
    return config.replace(**changes, **fixed)


def text_config(ctx: click.Context) -> FingerprintConfig:
    """The fingerprint settings of a command that reads plain text records; ``fields``
    weighting needs per-field input, so it is refused before any input is read."""
    config = build_config(ctx, FINGERPRINT_SETTINGS)
    if config.weighting == "fields":
        raise ConfigError(FIELDS_ON_TEXT)
    return config


def _setting_value(param: str, value: Any) -> Any:
    if param == "bits":
        return int(value)
    if param == "no_stopwords":
        return not value
    if param == "stopword_files":
        return tuple(value)
    return value


def open_records(ctx: click.Context, source: str, report: ErrorReport) -> Iterator[Record]:
    """The records of ``source`` under the command's input options."""
    params = ctx.params
    return read_records(
        source,
        params["input_format"],
        id_field=params["id_field"],
        text_field=params["text_field"],
        title_field=params["title_field"],
        on_error=params["on_error"],
        max_bytes=params["max_bytes"],
        report=report,
    )


def progress_bar(
    show: bool | None, description: str, *, unit: str = " records", total: int | None = None
) -> Any:
    """Progress on stderr: a tqdm bar on a terminal or with --progress; by default elsewhere
    (logs, pipes, CI, where a bar is one ever-growing line of carriage returns) the throttled
    plain lines of :class:`ProgressLines`, so a long run is never silent; none with
    --no-progress."""
    if show is None and not sys.stderr.isatty():
        return ProgressLines(description, unit=unit, total=total)
    from tqdm import tqdm

    return tqdm(
        desc=description, unit=unit, total=total, file=sys.stderr, disable=show is False, dynamic_ncols=True
    )


class ProgressLines:
    """Progress as plain stderr lines, ``neardup: sweep: 12/60 settings (20%), 35 s``, at most
    one every :data:`PROGRESS_INTERVAL` seconds, and none in a run shorter than that (its
    summary line says it all). The part of tqdm's interface the commands use."""

    def __init__(
        self,
        description: str,
        *,
        unit: str = " records",
        total: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.description = description
        self.unit = unit
        self.total = total
        self.count = 0
        self.interval = PROGRESS_INTERVAL
        self.clock = clock
        self.started = self.shown = clock()

    def update(self, n: int = 1) -> None:
        self.count += n
        now = self.clock()
        if now - self.shown >= self.interval:
            self.shown = now
            click.echo(self.line(now - self.started), err=True)

    def line(self, seconds: float) -> str:
        done = f"{self.count:,}"
        if self.total:
            done += f"/{self.total:,}{self.unit} ({self.count / self.total:.0%})"
        else:
            done += self.unit
        return f"neardup: {self.description}: {done}, {seconds:.0f} s"

    def close(self) -> None:
        """Nothing to clear: every line is complete when written."""

    def __enter__(self) -> ProgressLines:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def output_option(name: str, help: str) -> Callable[[F], F]:
    """``--pairs PATH`` / ``--clusters PATH``: an output file ('-' is stdout), the same option
    on every command that writes neardup's PAIRS and CLUSTERS formats."""
    return click.option(
        f"--{name}",
        f"{name}_path",
        metavar="PATH",
        type=click.Path(dir_okay=False, allow_dash=True),
        help=help,
    )


def progress_option(function: F) -> F:
    return click.option(
        "--progress/--no-progress",
        default=None,
        help="Show a progress bar on stderr [default: a bar on a terminal, else a line every "
        f"{PROGRESS_INTERVAL:g} s]; --no-progress shows none.",
    )(function)


def batch_size_option(function: F) -> F:
    return click.option(
        "--batch-size",
        type=click.IntRange(min=1),
        default=BATCH_RECORDS,
        show_default=True,
        help="Records per batch (a batch also ends at ~8 million characters of text).",
    )(function)


def jsonl_output_option(function: F) -> F:
    """``-o/--output`` of the commands that write one JSON line a record."""
    return click.option(
        "-o",
        "--output",
        default="-",
        show_default=True,
        type=click.Path(dir_okay=False, allow_dash=True),
        help="Where to write the JSON lines ('-' is stdout).",
    )(function)


def report_skipped(report: ErrorReport, read: int | None = None, source: str | None = None) -> None:
    """The first few reasons records were skipped, one per line on stderr (parameters a
    library message names put as the command's flags, as for errors); given how many records
    were ``read`` from ``source``, a warning when it held none at all (an empty file is often
    a mistake upstream, but an empty feed is not an error: the exit status stays 0)."""
    from .main import in_flags

    if read == 0 and report.count == 0:
        shown = "stdin" if source in (None, "-") else source
        click.echo(f"neardup: warning: {shown} holds no records; the outputs are empty", err=True)
    ctx = click.get_current_context(silent=True)
    flags = frozenset(opt for param in ctx.command.params for opt in param.opts) if ctx else frozenset()
    for message in report.messages:
        click.echo(f"neardup: skipped {in_flags(message, flags)}", err=True)
    if report.count > len(report.messages):
        click.echo(f"neardup: ... and {report.count - len(report.messages)} more skipped", err=True)


def output_error(target: str, exc: OSError) -> NeardupError:
    return NeardupError(f"cannot write {target}: {exc.strerror or exc}")


# Parameters that name files a command reads, and what the user calls them.
_INPUT_PARAMS = {
    "input_path": "INPUT",
    "gold_path": "GOLD",
    "predictions_path": "PREDICTIONS",
    "config_file": "--config",
    "user_dict": "--user-dict",
    "idf": "--idf",
    "stopword_files": "--stopwords",
    "index_url": "--index",
    "url": "URL",
    "source": "SOURCE",  # neardup records: a file or a database URL
}
_URL_PARAMS = ("index_url", "url", "source")


def command_inputs(ctx: click.Context) -> list[tuple[str, str]]:
    """The files the command reads: its input options and, for an SQLite store, its file."""
    found: list[tuple[str, str]] = []
    for param, role in _INPUT_PARAMS.items():
        value = ctx.params.get(param)
        values = value if isinstance(value, tuple | list) else [value]
        for item in values:
            if not isinstance(item, str) or not item or (param == "idf" and item in ("default", "none")):
                continue
            path = store_file(item) if param in _URL_PARAMS else item
            if path is not None:
                found.append((role, path))
    return found


def store_file(url: str) -> str | None:
    """The file of an SQLite store URL (a bare path is one), None for other stores."""
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    if scheme.lower().split("+")[0] != "sqlite" or not rest.startswith("/"):
        return None
    path = unquote(rest[1:].split("?", 1)[0])
    return path if path and path != ":memory:" else None


def check_outputs_not_inputs(ctx: click.Context, outputs: Mapping[str, str | None]) -> None:
    """Refuse, as bad usage (exit 2) and before anything is opened, an output that is or
    links to a file the command reads: writing it would destroy that input."""
    try:
        check_outputs_distinct(command_inputs(ctx), outputs)
    except OutputIsInputError as exc:
        raise click.UsageError(str(exc), ctx) from None


def check_max_distance(ctx: click.Context, bits: int, max_distance: int | None) -> None:
    """-k is a usage error (exit 2) when the fingerprint width cannot have that distance."""
    if max_distance is not None and not 0 <= max_distance < bits:
        raise click.BadParameter(
            f"{max_distance} is not a distance a {bits}-bit fingerprint can have; give 0 to {bits - 1} "
            f"(or a wider --bits)",
            ctx,
            param_hint="'-k' / '--max-distance'",
        )


def create_in_existing_option(function: Any) -> Any:
    """``--create-in-existing``: read by ``cli.index.open_index`` from the command's parameters."""
    return click.option(
        "--create-in-existing",
        is_flag=True,
        help="Create the index even inside an SQLite database that holds other tables "
        "(refused by default, so another application's database is never changed by mistake).",
    )(function)


def existing_index_option(function: Any) -> Any:
    """``dedup --index``'s ``--existing``: what a stored id sent with another text does."""
    return click.option(
        "--existing",
        type=click.Choice(["skip", "replace"]),
        default=None,
        help="With --index, a record whose id is stored already: skip (the default) answers a "
        "retry of the same text with its stored cluster and stops at another text naming its "
        "line; replace stores the new text over the stored record, which keeps its cluster id.",
    )(function)

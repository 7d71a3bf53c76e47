"""``neardup records``: duplicate rows of a database table, a query, or a CSV/Parquet file.

A thin adapter: options and the ``[records]`` / ``[fingerprint]`` tables of ``--config`` →
a :class:`~neardup.records.schema.RecordSchema` and a source (:mod:`neardup.records.sources`) →
:func:`~neardup.records.run.dedup_records` → the CLUSTERS file, the pairs and the groups table
(:mod:`neardup.records.run`).
"""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path
from typing import Any

import click
import numpy as np
from click.core import ParameterSource

from ..dedup.clusters import KEEP_POLICIES
from ..distance import BITS_CHOICES
from ..errors import ConfigError, OutputError
from ..fingerprint.config import FingerprintConfig
from ..fingerprint.hashing import HASH_NAMES
from ..io.output import write_jsonl
from ..io.record import ErrorReport
from ..records.dedup import AUTO, DEFAULT_MAX_DISTANCE, RECORD_CHECKS, RecordsResult, verification
from ..records.incremental import DEFAULT_BATCH_SIZE, MODES, BatchDone, IndexedRecords, index_records
from ..records.learned import DEFAULT_THRESHOLD, FEW_PAIRS_AGREEMENT
from ..records.run import SimhashSearch, dedup_records, pair_rows, write_group_table
from ..records.schema import ResolvedSchema, parse_field, schema_from_mapping
from ..records.sources import DEFAULT_CHUNK_SIZE, RowSource, SqlSource, open_source
from .common import (
    TOKENIZER_SETTINGS,
    check_outputs_not_inputs,
    output_option,
    parse_size,
    progress_bar,
    progress_option,
    report_skipped,
    tokenizer_options,
)
from .dedup import parse_distance

_EXPLICIT = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
_SETTINGS = {**TOKENIZER_SETTINGS, "bits": "bits", "hash_name": "hash", "no_stopwords": "stopwords"}
# [records] keys of --config that a flag of the same meaning overrides.
_RECORD_SETTINGS = ("max_distance", "verify", "min_similarity", "keep", "chunk_size")
# Options (flags or [records] keys) that ask for the Simhash search; without any of them the
# learned field weights (neardup.records.learned) find the duplicates.
_SIMHASH_FLAGS = ("max_distance", "verify", "min_similarity", "fields", "only_fields", "bits", "hash_name")
_SIMHASH_KEYS = ("max_distance", "verify", "min_similarity", "fields", "only_listed")


@click.command(short_help="Find duplicate rows of a database table, a query, or a CSV/Parquet file.")
@click.argument("source", metavar="SOURCE")
@click.option("--table", help="Table or view to read (matched exactly against the database's schema).")
@click.option(
    "--query", help="One SELECT statement whose rows are compared (instead of --table); run read-only."
)
@click.option("--schema", "db_schema", help="Database schema of --table and --write-table.")
@click.option("--key", help="Column that identifies a row (unique, never a feature).")
@click.option(
    "--field",
    "fields",
    multiple=True,
    metavar="COL[:KIND][:WEIGHT]",
    help="How a column counts: KIND short|text|number|date|ignore|auto, WEIGHT > 0 (repeatable).",
)
@click.option("--ignore", multiple=True, metavar="COL", help="Leave a column out (repeatable).")
@click.option("--only-fields", is_flag=True, help="Use only the columns named by --field.")
@click.option(
    "-k",
    "--max-distance",
    default="auto",
    show_default=True,
    callback=parse_distance,
    help="Simhash path only (giving it replaces the default, learned field weights): largest "
    "Hamming distance of two duplicate rows' fingerprints; auto: 18 up to 20,000 rows, "
    f"12 up to 100,000, then {DEFAULT_MAX_DISTANCE}.",
)
@click.option(
    "--verify",
    type=click.Choice((AUTO, *RECORD_CHECKS)),
    default=AUTO,
    show_default=True,
    help="Simhash path only (giving it replaces the learned weights): check each pair by fields "
    "(share of agreeing columns) or jaccard (shared features); "
    "auto: fields when -k auto searches wider than 8.",
)
@click.option(
    "--min-similarity",
    type=click.FloatRange(0.0, 1.0),
    help="Similarity a pair needs to pass --verify [default: fields 0.7, jaccard 0.5].",
)
@click.option(
    "--match-threshold",
    type=click.FloatRange(0.0, 1.0),
    default=DEFAULT_THRESHOLD,
    show_default=True,
    help="Learned weights (the default without -k/--verify/--field): match probability a pair needs.",
)
@click.option(
    "--keep",
    type=click.Choice(KEEP_POLICIES),
    default="first",
    show_default=True,
    help="Representative of a group: first row, longest (most filled columns), drop-all.",
)
@output_option(
    "clusters",
    'Write {"id": key, "cluster": representative key} for every row, in source order.',
)
@output_option(
    "pairs",
    'Write {"a": key, "b": key, "distance": d} for every accepted pair.',
)
@click.option(
    "--write-table",
    metavar="NAME",
    help="Create this table in the source database: row_key, group_id, representative, distance "
    "(never a table the source reads).",
)
@click.option("--replace-table", is_flag=True, help="Let --write-table replace an existing table.")
@click.option(
    "--index",
    "index_url",
    metavar="URL",
    help="Records index (SQLite path or store URL): the first run learns and stores the model and "
    "the rows; later runs check new rows against the stored ones and add them (docs/records.md).",
)
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="add",
    show_default=True,
    help="With --index: add new rows; any: whether each row has a stored duplicate; all: every "
    "stored duplicate with its match probability (any/all add nothing; JSON lines on stdout).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=DEFAULT_BATCH_SIZE,
    show_default=True,
    help="With --index: rows checked and stored per transaction.",
)
@click.option(
    "--refit",
    is_flag=True,
    help="With --index (add): first refit the weights on every stored row and regroup them, keeping "
    "the id of every group whose members did not change (also rebuilds an index of an older "
    "model version); SOURCE's new rows are added after.",
)
@click.option(
    "--report-batches",
    is_flag=True,
    help='With --index (add): print {"batch", "added", "skipped", "last_id"} on stdout after each '
    "committed batch.",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=1),
    default=DEFAULT_CHUNK_SIZE,
    show_default=True,
    help="Rows fetched per round trip (and per batch of fingerprints).",
)
@click.option(
    "--on-error",
    type=click.Choice(["fail", "skip"]),
    default="fail",
    show_default=True,
    help="Stop at the first bad row, or skip bad rows and count them.",
)
@click.option(
    "--max-bytes",
    callback=parse_size,
    metavar="SIZE",
    default="64M",
    show_default=True,
    help="Largest CSV row accepted (e.g. 64M, 1G).",
)
@click.option(
    "--bits",
    type=click.Choice([str(bits) for bits in BITS_CHOICES]),
    default="64",
    show_default=True,
    help="Fingerprint width.",
)
@click.option(
    "--hash",
    "hash_name",
    type=click.Choice(HASH_NAMES),
    default="city64",
    show_default=True,
    help="Feature hash.",
)
@click.option("--no-stopwords", is_flag=True, help="Keep stopwords in text columns.")
@tokenizer_options
@progress_option
@click.pass_context
def records(ctx: click.Context, /, source: str, **options: Any) -> None:
    """Find the duplicate rows of SOURCE: a database URL with --table or --query, or a CSV
    or Parquet file.

    By default, rows sharing a rare exact key (a column's value, a typo-tolerant name, a
    title's first words, two columns' values) are compared column by column, and weights
    learnt from those pairs without labels (Fellegi-Sunter, EM; printed to stderr) decide
    which are duplicates (--match-threshold).

    With -k, --verify, --min-similarity, --field or --only-fields (flags or [records] keys),
    each row becomes a Simhash fingerprint of its columns (seed 002's fields weighting):
    short columns (names, codes, dates, numbers) are one feature each, `column=value`,
    weight 2; long text columns are cut into words weighted by their counts; nulls count
    for nothing. Kinds are chosen from the first 1,000 rows unless --field gives them.
    Rows are streamed in --chunk-size chunks; the source is only read.

    With --index URL the model and rows are stored, and later runs check only new rows
    against the stored ones (--mode add|any|all; docs/records.md).

    \b
    URLs: sqlite:///file.db, postgresql://user@host/db, mysql://user@host/db (drivers:
    psycopg, pymysql; pip install 'neardup[stores]').
    --config FILE.toml may hold a [records] table (key, fields, ignore, only_listed,
    max_distance, verify, min_similarity, keep, chunk_size) and a [fingerprint] table
    (bits, hash, lang, ...); flags override it.

    \b
    Example:
      neardup records sqlite:///examples/complaints.db --table complaints --key id \\
          --ignore cluster --field complaint:text --field phone:3 --clusters groups.jsonl
      neardup records postgresql://app@db/crm --query "SELECT * FROM people WHERE active" \\
          --key person_id --verify fields -k 8 --write-table neardup_groups
      neardup records people.csv --key id --ignore cluster --clusters groups.jsonl
    """
    started = time.perf_counter()
    settings = _settings(ctx, options)
    if settings["index_url"]:
        _check_index_options(ctx, settings)
    else:
        _check_batch_options(ctx)
        _check_outputs(ctx, settings)
    report = ErrorReport()
    row_source = _open_source(source, settings, report)
    try:  # the source is closed however this ends
        if settings["write_table"] and not isinstance(row_source, SqlSource):
            raise click.UsageError("--write-table writes to the source database; SOURCE is a file", ctx)
        if settings["index_url"]:
            indexed = _run_index(row_source, settings, report)
        else:
            if isinstance(row_source, SqlSource) and settings["write_table"]:
                row_source.check_target(settings["write_table"], replace=settings["replace_table"])
            result = _run(row_source, settings, report)
    finally:
        row_source.close()
    if settings["index_url"]:
        _write_index_outputs(indexed, settings, time.perf_counter() - started)
    else:
        _write_outputs(result, row_source, settings)
        click.echo(_summary(result, settings, time.perf_counter() - started), err=True)
    report_skipped(report)


def _open_source(source: str, settings: dict[str, Any], report: ErrorReport) -> RowSource:
    return open_source(
        source,
        table=settings["table"],
        query=settings["query"],
        schema=settings["db_schema"],
        chunk_size=settings["chunk_size"],
        on_error=settings["on_error"],
        report=report,
        max_bytes=settings["max_bytes"],
    )


def _check_batch_options(ctx: click.Context) -> None:
    """Usage errors for the options of --index given without it (never silently ignored)."""
    for name, flag in (
        ("mode", "--mode"),
        ("batch_size", "--batch-size"),
        ("report_batches", "--report-batches"),
        ("refit", "--refit"),
    ):
        if ctx.get_parameter_source(name) in _EXPLICIT:
            raise click.UsageError(
                f"{flag} applies to a records index; give --index URL or leave it out", ctx
            )


def _check_index_options(ctx: click.Context, settings: dict[str, Any]) -> None:
    """Usage errors for options that --index does not take: it uses the learned weights and
    keeps its groups in the store."""
    if not settings["learned"]:
        raise click.UsageError(
            "--index uses the learned field weights; leave out -k, --verify, --min-similarity, "
            "--field, --only-fields, --bits and --hash (and those [records] keys)",
            ctx,
        )
    for option, name in (("--pairs", "pairs_path"), ("--write-table", "write_table")):
        if settings[name]:
            raise click.UsageError(f"{option} is not written with --index; use --clusters PATH", ctx)
    if (settings["clusters_path"] or settings["report_batches"]) and settings["mode"] != "add":
        raise click.UsageError(
            "--clusters and --report-batches are for --mode add; queries print JSON lines", ctx
        )
    if settings["refit"] and settings["mode"] != "add":
        raise click.UsageError("--refit regroups the rows stored in --index, which queries never change", ctx)
    if settings["report_batches"] and settings["clusters_path"] == "-":
        raise click.UsageError("--report-batches prints on stdout; write --clusters to a file", ctx)
    check_outputs_not_inputs(ctx, {"--clusters": settings["clusters_path"]})


def _run_index(row_source: RowSource, settings: dict[str, Any], report: ErrorReport) -> IndexedRecords:
    """:func:`~neardup.records.incremental.index_records` with the command's options."""
    with progress_bar(settings["progress"], "rows", unit=" rows") as bar:
        indexed = index_records(
            row_source,
            settings["index_url"],
            settings["record_schema"],
            mode=settings["mode"],
            threshold=float(settings["match_threshold"]),
            on_error=settings["on_error"],
            report=report,
            progress=bar.update,
            batch_size=settings["batch_size"],
            on_batch=_report_batch if settings["report_batches"] else None,
            refit=settings["refit"],
        )
    return indexed


def _report_batch(done: BatchDone) -> None:
    click.echo(json.dumps(done.to_dict(), ensure_ascii=False))


def _write_index_outputs(indexed: IndexedRecords, settings: dict[str, Any], seconds: float) -> None:
    """The clusters (add) or the query lines (any/all), then the summary on stderr."""
    if indexed.mode != "add":
        write_jsonl("-", indexed.check_rows())
    elif settings["clusters_path"]:
        write_jsonl(settings["clusters_path"], indexed.cluster_rows())
    rows = len(indexed.rows)
    rate = rows / seconds if seconds > 0 else 0.0
    if indexed.refit is not None:
        click.echo(f"neardup: {indexed.refit.describe()}", err=True)
    for count in indexed.refitted:
        click.echo(
            f"neardup: the store had grown to {count} rows: weights refitted on them (stored groups kept)",
            err=True,
        )
    if indexed.mode == "add":
        made = "made the index (model learned from these rows); " if indexed.created else ""
        joined = sum(row.status == "added" and row.group != row.key for row in indexed.rows)
        done = (
            f"{made}{indexed.added} added ({joined} joined a group), {indexed.skipped} already stored "
            "(skipped, unchanged)"
        )
    else:
        done = f"{indexed.duplicates} have a stored duplicate (--mode {indexed.mode}; nothing added)"
    click.echo(f"neardup: {rows} rows, {done}; {seconds:.1f} s ({rate:,.0f} rows/s)", err=True)


def _check_outputs(ctx: click.Context, settings: dict[str, Any]) -> None:
    """Usage errors for no output at all or an output that is an input; an error for an
    output file in a directory that does not exist, before any row is read."""
    if not (settings["clusters_path"] or settings["pairs_path"] or settings["write_table"]):
        raise click.UsageError(
            "nothing to write: give --clusters PATH, --pairs PATH or --write-table NAME", ctx
        )
    check_outputs_not_inputs(
        ctx, {"--clusters": settings["clusters_path"], "--pairs": settings["pairs_path"]}
    )
    for target in (settings["clusters_path"], settings["pairs_path"]):
        if target not in (None, "-") and not Path(target).parent.is_dir():
            raise OutputError(f"cannot open output file {target}: no directory {Path(target).parent}")


def _settings(ctx: click.Context, options: dict[str, Any]) -> dict[str, Any]:
    """Flags over the --config file's [records] and [fingerprint] tables over defaults."""
    data = _read_toml(options.get("config_file"))
    settings = dict(options)
    records_table = data.get("records", {})
    if not isinstance(records_table, dict):
        raise ConfigError("[records] in the config file must be a table")
    for name in _RECORD_SETTINGS:
        if name in records_table and ctx.get_parameter_source(name) not in _EXPLICIT:
            settings[name] = records_table[name]
    flags_schema: dict[str, Any] = {"key": options["key"]}
    if options["fields"]:
        flags_schema["fields"] = tuple(parse_field(text) for text in options["fields"])
    if options["ignore"]:
        flags_schema["ignore"] = tuple(options["ignore"])
    if options["only_fields"]:
        flags_schema["only_listed"] = True
    settings["record_schema"] = schema_from_mapping(records_table, **flags_schema)
    settings["config"] = _fingerprint_config(ctx, data, options)
    settings["learned"] = not any(
        ctx.get_parameter_source(name) in _EXPLICIT for name in _SIMHASH_FLAGS
    ) and not any(name in records_table for name in _SIMHASH_KEYS)
    distance = settings["max_distance"]
    settings["max_distance"] = None if distance in (None, AUTO) else int(distance)
    verify = str(settings["verify"])
    settings["check"] = AUTO if verify == AUTO else verification(verify, settings["min_similarity"])
    return settings


def _read_toml(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 (byte {exc.start}); re-save it as UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc


def _fingerprint_config(
    ctx: click.Context, data: dict[str, Any], options: dict[str, Any]
) -> FingerprintConfig:
    path = options.get("config_file")
    config = FingerprintConfig.from_toml(path) if path and "fingerprint" in data else FingerprintConfig()
    changes: dict[str, Any] = {}
    for param, name in _SETTINGS.items():
        if ctx.get_parameter_source(param) in _EXPLICIT:
            value = options[param]
            changes[name] = (
                int(value) if param == "bits" else (not value if param == "no_stopwords" else value)
            )
    return config.replace(**changes, weighting="fields")


def _run(row_source: RowSource, settings: dict[str, Any], report: ErrorReport) -> RecordsResult:
    def announce(resolved: ResolvedSchema) -> None:
        click.echo(f"neardup: {row_source.name}: {resolved.describe()}", err=True)

    simhash = (
        None
        if settings["learned"]
        else SimhashSearch(settings["config"], settings["max_distance"], settings["check"])
    )
    with progress_bar(settings["progress"], "rows", unit=" rows") as bar:
        result = dedup_records(
            row_source,
            settings["record_schema"],
            simhash=simhash,
            threshold=float(settings["match_threshold"]),
            keep=str(settings["keep"]),
            on_error=settings["on_error"],
            report=report,
            progress=bar.update,
            on_schema=announce,
        )
    if result.model is not None:
        for line in result.model.describe():
            click.echo(f"neardup: {line}", err=True)
    return result


def _write_outputs(result: RecordsResult, row_source: RowSource, settings: dict[str, Any]) -> None:
    if settings["clusters_path"]:
        write_jsonl(settings["clusters_path"], result.cluster_rows())
    if settings["pairs_path"]:
        write_jsonl(settings["pairs_path"], pair_rows(result))
    if settings["write_table"]:
        assert isinstance(row_source, SqlSource)
        write_group_table(
            result,
            row_source,
            settings["write_table"],
            schema=settings["db_schema"],
            replace=settings["replace_table"],
        )


def _summary(result: RecordsResult, settings: dict[str, Any], seconds: float) -> str:
    n = len(result.keys)
    clusters = result.clusters
    groups = int(np.count_nonzero((clusters.cluster == np.arange(n)) & (clusters.size >= 2))) if n else 0
    duplicates = int(np.count_nonzero(clusters.representative != np.arange(n))) if n else 0
    verified = f" ({len(result.candidates)} candidates, {result.check.mode} verified)" if result.check else ""
    rate = n / seconds if seconds > 0 else 0.0
    found = f"{len(result.pairs)} pairs within distance {result.max_distance}{verified}"
    if result.model is not None:
        rule = (
            f"with match probability >= {result.model.threshold:g}"
            if result.model.learned
            else f"agreeing on {FEW_PAIRS_AGREEMENT:.0%} of their filled columns"
        )
        found = f"{len(result.pairs)} pairs {rule} ({len(result.candidates)} candidates)"
    return (
        f"neardup: {n} rows, {found}, "
        f"{groups} groups of 2+ rows, {duplicates} duplicates of a representative; {result.empty} empty; "
        f"{result.skipped} skipped; {seconds:.1f} s ({rate:,.0f} rows/s)"
    )

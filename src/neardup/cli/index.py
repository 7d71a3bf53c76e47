"""``neardup index add|query|remove|stats URL``: a persistent index in a store named by URL.

Texts are fingerprinted with the settings stored in the index (written when ``index add``
creates it), so later batches are always comparable with earlier ones; fingerprint flags on
an existing index must agree with the stored settings or the command refuses. Every batch is
one transaction: an interrupted ``index add`` keeps the batches it reported and nothing of
the one in flight, and running the same command again skips what is stored and adds the rest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import click
import numpy as np
from click.core import ParameterSource

from ..dedup.batch import BucketStats
from ..dedup.documents import Index, digests_of, resolve_keys
from ..distance import to_hex
from ..errors import ConfigError, IndexNotFoundError, InputError, KeyNotFoundError
from ..fingerprint.config import FingerprintConfig
from ..index.config import IndexConfig, scheme_kind
from ..index.simhash_index import capped
from ..io.output import write_jsonl
from ..io.read import batches
from ..io.record import ErrorReport, Record
from ..similarity.verify import Verifier
from ..storage.base import Key, key_problem, shown_key
from ..storage.urls import redacted
from .common import (
    FINGERPRINT_SETTINGS,
    batch_size_option,
    check_max_distance,
    check_outputs_not_inputs,
    create_in_existing_option,
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
from .index_add import add_batch, first_of_each_id
from .index_kind import index_kind_option

DEFAULT_STORE_BATCH = 1000
TYPED = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)

url_argument = click.argument("url", metavar="URL")


@click.group(
    short_help="A persistent index: add, query, remove, stats, rebuild (SQLite, Redis, SQL servers, MongoDB)."
)
def index() -> None:
    """Keep fingerprints in a store and search it.

    URL names the store: a file path or sqlite:///path.db (the default kind),
    postgresql://user@host/db, mysql://user@host/db,
    redis://host:6379/0, mongodb://host/db, or memory:// (gone at exit).

    \b
    Example:
      neardup index add news.db docs.jsonl
      neardup index query news.db new.jsonl -o matches.jsonl
      neardup dedup new.jsonl --index news.db --clusters clusters.jsonl
      neardup index remove news.db doc-17 doc-18
      neardup index stats news.db
    """


#: What a new index verifies with: sketch (the default, with band search) or, with -k, a
#: Simhash block index verified by nothing, MinHash signatures or the combined score.
INDEX_VERIFY_MODES = ("sketch", "none", "minhash", "combined")
INDEX_VERIFY_HELP = (
    "When creating the index: sketch (the default) keeps a 512-byte text sketch per record, "
    "finds candidates by its bands and keeps those whose estimated shingle Jaccard reaches 0.5, "
    "as batch dedup does; none, minhash or combined make a Simhash block index (-k, default 3), "
    "verified by nothing, MinHash signatures of the text, or the combined score."
)


def requested_config(ctx: click.Context, max_distance: int | None) -> IndexConfig | None:
    """The settings the user typed (None when none): used to create a new index, and checked
    against the stored ones of an existing index. Without -k and --verify (or with --verify
    sketch) that is the full-recall band index; -k makes a Simhash block index."""
    typed = [param for param in FINGERPRINT_SETTINGS if ctx.get_parameter_source(param) in TYPED]
    verify = ctx.params.get("verify") or "auto"  # dedup --index: auto keeps the index's setting
    kind = ctx.params.get("index_kind")
    if (
        not typed
        and not ctx.params.get("config_file")
        and max_distance is None
        and verify == "auto"
        and kind is None
    ):
        return None
    fingerprint = text_config(ctx)
    if kind is not None:
        return kind_config(kind, fingerprint, max_distance, verify)
    if verify == "sketch" or (verify == "auto" and max_distance is None):
        if max_distance is not None:
            raise click.UsageError(
                "--verify sketch searches by text sketches, not by Hamming distance: drop -k, "
                "or give -k with --verify none, minhash or combined for a Simhash block index"
            )
        return IndexConfig.band_index(fingerprint)
    check_max_distance(ctx, fingerprint.bits, max_distance)
    verify = "none" if verify == "auto" else verify
    return IndexConfig(
        bits=fingerprint.bits,
        max_distance=3 if max_distance is None else max_distance,
        fingerprint=fingerprint,
        verification=None if verify == "none" else verification_settings(verify),
    )


def kind_config(
    kind: str, fingerprint: FingerprintConfig, max_distance: int | None, verify: str
) -> IndexConfig:
    """The index ``--index-kind`` asks for; the options that make another kind are refused."""
    if max_distance is not None or verify not in ("auto", "sketch"):
        given = "-k" if max_distance is not None else f"--verify {verify}"
        raise click.UsageError(
            f"{given} makes a Simhash block index; --index-kind {kind} searches by text sketches: "
            "drop one of them"
        )
    if kind == "band":
        return IndexConfig.band_index(fingerprint)
    if fingerprint.bits != 64:
        raise click.UsageError(
            f"--index-kind compact keeps 64-bit fingerprints: drop --bits {fingerprint.bits}"
        )
    return IndexConfig.compact(fingerprint)


def check_kind(url: str, config: IndexConfig | None) -> None:
    """Refuse ``--index-kind`` on an existing index of another kind, in one line."""
    context = click.get_current_context(silent=True)
    wanted = context.params.get("index_kind") if context else None
    if wanted is None or config is None:
        return
    try:
        stored = Index.open(url, create=False, check_files=False)
    except IndexNotFoundError:
        return
    with stored:
        kind = scheme_kind(stored.index.scheme)
    if kind != wanted:
        raise ConfigError(
            f"the index at {redacted(url)} is a {kind} index; --index-kind {wanted} applies when "
            "creating one: drop it to use the stored index, or give another store"
        )


def verification_settings(mode: str) -> dict[str, Any]:
    """What the meta records of a verifying index: every field of the Verifier."""
    if mode == "jaccard":
        raise click.UsageError(
            "an index decides with what it stores: use --verify sketch (the default: the stored "
            "sketch, and the exact Jaccard of the kept texts near the threshold), minhash or combined"
        )
    if mode == "sketch":
        return dict(IndexConfig.band_index().verification or {})
    return Verifier(mode).settings()


def open_index(url: str, config: IndexConfig | None) -> Index:
    """:meth:`Index.open` of ``url`` with ``config`` (the flags typed, or None for the stored
    settings or a new default index), and the command's ``--create-in-existing``."""
    context = click.get_current_context(silent=True)
    into_existing = bool(context and context.params.get("create_in_existing"))
    check_kind(url, config)
    return Index.open(url, config, create_in_existing=into_existing)


def create_option(function: Any) -> Any:
    return index_kind_option(
        create_in_existing_option(
            click.option(
                "-k",
                "--max-distance",
                type=click.IntRange(min=0),
                default=None,
                help="When creating the index: a Simhash block index answering this Hamming distance, "
                "instead of the default full-recall band index (--verify sketch).",
            )(function)
        )
    )


@index.command("add", short_help="Fingerprint records and add them to the index (creating it).")
@url_argument
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "--existing",
    type=click.Choice(["skip", "fail", "replace"]),
    default="skip",
    show_default=True,
    help="What to do with a record whose id is stored already: skip it when its text is the "
    "stored one (re-running an interrupted add completes it) and stop with an error naming its "
    "line when the text differs; fail: stop at any stored id; replace: store the new text over "
    "the stored record (its fingerprint, sketch and postings; it keeps its cluster id).",
)
@click.option(
    "--verify",
    type=click.Choice(INDEX_VERIFY_MODES),
    default=None,
    help=INDEX_VERIFY_HELP,
)
@click.option(
    "--report-batches",
    is_flag=True,
    help='Print {"batch", "added", "skipped", "last_id"} on stdout after each committed batch.',
)
@create_option
@fingerprint_options
@tokenizer_options
@input_options
@batch_size_option
@progress_option
@click.pass_context
def add(
    ctx: click.Context,
    /,
    url: str,
    input_path: str,
    existing: str,
    verify: str,
    report_batches: bool,
    max_distance: int | None,
    batch_size: int,
    progress: bool | None,
    **_: Any,
) -> None:
    """Add the records of INPUT to the index at URL, one transaction per batch.

    A new index is created with the fingerprint flags given here (or the defaults);
    an existing one uses its stored settings, and flags that disagree are refused.
    """
    config = requested_config(ctx, max_distance)
    report = ErrorReport()
    counts = {"added": 0, "skipped": 0, "replaced": 0, "repeated": 0, "empty": 0}
    first_seen: dict[Key, tuple[str, bytes | None]] = {}  # where each id first appeared, its digest
    with open_index(url, config) as opened:
        opened.fingerprinter  # noqa: B018 - refuse an index of bare fingerprints before reading
        records = storable_ids(open_records(ctx, input_path, report), ctx.params["on_error"], report)
        size = batch_size if ctx.get_parameter_source("batch_size") in TYPED else DEFAULT_STORE_BATCH
        with progress_bar(progress, "index add") as bar:
            for number, batch in enumerate(batches(records, size)):
                digests = digests_of(opened.verifier, batch)
                group = first_of_each_id(batch, digests, existing, first_seen)
                added, replaced, empty = add_batch(opened, group, existing)
                counts["empty"] += empty
                counts["added"] += added
                counts["replaced"] += replaced
                counts["skipped"] += len(batch) - added - replaced
                counts["repeated"] += len(batch) - len(group)
                if report_batches:
                    line = {"batch": number, "added": added, "skipped": len(batch) - added - replaced}
                    line |= {"replaced": replaced} if existing == "replace" else {}
                    last = batch[-1].id if batch else None
                    click.echo(json.dumps({**line, "last_id": last}, ensure_ascii=False))
                bar.update(len(batch))
        total = len(opened)
    message = f"neardup: added {counts['added']}, skipped {counts['skipped']} already stored"
    if counts["repeated"]:
        message += f" ({counts['repeated']} repeating an earlier id of the input)"
    if existing == "replace":
        message += f", replaced {counts['replaced']} whose text changed"
    message += f"; {counts['empty']} empty"
    click.echo(f"{message}; {report.count} bad records skipped; the index holds {total}", err=True)
    report_skipped(report, counts["added"] + counts["skipped"] + counts["replaced"], input_path)


@index.command("query", short_help="Find the stored near-duplicates of each record.")
@url_argument
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@jsonl_output_option
@click.option(
    "-k",
    "--max-distance",
    type=click.IntRange(min=0),
    default=None,
    help="Largest distance to report (at most the index's) [default: the index's].",
)
@click.option(
    "--max-matches",
    type=click.IntRange(min=1),
    default=None,
    help="Matches listed per record, the nearest first; a cut list says matches_truncated "
    "[default: every match].",
)
@input_options
@batch_size_option
@progress_option
@click.pass_context
def query(
    ctx: click.Context,
    /,
    url: str,
    input_path: str,
    output: str,
    max_distance: int | None,
    max_matches: int | None,
    batch_size: int,
    progress: bool | None,
    **_: Any,
) -> None:
    """For each record of INPUT, write {"id", "duplicate", "matches": [{"id", "distance",
    "fingerprint"}]} (matches by distance, then id), without changing the index. With
    --max-matches N only the nearest N are listed, and "matches_truncated": true says when
    there were more."""
    check_outputs_not_inputs(ctx, {"-o/--output": output})
    report = ErrorReport()
    counts = {"records": 0, "duplicates": 0, "matches": 0, "empty": 0}
    with Index.open(url, create=False) as opened:
        check_max_distance(ctx, opened.bits, max_distance)
        opened.fingerprinter  # noqa: B018 - refuse an index of bare fingerprints before reading
        records = open_records(ctx, input_path, report)
        with progress_bar(progress, "index query") as bar:
            groups = batches(records, batch_size)
            rows = _query_rows(opened, groups, (max_distance, max_matches), bar, counts)
            write_jsonl(output, rows)
    click.echo(
        f"neardup: {counts['records']} records queried, {counts['duplicates']} with a near-duplicate, "
        f"{counts['matches']} matches; {counts['empty']} empty; {report.count} bad records skipped",
        err=True,
    )
    report_skipped(report, counts["records"], input_path)


def _query_rows(
    opened: Index,
    groups: Iterator[list[Record]],
    limits: tuple[int | None, int | None],
    bar: Any,
    counts: dict[str, int],
) -> Iterator[dict[str, Any]]:
    """One output row per record, counted into ``counts``. A stored record with the query's id
    is that record itself, not a near-duplicate of it, so it is never listed (the index is
    asked for one match more than ``limits``' max_matches, the place it may take)."""
    k, max_matches = limits
    asked = None if max_matches is None else max_matches + 1
    bits = opened.bits
    for group in groups:
        prepared = opened.prepare(group)
        counts["empty"] += int(np.count_nonzero(prepared.empty_rows()))
        found = opened.query(prepared, max_distance=k, max_matches=asked)
        for record, found_for in zip(group, found, strict=True):
            listed = capped([match for match in found_for if match.key != record.id], max_matches)
            matches, truncated = list(listed), found_for.truncated or listed.truncated
            counts["records"] += 1
            counts["duplicates"] += bool(matches)
            counts["matches"] += len(matches)
            row = {
                "id": record.id,
                "duplicate": bool(matches),
                "matches": [
                    {"id": m.key, "distance": m.distance, "fingerprint": to_hex(m.fingerprint, bits)}
                    for m in matches
                ],
            }
            if truncated:  # as the service says it: only when cut
                row["matches_truncated"] = True
            yield row
        bar.update(len(group))


int_ids_option = click.option(
    "--int-ids",
    is_flag=True,
    help="The ids are integers (plain decimal: 42, -5; not 042), for records whose JSON id is a "
    "number. Without it every id is the string typed.",
)


@index.command("remove", short_help="Remove records from the index by id.")
@url_argument
@click.argument("keys", metavar="ID...", nargs=-1, required=True)
@click.option(
    "--missing",
    type=click.Choice(["fail", "ignore"]),
    default="fail",
    show_default=True,
    help="An id the index does not hold: fail removes nothing and names the first missing id (exit 1); "
    "ignore removes the ids it holds and counts the others.",
)
@int_ids_option
def remove(url: str, keys: tuple[str, ...], missing: str, int_ids: bool) -> None:
    """Remove the records with these ids (all or none). Ids are strings exactly as typed;
    with --int-ids they are integers (written 0, 42, -5: no leading zeros). Put -- before
    ids that start with '-'."""
    with Index.open(url, create=False) as opened:
        resolved = resolve_keys(opened.index, keys, int_ids=int_ids)
        absent = [text for text, key in zip(keys, resolved, strict=True) if key is None]
        present = list(dict.fromkeys(key for key in resolved if key is not None))
        if absent and missing == "fail":
            raise _missing_ids_error(absent, len(keys), len(present))
        opened.remove_many(present)
        left = len(opened)
    click.echo(f"neardup: removed {len(present)}; {len(absent)} not found; the index holds {left}", err=True)


@index.command("stats", short_help="Size, settings and bucket statistics of the index.")
@url_argument
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def stats(url: str, as_json: bool) -> None:
    """How many records the index holds, its settings and its bucket statistics."""
    with Index.open(url, create=False, check_files=False) as opened:  # fingerprints nothing
        count = len(opened)
        buckets = opened.index.stats()
        config = opened.index.config()
    url = redacted(url)
    if as_json:
        tables = [vars(table) for table in buckets.tables]
        click.echo(json.dumps({"url": url, "records": count, **config, "tables": tables}, ensure_ascii=False))
        return
    click.echo(f"url: {url}\nrecords: {count}\nbits: {config['bits']}")
    if config["scheme"].get("kind") == "bands":
        verification = config["verification"] or {}
        click.echo(
            f"search: {config['scheme']['bands']} bands of {config['scheme']['rows']} text-sketch bins; "
            f"a candidate counts when its sketch Jaccard reaches {verification.get('threshold', 0.5):g}"
        )
    else:
        click.echo(f"max_distance: {config['max_distance']}")
    fingerprint = config["fingerprint_config"]
    if fingerprint:
        click.echo("fingerprint: " + ", ".join(f"{k}={v}" for k, v in fingerprint.items()))
    click.echo(_bucket_lines(buckets))


def _missing_ids_error(absent: list[str], given: int, present: int) -> KeyNotFoundError:
    """Why nothing was removed; the --missing ignore hint only when some ids are stored."""
    first = _typed_id(absent[0])
    if not present:
        if len(absent) == 1:
            return KeyNotFoundError(f"id {first} is not in the index; nothing was removed")
        return KeyNotFoundError(
            f"none of the {len(absent)} ids is in the index (the first: {first}); nothing was removed"
        )
    return KeyNotFoundError(
        f"id {first} is not in the index ({len(absent)} of the {given} ids given); nothing was removed: "
        f"use --missing ignore to remove the {present} that {'is' if present == 1 else 'are'}"
    )


def _typed_id(text: str) -> str:
    """An id as typed; quoted only where plain text would hide what it is (empty, spaces,
    non-ASCII lookalikes such as '٣', quotes)."""
    plain = text.isascii() and text.isprintable() and not any(c in text for c in " '\"")
    return text if text and plain else repr(text)


def _bucket_lines(buckets: BucketStats) -> str:
    """:meth:`BucketStats.format` with the second hash described: a stored index has none
    (its threshold is 0, not a bucket size), the in-memory one splits buckets above a size."""
    lines = buckets.format().splitlines()
    second = (
        f"second hash: buckets of more than {buckets.threshold:g} entries are split"
        if buckets.threshold > 0
        else "second hash: none (a stored index reads each bucket whole)"
    )
    return "\n".join(second if line.startswith("second-hash threshold:") else line for line in lines)


def storable_ids(records: Iterable[Record], on_error: str, report: ErrorReport) -> Iterator[Record]:
    """The records whose ids every store can hold (docs/index.md, "Ids"); another id is a
    bad record, named by its file:line: it stops the run, or is skipped and counted."""
    for record in records:
        problem = key_problem(record.id)
        if problem is None:
            yield record
            continue
        error = InputError(f"id {shown_key(record.id)} {problem}", record.location)
        if on_error == "fail":
            raise error
        report.add(error)

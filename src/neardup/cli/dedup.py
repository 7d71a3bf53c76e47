"""``neardup dedup``: the near-duplicate pairs, clusters and deduplicated records of one input.

Fingerprints are computed batch by batch as ``neardup fingerprint`` does, then every pair
within the distance is found exactly by :func:`~neardup.dedup.batch.find_all_pairs` and the
pairs are joined into clusters by :func:`~neardup.dedup.clusters.cluster_records`. Pairs and
clusters name records by their ids, so ids must be unique. Only ids, text lengths and the
fingerprints are held in memory, plus the records themselves when ``--emit`` writes them.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click
import numpy as np
import numpy.typing as npt
from click.core import ParameterSource

from ..blocks import DEFAULT_MAX_TABLES, BlockScheme
from ..dedup.auto import AUTO_TEXT_LIMIT, resolve_search
from ..dedup.batch import DEFAULT_MU, BucketStats, Pairs, find_all_pairs
from ..dedup.clusters import KEEP_POLICIES, Clusters, cluster_records
from ..dedup.verify import DEFAULT_THRESHOLDS, META_FIELDS, VERIFY_MODES, Verifier, explain_pairs, metadata_of
from ..errors import ConfigError, InputError, NeardupError
from ..fingerprint import Fingerprinter
from ..io import ErrorReport, Record, RecordId, record_row, write_jsonl
from ..minhash import DEFAULT_CONTENT_WEIGHT, DEFAULT_NUM_PERM
from .common import (
    batch_size_option,
    batches,
    check_max_distance,
    check_outputs_not_inputs,
    fingerprint_options,
    input_options,
    open_records,
    output_option,
    progress_bar,
    progress_option,
    report_skipped,
    text_config,
    tokenizer_options,
)
from .incremental import run_incremental
from .index import create_in_existing_option

#: More tables than this from --scheme is surely a typo: each table is one sort of the whole
#: input (the auto-tuner has the same cap).
MAX_TABLES = DEFAULT_MAX_TABLES
_SCHEME = re.compile(r"^\s*(\d+)\s*,\s*(\d+)\s*$")


def parse_distance(ctx: click.Context, param: click.Parameter, value: str | int | None) -> int | None:
    """-k: a number of bits, or ``auto`` (None) for the size-dependent default."""
    if value is None or value == "auto":
        return None
    try:
        distance = int(value)
    except (TypeError, ValueError):
        raise click.BadParameter(f"{value!r} is not a number of bits or 'auto'", ctx, param) from None
    if distance < 0:
        raise click.BadParameter(f"{value!r} is negative; give 0 or more bits, or 'auto'", ctx, param)
    return distance


def _parse_scheme(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    match = _SCHEME.match(value)
    if not match:
        raise click.BadParameter(f"{value!r} is not M,T (blocks, key blocks), e.g. 6,2", ctx, param)
    return int(match.group(1)), int(match.group(2))


@click.command(short_help="Find near-duplicates: pairs, clusters and the deduplicated records.")
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@output_option(
    "pairs",
    'Write each pair within --max-distance as {"a": id, "b": id, "distance": d}.',
)
@output_option(
    "clusters",
    'Write {"id": id, "cluster": representative id} for every record, in input order.',
)
@click.option(
    "--emit",
    type=click.Choice(["kept", "dropped"]),
    help="Write the input records that --keep keeps (kept) or drops (dropped) to --output.",
)
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Where --emit writes the records as JSON lines ('-' is stdout).",
)
@click.option(
    "-k",
    "--max-distance",
    default="auto",
    show_default=True,
    callback=parse_distance,
    help="Largest Hamming distance (differing bits) of a near-duplicate pair; auto: by input "
    "size, 16 up to 20 k records, 12 up to 100 k, 6 up to 1 M, then 3 (see below).",
)
@click.option(
    "--keep",
    type=click.Choice(KEEP_POLICIES),
    default="first",
    show_default=True,
    help="Which record represents a cluster and survives (see above).",
)
@click.option(
    "--scheme",
    metavar="M,T",
    callback=_parse_scheme,
    help="Block scheme: M blocks, tables keyed on T of them (needs T <= M - max-distance) "
    "[default: tuned to the input size].",
)
@click.option(
    "--mu",
    type=click.FloatRange(min=0),
    default=DEFAULT_MU,
    show_default=True,
    help="Second hash: a bucket over (1 + mu) x the mean bucket is split again.",
)
@click.option("--stats", is_flag=True, help="Print the bucket statistics and a timed summary on stderr.")
@click.option(
    "--index",
    "index_url",
    metavar="URL",
    help="Dedup against the index at URL (a file path, sqlite:///, postgresql://, mysql://, "
    "redis://, mongodb://) and add the new records to it; created if absent.",
)
@create_in_existing_option
@click.option(
    "--verify",
    type=click.Choice(("auto", *VERIFY_MODES)),
    default="auto",
    show_default=True,
    help="Confirm each candidate pair: shingle Jaccard, its MinHash estimate, or the combined score; "
    "auto: jaccard when -k auto searches wider than 3, else none.",
)
@click.option(
    "--threshold",
    "verify_threshold",
    type=click.FloatRange(0.0, 1.0),
    help="Smallest similarity --verify accepts [default: "
    + ", ".join(f"{mode} {value}" for mode, value in DEFAULT_THRESHOLDS.items() if mode != "none")
    + "].",
)
@click.option(
    "--content-weight",
    type=click.FloatRange(0.0, 1.0),
    default=DEFAULT_CONTENT_WEIGHT,
    show_default=True,
    help="mu of the combined score mu/(H+1) + (1-mu)*J(metadata).",
)
@click.option(
    "--meta-field",
    "meta_fields",
    multiple=True,
    metavar="NAME",
    help="Record field holding metadata (list or 'a, b' text; repeatable) "
    f"[default: {', '.join(META_FIELDS)}].",
)
@click.option(
    "--num-perm",
    type=click.IntRange(min=1),
    default=DEFAULT_NUM_PERM,
    show_default=True,
    help="MinHash functions per signature.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Add jaccard, metadata_jaccard, score and the top shared features to each --pairs line.",
)
@fingerprint_options
@tokenizer_options
@input_options
@batch_size_option
@progress_option
@click.pass_context
def dedup(
    ctx: click.Context,
    /,
    input_path: str,
    pairs_path: str | None,
    clusters_path: str | None,
    emit: str | None,
    output: str,
    max_distance: int | None,
    keep: str,
    scheme: tuple[int, int] | None,
    mu: float,
    stats: bool,
    index_url: str | None,
    verify: str,
    verify_threshold: float | None,
    content_weight: float,
    meta_fields: tuple[str, ...],
    num_perm: int,
    explain: bool,
    batch_size: int,
    progress: bool | None,
    **_: Any,
) -> None:
    """Find the near-duplicate records of INPUT (JSONL, CSV or Parquet; '-' is stdin).

    Every record is fingerprinted as `neardup fingerprint` does (same options), every
    pair within --max-distance bits is found exactly (block keys, no pair missed), and
    pairs are joined into clusters: a near-duplicate of a near-duplicate is in the same
    cluster. Ids are written as given; they must be unique.

    By default (-k auto, --verify auto) the distance follows the input size: 16 bits up
    to 20,000 records, 12 up to 100,000, 6 up to 1,000,000, each candidate confirmed by
    the shingle Jaccard of the texts (--verify jaccard); above that, 3 bits and Simhash
    alone. On the labelled news dev sets this scores F1 0.99 where -k 3 alone scores
    0.41-0.45 (docs/evaluation.md). A -k given by hand is searched as given, with no
    verification unless --verify asks for it.

    \b
    Outputs (give at least one):
      --pairs PATH         {"a": id, "b": id, "distance": d}, a the earlier record
      --clusters PATH      {"id": id, "cluster": representative id} per record, in
                           input order (a record with no near-duplicate is its own cluster)
      --emit kept|dropped  the input records kept (or dropped) by --keep, as JSON lines
                           to -o; JSONL and CSV records keep all their fields (CSV values
                           are strings), Parquet records their id, text and title columns

    \b
    --keep picks each cluster's representative and the records that survive:
      first     the earliest record (input order) represents the cluster and is kept
      longest   the record with the longest text (ties: the earliest) is kept
      drop-all  every record of a cluster of two or more is dropped; the earliest
                names the cluster

    A record whose text yields no features (empty, only stopwords or punctuation) gets
    the all-zero fingerprint, so all such records pair up at distance 0 in one cluster
    (unless a verification rejects them: their texts share no shingles).

    \b
    --verify confirms each pair found within --max-distance before clustering, so a
    wide search (-k 10 to 16, for recall on short or edited texts) keeps its precision:
      none      Simhash alone
      jaccard   exact Jaccard of the texts' character shingles >= --threshold (0.5)
      minhash   MinHash estimate of that Jaccard >= --threshold (0.5)
      combined  mu/(H+1) + (1-mu)*J(metadata) >= --threshold (0.2), seed 000's score;
                metadata from --meta-field (tags, keywords, refs), else top keywords
    Pairs of identical texts are always kept. --explain adds to each --pairs line the
    shingle Jaccard, the metadata estimate, the combined score and shared features.

    --index URL dedups INPUT against a stored index instead (seed 002's incremental
    mode) and adds the new records to it, one transaction per batch: each record joins
    the cluster of its nearest stored or earlier match, named by the record that started
    it (perhaps in an earlier run), and keeps it for good. Records already stored get
    their stored answer. --keep first only; --verify minhash|combined on a new index
    stores signatures and verifies every match (recorded in the index). See `neardup
    index --help`.

    \b
    Example:
      neardup dedup docs.jsonl --pairs pairs.jsonl --clusters clusters.jsonl
      neardup dedup today.jsonl --index news.db --clusters clusters.jsonl
      neardup dedup short.jsonl -k 16 --verify jaccard --pairs pairs.jsonl --explain
      neardup dedup docs.jsonl --emit kept --keep longest -o deduplicated.jsonl
      neardup dedup rows.csv --id-field doc_id --text-field body --bits 128 -k 6 --pairs pairs.jsonl
      cat docs.jsonl | neardup dedup - --emit dropped --stats > dropped.jsonl
    """
    started = time.perf_counter()
    targets = check_outputs(ctx, pairs_path, clusters_path, emit, output)
    if index_url is not None:
        if explain or scheme is not None:
            raise click.UsageError("--explain and --scheme do not apply with --index", ctx)
        run_incremental(
            ctx,
            url=index_url,
            input_path=input_path,
            pairs_path=pairs_path,
            clusters_path=clusters_path,
            emit=emit,
            output=output,
            keep=keep,
            batch_size=batch_size,
            progress=progress,
        )
        return
    if explain and pairs_path is None:
        raise click.UsageError("--explain adds fields to the --pairs lines; add --pairs PATH", ctx)
    if scheme is not None and max_distance is None:
        raise click.UsageError("--scheme guarantees a distance: give it with -k/--max-distance", ctx)
    Verifier(VERIFY_MODES[0] if verify == "auto" else verify, verify_threshold, content_weight, num_perm)
    config = text_config(ctx)
    check_max_distance(ctx, config.bits, max_distance)
    if max_distance is not None:
        block_scheme_of(config.bits, max_distance, scheme)  # refuse a bad scheme before reading
    auto_texts = verify == "auto" and max_distance is None and not explain
    for target in targets:
        check_directory(target)
    fingerprinter = Fingerprinter(config=config)
    ready = time.perf_counter()
    report = ErrorReport()
    records = open_records(ctx, input_path, report)
    with progress_bar(progress, "fingerprint") as bar:
        collected = _collect(
            fingerprinter,
            batches(records, batch_size),
            keep_records=emit is not None,
            keep_texts=explain or verify not in ("none", "auto") or auto_texts,
            text_limit=AUTO_TEXT_LIMIT if auto_texts else None,
            meta_fields=meta_fields or META_FIELDS,
            bar=bar,
        )
    fingerprinted = time.perf_counter()

    n = len(collected.ids)
    max_distance, verify = resolve_search(n, config.bits, max_distance, verify)
    verifier = Verifier(verify, verify_threshold, content_weight, num_perm)
    block_scheme = block_scheme_of(config.bits, max_distance, scheme)
    block_scheme = block_scheme or BlockScheme.auto(n, config.bits, max_distance)
    bucket_stats = BucketStats()
    with progress_bar(progress, "pairs", unit=" tables", total=block_scheme.table_count) as bar:
        pairs = find_all_pairs(
            collected.fingerprints,
            max_distance,
            bits=config.bits,
            scheme=block_scheme,
            mu=mu,
            stats=bucket_stats,
            progress=bar.update,
        )
    candidates = len(pairs)
    if verify != "none":
        pairs = _verified(verifier, fingerprinter, collected, pairs)
    paired = time.perf_counter()
    lengths = collected.lengths if keep == "longest" else None
    clusters = cluster_records(n, pairs.i, pairs.j, keep=keep, lengths=lengths)

    if pairs_path is not None:
        rows = _pair_rows(collected.ids, pairs)
        if explain:
            rows = _explained_rows(rows, verifier, fingerprinter, collected, pairs)
        write_jsonl(pairs_path, rows)
    if clusters_path is not None:
        write_jsonl(clusters_path, _cluster_rows(collected.ids, clusters))
    if emit is not None:
        params = ctx.params
        fields = (params["id_field"], params["text_field"], params["title_field"])
        write_jsonl(output, _record_rows(collected.records, clusters, emit == "kept", fields))

    summary = Summary.of(collected, report, pairs, clusters, max_distance, keep)
    summary = replace(summary, verify=verify, rejected=candidates - len(pairs))
    if stats:
        click.echo(bucket_stats.format(), err=True)
        finished = time.perf_counter()
        timings = (ready - started, fingerprinted - ready, paired - fingerprinted, finished - paired)
        click.echo(summary.details(timings), err=True)
    else:
        click.echo(summary.line(), err=True)
    report_skipped(report)


# -- checks before any work --------------------------------------------------------------------


def check_outputs(
    ctx: click.Context, pairs_path: str | None, clusters_path: str | None, emit: str | None, output: str
) -> list[str]:
    """The files to write; usage errors for no output at all, -o without --emit, two outputs
    on stdout or the same file twice, and an output that is an input (INPUT, --index, ...)."""
    if emit is None and ctx.get_parameter_source("output") == ParameterSource.COMMANDLINE:
        raise click.UsageError("-o/--output is where --emit writes records; add --emit kept|dropped", ctx)
    if pairs_path is None and clusters_path is None and emit is None:
        raise click.UsageError(
            "nothing to write: give --pairs PATH, --clusters PATH or --emit kept|dropped", ctx
        )
    named = {"--pairs": pairs_path, "--clusters": clusters_path, "--output": output if emit else None}
    check_outputs_not_inputs(ctx, named)
    given = [(flag, path) for flag, path in named.items() if path is not None]
    seen: dict[str, str] = {}
    for flag, path in given:
        key = "-" if path == "-" else str(Path(path).resolve())
        if key in seen:
            where = "stdout ('-')" if path == "-" else path
            raise click.UsageError(
                f"{seen[key]} and {flag} both write to {where}; give them different files", ctx
            )
        seen[key] = flag
    return [path for _, path in given if path != "-"]


def check_directory(target: str) -> None:
    """Fail before the work, not after it, when an output cannot be created."""
    parent = Path(target).parent
    if not parent.is_dir():
        raise NeardupError(f"cannot open output file {target}: no directory {parent}")


def block_scheme_of(bits: int, max_distance: int, scheme: tuple[int, int] | None) -> BlockScheme | None:
    """The --scheme block scheme, or None for the auto-tuned one; either way the distance is
    checked against the width here, before any input is read."""
    if scheme is None:
        BlockScheme(bits, max_distance)  # raises for a distance the width cannot have
        return None
    num_blocks, key_blocks = scheme
    try:
        chosen = BlockScheme(bits, max_distance, num_blocks, key_blocks)
    except ConfigError as exc:
        raise ConfigError(f"--scheme {num_blocks},{key_blocks}: {exc}") from exc
    if chosen.table_count > MAX_TABLES:
        raise ConfigError(
            f"--scheme {num_blocks},{key_blocks} means C({num_blocks},{key_blocks}) = {chosen.table_count:,} "
            f"tables, each a sort of the whole input; choose a scheme with at most {MAX_TABLES} tables"
        )
    return chosen


# -- fingerprinting ----------------------------------------------------------------------------


@dataclass
class _Collected:
    """What later steps need of every record, in input order."""

    bits: int
    ids: list[RecordId] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    metadata: list[list[str] | None] = field(default_factory=list)
    parts: list[npt.NDArray[np.uint64]] = field(default_factory=list)
    empty: int = 0

    @property
    def fingerprints(self) -> npt.NDArray[np.uint64]:
        if not self.parts:
            shape = (0, 2) if self.bits == 128 else (0,)
            return np.empty(shape, dtype=np.uint64)
        return np.concatenate(self.parts)


def _collect(
    fingerprinter: Fingerprinter,
    groups: Iterable[list[Record]],
    *,
    keep_records: bool,
    bar: Any,
    keep_texts: bool = False,
    text_limit: int | None = None,
    meta_fields: tuple[str, ...] = META_FIELDS,
) -> _Collected:
    """Fingerprint every record; ids are checked for uniqueness as they arrive. Texts and
    metadata are kept only when pairs are verified or explained, and only while there are no
    more than ``text_limit`` records (beyond it the automatic search does not verify)."""
    collected = _Collected(bits=fingerprinter.bits)
    first_seen: dict[RecordId, str] = {}
    for group in groups:
        for record in group:
            if record.id in first_seen:
                raise InputError(
                    f"duplicate id {record.id!r}, first seen at {first_seen[record.id]}; pairs and "
                    f"clusters name records by id, so ids must be unique (choose another field with "
                    f"--id-field)",
                    record.location,
                )
            first_seen[record.id] = record.location
        encoded = fingerprinter.encode_many([r.text for r in group], [r.title for r in group])
        collected.parts.append(np.asarray(encoded.fingerprints, dtype=np.uint64))
        collected.empty += int(np.count_nonzero(encoded.feature_counts == 0))
        collected.ids.extend(record.id for record in group)
        collected.lengths.extend(len(record.text) for record in group)
        if keep_records:
            collected.records.extend(group)
        if keep_texts:
            collected.texts.extend(record.text for record in group)
            collected.metadata.extend(metadata_of(record.fields, meta_fields) for record in group)
            if text_limit is not None and len(collected.texts) > text_limit:
                keep_texts = False
                collected.texts, collected.metadata = [], []
        bar.update(len(group))
    return collected


# -- verification ------------------------------------------------------------------------------


def _verified(verifier: Verifier, fingerprinter: Fingerprinter, collected: _Collected, pairs: Pairs) -> Pairs:
    """The candidate pairs that pass --verify."""
    if not len(pairs):
        return pairs
    result = verifier.verify_texts(
        pairs.distance, pairs.i, pairs.j, collected.texts, collected.metadata, fingerprinter
    )
    kept = result.kept
    return Pairs(pairs.i[kept], pairs.j[kept], pairs.distance[kept])


def _explained_rows(
    rows: Iterator[dict[str, Any]],
    verifier: Verifier,
    fingerprinter: Fingerprinter,
    collected: _Collected,
    pairs: Pairs,
) -> Iterator[dict[str, Any]]:
    explanations = explain_pairs(
        verifier, fingerprinter, collected.texts, collected.metadata, pairs.i, pairs.j, pairs.distance
    )
    for row, explanation in zip(rows, explanations, strict=True):
        yield {**row, **explanation.as_dict()}


# -- output ------------------------------------------------------------------------------------


def _pair_rows(ids: list[RecordId], pairs: Pairs) -> Iterator[dict[str, Any]]:
    for a, b, distance in zip(pairs.i.tolist(), pairs.j.tolist(), pairs.distance.tolist(), strict=True):
        yield {"a": ids[a], "b": ids[b], "distance": distance}


def _cluster_rows(ids: list[RecordId], clusters: Clusters) -> Iterator[dict[str, Any]]:
    for record_id, representative in zip(ids, clusters.representative.tolist(), strict=True):
        yield {"id": record_id, "cluster": ids[representative]}


def _record_rows(
    records: list[Record], clusters: Clusters, kept: bool, fields: tuple[str, str, str]
) -> Iterator[dict[str, Any]]:
    """The records on the chosen side of the keep policy, as they were read."""
    for record, keep in zip(records, clusters.keep.tolist(), strict=True):
        if keep == kept:
            yield record_row(record, fields)


@dataclass(frozen=True)
class Summary:
    records: int
    empty: int
    skipped: int
    pairs: int
    exact: int
    max_distance: int
    clusters: int
    largest: int
    dropped: int
    keep: str
    verify: str = "none"
    rejected: int = 0

    @classmethod
    def of(
        cls,
        collected: _Collected,
        report: ErrorReport,
        pairs: Pairs,
        clusters: Clusters,
        max_distance: int,
        keep: str,
    ) -> Summary:
        n = len(collected.ids)
        leaders = clusters.cluster == np.arange(n)
        return cls(
            records=n,
            empty=collected.empty,
            skipped=report.count,
            pairs=len(pairs),
            exact=int(np.count_nonzero(pairs.distance == 0)),
            max_distance=max_distance,
            clusters=int(np.count_nonzero(leaders & (clusters.size >= 2))),
            largest=int(clusters.size.max()) if n else 0,
            dropped=n - int(np.count_nonzero(clusters.keep)),
            keep=keep,
        )

    def line(self) -> str:
        verified = f" ({self.rejected} rejected by --verify {self.verify})" if self.verify != "none" else ""
        return (
            f"neardup: {self.records} records, {self.pairs} pairs within distance {self.max_distance}"
            f"{verified}, {self.clusters} clusters of 2+ records, {self.dropped} dropped "
            f"(--keep {self.keep}); {self.empty} empty; {self.skipped} skipped"
        )

    def details(self, seconds: tuple[float, float, float, float]) -> str:
        setup, fingerprints, pairs, rest = seconds
        rate = self.records / fingerprints if fingerprints > 0 else math.inf
        total = sum(seconds)
        return "\n".join(
            [
                f"records: {self.records} ({self.empty} empty, {self.skipped} skipped)",
                f"pairs: {self.pairs} within distance {self.max_distance} ({self.exact} at distance 0)"
                + (f", {self.rejected} rejected by --verify {self.verify}" if self.verify != "none" else ""),
                f"clusters of 2+ records: {self.clusters} (largest {self.largest})",
                f"dropped: {self.dropped} (--keep {self.keep}), kept {self.records - self.dropped}",
                f"seconds: {total:.2f} (set-up {setup:.2f}, fingerprints {fingerprints:.2f} at "
                f"{rate:,.0f} records/s, pairs {pairs:.2f}, clusters and output {rest:.2f})",
            ]
        )

"""``neardup dedup``: the near-duplicate pairs, clusters and deduplicated records of one input.

A thin adapter over :func:`neardup.dedup.pipeline.dedup_documents`, which owns the job
(fingerprints, candidate pairs, verification, clusters, keep policy): this module parses the
options, refuses bad usage and unusable outputs before any input is read, and writes the rows
and the summary. Pairs and clusters name records by their ids, so ids must be unique.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import click
from click.core import ParameterSource

from ..dedup.batch import DEFAULT_MU
from ..dedup.clusters import KEEP_POLICIES
from ..dedup.pipeline import MAX_TABLES as MAX_TABLES
from ..dedup.pipeline import SEARCHES, DedupResult, DedupSettings, dedup_documents
from ..dedup.pipeline import block_scheme_of as block_scheme_of
from ..dedup.summary import Summary as Summary
from ..dedup.workspace import MIN_MEMORY
from ..errors import OutputError
from ..fingerprint.fingerprinter import Fingerprinter
from ..io.output import write_jsonl
from ..io.record import ErrorReport, record_row
from ..similarity.minhash import DEFAULT_CONTENT_WEIGHT, DEFAULT_NUM_PERM, MAX_NUM_PERM
from ..similarity.verify import DEFAULT_THRESHOLDS, META_FIELDS, VERIFY_MODES
from .common import (
    batch_size_option,
    check_max_distance,
    check_outputs_not_inputs,
    create_in_existing_option,
    existing_index_option,
    fingerprint_options,
    input_options,
    open_records,
    output_option,
    parse_size,
    progress_bar,
    progress_option,
    report_skipped,
    text_config,
    tokenizer_options,
)
from .index_kind import index_kind_option

_SCHEME = re.compile(r"^\s*(\d+)\s*,\s*(\d+)\s*$")


def parse_distance(ctx: click.Context, param: click.Parameter, value: str | int | None) -> int | None:
    """-k: a number of bits, or ``auto`` (None): chosen from the data, or by size."""
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


def _memory(ctx: click.Context, param: click.Parameter, value: str | int) -> int:
    size = parse_size(ctx, param, value)
    if size < MIN_MEMORY:
        raise click.BadParameter(f"{value!r} is below the {MIN_MEMORY >> 20}M a run needs", ctx, param)
    return size


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
    help="The Simhash search (implies --search simhash): largest Hamming distance (differing "
    "bits) of a near-duplicate pair; auto: the widest (up to 22 at 64 bits) whose candidates "
    "the check of the texts can afford, from the fingerprints and text lengths; without a check "
    "(--verify none) by input size, 16 up to 20 k records, 12 up to 100 k, 6 up to 1 M, then 3.",
)
@click.option(
    "--search",
    "search",
    type=click.Choice(SEARCHES),
    default=None,
    help="How candidates are found: lsh (shingle LSH, every pair of shingle Jaccard >= 0.5 at "
    "any size) or simhash (the exact Simhash search within -k bits) [default: lsh; simhash "
    "when -k or --scheme is given].",
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
@existing_index_option
@index_kind_option
@click.option(
    "--verify",
    type=click.Choice(("auto", *VERIFY_MODES)),
    default="auto",
    show_default=True,
    help="Check each candidate pair (see below); auto: jaccard, or under --search simhash "
    "jaccard when -k auto searches wider than 3, else none.",
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
    type=click.IntRange(min=1, max=MAX_NUM_PERM),
    default=DEFAULT_NUM_PERM,
    show_default=True,
    help="MinHash functions per signature.",
)
@click.option(
    "--memory",
    callback=_memory,
    default="4G",
    show_default=True,
    help="What the LSH search holds in memory (e.g. 4G, 512M); past it, band keys, check bins, "
    "texts and candidate pairs go to files under --tmp-dir. The output is the same at any size.",
)
@click.option(
    "--tmp-dir",
    type=click.Path(exists=True, file_okay=False, writable=True),
    help="Where the LSH search puts what exceeds --memory: a private directory, removed when the "
    "run ends, however it ends [default: the system's temporary directory, e.g. $TMPDIR].",
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
    search: str | None,
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
    memory: int,
    tmp_dir: str | None,
    batch_size: int,
    progress: bool | None,
    **_: Any,
) -> None:
    """Find the near-duplicate records of INPUT (JSONL, CSV or Parquet; '-' is stdin).

    Pairs of near-duplicate records are found and joined into clusters: a near-duplicate
    of a near-duplicate is in the same cluster. Ids are written as given; they must be
    unique.

    By default (--search lsh) candidates come from a shingle LSH whose recall does not
    fall with the input size (every pair of shingle Jaccard >= 0.5 found with probability
    >= 0.99), each checked on the texts' sketches and, where those are unsure, on the exact
    shingle Jaccard. On the labelled dev sets this scores F1 0.99 where -k 3 alone scores
    0.41-0.60 (docs/candidates.md). --search simhash, or a -k or --scheme given by hand, is
    the exact Simhash search instead: records fingerprinted as `neardup fingerprint` does
    (same options), every pair within --max-distance bits found (block keys, no pair
    missed); a -k given by hand is searched as given, with no check unless --verify asks
    for it. An option the chosen search does not read is refused (exit 2), never ignored.

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

    A record without letters or digits (no shingles, no features) pairs with nothing,
    under either search, as in an index, the service and the Spark job; the summary
    counts it as empty.

    \b
    --verify checks each candidate before clustering. Under --search lsh:
      jaccard   the sketch estimate, and the exact shingle Jaccard near --threshold (0.5)
                (auto: the default)
      sketch    the sketch estimate alone (as an index decides)
      none      candidates unchecked (the summary says so)

    \b
    Under --search simhash, so that a wide search (-k 10 to 16) keeps its precision:
      none      Simhash alone
      jaccard   exact Jaccard of the texts' character shingles >= --threshold (0.5)
      minhash   MinHash estimate of that Jaccard >= --threshold (0.5), --num-perm functions
      sketch    the 512-bin sketch estimate of that Jaccard >= --threshold (0.5)
      combined  mu/(H+1) + (1-mu)*J(metadata) >= --threshold (0.2), seed 000's score;
                metadata from --meta-field (tags, keywords, refs), else top keywords
    Pairs of identical texts are always kept. --explain adds to each --pairs line the
    evidence: the exact shingle Jaccard and shared features, with the check's estimate
    (LSH) or the metadata estimate and the combined score (Simhash).

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
    \f
    Long: the docstring is the command's --help; the body is an adapter over dedup_documents.
    """
    started = time.perf_counter()
    targets = check_outputs(ctx, pairs_path, clusters_path, emit, output)
    if index_url is not None:
        _dedup_against_index(ctx, index_url)
        return
    for name in ("existing", "index_kind"):
        if ctx.params.get(name) is not None:
            raise click.UsageError(f"--{name.replace('_', '-')} applies with --index only", ctx)

    def given(name: str, value: Any) -> Any:
        return None if ctx.get_parameter_source(name) == ParameterSource.DEFAULT else value

    settings = DedupSettings(
        max_distance=max_distance,
        verify=verify,
        threshold=verify_threshold,
        content_weight=given("content_weight", content_weight),
        num_perm=given("num_perm", num_perm),
        keep=keep,
        scheme=scheme,
        mu=given("mu", mu),
        explain=explain,
        keep_records=emit is not None,
        meta_fields=meta_fields or None,
        batch_size=batch_size,
        search=search,
        memory=given("memory", memory),
        tmp_dir=tmp_dir,
    )
    check_applicable(ctx, settings)
    fingerprinter = _checked_fingerprinter(ctx, settings, pairs_path, targets)
    ready = time.perf_counter()
    report = ErrorReport()
    with _Bars(progress) as bars:
        records = open_records(ctx, input_path, report)
        result = dedup_documents(records, fingerprinter=fingerprinter, settings=settings, progress=bars)
    _write_outputs(ctx, result, pairs_path, clusters_path, emit, output)
    summary = replace(result.summary, skipped=report.count)
    if stats:
        click.echo(result.bucket_stats.format(), err=True)
        click.echo(summary.details(_timings(result.seconds, started, ready)), err=True)
    else:
        click.echo(summary.line(), err=True)
    report_skipped(report, summary.records + report.count, input_path)


def _write_outputs(
    ctx: click.Context,
    result: DedupResult,
    pairs_path: str | None,
    clusters_path: str | None,
    emit: str | None,
    output: str,
) -> None:
    """Write the pairs, the clusters and the kept (or dropped) records asked for."""
    if pairs_path is not None:
        write_jsonl(pairs_path, result.pair_rows())
    if clusters_path is not None:
        write_jsonl(clusters_path, result.cluster_rows())
    if emit is not None:
        fields = (ctx.params["id_field"], ctx.params["text_field"], ctx.params["title_field"])
        write_jsonl(output, (record_row(r, fields) for r in result.selected_records(emit == "kept")))


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
    check_outputs_not_inputs(ctx, named)  # also two outputs that are one file (links too)
    given = [(flag, path) for flag, path in named.items() if path is not None]
    return [path for _, path in given if path != "-"]


#: The flag of each setting :meth:`DedupSettings.not_applicable` may name.
SETTING_FLAGS = {
    "max_distance": "-k/--max-distance",
    "scheme": "--scheme",
    "mu": "--mu",
    "verify": "--verify",
    "content_weight": "--content-weight",
    "num_perm": "--num-perm",
    "meta_fields": "--meta-field",
    "threshold": "--threshold",
    "memory": "--memory",
    "tmp_dir": "--tmp-dir",
}


def check_applicable(ctx: click.Context, settings: DedupSettings) -> None:
    """Refuse (exit 2) an option the chosen search or check does not read: it would
    otherwise be ignored, or switch the search behind the user's back."""
    unused = settings.not_applicable()
    if not unused:
        return
    name, _ = unused[0]
    flag = SETTING_FLAGS[name]
    shown = f"{flag} {settings.verify}" if name == "verify" else flag
    if settings.method == "lsh":
        fix = (
            "the LSH search checks with --verify jaccard (the default), sketch or none"
            if name == "verify"
            else "drop it"
        )
        chosen = "--search lsh" if settings.search else "the default search (--search lsh)"
        raise click.UsageError(
            f"{shown} applies to the Simhash search, not {chosen}: {fix}, or add --search simhash", ctx
        )
    if name in ("memory", "tmp_dir"):
        raise click.UsageError(
            f"{shown} applies to the LSH search (the default), which spills what exceeds the budget; "
            "the Simhash search holds its fingerprints in memory: drop it",
            ctx,
        )
    needs = {
        "content_weight": "--verify combined or --explain",
        "num_perm": "--verify minhash, --verify combined or --explain",
        "meta_fields": "--verify combined or --explain",
        "threshold": "a --verify other than none (-k K alone checks nothing)",
    }[name]
    raise click.UsageError(f"{shown} is read only with {needs}; drop it or add one", ctx)


def check_directory(target: str) -> None:
    """Fail before the work, not after it, when an output cannot be created."""
    parent = Path(target).parent
    if not parent.is_dir():
        raise OutputError(f"cannot open output file {target}: no directory {parent}")


def _dedup_against_index(ctx: click.Context, url: str) -> None:
    """--index URL: seed 002's incremental mode over a stored index (see the command help).
    Imported here: batch dedup loads no store."""
    from .incremental import run_incremental

    params = ctx.params
    if params["explain"] or params["scheme"] is not None:
        raise click.UsageError("--explain and --scheme do not apply with --index", ctx)
    for name in ("memory", "tmp_dir"):
        if ctx.get_parameter_source(name) != ParameterSource.DEFAULT:
            flag = SETTING_FLAGS[name]
            raise click.UsageError(f"{flag} does not apply with --index: the index holds the records", ctx)
    run_incremental(
        ctx,
        url=url,
        input_path=params["input_path"],
        pairs_path=params["pairs_path"],
        clusters_path=params["clusters_path"],
        emit=params["emit"],
        output=params["output"],
        keep=params["keep"],
        batch_size=params["batch_size"],
        progress=params["progress"],
    )


def _checked_fingerprinter(
    ctx: click.Context, settings: DedupSettings, pairs_path: str | None, targets: list[str]
) -> Fingerprinter:
    """The fingerprinter of the command's options, once every option and output is known to
    be usable: bad usage exits 2 and bad settings 1, both before any input is read."""
    if settings.explain and pairs_path is None:
        raise click.UsageError("--explain adds fields to the --pairs lines; add --pairs PATH", ctx)
    if settings.scheme is not None and settings.max_distance is None:
        raise click.UsageError("--scheme guarantees a distance: give it with -k/--max-distance", ctx)
    config = text_config(ctx)
    check_max_distance(ctx, config.bits, settings.max_distance)
    settings.check(config.bits)
    for target in targets:
        check_directory(target)
    return Fingerprinter(config=config)


class _Bars:
    """The pipeline's progress as tqdm bars on stderr, one per stage in turn."""

    UNITS: ClassVar[dict[str, str]] = {
        "pairs": " tables",
        "bands": " bands",
        "check": " pairs",
        "distances": " pairs",
    }

    def __init__(self, show: bool | None) -> None:
        self.show = show
        self.stage: str | None = None
        self.bar: Any = None

    def __call__(self, stage: str, advance: int, total: int | None) -> None:
        if stage != self.stage:
            self.close()
            self.stage = stage
            self.bar = progress_bar(self.show, stage, unit=self.UNITS.get(stage, " records"), total=total)
        self.bar.update(advance)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> _Bars:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _timings(seconds: dict[str, float], started: float, ready: float) -> tuple[float, float, float, float]:
    """--stats: set-up, reading the records (sketches or fingerprints), pairs (search, check
    and distances), clusters and output."""
    read = seconds.get("sketches", seconds.get("fingerprints", 0.0))
    pairs = seconds["candidates"] + seconds["verification"] + seconds.get("distances", 0.0)
    rest = time.perf_counter() - ready - read - pairs
    return ready - started, read, pairs, rest

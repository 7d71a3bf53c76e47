"""``neardup eval``, ``neardup baseline``, ``neardup sweep`` and ``neardup report``: thin
adapters over :mod:`neardup.eval` and :mod:`neardup.eval.baselines`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import click

from ..dedup.clusters import cluster_records
from ..distance import BITS_CHOICES
from ..errors import InputError
from ..eval.baselines import BASELINES, ScoredPairs, run_baseline
from ..eval.files import find_id, load_gold, load_prediction
from ..eval.metrics import Gold, Scores, evaluate
from ..eval.sweep import DEFAULT, Grid, SweepRow, check_grid, format_rows, recommended, run_sweep
from ..fingerprint.hashing import HASH_NAMES
from ..fingerprint.weighting import WEIGHTINGS
from ..io.output import write_jsonl, write_text
from ..io.record import ErrorReport, RecordId
from ..similarity.verify import VERIFY_MODES, metadata_of
from .common import (
    check_outputs_not_inputs,
    input_options,
    open_records,
    output_option,
    progress_bar,
    progress_option,
    report_skipped,
)


@click.command("eval", short_help="Score a PAIRS or CLUSTERS file against labelled data.")
@click.argument("gold_path", metavar="GOLD", type=click.Path(exists=True, dir_okay=False))
@click.argument("predictions_path", metavar="PREDICTIONS", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="A readable table, or one JSON object.",
)
@click.option(
    "--closure",
    is_flag=True,
    help="Score the clusters the pairs imply (a near-duplicate of a near-duplicate counts).",
)
@click.option("--id-field", default="id", show_default=True, help="Gold field (or column) holding the id.")
@click.option(
    "--cluster-field",
    default="cluster",
    show_default=True,
    help="Gold field (or column) holding the cluster.",
)
@click.option(
    "--topic-field", default="topic", show_default=True, help="Gold field (or column) holding the topic."
)
def eval_command(
    gold_path: str,
    predictions_path: str,
    output_format: str,
    closure: bool,
    id_field: str,
    cluster_field: str,
    topic_field: str,
) -> None:
    """Score PREDICTIONS (a --pairs or --clusters file of `neardup dedup`) against GOLD.

    GOLD is JSON lines with an id and a cluster per record, optionally a level
    (original, light, medium, heavy, unique) and a topic; or a .csv file with those
    columns (a labelled table, as `neardup records` reads). Records of one cluster are
    near-duplicates; unique records are singletons; heavy copies are related but not
    near-duplicates, so pairs with them are left out of the scores (and reported apart).

    \b
    Prints pairwise precision, recall and F1 (pairs as found; --closure scores the
    clusters they imply), recall per edit level and per topic, and the adjusted Rand
    index of the clusterings.

    \b
    Example:
      neardup dedup docs.jsonl --pairs pairs.jsonl
      neardup eval docs.jsonl pairs.jsonl
      neardup eval gold.jsonl clusters.jsonl --format json
      neardup records people.csv --key id --ignore cluster --clusters groups.jsonl
      neardup eval people.csv groups.jsonl
    """
    ids, gold = load_gold(gold_path, id_field=id_field, cluster_field=cluster_field, topic_field=topic_field)
    prediction = load_prediction(predictions_path, ids)
    if closure:
        prediction = prediction.closure(len(ids))
    scores = evaluate(gold, prediction)
    if output_format == "json":
        click.echo(json.dumps(scores.as_dict(), ensure_ascii=False))
    else:
        click.echo(format_scores(scores))


def format_scores(scores: Scores) -> str:
    """The table ``neardup eval`` prints."""
    data: dict[str, Any] = scores.as_dict()
    lines = [
        f"predictions        {data['predictions']}",
        f"predicted pairs    {scores.predicted_pairs}",
        f"gold pairs         {scores.gold_pairs}",
        f"true positives     {scores.true_positives}",
        f"precision          {scores.precision:.4f}",
        f"recall             {scores.recall:.4f}",
        f"F1                 {scores.f1:.4f}",
        f"adjusted Rand      {scores.ari:.4f}",
    ]
    if scores.related.total:
        lines.append(
            f"related (heavy)    {scores.related.found}/{scores.related.total} paired with their source "
            "(not scored)"
        )
    for title, groups in (("level", scores.by_level), ("topic", scores.by_topic)):
        if groups:
            width = max(len(name) for name in groups)
            lines.append(f"\nrecall by {title}")
            lines.extend(
                f"  {name:{width}}  {group.recall:.4f}  ({group.found}/{group.total})"
                for name, group in groups.items()
            )
    return "\n".join(lines)


@click.command(short_help="Run a baseline method (evaluation only) with dedup's outputs.")
@click.argument("method", type=click.Choice(list(BASELINES)))
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@output_option(
    "pairs",
    'Write each pair as {"a", "b", "distance"} (+ "similarity" for set methods).',
)
@output_option(
    "clusters",
    'Write {"id": id, "cluster": representative id} for every record.',
)
@click.option(
    "--parameter",
    type=float,
    help="The method's threshold: max distance (classic, pypi-simhash), similarity (shingle, vsm, "
    "minhash-lsh) or the document-frequency cap (imatch) [default: per method].",
)
@input_options
@click.pass_context
def baseline(
    ctx: click.Context,
    /,
    method: str,
    input_path: str,
    pairs_path: str | None,
    clusters_path: str | None,
    parameter: float | None,
    **_: Any,
) -> None:
    """Run a baseline (the help text is built below from BASELINES, so it lists every method)."""
    if pairs_path is None and clusters_path is None:
        raise click.UsageError("nothing to write: give --pairs PATH or --clusters PATH", ctx)
    check_outputs_not_inputs(ctx, {"--pairs": pairs_path, "--clusters": clusters_path})
    report = ErrorReport()
    records = list(open_records(ctx, input_path, report))
    ids = [record.id for record in records]
    if len(set(ids)) != len(ids):
        raise InputError("ids must be unique: pairs and clusters name records by id")
    pairs = run_baseline(method, [record.text for record in records], parameter)
    if pairs_path is not None:
        write_jsonl(pairs_path, pair_rows(ids, pairs, integer=BASELINES[method].parameter == "max_distance"))
    if clusters_path is not None:
        clusters = cluster_records(len(ids), pairs.i, pairs.j)
        write_jsonl(
            clusters_path,
            ({"id": ids[r], "cluster": ids[c]} for r, c in enumerate(clusters.representative.tolist())),
        )
    click.echo(
        f"neardup: {len(ids)} records, {len(pairs)} pairs by {method}; {report.count} skipped", err=True
    )
    report_skipped(report)


baseline.help = (
    "Find near-duplicates of INPUT with a baseline METHOD, to compare with `neardup dedup` "
    "(same input options; PAIRS and CLUSTERS files in the same formats).\n\n\b\nMethods [threshold]:\n"
    + "\n".join(
        f"  {name:13} {item.summary} [{item.parameter} {item.default:g}]" for name, item in BASELINES.items()
    )
)


def pair_rows(ids: list[RecordId], pairs: ScoredPairs, *, integer: bool) -> Iterator[dict[str, Any]]:
    """PAIRS lines: Hamming distances as integers, set-method distances as 1 - similarity."""
    for a, b, distance in zip(pairs.i.tolist(), pairs.j.tolist(), pairs.distance.tolist(), strict=True):
        if integer:
            yield {"a": ids[a], "b": ids[b], "distance": int(distance)}
        else:
            yield {
                "a": ids[a],
                "b": ids[b],
                "distance": round(distance, 6),
                "similarity": round(1 - distance, 6),
            }


def _names(choices: Sequence[str]) -> Callable[[click.Context, click.Parameter, str], list[str]]:
    def parse(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
        names = [name.strip() for name in value.split(",") if name.strip()]
        wrong = [name for name in names if name not in choices]
        if wrong or not names:
            raise click.BadParameter(
                f"{value!r}: choose from {', '.join(choices)} (comma-separated)", ctx, param
            )
        return names

    return parse


def _numbers(ctx: click.Context, param: click.Parameter, value: str) -> list[int]:
    try:
        numbers = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        numbers = []
    if not numbers or any(number < 0 for number in numbers):
        raise click.BadParameter(f"{value!r} is not a comma-separated list of integers >= 0", ctx, param)
    return numbers


def aligned_gold(gold_ids: list[RecordId], gold: Gold, input_ids: list[RecordId]) -> Gold:
    """The gold in the input's record order; every input id must be in the gold."""
    position = {record_id: index for index, record_id in enumerate(gold_ids)}
    found = [find_id(position, record_id) for record_id in input_ids]
    missing = [record_id for record_id, index in zip(input_ids, found, strict=True) if index is None]
    if missing:
        raise InputError(
            f"{len(missing)} input ids are not in the gold file, e.g. {missing[0]!r}; "
            "the gold must label every input record"
        )
    return gold.reorder([index for index in found if index is not None])


@click.command(short_help="Score a grid of settings on labelled data, best F1 first.")
@click.argument("gold_path", metavar="GOLD", type=click.Path(exists=True, dir_okay=False))
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "--weighting",
    "weightings",
    default="tf,tfidf,tfidf-len,composite",
    show_default=True,
    callback=_names([w for w in WEIGHTINGS if w != "fields"]),
    help="Weightings to try (comma-separated).",
)
@click.option(
    "--hash",
    "hashes",
    default="city64,java",
    show_default=True,
    callback=_names(HASH_NAMES),
    help="Feature hashes to try.",
)
@click.option("--bits", "bits", default="64", show_default=True, callback=_numbers, help="Widths to try.")
@click.option(
    "-k",
    "--max-distance",
    "distances",
    default="3,6,10,16",
    show_default=True,
    callback=_numbers,
    help="Max distances to try.",
)
@click.option(
    "--verify",
    "verifications",
    default="none,jaccard,minhash",
    show_default=True,
    callback=_names(VERIFY_MODES),
    help="Verifications to try (at their default thresholds).",
)
@click.option(
    "--baselines",
    "baseline_names",
    default="",
    metavar="NAMES",
    help=f"Also rank these baselines at their defaults ({', '.join(BASELINES)}; 'all' for every one).",
)
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True, help="Rows to print.")
@click.option(
    "--output-format",
    "output_format",
    type=click.Choice(["table", "markdown", "json"]),
    default="table",
    show_default=True,
    help="Output: a table, a markdown table, or JSON lines (every row).",
)
@input_options
@progress_option
@click.pass_context
def sweep(
    ctx: click.Context,
    /,
    gold_path: str,
    input_path: str,
    weightings: list[str],
    hashes: list[str],
    bits: list[int],
    distances: list[int],
    verifications: list[str],
    baseline_names: str,
    top: int,
    output_format: str,
    progress: bool | None,
    **_: Any,
) -> None:
    """Run `neardup dedup` over a grid of settings on INPUT and rank them by F1 against GOLD.

    GOLD labels every INPUT record (see `neardup eval`; a labelled dev set can be both).
    The grid is weighting x hash x bits x max distance x verification of the Simhash search;
    each row reports pairwise precision, recall, F1, the adjusted Rand index and the seconds
    it took after reading the input (fingerprints + pair search + verification).
    Combinations a width cannot search (e.g. -k 16 at 32 bits) are left out.

    The default search is always ranked too: what `neardup dedup` runs with no options (the
    shingle LSH, method "default"), timed the same way. The last line on stderr recommends
    what to run: a grid setting only when its F1 beats the default's (to 4 places), else
    the default (neardup dedup (default: --search lsh)), and says which.

    \b
    Example:
      neardup sweep docs.jsonl docs.jsonl
      neardup sweep gold.jsonl docs.jsonl --weighting tfidf-len -k 3,8,16 --verify none,jaccard
      neardup sweep docs.jsonl docs.jsonl --baselines all --output-format markdown
    """
    started = time.perf_counter()
    wrong_bits = [b for b in bits if b not in BITS_CHOICES]
    if wrong_bits:
        raise click.BadParameter(f"{wrong_bits[0]}: choose from {BITS_CHOICES}", ctx, param_hint="--bits")
    names = (
        list(BASELINES) if baseline_names == "all" else [n for n in baseline_names.split(",") if n.strip()]
    )
    grid = check_grid(Grid(weightings, hashes, tuple(bits), tuple(distances), verifications, tuple(names)))
    gold_ids, gold = load_gold(gold_path)
    report = ErrorReport()
    records = list(open_records(ctx, input_path, report))
    gold = aligned_gold(gold_ids, gold, [record.id for record in records])
    texts = [record.text for record in records]
    titles = [record.title for record in records]
    metadata = [metadata_of(record.fields) for record in records]
    with progress_bar(progress, "sweep", unit=" settings", total=grid.size) as bar:
        rows = run_sweep(texts, gold, grid, titles=titles, metadata=metadata, progress=bar.update)
    if output_format == "json":
        for row in rows:
            click.echo(json.dumps(row.as_dict(), ensure_ascii=False))
    else:
        click.echo(format_rows(rows, top, markdown=output_format == "markdown"))
    seconds = time.perf_counter() - started
    click.echo(sweep_summary(rows, len(records), seconds, report.count), err=True)
    report_skipped(report)


def sweep_summary(rows: Sequence[SweepRow], records: int, seconds: float, skipped: int) -> str:
    """The stderr line that ends a sweep, so a log shows it finished and what to run: never
    a setting below the default search."""
    done = f"neardup: sweep: {len(rows)} settings on {records} records in {seconds:.1f} s"
    best = recommended(rows)
    default = next((row for row in rows if row.setting.method == DEFAULT), None)
    if best is None or default is None:
        return f"{done}; {skipped} skipped"
    if best is default:
        why = "no setting of the grid beats it"
    else:
        why = f"above the default's F1 {default.scores.f1:.4f}"
    advice = f"recommended: {best.setting.describe()} (F1 {best.scores.f1:.4f}; {why})"
    return f"{done}; {advice}; {skipped} skipped"


@click.command(short_help="Write an HTML report of plots on labelled data and synthetic scaling runs.")
@click.argument("gold_path", metavar="GOLD", type=click.Path(exists=True, dir_okay=False))
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "-o",
    "--output",
    "output_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="HTML file to write.",
)
@click.option(
    "--weighting",
    "weightings",
    default="tf,tfidf,tfidf-len,composite",
    show_default=True,
    callback=_names([w for w in WEIGHTINGS if w != "fields"]),
    help="Weightings to plot.",
)
@click.option(
    "-k",
    "--max-distance",
    type=click.IntRange(0, 32),
    default=16,
    show_default=True,
    help="Largest k plotted.",
)
@click.option(
    "--sizes",
    default="1000,2000,5000,10000,20000",
    show_default=True,
    callback=_numbers,
    help="Collection sizes of the index vs Single-Pass timing (synthetic fingerprints).",
)
@click.option(
    "--skew-size",
    type=click.IntRange(min=100),
    default=40_000,
    show_default=True,
    help="Fingerprints in the second-hashing run.",
)
@click.option(
    "--skew",
    type=click.FloatRange(0, 1),
    default=0.3,
    show_default=True,
    help="Share of them put in one bucket.",
)
@input_options
@click.pass_context
def report(
    ctx: click.Context,
    /,
    gold_path: str,
    input_path: str,
    output_path: str,
    weightings: list[str],
    max_distance: int,
    sizes: list[int],
    skew_size: int,
    skew: float,
    **_: Any,
) -> None:
    """Write one self-contained HTML file of plots (matplotlib, embedded PNG).

    \b
    From GOLD and INPUT (as for `neardup sweep`):
      precision and recall vs max distance per weighting
      Hamming-distance histograms of duplicate vs other pairs
    From synthetic fingerprints and the input's words:
      time vs N, block index vs Single-Pass clustering
      hash-function speed and bit balance
      bucket sizes with and without second hashing

    \b
    Example:
      neardup report docs.jsonl docs.jsonl -o report.html
    """
    from ..eval.report import evaluation_report

    check_outputs_not_inputs(ctx, {"-o/--output": output_path})
    gold_ids, gold = load_gold(gold_path)
    error_report = ErrorReport()
    records = list(open_records(ctx, input_path, error_report))
    gold = aligned_gold(gold_ids, gold, [record.id for record in records])
    page, figures = evaluation_report(
        [record.text for record in records],
        [record.title for record in records],
        gold,
        names=(Path(input_path).name, Path(gold_path).name),
        weightings=weightings,
        max_distance=max_distance,
        sizes=sizes,
        skew=(skew_size, skew),
    )
    write_text(output_path, page)
    click.echo(f"neardup: wrote {output_path} ({figures} plots, {len(page) // 1024} KiB)", err=True)
    report_skipped(error_report)

"""``neardup spark``: the near-duplicate search as a Spark job.

``neardup spark dedup`` takes every option of ``neardup dedup`` (the very same click
parameters, so they cannot drift apart) plus where and how Spark runs. pyspark is imported
only when the command runs; without it the command prints the install line.
"""

from __future__ import annotations

import re
import sys
import time
from typing import Any

import click
from click.core import ParameterSource

from ..io.read import detect_format
from ..io.record import ErrorReport
from ..spark import require_pyspark
from ..spark.dedup import check_input, dedup, is_local
from .common import ProgressLines, progress_bar, report_skipped, text_config
from .dedup import Summary, block_scheme_of, check_directory, check_outputs, parse_distance
from .dedup import dedup as local_dedup

_CONF = re.compile(r"^([^=\s]+)=(.*)$")
OUTPUT_FORMATS = ("auto", "jsonl", "parquet")


def _parse_conf(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    settings = {}
    for value in values:
        match = _CONF.match(value)
        if not match:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE, e.g. spark.executor.memory=8g", ctx, param)
        settings[match.group(1)] = match.group(2)
    return settings


@click.group(short_help="Run neardup on Apache Spark (needs neardup[spark]).")
def spark() -> None:
    """Run neardup as an Apache Spark job, for collections larger than one machine.

    Locally (`--master local[*]`) or on a cluster through spark-submit; see docs/spark.md.
    """


_SPARK_PARAMS = [
    click.Argument(["input_path"], metavar="INPUT"),
    click.Option(
        ["--master"],
        metavar="URL",
        help="Spark master, e.g. local[*], yarn, spark://host:7077 [default: spark-submit's, else local[*]].",
    ),
    click.Option(
        ["--partitions"],
        type=click.IntRange(min=1),
        help="Partitions of the input splits and of every shuffle [default: spark.sql.shuffle.partitions].",
    ),
    click.Option(
        ["--output-format"],
        type=click.Choice(OUTPUT_FORMATS),
        default="auto",
        show_default=True,
        help="Pairs and clusters as JSON lines or Parquet; auto: Parquet for paths ending in .parquet.",
    ),
    click.Option(
        ["--conf", "spark_conf"],
        metavar="KEY=VALUE",
        multiple=True,
        callback=_parse_conf,
        help="A Spark setting (repeatable), e.g. --conf spark.driver.memory=4g.",
    ),
]


def _spark_dedup(**params: Any) -> None:
    """Find the near-duplicate records of INPUT with Spark: the same pairs and clusters as
    `neardup dedup`, with the same options and output formats.

    INPUT is JSONL or Parquet: a file, a folder or a glob, local or on any Hadoop-compatible
    file system (hdfs://, s3a://, ...); files are taken in path order. A local PATH ending
    in .jsonl is written as one file; any other PATH (hdfs://..., a folder) becomes a
    folder of part files which, concatenated in name order, are that file. Parquet output
    (--output-format parquet or a .parquet PATH) is a folder with typed columns.

    \b
    Example:
      neardup spark dedup docs.jsonl --pairs pairs.jsonl --clusters clusters.jsonl --master 'local[*]'
      spark-submit --master yarn "$(python -c 'import neardup.spark.submit as m; print(m.__file__)')" \\
          dedup hdfs:///corpus/ --format jsonl --pairs hdfs:///out/pairs --clusters hdfs:///out/clusters
    """
    ctx = click.get_current_context()
    started = time.perf_counter()
    require_pyspark()
    targets = check_outputs(
        ctx, params["pairs_path"], params["clusters_path"], params["emit"], params["output"]
    )
    for target in targets:
        if is_local(target):
            check_directory(target)
    config = text_config(ctx)
    block_scheme = _block_scheme(ctx, config.bits, params)
    source: str = params["input_path"]
    input_format = detect_format(source, params["input_format"])
    check_input(source, input_format)  # before the job's modules import pyspark
    job, outputs = _job_of(params, source, input_format, config, block_scheme)
    ready = time.perf_counter()
    with _StageBars(params["progress"]) as bars:
        result = dedup(
            job,
            outputs,
            master=params["master"],
            conf=params["spark_conf"],
            stats=params["stats"],
            progress=None if params["progress"] is False else bars,
        )
    summary = _summary_of(result, params, config.bits)
    if params["stats"]:
        _echo_stats(result, summary, ready - started + result.session_seconds)
    else:
        click.echo(summary.line(), err=True)
    report_skipped(ErrorReport(count=result.skipped, messages=result.messages))


class _StageLines(ProgressLines):
    """ProgressLines with the stage's records per second."""

    rate = ""

    def line(self, seconds: float) -> str:
        return f"{super().line(seconds)}, {self.rate}"


class _StageBars:
    """The job's stages on stderr, one after another, as ``neardup dedup`` shows its own:
    each stage's tasks done of those known, with records/s, as a bar on a terminal (or with
    --progress), else as a line every few seconds."""

    def __init__(self, show: bool | None) -> None:
        self.show = show
        self.stage: str | None = None
        self.bar: Any = None
        self.done = 0

    def __call__(self, status: Any) -> None:
        if status.stage != self.stage:
            self.close()
            self.stage, self.done = status.stage, 0
            description = f"spark {status.stage}"
            if self.show is None and not sys.stderr.isatty():
                self.bar = _StageLines(description, unit=" tasks")
            else:
                self.bar = progress_bar(self.show, description, unit=" tasks")
        rate = f"{status.rate:,.0f} records/s"
        if isinstance(self.bar, _StageLines):
            self.bar.rate = rate
        else:
            self.bar.set_postfix_str(rate, refresh=False)
        self.bar.total = status.tasks or None
        self.bar.update(max(0, status.done - self.done))
        self.done = max(self.done, status.done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> _StageBars:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _job_of(
    params: dict[str, Any], source: str, input_format: str, config: Any, block_scheme: Any
) -> tuple[Any, Any]:
    """The Spark job and its outputs, from the command's options."""
    from ..spark.job import DedupJob
    from ..spark.output import Outputs
    from ..spark.tasks import ReadSettings

    read = ReadSettings(
        format=input_format,
        id_field=params["id_field"],
        text_field=params["text_field"],
        title_field=params["title_field"],
        max_bytes=params["max_bytes"],
        keep_rows=params["emit"] is not None,
    )
    job = DedupJob(
        input=source,
        read=read,
        config=config,
        max_distance=params["max_distance"],
        scheme=block_scheme,
        mu=params["mu"],
        keep=params["keep"],
        batch_size=params["batch_size"],
        on_error=params["on_error"],
        partitions=params["partitions"],
    )
    outputs = Outputs(
        pairs=params["pairs_path"],
        clusters=params["clusters_path"],
        emit=params["emit"],
        output=params["output"],
        format=params["output_format"],
    )
    return job, outputs


def _summary_of(result: Any, params: dict[str, Any], bits: int) -> Summary:
    """The run's summary, as `neardup dedup` prints it."""
    return Summary(
        records=result.records,
        empty=result.empty,
        skipped=result.skipped,
        pairs=result.pairs,
        exact=result.exact,
        max_distance=bits if params["max_distance"] is None else params["max_distance"],
        clusters=result.clusters,
        largest=result.largest,
        dropped=result.dropped,
        keep=params["keep"],
        verify=result.verify,
        rejected=result.rejected,
        method=result.method,
    )


def _echo_stats(result: Any, summary: Summary, setup: float) -> None:
    """--stats: bucket statistics, the summary with timings, Spark stages and rounds."""
    from ..spark.job import describe_seconds

    click.echo(result.stats.format(), err=True)
    seconds = result.seconds
    timings = (
        setup,
        seconds.get("fingerprints", 0.0),
        seconds.get("buckets", 0.0) + seconds.get("pairs", 0.0),
        seconds.get("clusters", 0.0) + seconds.get("output", 0.0),
    )
    click.echo(summary.details(timings), err=True)
    click.echo(f"spark stages: {describe_seconds(seconds, result.records)}", err=True)
    click.echo(f"connected components: {result.rounds} large-star/small-star rounds", err=True)


def _block_scheme(ctx: click.Context, bits: int, params: dict[str, Any]) -> Any:
    """The hand-given block scheme of ``-k K`` (None: tuned), after the usage checks of the
    default search: without -k the job runs ``neardup dedup``'s default, the shingle LSH."""
    if params["max_distance"] is None:
        if params["scheme"] is not None:
            raise click.UsageError("--scheme guarantees a distance: give it with -k/--max-distance", ctx)
        if ctx.get_parameter_source("mu") != ParameterSource.DEFAULT:
            raise click.UsageError("--mu applies to the Simhash search (-k K), not the default LSH", ctx)
        if params["search"] == "simhash":
            raise click.UsageError(
                "the Spark job's automatic search is the shingle LSH; for a Simhash search give -k K", ctx
            )
        return None
    if params["search"] == "lsh":
        raise click.UsageError(
            "-k/--max-distance applies to the Simhash search, not --search lsh: drop one of them", ctx
        )
    return block_scheme_of(bits, params["max_distance"], params["scheme"])


#: ``neardup dedup`` parameters the job does not implement: left out, so that click refuses
#: them ("no such option") instead of the job silently ignoring them. INPUT is replaced
#: because it need not exist locally.
NOT_SHARED = frozenset(
    {
        "input_path",
        "index_url",
        "index_kind",
        "verify",
        "verify_threshold",
        "content_weight",
        "meta_fields",
        "num_perm",
        "explain",
    }
)


#: Without -k the job runs `neardup dedup`'s default search (shingle LSH, verified); a -k given
#: by hand is the exact Simhash search within that distance, unverified, as locally.
SPARK_DISTANCE = click.Option(
    ["-k", "--max-distance"],
    default="auto",
    show_default=True,
    callback=parse_distance,
    help="Largest Hamming distance (differing bits) of a near-duplicate pair, searched exactly "
    "with Simhash; auto: neardup dedup's default, every pair of shingle Jaccard >= 0.5 (LSH, "
    "confirmed on the texts).",
)


def _shared_params() -> list[click.Parameter]:
    """``neardup dedup``'s parameters that the job implements (its own -k default)."""
    return [
        SPARK_DISTANCE if param.name == "max_distance" else param
        for param in local_dedup.params
        if param.name not in NOT_SHARED
    ]


spark_dedup = click.Command(
    "dedup",
    callback=_spark_dedup,
    params=[_SPARK_PARAMS[0], *_shared_params(), *_SPARK_PARAMS[1:]],
    help=_spark_dedup.__doc__,
    short_help="Find near-duplicates with Spark: pairs, clusters and the deduplicated records.",
    context_settings={"max_content_width": 100},
)
spark.add_command(spark_dedup)

"""``neardup spark dedup`` as one library call: :func:`dedup` checks the input, starts (or
joins) a Spark session and runs the job. The command is a thin layer over it; a program that
already holds a session can call :func:`neardup.spark.job.run_dedup` itself.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError, InputError
from . import require_pyspark

if TYPE_CHECKING:  # the job's modules import pyspark
    from .job import DedupJob, DedupResult
    from .output import Outputs
    from .progress import Report

#: Spark reads these formats (CSV through Spark would not keep ``neardup dedup``'s rules).
SPARK_FORMATS = ("jsonl", "parquet")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_local(path: str) -> bool:
    """Whether a path names the local file system (no scheme such as hdfs:// or file:)."""
    return not _URL.match(path) and not path.startswith("file:")


def check_input(source: str, input_format: str) -> None:
    """Refuse a local input that does not exist (globs are left to Spark) and a format the
    job does not read, before any session starts."""
    if is_local(source) and not any(char in source for char in "*?[{") and not Path(source).exists():
        raise InputError(f"cannot open input {source}: no such file or folder")
    if input_format not in SPARK_FORMATS:
        raise ConfigError(f"the Spark job reads JSONL or Parquet, not {input_format}; convert {source} first")


def dedup(
    job: DedupJob,
    outputs: Outputs,
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    stats: bool = False,
    progress: Report | None = None,
) -> DedupResult:
    """Run ``job`` on Spark and write ``outputs``: the pairs and clusters ``neardup dedup``
    finds (``stats``: bucket statistics too). ``master`` (e.g. ``local[*]``, ``yarn``)
    defaults to spark-submit's, else local; ``conf`` adds Spark settings; the job's
    ``partitions`` sets the shuffle partitions; ``progress`` is called with each stage's
    :class:`~neardup.spark.progress.StageProgress` while it runs."""
    require_pyspark()
    check_input(job.input, job.read.format)
    from .job import run_dedup
    from .session import build_session

    started = time.perf_counter()
    session = build_session(master, job.partitions, conf)
    session_seconds = time.perf_counter() - started
    result = run_dedup(session, job, outputs, stats=stats, progress=progress)
    result.session_seconds = session_seconds
    return result

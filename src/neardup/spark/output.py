"""Writing the Spark job's pairs, clusters and records.

Lines are built in SQL from ids kept as their JSON text, so they are the bytes
``write_jsonl`` writes for ``neardup dedup``: ``{"a":id,"b":id,"distance":d}`` and
``{"id":id,"cluster":id}``. The executors write every line: any target but a single file
(``hdfs://…``, ``s3a://…``, a folder) gets Spark's folder of part files (in order, so
concatenated they are the single file). A local path ending in .jsonl (or .json, .ndjson) or
``-`` gets one file: the part files are staged and joined by the driver as bytes, so no row is
collected to it (:func:`write_single`). Parquet (``--output-format parquet``) is always a
folder, with typed id columns.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..errors import OutputError
from ..io.output import atomic_output, remove_stale, temporary_name, write_bytes

LOCAL_SUFFIXES = (".jsonl", ".json", ".ndjson")
OUTPUT_FORMATS = ("auto", "jsonl", "parquet")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
#: Bytes per read and write when joining part files into a single file.
COPY_BYTES = 1 << 20
_PART = re.compile(r"^part-[0-9]+")


@dataclass(frozen=True)
class Outputs:
    """Where each result goes (None: not wanted); ``emit`` is "kept" or "dropped"."""

    pairs: str | None = None
    clusters: str | None = None
    emit: str | None = None
    output: str = "-"
    format: str = "auto"

    def format_of(self, target: str) -> str:
        if self.format != "auto":
            return self.format
        return "parquet" if target.lower().rstrip("/").endswith((".parquet", ".pq")) else "jsonl"


def is_single_file(target: str) -> bool:
    """``-`` or a local path with a JSON-lines suffix: written as one file."""
    if target == "-":
        return True
    local = target[len("file:") :] if target.startswith("file:") else target
    return not _SCHEME.match(local) and local.lower().endswith(LOCAL_SUFFIXES)


def write_outputs(records: DataFrame, pairs: DataFrame, clusters: DataFrame, outputs: Outputs) -> None:
    """Write the requested results, each sorted as ``neardup dedup`` writes it."""
    ids = records.select("order", "id")
    targets = [outputs.pairs, outputs.clusters]
    parquet = any(target is not None and outputs.format_of(target) == "parquet" for target in targets)
    integers = parquet and ids.where(F.col("id").startswith('"')).isEmpty()
    if outputs.pairs is not None:
        named = pairs.join(_renamed(ids, "a", "a_id"), "a").join(_renamed(ids, "b", "b_id"), "b")
        frame = named.orderBy("a", "b").select(
            F.col("a_id").alias("a"), F.col("b_id").alias("b"), F.col("distance").cast("string")
        )
        _write(frame, outputs.pairs, outputs.format_of(outputs.pairs), ("a", "b"), integers)
    if outputs.clusters is not None:
        named = (
            clusters.select("order", "representative")
            .join(ids, "order")
            .join(_renamed(ids, "representative", "cluster"), "representative")
        )
        frame = named.orderBy("order").select("id", "cluster")
        _write(frame, outputs.clusters, outputs.format_of(outputs.clusters), ("id", "cluster"), integers)
    if outputs.emit is not None:
        chosen = clusters.where(F.col("keep") == (outputs.emit == "kept")).select("order")
        frame = records.join(chosen, "order").orderBy("order")
        _write_lines(frame.select(F.col("row").alias("line")), outputs.output)


def _renamed(ids: DataFrame, order: str, name: str) -> DataFrame:
    return ids.select(F.col("order").alias(order), F.col("id").alias(name))


def json_line(columns: list[str]) -> Column:
    """``{"name":value,...}`` from columns that hold JSON text, in column order: the bytes
    ``json.dumps(row, ensure_ascii=False, separators=(",", ":"))`` gives."""
    parts: list[Column] = []
    for index, name in enumerate(columns):
        parts += [F.lit(("{" if index == 0 else ",") + f'"{name}":'), F.col(name)]
    return F.concat(*parts, F.lit("}"))


def _write(frame: DataFrame, target: str, format: str, ids_in: tuple[str, ...], integers: bool) -> None:
    if format == "parquet":
        typed = [
            _typed_id(name, integers) if name in ids_in else F.col(name).cast("int") for name in frame.columns
        ]
        try:
            frame.select(*typed).write.parquet(target)
        except Exception as exc:  # Spark's AnalysisException for an existing folder, I/O errors
            raise OutputError(f"cannot write {target}: {str(exc).splitlines()[0]}") from exc
        return
    _write_lines(frame.select(json_line(frame.columns).alias("line")), target)


def _typed_id(name: str, integers: bool) -> Column:
    """An id column from its JSON text: long when every id is an integer, else string."""
    if integers:
        return F.col(name).cast("long").alias(name)
    as_text = F.get_json_object(F.concat(F.lit('{"v":'), F.col(name), F.lit("}")), "$.v")
    return as_text.alias(name)


def _write_lines(frame: DataFrame, target: str) -> None:
    """One ``line`` column written as text by the executors: part files, or one file."""
    if not is_single_file(target):
        _write_text(frame, target, target)
        return
    context = frame.sparkSession.sparkContext
    remote = None if str(context.master).startswith("local") else _remote_staging(frame)
    write_single(frame, target, remote)


def write_single(frame: DataFrame, target: str, remote: str | None = None) -> None:
    """``target`` (a local path or ``-``) as one file: the executors write part files, which
    the driver joins in partition order, a chunk at a time, into a file that replaces the
    target only when it is whole (:func:`~neardup.io.output.atomic_output`).

    With ``remote`` None the executors share the driver's disk (local mode) and write beside
    the target; else they write to the folder ``remote`` (a URI on a file system all of them
    reach) and each part file is copied to the driver's disk before it is joined."""
    local = target[len("file:") :] if target.startswith("file:") else target
    with atomic_output(local) as stream:
        if local == "-":
            near, stem = tempfile.gettempdir(), ".neardup-stdout"
        else:
            near, name = os.path.split(os.path.realpath(local))
            stem = f".{name}"
        remove_stale(near, stem, ".parts")  # what a killed driver left
        folder = os.path.join(near, temporary_name(stem, ".parts"))
        try:
            os.mkdir(folder, 0o700)
        except OSError as exc:
            raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from exc
        try:
            for part in _staged_parts(frame, target, folder, remote):
                with open(part, "rb") as handle:
                    while chunk := handle.read(COPY_BYTES):
                        write_bytes(stream, chunk, target)
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _staged_parts(frame: DataFrame, target: str, folder: str, remote: str | None) -> Iterator[str]:
    """The local paths of the part files of ``frame``'s lines, in partition order."""
    if remote is None:
        staged = os.path.join(folder, "parts")
        _write_text(frame, Path(staged).as_uri(), target)
        for name in part_names(os.listdir(staged)):
            yield os.path.join(staged, name)
            os.unlink(os.path.join(staged, name))  # room for the joined file
        return
    context = frame.sparkSession.sparkContext
    hadoop: Any = context._jvm.org.apache.hadoop.fs  # type: ignore[union-attr]
    path = hadoop.Path(remote)
    system = path.getFileSystem(context._jsc.hadoopConfiguration())
    try:
        _write_text(frame, remote, target)
        names = part_names([status.getPath().getName() for status in system.listStatus(path)])
        for name in names:
            copy = os.path.join(folder, name)
            system.copyToLocalFile(False, hadoop.Path(path, name), hadoop.Path(Path(copy).as_uri()), True)
            yield copy
            os.unlink(copy)
    finally:
        system.delete(path, True)


def _remote_staging(frame: DataFrame) -> str:
    """A new folder in the default file system's working directory (e.g. hdfs:///user/NAME),
    where every executor can write and the driver can read."""
    context = frame.sparkSession.sparkContext
    hadoop: Any = context._jvm.org.apache.hadoop.fs  # type: ignore[union-attr]
    system = hadoop.FileSystem.get(context._jsc.hadoopConfiguration())
    return str(system.getWorkingDirectory().toString()) + f"/.neardup-staging-{uuid.uuid4().hex}"


def part_names(names: Iterable[str]) -> list[str]:
    """Spark's part files among ``names``, by partition number (not by name: part-100000
    sorts before part-99999)."""
    parts = [name for name in names if _PART.match(name)]
    return sorted(parts, key=lambda name: int(name.split("-")[1]))


def _write_text(frame: DataFrame, uri: str, target: str) -> None:
    try:
        frame.write.option("compression", "none").text(uri)
    except Exception as exc:  # Spark's AnalysisException for an existing folder, I/O errors
        raise OutputError(f"cannot write {target}: {str(exc).splitlines()[0]}") from exc

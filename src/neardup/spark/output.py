"""Writing the Spark job's pairs, clusters and records.

Lines are built in SQL from ids kept as their JSON text, so they are the bytes
``write_jsonl`` writes for ``neardup dedup``: ``{"a":id,"b":id,"distance":d}`` and
``{"id":id,"cluster":id}``. A local path ending in .jsonl (or .json, .ndjson) or ``-`` gets
one file, streamed in order through the driver one partition at a time into a temporary
file renamed onto the target at the end (:func:`neardup.io.output.atomic_output`); any other target
(``hdfs://…``, ``s3a://…``, a folder) gets Spark's folder of part files, written by the
executors in parallel (part files in order, so concatenated they are the single file).
Parquet (``--output-format parquet``) is always a folder, with typed id columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..errors import OutputError
from ..io.output import atomic_output, write_bytes

LOCAL_SUFFIXES = (".jsonl", ".json", ".ndjson")
OUTPUT_FORMATS = ("auto", "jsonl", "parquet")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
#: Lines per write call when streaming a single file.
WRITE_LINES = 4096


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
    """``-`` or a local path with a JSON-lines suffix: written as one file by the driver."""
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
    """One ``line`` column written as text: one file through the driver, or part files."""
    if not is_single_file(target):
        try:
            frame.write.text(target)
        except Exception as exc:  # Spark's AnalysisException for an existing folder, I/O errors
            raise OutputError(f"cannot write {target}: {str(exc).splitlines()[0]}") from exc
        return
    local = target[len("file:") :] if target.startswith("file:") else target
    with atomic_output(local) as stream:  # a failed run leaves the previous file whole
        buffer: list[bytes] = []
        for row in frame.toLocalIterator(prefetchPartitions=True):
            buffer.append(row[0].encode("utf-8"))
            if len(buffer) >= WRITE_LINES:
                write_bytes(stream, b"\n".join(buffer) + b"\n", target)
                buffer.clear()
        if buffer:
            write_bytes(stream, b"\n".join(buffer) + b"\n", target)

"""Reading gold and prediction files for evaluation: ids to positions, with errors that name
the file and line, because a mismatched pair of files is the usual mistake.

Gold is JSON lines with ``id`` and ``cluster`` (optional ``level``, ``topic``,
``derived_from``), or a CSV file (by its ``.csv`` suffix) with those columns, as labelled
record sets for ``neardup records`` come; predictions are the PAIRS (``{"a", "b", ...}``) or
CLUSTERS (``{"id", "cluster"}``) output of ``neardup dedup`` or ``neardup records``, told
apart by the first line's keys. CSV values are text, so an integer id of a prediction also
matches the same digits in a CSV gold.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..io.csv_strict import StrictCsvReader
from ..io.record import RecordId
from .metrics import Gold, Prediction

PAIRS = "pairs"
CLUSTERS = "clusters"


def read_json_lines(path: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(location, object) per non-blank line; malformed lines raise with their location."""
    if not Path(path).is_file():
        raise InputError(f"cannot read {path}: no such file")
    with Path(path).open("rb") as handle:  # bytes: a line that is not UTF-8 is named, not a traceback
        for number, raw in enumerate(handle, start=1):
            location = f"{path}:{number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"invalid UTF-8 at byte {exc.start} of the line: {raw[exc.start : exc.start + 4]!r}; "
                    "convert the file to UTF-8 first, e.g. `iconv -f GBK -t UTF-8 IN > OUT`",
                    location,
                ) from None
            if not line.strip():
                continue
            try:
                data = json.loads(line.removeprefix("\ufeff") if number == 1 else line)
            except json.JSONDecodeError as exc:
                raise InputError(f"not a JSON object: {exc.msg}", location) from exc
            if not isinstance(data, dict):
                raise InputError("not a JSON object (one object per line)", location)
            yield location, data


def read_csv_rows(path: str | Path, required: tuple[str, ...]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(location, row) per non-blank CSV record, empty fields left out (as absent JSON keys);
    a header without the ``required`` columns is one error naming them and the fix."""
    if not Path(path).is_file():
        raise InputError(f"cannot read {path}: no such file")
    with Path(path).open("rb") as handle:
        reader = StrictCsvReader(handle, str(path))
        header = reader.header() or []
        missing = [name for name in required if name not in header]
        if missing:
            names = " and ".join(map(repr, missing)) + (" columns" if len(missing) > 1 else " column")
            raise InputError(
                f"the CSV gold {path} has no {names} (its header: {', '.join(header) or 'none'}); "
                f"rename the columns, or pass id_field/cluster_field"
            )
        for row in reader:
            if isinstance(row, InputError):
                raise row
            location = f"{path}:{row.line}"
            if not any(row.values):
                continue  # a blank line
            if len(row.values) != len(header):
                raise InputError(f"{len(row.values)} fields but the header has {len(header)}", location)
            yield location, {name: value for name, value in zip(header, row.values, strict=True) if value}


def _gold_rows(path: str | Path, id_field: str, cluster_field: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if Path(path).suffix.lower() == ".csv":
        return read_csv_rows(path, (id_field, cluster_field))
    return read_json_lines(path)


def _hashable(value: Any, name: str, location: str) -> RecordId:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{name} must be a string or an integer; got {value!r}", location)
    return value


def load_gold(
    path: str | Path, *, id_field: str = "id", cluster_field: str = "cluster", topic_field: str = "topic"
) -> tuple[list[RecordId], Gold]:
    """The record ids (in file order) and their gold labels."""
    ids: list[RecordId] = []
    clusters: list[RecordId] = []
    levels: list[str | None] = []
    topics: list[str | None] = []
    sources: list[RecordId | None] = []
    position: dict[RecordId, int] = {}
    first_seen: dict[RecordId, str] = {}
    for location, row in _gold_rows(path, id_field, cluster_field):
        if id_field not in row or cluster_field not in row:
            raise InputError(f"gold records need {id_field!r} and {cluster_field!r} fields", location)
        record_id = _hashable(row[id_field], id_field, location)
        if record_id in position:
            raise InputError(f"duplicate id {record_id!r}, first seen at {first_seen[record_id]}", location)
        position[record_id] = len(ids)
        first_seen[record_id] = location
        ids.append(record_id)
        clusters.append(_hashable(row[cluster_field], cluster_field, location))
        levels.append(_optional_text(row.get("level")))
        topics.append(_optional_text(row.get(topic_field)))
        source = row.get("derived_from")
        sources.append(None if source is None else _hashable(source, "derived_from", location))
    if not ids:
        raise InputError(f"{path} holds no gold records")
    derived = [position.get(source, -1) if source is not None else -1 for source in sources]
    return ids, Gold.from_labels(clusters, levels, topics, derived)


def _optional_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return str(value[0]) if value else None
    return str(value)


def load_prediction(path: str | Path, ids: list[RecordId]) -> Prediction:
    """A PAIRS or CLUSTERS file over the gold ``ids``; records a CLUSTERS file leaves out are
    singletons. An id the gold does not have is an error (the files do not belong together)."""
    position = {record_id: index for index, record_id in enumerate(ids)}
    kind: str | None = None
    left: list[int] = []
    right: list[int] = []
    labels = np.arange(len(ids), dtype=np.int64)
    cluster_codes: dict[RecordId, int] = {}
    for location, row in read_json_lines(path):
        if kind is None:
            kind = _kind(row, location)
        if kind == PAIRS:
            if "a" not in row or "b" not in row:
                raise InputError('pair lines need "a" and "b" ids', location)
            left.append(_position(row["a"], position, location, path))
            right.append(_position(row["b"], position, location, path))
        else:
            if "id" not in row or "cluster" not in row:
                raise InputError('cluster lines need "id" and "cluster" fields', location)
            record = _position(row["id"], position, location, path)
            cluster = _hashable(row["cluster"], "cluster", location)
            labels[record] = len(ids) + cluster_codes.setdefault(cluster, len(cluster_codes))
    if kind == CLUSTERS:
        return Prediction.from_labels(labels)
    return Prediction.from_pairs(np.array(left, dtype=np.int64), np.array(right, dtype=np.int64))


def _kind(row: dict[str, Any], location: str) -> str:
    if "a" in row and "b" in row:
        return PAIRS
    if "id" in row and "cluster" in row:
        return CLUSTERS
    raise InputError(
        'predictions must be a PAIRS file ({"a", "b", "distance"} lines) or a CLUSTERS file '
        '({"id", "cluster"} lines) from neardup dedup',
        location,
    )


def find_id(position: dict[RecordId, int], record_id: RecordId) -> int | None:
    """The position of ``record_id``; an integer also matches its digits (a CSV gold's ids are text)."""
    found = position.get(record_id)
    if found is None and isinstance(record_id, int):
        found = position.get(str(record_id))
    return found


def _position(value: Any, position: dict[RecordId, int], location: str, path: str | Path) -> int:
    record_id = _hashable(value, "id", location)
    found = find_id(position, record_id)
    if found is None:
        raise InputError(
            f"id {record_id!r} is not in the gold file; were {path} and the gold made from the same records?",
            location,
        )
    return found

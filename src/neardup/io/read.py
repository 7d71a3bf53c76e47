"""Reading input records (JSONL, CSV, Parquet). CSV rows are parsed strictly by
:mod:`neardup.io.csv_strict`; outputs are written by :mod:`neardup.io.output` (re-exported here).

Every reader yields :class:`Record` objects and checks each record the same way, so a bad
record is reported with where it is (``file.jsonl:LINE`` or ``file.csv:row N``) and why,
whatever the format. With ``on_error="fail"`` the first bad record raises
:class:`~neardup.errors.InputError`; with ``on_error="skip"`` it is counted in an
:class:`ErrorReport` and reading goes on, so no record is ever dropped silently. Problems
with the file as a whole (cannot open it, a missing CSV column, not Parquet at all) always
raise, because skipping every record would only hide them.

JSONL and CSV are read as bytes, one physical line at a time, and each line is decoded
strictly as UTF-8: that is how an error can name the line and the byte offset (a ``\\n``
byte never occurs inside a multi-byte UTF-8 sequence, so decoding by line is exact).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError, MissingDependencyError
from .lines import InputLine, _decode, _display_name, _lines, _open_binary
from .record import (
    DEFAULT_MAX_BYTES,
    ErrorReport,
    Record,
    RecordFields,
    _json_type,
    _make_record,
    require_columns,
    too_long_error,
)

FORMATS: tuple[str, ...] = ("auto", "jsonl", "csv", "parquet")
ON_ERROR_CHOICES: tuple[str, ...] = ("fail", "skip")
EXTENSIONS: Mapping[str, str] = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
PARQUET_BATCH_ROWS = 1024

_ARRAY_HINT = "; JSON Lines needs one object per line (a JSON array file converts with: jq -c '.[]' IN > OUT)"


def detect_format(source: str | Path, format: str = "auto") -> str:
    """The reader for ``source``: ``format`` unless it is ``auto``, else from the extension
    (stdin, ``-``, is JSONL)."""
    if format not in FORMATS:
        raise ConfigError(f"format must be one of {', '.join(FORMATS)}; got {format!r}")
    if format != "auto":
        return format
    if str(source) == "-":
        return "jsonl"
    suffix = Path(source).suffix.lower()
    if suffix not in EXTENSIONS:
        raise ConfigError(
            f"cannot tell the format of {source} from its extension {repr(suffix) if suffix else '(none)'}; "
            "pass format='jsonl', 'csv' or 'parquet'"
        )
    return EXTENSIONS[suffix]


def read_records(
    source: str | Path,
    format: str = "auto",
    *,
    id_field: str = "id",
    text_field: str = "text",
    title_field: str = "title",
    on_error: str = "fail",
    max_bytes: int = DEFAULT_MAX_BYTES,
    report: ErrorReport | None = None,
) -> Iterator[Record]:
    """The records of a file (``-`` for stdin) in input order, read lazily; settings are
    checked at once, the file is opened at the first record.

    ``max_bytes`` bounds one record: the line(s) it occupies in JSONL and CSV, the UTF-8 size
    of its text in Parquet. Bad records raise :class:`InputError` (``on_error="fail"``) or are
    counted in ``report`` and skipped (``"skip"``); blank JSONL lines are not records.
    """
    if on_error not in ON_ERROR_CHOICES:
        raise ConfigError(f"on_error must be 'fail' or 'skip'; got {on_error!r}")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ConfigError(f"max_bytes must be a positive integer; got {max_bytes!r}")
    fields = RecordFields(id_field, text_field, title_field, max_bytes)
    from .csv_strict import csv_records  # imported here: it builds on this module

    readers = {"jsonl": _jsonl_records, "csv": csv_records, "parquet": _parquet_records}
    items = readers[detect_format(source, format)](source, fields)
    return _apply_policy(items, on_error, report if report is not None else ErrorReport())


def _apply_policy(
    items: Iterator[Record | InputError], on_error: str, report: ErrorReport
) -> Iterator[Record]:
    """Readers yield errors instead of raising them, so this one place decides fail or skip."""
    for item in items:
        if isinstance(item, Record):
            yield item
        elif on_error == "fail":
            raise item
        else:
            report.add(item)


# -- opening ----------------------------------------------------------------------------------


# -- checking one record ----------------------------------------------------------------------


# -- lines ------------------------------------------------------------------------------------


# -- JSONL ------------------------------------------------------------------------------------


def _jsonl_records(source: str | Path, fields: RecordFields) -> Iterator[Record | InputError]:
    name = _display_name(source)
    with _open_binary(source, "rb") as stream:
        for line in _lines(stream, fields.max_bytes):
            location = f"{name}:{line.number}"
            if line.data is None:
                yield InputError(too_long_error(line.size, fields).reason, location)
                continue
            if not line.data or line.data.isspace():  # a blank line; strip() would copy it
                continue
            record = jsonl_record(line, line.data, fields, location)
            del line  # the line's bytes are not kept while the record is worked on
            yield record


def jsonl_record(line: InputLine, data: bytes, fields: RecordFields, location: str) -> Record | InputError:
    text = _decode(line, data)
    if isinstance(text, InputError):
        return InputError(text.reason, location)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = _ARRAY_HINT if text.strip() == "[" else ""
        return InputError(f"invalid JSON: {exc.msg} (column {exc.colno}){hint}", location)
    except (ValueError, RecursionError) as exc:  # integers over 4300 digits, absurd nesting
        return InputError(f"unreadable JSON: {exc}", location)
    if not isinstance(value, dict):
        hint = _ARRAY_HINT if isinstance(value, list) else ""
        return InputError(f"expected one JSON object per line, got {_json_type(value)}{hint}", location)
    # Strict JSON strings hold no raw control characters, and valid UTF-8 no surrogates:
    # both can only come from escapes, so a line without them needs no scan.
    scan = "\\u" in text or "\\b" in text or "\\f" in text
    return _make_record(value, fields, location, scan)


# -- CSV --------------------------------------------------------------------------------------


# -- Parquet ----------------------------------------------------------------------------------


def _parquet_records(source: str | Path, fields: RecordFields) -> Iterator[Record | InputError]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError("pyarrow", "parquet", "Reading Parquet") from exc
    name = _display_name(source)
    with _open_binary(source, "rb") as stream:
        try:
            handle = pa.BufferReader(stream.read()) if str(source) == "-" else stream
            parquet = pq.ParquetFile(handle)
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"not a readable Parquet file: {_one_line(exc)}", name) from exc
        columns = _parquet_columns(parquet.schema_arrow.names, fields, name)
        batches = parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns)
        row_number = 0
        while True:
            try:  # a damaged page fails here, in the middle of the file
                batch = next(batches, None)
                rows = [] if batch is None else batch.to_pylist()
            except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
                raise InputError(
                    f"damaged Parquet data after {row_number} good rows: {_one_line(exc)}; the rows after it "
                    "cannot be read: rewrite the file from its source",
                    name,
                ) from exc
            if batch is None:
                return
            for data in rows:
                row_number += 1
                yield parquet_record(data, fields, f"{name}:row {row_number}")


def _one_line(error: BaseException) -> str:
    """A library's message on one line (some span several)."""
    return " ".join(str(error).split())


def _parquet_columns(names: list[str], fields: RecordFields, name: str) -> list[str]:
    require_columns(names, fields, "the Parquet schema", name)
    wanted = [fields.id, fields.text] + ([fields.title] if fields.title in names else [])
    return list(dict.fromkeys(wanted))


def parquet_record(data: Mapping[str, Any], fields: RecordFields, location: str) -> Record | InputError:
    text = data.get(fields.text)
    if isinstance(text, str) and len(text) > fields.max_bytes // 4:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > fields.max_bytes:
            return InputError(too_long_error(size, fields, "text").reason, location)
    return _make_record(data, fields, location)


#: Records and about how much text one batch holds: large enough to amortise the vectorised
#: work, small enough to bound memory whatever the record sizes.
BATCH_RECORDS = 2048
BATCH_CHARACTERS = 8_000_000


def batches(
    records: Iterable[Record], size: int, characters: int = BATCH_CHARACTERS
) -> Iterator[list[Record]]:
    """Groups of at most ``size`` records or about ``characters`` of text, whichever comes
    first: large enough to amortise the vectorised work, small enough to bound memory."""
    batch: list[Record] = []
    total = 0
    for record in records:
        batch.append(record)
        total += len(record.text)
        if len(batch) >= size or total >= characters:
            yield batch
            batch, total = [], 0
    if batch:
        yield batch

"""Reading input records (JSONL, CSV, Parquet). CSV rows are parsed strictly by
:mod:`neardup.csv_strict`; outputs are written by :mod:`neardup.output` (re-exported here).

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

import csv
import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .errors import ConfigError, InputError, MissingDependencyError
from .output import JsonlWriter as JsonlWriter
from .output import atomic_output as atomic_output
from .output import check_outputs_distinct as check_outputs_distinct
from .output import jsonl_writer as jsonl_writer
from .output import write_jsonl as write_jsonl

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
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
# Share of C0 control characters (other than tab, newline, carriage return) above which a
# text is taken for binary data decoded by accident rather than for prose.
CONTROL_SHARE = 0.10
PARQUET_BATCH_ROWS = 1024

_CONTROLS = [chr(code) for code in range(32) if chr(code) not in "\t\n\r"]
_CONTROL = re.compile("[" + "".join(_CONTROLS) + "]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ARRAY_HINT = "; JSON Lines needs one object per line (a JSON array file converts with: jq -c '.[]' IN > OUT)"
_ICONV_HINT = "convert the file to UTF-8 first, e.g. `iconv -f GBK -t UTF-8 IN > OUT`"

RecordId = str | int


@dataclass(frozen=True, slots=True)
class Record:
    """One input document: its id as given (str or int), text, optional title, and where it
    came from, so later errors can point back at the input.

    ``fields`` is the whole input record as read, under its own field names (for Parquet,
    only the id, text and title columns are read), so a command can pass records through
    unchanged; it costs only a reference, and is left out of equality and repr.
    """

    id: RecordId
    text: str
    title: str | None
    location: str
    fields: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)


@dataclass
class ErrorReport:
    """Counts skipped records and keeps the first ``keep`` messages, enough to show the user
    what went wrong without flooding the terminal on a file full of bad lines."""

    keep: int = 5
    count: int = 0
    messages: list[str] = field(default_factory=list)

    def add(self, error: InputError) -> None:
        self.count += 1
        if len(self.messages) < self.keep:
            self.messages.append(str(error))


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
            f"pass --format jsonl, csv or parquet"
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


def record_row(record: Record, fields: tuple[str, str, str] = ("id", "text", "title")) -> dict[str, Any]:
    """A record as it was read (all its input fields), or, when only its id, text and title
    were kept (Parquet), those under the given field names: what ``--emit`` writes."""
    if record.fields is not None:
        return dict(record.fields)
    id_field, text_field, title_field = fields
    row: dict[str, Any] = {id_field: record.id, text_field: record.text}
    if record.title is not None:
        row[title_field] = record.title
    return row


# -- opening ----------------------------------------------------------------------------------


@contextmanager
def _open_binary(source: str | Path, mode: str = "rb") -> Iterator[IO[bytes]]:
    """A binary stream to read a path, or stdin for ``-`` (left open: not ours to close);
    outputs are written by :mod:`neardup.output`."""
    if str(source) == "-":
        yield sys.stdin.buffer
        return
    try:
        stream = open(source, mode)  # noqa: SIM115 - closed in the finally block below
    except OSError as exc:
        raise InputError(f"cannot open input file {source}: {exc.strerror}") from exc
    try:
        yield stream
    finally:
        with suppress(OSError):
            stream.close()


def _display_name(source: str | Path, stream: str = "stdin") -> str:
    return f"<{stream}>" if str(source) == "-" else str(source)


# -- checking one record ----------------------------------------------------------------------


@dataclass(frozen=True)
class RecordFields:
    """Field names and the size limit, shared by every reader."""

    id: str
    text: str
    title: str
    max_bytes: int


def _json_type(value: Any) -> str:
    """The JSON name of a value's type, as the user wrote it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, bytes):
        return "binary data"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def record_from_mapping(
    data: Mapping[str, Any], location: str, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> Record:
    """One record from a JSON object (``id``, ``text``, optional ``title``), checked exactly
    as a JSONL line is; :class:`InputError` names ``location`` and the fix."""
    fields = RecordFields("id", "text", "title", max_bytes)
    made = _make_record(data, fields, location)
    if isinstance(made, InputError):
        raise made
    size = len(made.text.encode("utf-8"))
    if size > max_bytes:
        error = too_long_error(size, fields, "the text", "shorten or split the document")
        raise InputError(error.reason, location)
    return made


def _make_record(
    data: Mapping[str, Any], fields: RecordFields, location: str, scan: bool = True
) -> Record | InputError:
    """Check one record's fields; the error, if any, is returned for the caller's policy.
    ``scan=False`` skips the scans for surrogates and control characters, for values that
    cannot hold them (JSON read from a line without ``\\u``, ``\\b`` or ``\\f`` escapes)."""
    try:
        record_id = _check_id(data.get(fields.id), fields.id, scan)
        text = _check_text(data.get(fields.text), fields.text, scan)
        title = _check_title(data.get(fields.title), fields.title, scan)
    except InputError as exc:
        return InputError(exc.reason, location)
    return Record(record_id, text, title, location, data)


def _check_id(value: Any, name: str, scan: bool = True) -> RecordId:
    if value is None or value == "":
        raise InputError(f"missing id field {name!r}; name the id field with --id-field")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(f"id field {name!r} must be a string or an integer, not {_json_type(value)}")
    if not isinstance(value, str):
        return int(value)
    if scan:
        _check_surrogates(value, name)
    return value


def _check_text(value: Any, name: str, scan: bool = True) -> str:
    if value is None:
        raise InputError(f"missing text field {name!r}; name the text field with --text-field")
    if not isinstance(value, str):
        raise InputError(f"text field {name!r} must be a string, not {_json_type(value)}")
    if scan:
        _check_surrogates(value, name)
        _check_not_binary(value, name)
    return value


def _check_title(value: Any, name: str, scan: bool = True) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(f"title field {name!r} must be a string or null, not {_json_type(value)}")
    if scan:
        _check_surrogates(value, name)
    return value


def _check_surrogates(value: str, name: str) -> None:
    """Lone surrogates (JSON ``\\udc80`` escapes) cannot be written as UTF-8 later on."""
    found = _SURROGATE.search(value)
    if found:
        raise InputError(
            f"field {name!r} holds an unpaired surrogate \\u{ord(found.group()):04x} at character "
            f"{found.start()}, which is not valid Unicode; fix the producer of this file"
        )


def _check_not_binary(text: str, name: str) -> None:
    """Binary data decoded as text would fingerprint as noise; refuse it by its NULs or by a
    high share of control characters."""
    if "\x00" in text:
        raise InputError(f"field {name!r} looks like binary data (it contains NUL characters)")
    if not _CONTROL.search(text):
        return
    controls = sum(text.count(char) for char in _CONTROLS)
    if controls > CONTROL_SHARE * len(text):
        raise InputError(
            f"field {name!r} looks like binary data ({controls} of {len(text)} characters are "
            f"control characters)"
        )


def require_columns(names: list[str], fields: RecordFields, what: str, location: str) -> None:
    """A file without the id or text column has no record to read: raised even when
    skipping bad records, which would only hide it. ``what`` names the header or schema."""
    for column, option in ((fields.id, "--id-field"), (fields.text, "--text-field")):
        if column not in names:
            raise InputError(
                f"{what} has no column {column!r} (columns: {', '.join(names)}); "
                f"name the column with {option}",
                location,
            )


def too_long_error(
    size: int,
    fields: RecordFields,
    what: str = "record",
    fix: str = "raise it with --max-bytes if this is intended",
) -> InputError:
    return InputError(f"{what} is {size:,} bytes, over the limit of {fields.max_bytes:,} bytes; {fix}")


# -- lines ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InputLine:
    """One physical line without its terminator; ``data`` is None when it was over the limit
    (its bytes were read and dropped, never held), ``size`` its length either way."""

    number: int
    offset: int
    data: bytes | None
    size: int


def _lines(stream: IO[bytes], max_bytes: int) -> Iterator[InputLine]:
    """Physical lines with numbers and file offsets, never holding more than ``max_bytes``
    (plus the terminator) of one line in memory."""
    limit = max_bytes + 2  # room for a CRLF after a line of exactly max_bytes
    number = offset = 0
    while chunk := stream.readline(limit):
        number += 1
        start = offset
        offset += len(chunk)
        if len(chunk) == limit and not chunk.endswith(b"\n"):
            skipped, terminated = _drain_line(stream)
            offset += skipped
            yield InputLine(number, start, None, len(chunk) + skipped - terminated)
            continue
        data = chunk.removesuffix(b"\n").removesuffix(b"\r")
        yield InputLine(number, start, data if len(data) <= max_bytes else None, len(data))


def _drain_line(stream: IO[bytes]) -> tuple[int, int]:
    """Skip the rest of an over-long line: (bytes skipped, 1 if a newline ended it else 0)."""
    skipped = 0
    while piece := stream.readline(1 << 20):
        skipped += len(piece)
        if piece.endswith(b"\n"):
            return skipped, 1
    return skipped, 0


def _decode(line: InputLine, data: bytes) -> str | InputError:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return InputError(
            f"invalid UTF-8 at byte {exc.start} of the line (byte {line.offset + exc.start} of the "
            f"file): {data[exc.start : exc.start + 4]!r}; {_ICONV_HINT}"
        )
    return text.removeprefix("\ufeff") if line.number == 1 else text


# -- JSONL ------------------------------------------------------------------------------------


def _jsonl_records(source: str | Path, fields: RecordFields) -> Iterator[Record | InputError]:
    name = _display_name(source)
    with _open_binary(source, "rb") as stream:
        for line in _lines(stream, fields.max_bytes):
            location = f"{name}:{line.number}"
            if line.data is None:
                yield InputError(too_long_error(line.size, fields).reason, location)
                continue
            if not line.data.strip():
                continue
            yield jsonl_record(line, line.data, fields, location)


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


def raise_csv_field_limit() -> None:
    """Let the csv module parse fields of any size; our own ``max_bytes`` bounds records."""
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            return
        except OverflowError:  # pragma: no cover - platforms with a 32-bit C long
            limit //= 2


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


#: About how much text one batch holds: large enough to amortise the vectorised work, small
#: enough to bound memory whatever the record sizes.
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

"""Records as they are read: the :class:`Record` type, the fields it is read from, and the
checks every reader applies to an id, a text and a title."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
# Share of C0 control characters (other than tab, newline, carriage return) above which a
# text is taken for binary data decoded by accident rather than for prose.
CONTROL_SHARE = 0.10
_CONTROLS = [chr(code) for code in range(32) if chr(code) not in "\t\n\r"]
_CONTROL = re.compile("[" + "".join(_CONTROLS) + "]")
_SURROGATE = re.compile("[\ud800-\udfff]")

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
        raise InputError(f"missing id field {name!r}; name the id field with id_field")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(f"id field {name!r} must be a string or an integer, not {_json_type(value)}")
    if not isinstance(value, str):
        return int(value)
    if scan:
        _check_surrogates(value, name)
    return value


def _check_text(value: Any, name: str, scan: bool = True) -> str:
    if value is None:
        raise InputError(f"missing text field {name!r}; name the text field with text_field")
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
    for column, option in ((fields.id, "id_field"), (fields.text, "text_field")):
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
    fix: str = "raise it with max_bytes if this is intended",
) -> InputError:

    return InputError(f"{what} is {size:,} bytes, over the limit of {fields.max_bytes:,} bytes; {fix}")

"""Strict CSV reading, the one parser behind :func:`neardup.io.read.read_records` (fingerprint,
dedup, index add) and :class:`neardup.records.sources.CsvSource` (``neardup records``).

The csv module accepts a stray quote silently: an unterminated quoted field swallows every
line after it (to the end of the file, or to the next quote), and a quote inside an unquoted
field is kept as text. Here the parser runs in strict mode, each row is also matched against
the CSV grammar, and a bad row is an :class:`~neardup.errors.InputError` naming ``file:line``
(the caller fails or counts it), after which the lines it swallowed are read again as rows of
their own. Legitimate quoted fields spanning lines keep working.
"""

from __future__ import annotations

import csv
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import InputError
from .lines import InputLine, _decode, _display_name, _lines, _open_binary, raise_csv_field_limit
from .record import DEFAULT_MAX_BYTES, Record, RecordFields, _make_record, require_columns, too_long_error

# A well-formed CSV record: fields separated by commas, each either unquoted without any quote,
# or quoted with the quotes inside it doubled. The two kinds of field start differently, so
# matching takes linear time.
_CSV_FIELD = r'(?:"(?:[^"]+|"")*"|[^",\n]*)'
_CSV_ROW = re.compile(f"{_CSV_FIELD}(?:,{_CSV_FIELD})*")
_CSV_PLAIN = re.compile(r'[^",\n]+')
_QUOTE_HINT = 'quote the whole field and double each quote inside it ("")'


@dataclass(frozen=True, slots=True)
class CsvRow:
    """One well-formed record: its fields, its number (the header is 1; bad and blank
    records count too, so numbers match the file) and its first physical line."""

    values: list[str]
    number: int
    line: int


class StrictCsvReader:
    """The records of a binary stream, each a :class:`CsvRow` or the :class:`InputError` of
    a bad one (stray or unclosed quote, not UTF-8, over ``max_bytes``); reading goes on after
    an error, with the lines a bad quote swallowed read again. ``name`` is used in messages."""

    def __init__(self, stream: IO[bytes], name: str, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        raise_csv_field_limit()
        self.name = name
        self._lines = _CsvLines(stream, max_bytes)
        self._reader = csv.reader(self._lines, strict=True)
        self._number = 0

    def __iter__(self) -> Iterator[CsvRow | InputError]:
        return self

    def __next__(self) -> CsvRow | InputError:
        self._number += 1
        location = f"{self.name}:row {self._number}"
        try:
            values = next(self._reader)  # StopIteration ends the records
        except csv.Error as exc:
            error = self._lines.finish(self.name, location, exc)
            return error or InputError(f"malformed CSV: {exc}", location)
        line = self._lines.first
        return self._lines.finish(self.name, location) or CsvRow(values, self._number, line)

    def header(self) -> list[str] | None:
        """The column names (None for an empty file); a bad header raises: without it no row
        can be read."""
        row = next(self, None)
        if isinstance(row, InputError):
            raise InputError(f"unreadable CSV header: {row.reason}", row.location)
        if row is None:
            return None
        _check_distinct_names(row.values, f"{self.name}:row {row.number}")
        return row.values


def _check_distinct_names(names: list[str], location: str) -> None:
    """A column named twice: rows read as mappings would keep only the last of the two, so
    the other column's values would be dropped without a word."""
    first: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        if name in first:
            shown = repr(name) if name else "'' (an empty name)"
            raise InputError(
                f"the CSV header names column {shown} twice (columns {first[name]} and {position}), "
                f"so one of them would be ignored; rename one of them in the header line",
                location,
            )
        first[name] = position


class _CsvLines:
    """Feeds decoded physical lines to :mod:`csv` and keeps those of the row being parsed, so
    a bad row is reported by its lines, checked for stray quotes the csv module accepts, and,
    when malformed, its lines after the first are read again: a stray quote must not swallow
    the rows after it. Once a row is over ``max_bytes`` its further lines are fed as their
    quote-and-comma skeleton only, so the parser still finds the row's end without holding it."""

    def __init__(self, stream: IO[bytes], max_bytes: int) -> None:
        self._lines = _lines(stream, max_bytes)
        self._again: deque[InputLine] = deque()
        self.max_bytes = max_bytes
        self._reset()

    def _reset(self) -> None:
        self.kept: list[InputLine] = []
        self.texts: list[str] = []
        self.first = self.last = 0
        self.problem: InputError | None = None
        self.row_bytes = 0
        self.quoted = False

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        line = self._again.popleft() if self._again else next(self._lines)
        self.first, self.last = self.first or line.number, line.number
        self.row_bytes += line.size
        if line.data is None or self.row_bytes > self.max_bytes:
            self.kept, self.texts = [], []  # over the limit: reported as such, never read again
            plain = "" if line.data is None else _CSV_PLAIN.sub("x", line.data.decode("utf-8", "replace"))
            return plain + "\n"
        text = _decode(line, line.data)
        if isinstance(text, InputError):
            self.problem = self.problem or InputError(f"line {line.number}: {text.reason}")
            text = line.data.decode("utf-8", "replace")
        self.kept.append(line)
        self.texts.append(text)
        self.quoted = self.quoted or '"' in text
        return text + "\n"

    def finish(self, name: str, location: str, parse_error: csv.Error | None = None) -> InputError | None:
        """End the row just read: its error (malformed or stray quote, undecodable, too long)
        or None. A malformed row's lines after its first are read again as rows of their own."""
        first, last, kept, size = self.first, self.last, self.kept, self.row_bytes
        problem = self.problem
        malformed = _csv_quote_problem(parse_error, first, last) if parse_error else self._stray_quote()
        self._reset()
        if malformed is not None:
            if size <= self.max_bytes:
                self._again.extendleft(reversed(kept[1:]))
            return InputError(malformed, f"{name}:{first}")
        if problem is not None:
            return InputError(problem.reason, location)
        if size > self.max_bytes:
            reason = too_long_error(size, RecordFields("", "", "", self.max_bytes)).reason
            return InputError(reason, location)
        return None

    def _stray_quote(self) -> str | None:
        """A quote inside an unquoted field (``4,fourth "row"``), which csv reads as text."""
        if not self.quoted or not self.texts or _CSV_ROW.fullmatch("\n".join(self.texts)):
            return None
        return f"stray quote in an unquoted field on {_span(self.first, self.last)}; {_QUOTE_HINT}"


def _span(first: int, last: int) -> str:
    return f"line {first}" if first == last else f"lines {first}-{last}"


def _csv_quote_problem(error: csv.Error, first: int, last: int) -> str:
    """What the csv module's terse message means for the row on lines ``first``-``last``."""
    message = str(error)
    if "unexpected end of data" in message:
        return (
            f"unterminated quote: the quoted field opened on line {first} runs to the end of the "
            f"file ({_span(first, last)} read as one record); {_QUOTE_HINT}"
        )
    if "expected after" in message:
        return (
            f"stray quote: the quoted field opened on line {first} closes on line {last} with text "
            f"after the closing quote; {_QUOTE_HINT}"
        )
    return f"malformed CSV on line {last}: {message}"


# -- records for read_records -------------------------------------------------------------------


def csv_records(source: str | Path, fields: RecordFields) -> Iterator[Record | InputError]:
    """The records of a CSV file for :func:`neardup.io.read.read_records`, errors yielded for its
    policy; blank lines are not records, as in JSONL."""
    name = _display_name(source)
    with _open_binary(source, "rb") as stream:
        reader = StrictCsvReader(stream, name, fields.max_bytes)
        header = reader.header()
        if header is None:
            return
        require_columns(header, fields, "the CSV header", f"{name}:row 1")
        for row in reader:
            if isinstance(row, InputError):
                yield row
            elif row.values:
                yield _csv_record(header, row, fields, f"{name}:row {row.number}")


def _csv_record(header: list[str], row: CsvRow, fields: RecordFields, location: str) -> Record | InputError:
    if len(row.values) != len(header):
        return InputError(
            f"row has {len(row.values)} fields but the header has {len(header)}; "
            "check the quoting and delimiters",
            location,
        )
    return _make_record(dict(zip(header, row.values, strict=True)), fields, location)

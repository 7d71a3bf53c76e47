"""Strict CSV reading for :func:`neardup.io.read_records`.

The csv module accepts a stray quote silently: an unterminated quoted field swallows every
line after it (to the end of the file, or to the next quote), and a quote inside an unquoted
field is kept as text. Here the parser runs in strict mode, each row is also matched against
the CSV grammar, and a bad row is an :class:`~neardup.errors.InputError` naming ``file:line``
(or, under ``--on-error skip``, counted), after which the lines it swallowed are read again
as rows of their own. Legitimate quoted fields spanning lines keep working.
"""

from __future__ import annotations

import csv
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .errors import InputError
from .io import (
    InputLine,
    Record,
    RecordFields,
    _decode,
    _display_name,
    _lines,
    _make_record,
    _open_binary,
    raise_csv_field_limit,
    too_long_error,
)

# A well-formed CSV record: fields separated by commas, each either unquoted without any quote,
# or quoted with the quotes inside it doubled. The two kinds of field start differently, so
# matching takes linear time.
_CSV_FIELD = r'(?:"(?:[^"]+|"")*"|[^",\n]*)'
_CSV_ROW = re.compile(f"{_CSV_FIELD}(?:,{_CSV_FIELD})*")
_CSV_PLAIN = re.compile(r'[^",\n]+')
_QUOTE_HINT = 'quote the whole field and double each quote inside it ("")'


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
        where = f"line {self.first}" if self.first == self.last else f"lines {self.first}-{self.last}"
        return f"stray quote in an unquoted field on {where}; {_QUOTE_HINT}"


def _csv_quote_problem(error: csv.Error, first: int, last: int) -> str:
    """What the csv module's terse message means for the row on lines ``first``-``last``."""
    message = str(error)
    if "unexpected end of data" in message:
        return (
            f"unterminated quote: the quoted field opened on line {first} runs to the end of the "
            f"file (line {last}); {_QUOTE_HINT}"
        )
    if "expected after" in message:
        return (
            f"stray quote: the quoted field opened on line {first} closes on line {last} with text "
            f"after the closing quote; {_QUOTE_HINT}"
        )
    return f"malformed CSV on line {last}: {message}"


def csv_records(source: str | Path, fields: RecordFields) -> Iterator[Record | InputError]:
    raise_csv_field_limit()
    name = _display_name(source)
    with _open_binary(source, "rb") as stream:
        lines = _CsvLines(stream, fields.max_bytes)
        reader = csv.reader(lines, strict=True)
        header = _csv_header(reader, lines, fields, name)
        row_number = 1
        while True:
            row_number += 1
            location = f"{name}:row {row_number}"
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                yield lines.finish(name, location, exc) or InputError(f"malformed CSV: {exc}", location)
                continue
            problem = lines.finish(name, location)
            if problem is not None:
                yield problem
            elif row:  # a blank line is not a record, as in JSONL
                yield _csv_record(header, row, fields, location)


def _csv_header(reader: Iterator[list[str]], lines: _CsvLines, fields: RecordFields, name: str) -> list[str]:
    try:
        header = next(reader)
    except StopIteration:
        return []
    except csv.Error as exc:
        raise InputError(f"malformed CSV header: {exc}", f"{name}:row 1") from exc
    problem = lines.finish(name, f"{name}:row 1")
    if problem is not None:
        raise InputError(f"unreadable CSV header: {problem.reason}", problem.location)
    for column, option in ((fields.id, "--id-field"), (fields.text, "--text-field")):
        if column not in header:
            raise InputError(
                f"the CSV header has no column {column!r} (columns: {', '.join(header)}); "
                f"name the column with {option}",
                f"{name}:row 1",
            )
    return header


def _csv_record(
    header: list[str], row: list[str], fields: RecordFields, location: str
) -> Record | InputError:
    if len(row) != len(header):
        return InputError(
            f"row has {len(row)} fields but the header has {len(header)}; check the quoting and delimiters",
            location,
        )
    return _make_record(dict(zip(header, row, strict=True)), fields, location)

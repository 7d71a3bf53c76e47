"""Strict CSV reading: a stray or unclosed quote is an error naming its line, never a field
that silently swallows the rows after it.

Python's csv module, even with ``strict=True``, accepts a quote inside an unquoted field
(``4,fourth "row"``), and without it a quote opened by mistake runs the field on to the next
closing quote, however many lines later. :class:`StrictCsvReader` reads with ``strict=True``,
checks every record holding a quote against the dialect's grammar, and can skip a bad
record by its first line alone so the rows after it are read again.
"""

from __future__ import annotations

import csv
import re
from collections import deque
from typing import Any

from .errors import InputError

#: One record of the default CSV dialect, each field quoted (quotes doubled inside) or free of
#: quotes: catches the stray quote inside an unquoted field that csv's strict mode lets by.
_CSV_FIELD = r'(?:"(?:[^"]|"")*"|[^",\r\n]*)'
_CSV_RECORD = re.compile(rf"{_CSV_FIELD}(?:,{_CSV_FIELD})*(?:\r\n|\n|\r)?")


class _Lines:
    """The file's lines for csv.reader, counted, with the current record's lines kept."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._pending: deque[str] = deque()
        self.taken: list[str] = []
        self.line = 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self._pending.popleft() if self._pending else next(self._handle)
        self.line += 1
        self.taken.append(line)
        return line

    def start(self) -> int:
        """Begin a record; the number of its first line."""
        self.taken = []
        return self.line + 1

    def resume_after_first(self) -> None:
        """Read every line of the current record but its first again."""
        rest = self.taken[1:]
        self._pending.extendleft(reversed(rest))
        self.line -= len(rest)
        self.taken = []


class StrictCsvReader:
    """Records of a text handle opened with ``newline=""``; ``name`` is used in messages."""

    def __init__(self, handle: Any, name: str) -> None:
        self.name = name
        self._lines = _Lines(handle)
        self._reader = csv.reader(self._lines, strict=True)

    def read(self, number: int) -> list[str] | InputError | None:
        """The next record (data row ``number``, for messages), None at the end, or the error
        of a record with bad quoting (then :meth:`skip_bad` goes on after its first line).
        Text that is not UTF-8 raises: nothing after it can be trusted."""
        line = self._lines.start()
        try:
            row: list[str] | None = next(self._reader, None)
        except UnicodeDecodeError as exc:
            raise InputError(
                f"not valid UTF-8 near data row {number} ({exc.reason}); convert the file to UTF-8 first, "
                f"e.g. `iconv -f GBK -t UTF-8 IN > OUT`",
                self.name,
            ) from exc
        except csv.Error as exc:
            return self._bad_quote(line, number, str(exc))
        quoted = row is not None and any('"' in value for value in row)
        if quoted and not _CSV_RECORD.fullmatch("".join(self._lines.taken)):
            return self._bad_quote(line, number, 'a " inside an unquoted field')
        return row

    def skip_bad(self) -> None:
        """Leave out the first line of the bad record just read and read on from the next."""
        self._lines.resume_after_first()

    def _bad_quote(self, line: int, number: int, problem: str) -> InputError:
        last = self._lines.line
        span = f"lines {line}-{last}" if last > line else f"line {line}"
        return InputError(
            f"malformed CSV at line {line} (data row {number}): {problem} (the record read as {span}); "
            f'a stray or unclosed quote runs a field on: quote the whole field and double the " inside it',
            self.name,
        )

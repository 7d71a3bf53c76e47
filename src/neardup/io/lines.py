"""Input files as lines: opening a path or stdin as bytes, cutting it into lines under a size
limit and decoding each as UTF-8, for every line-based reader (JSON Lines and CSV)."""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import InputError

#: Lines from this size on are handed to the reader without a copy kept here (below it the
#: plain path is a little faster, and what it keeps is small).
_HAND_OVER = 1 << 20
_ICONV_HINT = "convert the file to UTF-8 first, e.g. `iconv -f GBK -t UTF-8 IN > OUT`"


@contextmanager
def _open_binary(source: str | Path, mode: str = "rb") -> Iterator[IO[bytes]]:
    """A binary stream to read a path, or stdin for ``-`` (left open: not ours to close);
    outputs are written by :mod:`neardup.io.output`."""
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
    # Room for a CRLF after a line of exactly max_bytes; readline takes at most sys.maxsize
    # (a larger max_bytes is no limit at all: no line can be longer).
    limit = min(max_bytes, sys.maxsize - 2) + 2
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
        if len(chunk) < _HAND_OVER:
            data = chunk.removesuffix(b"\n").removesuffix(b"\r")
            yield InputLine(number, start, data if len(data) <= max_bytes else None, len(data))
            continue
        # Handed over, not kept: this frame holds no reference to the line while the reader
        # works on it (a huge line held here too would stay alive through the whole run).
        held = [chunk.removesuffix(b"\n").removesuffix(b"\r")]
        chunk = b""
        yield _handed_over(number, start, held, max_bytes)


def _handed_over(number: int, start: int, held: list[bytes], max_bytes: int) -> InputLine:
    data = held.pop()
    return InputLine(number, start, data if len(data) <= max_bytes else None, len(data))


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


def raise_csv_field_limit() -> None:
    """Let the csv module parse fields of any size; our own ``max_bytes`` bounds records."""
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            return
        except OverflowError:  # pragma: no cover - platforms with a 32-bit C long
            limit //= 2

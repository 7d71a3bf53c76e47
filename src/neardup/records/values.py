"""Values of database rows: nulls, numbers, dates, keys, and the automatic choice of a
column's kind (the value side of :mod:`neardup.records`).

Every function here is pure and works on one value or one column (a list of values), so a
chunk of rows is processed column by column. Normalised forms are plain strings, the same
whatever the database or file said: ``1,000``, ``1000``, ``1000.0`` and ``Decimal("1E+3")``
are all ``1000``; ``2015-12-14``, ``2015/12/14``, ``2015.12.14``, ``2015年12月14日`` and
``date(2015, 12, 14)`` are all ``2015-12-14``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation
from typing import Any
from uuid import UUID

#: Column kinds: ``short`` values are one feature each, ``text`` is segmented into words,
#: ``number`` and ``date`` are short values normalised first, ``ignore`` is left out, ``auto``
#: is chosen from the data (:func:`infer_kind`).
KINDS: tuple[str, ...] = ("auto", "short", "text", "number", "date", "ignore")
SHORT_KINDS: tuple[str, ...] = ("short", "number", "date")
#: A column whose values average at least this many words is ``text`` (a Chinese character
#: counts as half a word: Chinese words average ~1.7 characters).
TEXT_MIN_WORDS = 4.0
#: Share of a sample's values that must parse for a column to be taken for numbers or dates.
PARSE_SHARE = 0.95

RecordKey = str | int

_NUMBER = re.compile(r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:e[+-]?\d+)?$", re.IGNORECASE)
_LEADING_ZERO = re.compile(r"^[+-]?0\d")
_DATE = re.compile(
    r"^(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})\s*日?"
    r"(?:[ T]+(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?)?\s*(?:z|[+-]\d{2}:?\d{2})?$",
    re.IGNORECASE,
)
_COMPACT_DATE = re.compile(r"^(\d{4})(\d{2})(\d{2})$")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def is_null(value: Any) -> bool:
    """None, NaN and empty or blank strings contribute nothing."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, float):
        return math.isnan(value)
    return isinstance(value, Decimal) and value.is_nan()


def is_binary(value: Any) -> bool:
    return isinstance(value, bytes | bytearray | memoryview)


def type_name(value: Any) -> str:
    if is_binary(value):
        return "binary data"
    return f"{type(value).__name__} {str(value)[:40]!r}"


# -- numbers ----------------------------------------------------------------------------------


def normalize_number(value: Any) -> str:
    """The canonical text of a number: no thousands separators, no trailing zeros, no
    exponent for ordinary magnitudes. Raises ValueError for anything else."""
    if isinstance(value, bool) or is_binary(value):
        raise ValueError(f"not a number: {type_name(value)}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return value.lstrip("0") or "0"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        value = Decimal(repr(value))
    elif not isinstance(value, Decimal):
        text = unicodedata.normalize("NFKC", str(value)).strip().replace(" ", "").replace("_", "")
        if not text or not _NUMBER.match(text) or not any(c.isdigit() for c in text):
            raise ValueError(f"not a number: {str(value)[:40]!r}")
        try:
            value = Decimal(text.replace(",", ""))
        except InvalidOperation as exc:  # pragma: no cover - the pattern admits only numbers
            raise ValueError(f"not a number: {str(value)[:40]!r}") from exc
    return _decimal_text(value)


def _decimal_text(number: Decimal) -> str:
    if not number.is_finite():
        raise ValueError(f"not a finite number: {number}")
    if number == 0:
        return "0"
    if abs(number.adjusted()) > 40:  # keep absurd exponents compact
        return f"{number.normalize():E}"
    if number == number.to_integral_value():
        return str(int(number))
    return format(number.normalize(), "f")


def looks_numeric(text: str) -> bool:
    """True for text that :func:`normalize_number` reads, except identifiers with leading
    zeros (postcodes, phone numbers), whose zeros matter."""
    text = unicodedata.normalize("NFKC", text).strip()
    if _LEADING_ZERO.match(text.replace(" ", "")):
        return False
    try:
        normalize_number(text)
    except ValueError:
        return False
    return True


# -- dates ------------------------------------------------------------------------------------


def normalize_date(value: Any, compact: bool = True) -> str:
    """``YYYY-MM-DD``, plus `` HH:MM:SS`` when a time other than midnight is given; year-first
    forms only (``14/12/2015`` is ambiguous), time zones dropped. ``compact`` admits
    ``20151214``. Raises ValueError for anything else."""
    if isinstance(value, datetime):
        return _date_text(value.date(), value.time())
    if isinstance(value, date):
        return value.isoformat()
    if not isinstance(value, str):
        raise ValueError(f"not a date: {type_name(value)}")
    if len(value) == 10 and value[4] == "-" and value[7] == "-" and value.isascii():
        try:
            return date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    text = unicodedata.normalize("NFKC", value).strip()
    match = _DATE.match(text)
    if match:
        year, month, day, hour, minute, second = (int(part) if part else 0 for part in match.groups())
        try:
            return _date_text(date(year, month, day), time(hour, minute, second))
        except ValueError as exc:
            raise ValueError(f"not a valid date: {value[:40]!r} ({exc})") from exc
    compact_match = _COMPACT_DATE.match(text) if compact else None
    if compact_match:
        try:
            return date(*(int(part) for part in compact_match.groups())).isoformat()
        except ValueError as exc:
            raise ValueError(f"not a valid date: {value[:40]!r} ({exc})") from exc
    raise ValueError(f"not a date: {value[:40]!r} (write dates year first, e.g. 2015-12-14)")


def _date_text(day: date, moment: time) -> str:
    if moment == time(0, 0):
        return day.isoformat()
    return f"{day.isoformat()} {moment.strftime('%H:%M:%S')}"


def looks_like_date(text: str) -> bool:
    try:
        normalize_date(text, compact=False)
    except ValueError:
        return False
    return True


# -- short values and keys --------------------------------------------------------------------


def short_value(value: Any) -> str:
    """A value of a ``short`` column as text before normalisation: numbers and dates of the
    database in their canonical form, so ``5``, ``5.0`` and ``Decimal('5.00')`` agree."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        return normalize_number(value)
    if isinstance(value, date):
        return normalize_date(value)
    if is_binary(value):
        raise ValueError("binary data cannot be compared as text")
    return str(value)


def record_key(value: Any) -> RecordKey:
    """A row's key as written to the output: an int or a str. Raises ValueError for a null
    or binary key."""
    if is_null(value):
        raise ValueError("the key is null or empty")
    if isinstance(value, bool) or is_binary(value):
        raise ValueError(f"a key must be text or an integer, not {type_name(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, float | Decimal):
        number = Decimal(repr(value)) if isinstance(value, float) else value
        if number == number.to_integral_value():
            return int(number)
        return str(value)
    if isinstance(value, UUID | date):
        return str(value)
    return value if isinstance(value, str) else str(value)


# -- the automatic choice ---------------------------------------------------------------------


def word_count(text: str) -> float:
    """Words of a value: whitespace-separated pieces, each Chinese character half a word."""
    han = len(_HAN.findall(text))
    latin = len(_HAN.sub(" ", text).split())
    return latin + han / 2


def infer_kind(values: Sequence[Any]) -> str:
    """The kind of a column from a sample of its values: database types first (numbers,
    dates, binary), then what the text looks like: numbers, year-first dates, ``text`` when
    values average :data:`TEXT_MIN_WORDS` words or more, else ``short``."""
    present = [value for value in values if not is_null(value)]
    if not present:
        return "short"
    if all(is_binary(value) for value in present):
        return "ignore"
    if all(isinstance(value, date) for value in present):
        return "date"
    if all(isinstance(value, int | float | Decimal) and not isinstance(value, bool) for value in present):
        return "number"
    texts = [value if isinstance(value, str) else str(value) for value in present if not is_binary(value)]
    needed = PARSE_SHARE * len(texts)
    if sum(map(looks_numeric, texts)) >= needed:
        return "number"
    if sum(map(looks_like_date, texts)) >= needed:
        return "date"
    if sum(map(word_count, texts)) / len(texts) >= TEXT_MIN_WORDS:
        return "text"
    return "short"

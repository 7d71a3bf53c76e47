"""Comparison levels of row pairs, column by column: the evidence :mod:`neardup.records.weights`
learns weights from.

Each column of a pair gets a small integer *level*; ``-1`` means the value is null in either
row (no evidence either way), higher levels mean closer agreement, the top level is exact
agreement on the normalised value:

=========  ===================================================================================
kind       levels
=========  ===================================================================================
``name``   0 different · 1 Jaro-Winkler ≥ 0.88, or abbreviated · 2 Jaro-Winkler ≥ 0.94 · 3 exact
``number`` 0 different · 1 two adjacent digits transposed · 2 one digit differs · 3 exact
           (levels 1 and 2 only for numbers of 3 digits or more)
``date``   as ``number``, on the digits of the ``YYYY-MM-DD`` form
``code``   0 different · 1 only the last two digits differ · 2 exact (digits only; the last
           nine digits of long values, so ``+61 2 9876 5432`` = ``(02) 9876 5432``)
``text``   word Jaccard, each word weighted by its rarity: 0 below 0.3 · 1 ≥ 0.3 · 2 ≥ 0.6 · 3 ≥ 0.9
=========  ===================================================================================

Typos keep a name within Jaro-Winkler reach, keyed numbers break one digit or swap two, and
postcodes and phone numbers share prefixes by region, so each kind has the levels its errors
produce. A ``name`` or ``text`` pair whose values both hold numbers, and not the same ones, is
``different`` however close its letters: ``4217 w 18th st`` / ``4216 w 19th st`` are two
addresses, two "Editorial" records of 2003 and 2008 two records. Levels are computed a whole
column of pairs at a time (numpy, ``rapidfuzz.process.cpdist``).

Below exact agreement, ``name`` and ``text`` values are compared without punctuation:
``1110 w. belmont`` / ``1110 w belmont`` and ``call for bids - evidence`` / ``call for bids:
evidence`` are one value written two ways (they reach the top level), and ``-`` or ``w.``
are no words for Jaccard. A ``name`` of several words whose words are, in order, prefixes of
the other's words (``600 w madison`` / ``600 west madison street``, ``dept of physics`` /
``department of physics``) is abbreviated, not different: level 1 however far apart
Jaro-Winkler puts them. Text words weigh their inverse document frequency in the column
(:func:`word_weights`, soft TF-IDF as in Cohen, Ravikumar & Fienberg 2003): two site names
sharing ``erie neighborhood house fcch ... site`` with different people's names, or two
titles sharing ``decision trees``, share common words, not rare ones. What each rule is
worth on the dev sets: docs/records.md.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from rapidfuzz.distance import OSA, Hamming, JaroWinkler
from rapidfuzz.process import cpdist

from ..text.normalize import Normalizer
from .values import PARSE_SHARE, infer_kind, is_binary, is_null, normalize_date, normalize_number
from .values import short_value as _short_value

#: Level labels per comparison kind, lowest (different) first; the last is exact agreement.
LEVELS: dict[str, tuple[str, ...]] = {
    "name": ("different", "jaro-winkler≥0.88", "jaro-winkler≥0.94", "exact"),
    "number": ("different", "transposed", "one digit", "exact"),
    "date": ("different", "transposed", "one digit", "exact"),
    "code": ("different", "last digits", "exact"),
    "text": ("jaccard<0.3", "jaccard≥0.3", "jaccard≥0.6", "jaccard≥0.9"),
}
COMPARE_KINDS: tuple[str, ...] = (*LEVELS, "ignore")
#: Kinds whose exact agreement is weighed by how common the shared value is (term
#: frequencies). For text only pairs whose whole normalised values are equal count as sharing
#: a value; its top level (word Jaccard ≥ 0.9) also holds near-equal values, which keep the
#: column's weight. Text is one: a title that 30 records hold ("Editorial") says little
#: when two records share it.
TF_KINDS: tuple[str, ...] = ("name", "number", "date", "code", "text")
JARO_WINKLER = (0.88, 0.94)
JACCARD = (0.3, 0.6, 0.9)
#: Numbers shorter than this have no "one digit" or "transposed" level: issue 5 and issue 6,
#: or volume 12 and 21, are other numbers, not typos.
TYPO_DIGITS = 3
#: Long digit strings (phone numbers) are compared on their last digits only, dropping
#: country codes and trunk prefixes.
CODE_DIGITS = 9
#: Column names that say the digits are a code (region prefixes matter, arithmetic does not).
_CODE_NAME = re.compile(r"post|zip|phone|tel|mobile|fax|plz", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s\-().+/]")
_NON_DIGIT = re.compile(r"\D")
_DIGIT_RUNS = re.compile(r"\d+")
_PUNCTUATION = re.compile(r"[^\w\s]+")
#: Records compare their values under the first normalizer (NFKC and case). A records index
#: keeps its rows' normalized values; a later version (escapes and markup read as separators)
#: would compare new rows by other rules than the stored ones, so it waits for a model version
#: that records which normalizer its rows were made by.
_NORMALIZER = Normalizer(version=1)

Keys = npt.NDArray[np.object_]
Levels = npt.NDArray[np.int8]
IntArray = npt.NDArray[np.int64]


def comparison_kind(name: str, values: Sequence[Any]) -> str:
    """The comparison kind of a column from a sample of its values: :func:`infer_kind`, then
    a digits-only check (digits once separators are removed, and at least 5% written with
    separators or leading zeros, or named like a postcode or phone) makes it a ``code``."""
    base = infer_kind(values)
    if base in ("ignore", "text", "date"):
        return base
    texts = [str(value).strip() for value in values if not is_null(value) and not is_binary(value)]
    digits = [_SEPARATORS.sub("", text) for text in texts]
    if texts and sum(text.isascii() and text.isdigit() for text in digits) >= PARSE_SHARE * len(texts):
        written = sum(d != t or (len(d) > 1 and d[0] == "0") for d, t in zip(digits, texts, strict=True))
        if written >= (1.0 - PARSE_SHARE) * len(texts) or _CODE_NAME.search(name):
            return "code"
    return "number" if base == "number" else "name"


def _text(value: Any) -> str:
    try:
        return _short_value(value)
    except ValueError:
        return str(value)


def normalize_column(values: Sequence[Any], kind: str) -> Keys:
    """Each value's comparable form (None for nulls): names and text normalised like the
    fingerprints' features (NFKC, case, whitespace), numbers and dates canonical (odd
    values fall back to their text), codes as digits."""
    out = np.full(len(values), None, dtype=object)
    rows = [row for row, value in enumerate(values) if not is_null(value) and not is_binary(value)]
    if kind == "ignore" or not rows:
        return out
    present = [values[row] for row in rows]
    keys: list[str | None]
    if kind in ("name", "text"):
        texts = _NORMALIZER.normalize_many([_text(value) for value in present])
        keys = [" ".join(text.split()) or None for text in texts]
    elif kind == "code":
        keys = [_NON_DIGIT.sub("", _text(value))[-CODE_DIGITS:] or None for value in present]
    elif kind in ("number", "date"):
        keys = [_canonical(value, kind) for value in present]
    else:
        raise ValueError(f"unknown comparison kind {kind!r}; choose one of {', '.join(COMPARE_KINDS)}")
    out[rows] = keys
    return out


def _canonical(value: Any, kind: str) -> str | None:
    try:
        if kind == "number":
            return normalize_number(value)
        return _NON_DIGIT.sub("", normalize_date(value))
    except ValueError:
        return " ".join(_NORMALIZER.normalize(_text(value)).split()) or None


def compare_values(a: Keys, b: Keys, kind: str, idf: Mapping[str, float] | None = None) -> Levels:
    """The level of each pair ``(a[k], b[k])`` of normalised values (module docstring)."""
    levels = np.full(len(a), -1, dtype=np.int8)
    present = np.flatnonzero((a != None) & (b != None))  # noqa: E711 - elementwise on objects
    if kind == "ignore" or not len(present):
        return levels
    left, right = a[present], b[present]
    exact = left == right
    top = len(LEVELS[kind]) - 1
    result = np.where(exact, top, 0).astype(np.int8)
    rest = np.flatnonzero(~exact)
    x, y = left[rest].tolist(), right[rest].tolist()
    if kind in ("name", "text"):
        x, y = _words(x), _words(y)
    if rest.size and kind == "name":
        similarity = cpdist(x, y, scorer=JaroWinkler.normalized_similarity, dtype=np.float64, workers=-1)
        result[rest] = (similarity >= JARO_WINKLER[0]).astype(np.int8) + (similarity >= JARO_WINKLER[1])
        low = np.flatnonzero(result[rest] == 0)
        shortened = [k for k in low.tolist() if " " in x[k] and " " in y[k] and _abbreviates(x[k], y[k])]
        result[rest[np.asarray(shortened, dtype=np.int64)]] = 1
    elif rest.size and kind in ("number", "date"):
        same_length = (_lengths(x) == _lengths(y)) & (_lengths(x) >= TYPO_DIGITS)
        hamming = cpdist(x, y, scorer=Hamming.distance, dtype=np.int32, workers=-1)
        osa = cpdist(x, y, scorer=OSA.distance, dtype=np.int32, workers=-1)
        result[rest] = np.select(
            [same_length & (hamming == 1), same_length & (hamming == 2) & (osa == 1)], [2, 1], 0
        )
    elif rest.size and kind == "code":
        prefix_x, prefix_y = [s[:-2] for s in x], [s[:-2] for s in y]
        same = (_lengths(x) == _lengths(y)) & (_lengths(x) > 2)
        result[rest] = same & (np.asarray(prefix_x, dtype=object) == np.asarray(prefix_y, dtype=object))
    elif rest.size and kind == "text":
        rare = max(idf.values(), default=1.0) if idf else 1.0
        similarity = np.fromiter(
            (_jaccard(s, t, idf, rare) for s, t in zip(x, y, strict=True)), float, len(x)
        )
        result[rest] = np.searchsorted(np.asarray(JACCARD), similarity, side="right")
    if rest.size and kind in ("name", "text"):
        result[rest[np.asarray(x, dtype=object) == np.asarray(y, dtype=object)]] = top
        close = np.flatnonzero(result[rest] > 0)
        clash = [_numbers_differ(x[k], y[k]) for k in close.tolist()]
        result[rest[close[np.asarray(clash, dtype=bool)]]] = 0
    levels[present] = result
    return levels


def _words(values: list[str]) -> list[str]:
    """The values with punctuation taken out (module docstring); once per distinct value, as
    candidate pairs repeat their values."""
    done: dict[str, str] = {}
    out = []
    for value in values:
        plain = done.get(value)
        if plain is None:
            plain = done[value] = " ".join(_PUNCTUATION.sub(" ", value).split())
        out.append(plain)
    return out


def _abbreviates(a: str, b: str) -> bool:
    """Every word of the shorter value (two words or more) is, in order, a word of the longer
    one or a prefix of it or has it as prefix: ``600 w madison`` / ``600 west madison
    street``, ``dept of physics`` / ``department of physics``."""
    short, long = a.split(), b.split()
    if len(short) > len(long):
        short, long = long, short
    if len(short) < 2:
        return False
    position = 0
    for word in short:
        while position < len(long) and not (
            long[position].startswith(word) or word.startswith(long[position])
        ):
            position += 1
        if position == len(long):
            return False
        position += 1
    return True


def _numbers_differ(a: str, b: str) -> bool:
    """Both values hold numbers and not the same ones (as multisets): ``4217 w 18th st`` is
    another address than ``4216 w 19th st``, ``editorial 2003`` another record than
    ``editorial 2008``, however close their letters."""
    left, right = _numbers(a), _numbers(b)
    return bool(left) and bool(right) and left != right


@functools.lru_cache(maxsize=1 << 16)
def _numbers(value: str) -> tuple[str, ...]:
    """The digit runs of a value, sorted; cached, as candidate pairs repeat their values."""
    return tuple(sorted(_DIGIT_RUNS.findall(value)))


def _lengths(texts: list[str]) -> IntArray:
    return np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))


def word_weights(values: Sequence[str], counts: Sequence[int], rows: int) -> dict[str, float]:
    """Each word's inverse document frequency, log((n + 1) / (rows holding it + ½)), over a
    text column given as its distinct values and how many of the ``rows`` hold each."""
    holding: Counter[str] = Counter()
    for value, count in zip(_words(list(values)), counts, strict=True):
        for word in set(value.split()):
            holding[word] += count
    return {word: math.log((rows + 1) / (held + 0.5)) for word, held in holding.items()}


def _jaccard(a: str, b: str, idf: Mapping[str, float] | None = None, rare: float = 1.0) -> float:
    """Word Jaccard of two values; with ``idf`` each word counts its weight (a word the
    weights do not know counts ``rare``, the weight of the rarest)."""
    left, right = set(a.split()), set(b.split())
    if not idf:
        union = len(left | right)
        return len(left & right) / union if union else 1.0
    total = sum(idf.get(word, rare) for word in left | right)
    return sum(idf.get(word, rare) for word in left & right) / total if total else 1.0


# -- tables and pairs -------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedTable:
    """A table's columns (not the key or gold labels) normalised once for comparison."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    keys: tuple[Keys, ...]
    idf: tuple[Mapping[str, float] | None, ...] = ()

    @property
    def rows(self) -> int:
        return len(self.keys[0]) if self.keys else 0


def prepare_table(
    columns: Mapping[str, Sequence[Any]], kinds: Mapping[str, str] | None = None, sample: int = 1000
) -> PreparedTable:
    """Normalise each column by its kind, given in ``kinds`` or chosen from the first
    ``sample`` values (:func:`comparison_kind`); ``ignore`` columns are dropped."""
    names: list[str] = []
    chosen: list[str] = []
    keys: list[Keys] = []
    for name, values in columns.items():
        kind = (kinds or {}).get(name) or comparison_kind(name, list(values[:sample]))
        if kind not in COMPARE_KINDS:
            raise ValueError(
                f"column {name!r}: unknown kind {kind!r}; choose one of {', '.join(COMPARE_KINDS)}"
            )
        if kind == "ignore":
            continue
        names.append(name)
        chosen.append(kind)
        keys.append(normalize_column(values, kind))
    return PreparedTable(tuple(names), tuple(chosen), tuple(keys))


@dataclass(frozen=True)
class PairLevels:
    """The levels of N pairs × C columns, and per column the value both rows of a pair hold
    when their normalised values are equal (None otherwise), for term frequencies."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    levels: Levels
    left: tuple[Keys, ...]

    def __len__(self) -> int:
        return int(self.levels.shape[0])


def compare_pairs(table: PreparedTable, i: npt.ArrayLike, j: npt.ArrayLike) -> PairLevels:
    """The levels of the row pairs ``(i[k], j[k])``."""
    first, second = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
    levels = np.full((len(first), len(table.names)), -1, dtype=np.int8)
    for column, (kind, keys) in enumerate(zip(table.kinds, table.keys, strict=True)):
        idf = table.idf[column] if table.idf else None
        levels[:, column] = compare_values(keys[first], keys[second], kind, idf)
    return PairLevels(
        table.names, table.kinds, levels, tuple(_shared(keys[first], keys[second]) for keys in table.keys)
    )


def _shared(a: Keys, b: Keys) -> Keys:
    """``a[k]`` where ``a[k] == b[k]``, None elsewhere."""
    out = a.copy()
    out[a != b] = None
    return out


def term_counts(table: PreparedTable) -> dict[str, Counter[str]]:
    """How often each normalised value occurs, per column whose exact agreement is on a
    single value (the ``counts`` of term-frequency adjustment)."""
    return {
        name: Counter(key for key in keys.tolist() if key is not None)
        for name, kind, keys in zip(table.names, table.kinds, table.keys, strict=True)
        if kind in TF_KINDS
    }

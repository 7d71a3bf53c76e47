"""Candidate row pairs by exact keys, with recall that does not fall as the table grows.

Simhash buckets lose duplicates as rows are added; exact keys do not: two rows that agree on
a column share that column's key however many other rows there are. Each row gets several
keys (*key types*):

- every column's normalised value;
- for ``name`` columns a typo-tolerant form (letters and digits only, vowels after the first
  letter dropped, repeated letters squeezed: ``smith``/``smyth`` → ``smth``) and, for
  several words, the words sorted (``john smith`` = ``smith john``);
- for ``text`` columns the letters and digits only, and the first :data:`TITLE_WORDS` words;
- the pair of values of two columns, for every two of the :data:`PAIR_COLUMNS` columns with
  the most distinct values: when ``surname`` alone is too common, ``surname`` + ``given_name``
  still is not.

A key held by many rows says little (a common surname, a default value, a state) and would
produce pairs quadratically, so keys held by more than ``cap`` rows produce no pairs. One
``cap`` holds for all key types: the largest value ≤ :data:`MAX_CAP` whose pairs (counted
before removing repeats) fit the budget ``max(MIN_BUDGET, PAIRS_PER_ROW · n)``, but at least 2.

**Promise** (tested against brute force): rows ``a`` and ``b`` are a candidate pair if and
only if, for at least one key type, both have the same non-null key and at most ``cap`` rows
hold that key. Hence two rows that agree exactly on any one column (or, for the paired
columns, on any two) whose value is rare enough are always compared, at any row count.

Keys are integer codes (dictionaries over the distinct values, built once per distinct value,
never per row), grouped by one sort per key type; pairs are made inside the groups with numpy.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .arrays import sorted_unique
from .dedup.batch import expand_runs, pairs_in_runs

IntArray = npt.NDArray[np.int64]

#: The largest group of rows sharing a key that still produces pairs.
MAX_CAP = 50
#: Candidate pairs allowed per row (and at least MIN_BUDGET in all) when choosing the cap.
PAIRS_PER_ROW = 5
MIN_BUDGET = 2_000_000
#: Columns (most distinct values first) whose values are also keyed two at a time.
PAIR_COLUMNS = 8
TITLE_WORDS = 3

_NOT_WORD = re.compile(r"[\W_]+")
_VOWELS = re.compile(r"(?<!^)[aeiouy]")
_REPEATS = re.compile(r"(.)\1+")


@dataclass(frozen=True)
class KeyColumn:
    """One column as integer codes: ``codes[r]`` indexes ``values`` (-1 for null)."""

    name: str
    kind: str
    codes: IntArray
    values: Sequence[str]


@dataclass(frozen=True)
class Candidates:
    """The candidate pairs (``i < j``, sorted by ``(i, j)``), the cap chosen, the key types
    used, and how many pairs each produced before repeats across types were removed."""

    i: IntArray
    j: IntArray
    cap: int
    key_names: tuple[str, ...]
    produced: tuple[int, ...]

    def __len__(self) -> int:
        return int(self.i.shape[0])


# -- keys ------------------------------------------------------------------------------------


def _phonetic(value: str) -> str:
    letters = _NOT_WORD.sub("", value)
    return _REPEATS.sub(r"\1", _VOWELS.sub("", letters))


def _sorted_words(value: str) -> str:
    return " ".join(sorted(value.split()))


def _alnum(value: str) -> str:
    return _NOT_WORD.sub(" ", value).strip()


def _first_words(value: str) -> str:
    words = _NOT_WORD.sub(" ", value).split()
    return " ".join(words[:TITLE_WORDS]) if len(words) > TITLE_WORDS else ""


_DERIVED = {
    "name": (("phonetic", _phonetic), ("words", _sorted_words)),
    "text": (("alnum", _alnum), ("start", _first_words)),
}


def derive(column: KeyColumn, form: str) -> IntArray:
    """Codes of a derived form of the column's values (computed once per distinct value);
    forms that come out empty are null."""
    function = dict(_DERIVED[column.kind])[form]
    lookup: dict[str, int] = {}
    mapped = np.fromiter(
        (
            lookup.setdefault(text, len(lookup)) if (text := function(value)) else -1
            for value in column.values
        ),
        dtype=np.int64,
        count=len(column.values),
    )
    mapped = np.append(mapped, -1)
    return mapped[column.codes]  # -1 codes read the appended -1


def key_types(columns: Sequence[KeyColumn]) -> list[tuple[str, IntArray]]:
    """Every key type of the module docstring as ``(name, codes)``, codes -1 for no key."""
    types: list[tuple[str, IntArray]] = []
    for column in columns:
        if len(column.values) < 2:
            continue  # constant or empty: every row shares the key
        types.append((column.name, column.codes))
        for form, _ in _DERIVED.get(column.kind, ()):
            codes = derive(column, form)
            types.append((f"{column.name}~{form}", codes))
    varied = sorted(
        (column for column in columns if len(column.values) >= 2),
        key=lambda column: -len(column.values),
    )[:PAIR_COLUMNS]
    order = {column.name: position for position, column in enumerate(columns)}
    varied.sort(key=lambda column: order[column.name])
    for left, right in itertools.combinations(varied, 2):
        both = (left.codes >= 0) & (right.codes >= 0)
        combined = np.where(both, left.codes * (len(right.values) + 1) + right.codes, -1)
        types.append((f"{left.name}+{right.name}", combined))
    return types


# -- groups and pairs --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Groups:
    """The rows of one key type's groups of 2..MAX_CAP rows, group after group."""

    rows: IntArray
    starts: IntArray
    lengths: IntArray


def _groups(codes: IntArray) -> _Groups:
    present = np.flatnonzero(codes >= 0)
    order = present[np.argsort(codes[present], kind="stable")]
    ordered = codes[order]
    if ordered.size < 2:
        empty = np.zeros(0, dtype=np.int64)
        return _Groups(empty, empty, empty)
    boundary = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    starts = np.concatenate([[0], boundary])
    lengths = np.diff(np.append(starts, ordered.size))
    small = (lengths >= 2) & (lengths <= MAX_CAP)
    starts, lengths = starts[small], lengths[small]
    positions = expand_runs(starts, lengths)
    new_starts = np.cumsum(lengths) - lengths
    return _Groups(order[positions].astype(np.int64), new_starts.astype(np.int64), lengths.astype(np.int64))


def choose_cap(histograms: Sequence[IntArray], rows: int) -> int:
    """The largest cap ≤ MAX_CAP whose pairs (summed over key types, before repeats are
    removed) fit the budget; at least 2. ``histograms[t][g]`` counts type t's groups of g rows."""
    budget = max(MIN_BUDGET, PAIRS_PER_ROW * rows)
    sizes = np.arange(MAX_CAP + 1, dtype=np.int64)
    total = np.zeros(MAX_CAP + 1, dtype=np.int64)
    for histogram in histograms:
        total += histogram * sizes * (sizes - 1) // 2
    within = np.flatnonzero(np.cumsum(total) <= budget)
    return max(2, int(within[-1])) if within.size else 2


def candidate_pairs(keys: Sequence[tuple[str, IntArray]], rows: int, cap: int | None = None) -> Candidates:
    """The pairs promised by the module docstring for the given key types (``cap`` None:
    :func:`choose_cap`)."""
    grouped = [_groups(np.asarray(codes, dtype=np.int64)) for _, codes in keys]
    if cap is None:
        histograms = [np.bincount(group.lengths, minlength=MAX_CAP + 1) for group in grouped]
        cap = choose_cap(histograms, rows)
    parts: list[IntArray] = []
    produced: list[int] = []
    for group in grouped:
        keep = group.lengths <= cap
        count = 0
        for a, b in pairs_in_runs(group.starts[keep], group.lengths[keep]):
            left, right = group.rows[a], group.rows[b]
            low, high = np.minimum(left, right), np.maximum(left, right)
            parts.append(low * rows + high)
            count += int(a.size)
        produced.append(count)
    if parts:
        codes = np.asarray(sorted_unique(np.concatenate(parts)), dtype=np.int64)
        i, j = codes // rows, codes % rows
    else:
        i = j = np.zeros(0, dtype=np.int64)
    names = tuple(name for name, _ in keys)
    return Candidates(i.astype(np.int64), j.astype(np.int64), int(cap), names, tuple(produced))


def candidates_for(columns: Sequence[KeyColumn], rows: int, cap: int | None = None) -> Candidates:
    """Candidate pairs of a table given as key columns (:func:`key_types`, :func:`candidate_pairs`)."""
    return candidate_pairs(key_types(columns), rows, cap)


def factorize(values: Sequence[str | None], lookup: dict[str, int]) -> IntArray:
    """Integer codes of values through ``lookup`` (extended with unseen values); None → -1."""
    return np.fromiter(
        (-1 if value is None else lookup.setdefault(value, len(lookup)) for value in values),
        dtype=np.int64,
        count=len(values),
    )

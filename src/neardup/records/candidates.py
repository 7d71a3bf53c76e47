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
produce pairs quadratically, so keys of type ``t`` held by more than ``caps[t]`` rows produce
no pairs. The pairs (counted before removing repeats) must fit the budget
``max(MIN_BUDGET, PAIRS_PER_ROW · n)``; the caps share it by water-filling
(:func:`choose_caps`): every type gets the largest cap ≤ :data:`MAX_CAP` whose pairs stay
within one allowance, the largest allowance that fits the budget, and at least 2. Selective
types (``soc_sec_id+date_of_birth``) so keep their groups of a real entity's many rows while
an unselective one (``state+postcode``) is cut down. One cap for all types would fall as the
table grows, until it drops the keys that one person's few records and their copies share.

**Promise** (tested against brute force): rows ``a`` and ``b`` are a candidate pair if and
only if, for at least one key type ``t``, both have the same non-null key and at most
``caps[t]`` rows hold that key. Hence two rows that agree exactly on any one column (or, for the paired
columns, on any two) whose value is rare enough are always compared, at any row count.

Keys are integer codes (dictionaries over the distinct values, built once per distinct value,
never per row), grouped by one sort per key type; pairs are made inside the groups with numpy.

The cap would also drop exact copies: 200 filings of one complaint share every key, each held
by more than the cap. :func:`identical_rows` finds them (every column's code equal, so the
same normalised value) whatever their number, for the caller to join without pairs.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..arrays import sorted_unique
from ..dedup.batch import expand_runs, pairs_in_runs

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
class RecordCandidates:
    """The candidate pairs (``i < j``, sorted by ``(i, j)``), the key types used with the cap
    chosen for each, and how many pairs each produced before repeats across types were removed."""

    i: IntArray
    j: IntArray
    caps: tuple[int, ...]
    key_names: tuple[str, ...]
    produced: tuple[int, ...]

    def __len__(self) -> int:
        return int(self.i.shape[0])

    def describe_caps(self) -> str:
        """``≤ 50`` or ``≤ 4–50`` (by key type): the largest groups that made pairs."""
        low, high = min(self.caps, default=2), max(self.caps, default=2)
        return f"≤ {high}" if low == high else f"≤ {low}–{high} (by key type)"


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
    function = derived_form(column.kind, form)
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


@dataclass(frozen=True)
class KeySpec:
    """One key type: its name, the column(s) it reads (positions into the key columns) and,
    for a derived key, the form (``phonetic``, ``words``, ``alnum``, ``start``)."""

    name: str
    columns: tuple[int, ...]
    form: str | None = None


def key_specs(columns: Sequence[KeyColumn]) -> list[KeySpec]:
    """The key types of the module docstring for these columns, in :func:`key_types`' order
    (the incremental path stores them, so later rows get the same keys)."""
    specs: list[KeySpec] = []
    for position, column in enumerate(columns):
        if not column.values:
            continue  # all null: no key
        # a column of one value is still a key: its rows (a few, or a whole small table of
        # copies) pair up, and where it is held by more than the cap it makes no pairs anyway
        specs.append(KeySpec(column.name, (position,)))
        for form, _ in _DERIVED.get(column.kind, ()):
            specs.append(KeySpec(f"{column.name}~{form}", (position,), form))
    varied = sorted(
        (position for position, column in enumerate(columns) if len(column.values) >= 2),
        key=lambda position: -len(columns[position].values),
    )[:PAIR_COLUMNS]
    for left, right in itertools.combinations(sorted(varied), 2):
        specs.append(KeySpec(f"{columns[left].name}+{columns[right].name}", (left, right)))
    return specs


def derived_value(kind: str, form: str, value: str) -> str:
    """A derived form of one normalised value ('' when it comes out empty: no key)."""
    return derived_form(kind, form)(value)


def derived_form(kind: str, form: str) -> Callable[[str], str]:
    """The function of a derived form of a kind's values ('' when one comes out empty)."""
    return dict(_DERIVED[kind])[form]


def key_types(columns: Sequence[KeyColumn]) -> list[tuple[str, IntArray]]:
    """Every key type of the module docstring as ``(name, codes)``, codes -1 for no key."""
    types: list[tuple[str, IntArray]] = []
    for spec in key_specs(columns):
        if len(spec.columns) == 2:
            left, right = columns[spec.columns[0]], columns[spec.columns[1]]
            both = (left.codes >= 0) & (right.codes >= 0)
            types.append((spec.name, np.where(both, left.codes * (len(right.values) + 1) + right.codes, -1)))
        elif spec.form is None:
            types.append((spec.name, columns[spec.columns[0]].codes))
        else:
            types.append((spec.name, derive(columns[spec.columns[0]], spec.form)))
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


def choose_caps(histograms: Sequence[IntArray], rows: int) -> list[int]:
    """Per key type, the largest cap ≤ MAX_CAP whose pairs stay within a common allowance,
    the largest allowance whose pairs (summed over types, before repeats are removed) fit the
    budget; at least 2. ``histograms[t][g]`` counts type t's groups of g rows."""
    if not histograms:
        return []
    budget = max(MIN_BUDGET, PAIRS_PER_ROW * rows)
    sizes = np.arange(MAX_CAP + 1, dtype=np.int64)
    # cumulative[t][c]: type t's pairs with cap c
    cumulative = np.cumsum(np.stack(histograms) * (sizes * (sizes - 1) // 2), axis=1)

    def caps_for(allowance: int) -> IntArray:
        within = cumulative <= allowance
        last = MAX_CAP - np.argmax(within[:, ::-1], axis=1)  # largest c with pairs ≤ allowance
        return np.maximum(np.where(within.any(axis=1), last, 2), 2)

    def total(caps: IntArray) -> int:
        return int(cumulative[np.arange(len(caps)), caps].sum())

    allowances = np.unique(cumulative)
    low, high = 0, len(allowances) - 1  # binary search: the largest allowance that fits
    if total(caps_for(int(allowances[high]))) <= budget:
        return [int(cap) for cap in caps_for(int(allowances[high]))]
    while low < high:
        middle = (low + high + 1) // 2
        if total(caps_for(int(allowances[middle]))) <= budget:
            low = middle
        else:
            high = middle - 1
    return [int(cap) for cap in caps_for(int(allowances[low]))]


def candidate_pairs(
    keys: Sequence[tuple[str, IntArray]], rows: int, cap: int | None = None
) -> RecordCandidates:
    """The pairs promised by the module docstring for the given key types (``cap`` None:
    :func:`choose_caps`; an int: that cap for every type)."""
    grouped = [_groups(np.asarray(codes, dtype=np.int64)) for _, codes in keys]
    if cap is None:
        caps = choose_caps([np.bincount(group.lengths, minlength=MAX_CAP + 1) for group in grouped], rows)
    else:
        caps = [cap] * len(grouped)
    parts: list[IntArray] = []
    produced: list[int] = []
    for group, type_cap in zip(grouped, caps, strict=True):
        keep = group.lengths <= type_cap
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
    return RecordCandidates(
        i.astype(np.int64), j.astype(np.int64), tuple(int(c) for c in caps), names, tuple(produced)
    )


def candidates_for(columns: Sequence[KeyColumn], rows: int, cap: int | None = None) -> RecordCandidates:
    """Candidate pairs of a table given as key columns (:func:`key_types`, :func:`candidate_pairs`)."""
    return candidate_pairs(key_types(columns), rows, cap)


#: Odd 64-bit multiplier of the row hash in :func:`identical_rows` (2⁶⁴ / golden ratio).
_ROW_HASH = np.uint64(0x9E3779B97F4A7C15)


def identical_rows(columns: Sequence[KeyColumn], rows: int) -> IntArray:
    """For each row, the first row whose codes equal its own in every column (itself when
    there is none, and for rows with no column filled, which say nothing). A 64-bit hash of
    the codes and one sort group the rows; each is then checked against its group's first
    row, so a hash collision never joins different rows (the rare groups holding one are
    sorted out exactly by their codes), with memory a few integers per row."""
    first = np.arange(rows, dtype=np.int64)
    filled = np.zeros(rows, dtype=bool)
    digest = np.zeros(rows, dtype=np.uint64)
    for column in columns:
        filled |= column.codes >= 0
        digest = (digest ^ (column.codes + 1).astype(np.uint64)) * _ROW_HASH
    present = np.flatnonzero(filled)
    order = present[np.argsort(digest[present], kind="stable")]  # stable: lowest row first
    if order.size < 2:
        return first
    hashes = digest[order]
    fresh = np.concatenate([[True], hashes[1:] != hashes[:-1]])
    run = np.cumsum(fresh) - 1
    leader = order[np.flatnonzero(fresh)][run]
    same = np.ones(order.size, dtype=bool)
    for column in columns:
        same &= column.codes[order] == column.codes[leader]
    first[order] = leader
    collided = np.isin(run, run[~same])  # the groups whose hash different rows share
    seen: dict[tuple[int, ...], int] = {}
    for row in np.sort(order[collided]).tolist():
        first[row] = seen.setdefault(tuple(int(column.codes[row]) for column in columns), row)
    return first


def factorize(values: Sequence[str | None], lookup: dict[str, int]) -> IntArray:
    """Integer codes of values through ``lookup`` (extended with unseen values); None → -1."""
    return np.fromiter(
        (-1 if value is None else lookup.setdefault(value, len(lookup)) for value in values),
        dtype=np.int64,
        count=len(values),
    )

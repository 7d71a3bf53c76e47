"""Relational rows → weighted features → fingerprints (seed 002's ``fields`` weighting).

A row is a set of columns. Short columns (names, ids, dates, phone numbers, categories) are
one feature each, ``column=value``, weight 2 by default; long text columns are segmented
(jieba for Chinese, words for Latin scripts) into ``column:word`` features weighted by term
frequency (weight 1 per occurrence by default). Nulls and empty strings contribute nothing;
numbers and dates are normalised first (:mod:`neardup.records.values`), short values also go
through the text normaliser (NFKC, width, case) and have their whitespace collapsed.

The kind and weight of each column come from a :class:`RecordSchema`: given per column (CLI
``--field col:kind:weight`` or a TOML ``[records.fields]`` table) or chosen from the first
rows (:func:`~neardup.records.values.infer_kind`). The key column is never a feature.

Rows arrive as column-major :class:`RowChunk` objects, so every step is a loop over a column
or a numpy operation over a chunk, never per-feature Python work beyond building the feature
strings; distinct features are hashed once (and cached across chunks) and the fingerprints of
a chunk are one sparse product (:meth:`Fingerprinter.encode_hashed`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..arrays import sorted_unique
from ..distance import FingerprintArray, ints_to_array
from ..errors import ConfigError
from ..fingerprint.config import FingerprintConfig
from ..fingerprint.fingerprinter import EncodedBatch, Fingerprinter
from ..fingerprint.hashing import get_hash_function
from ..text.tokenize import decode, word_character_mask
from .values import (
    KINDS,
    infer_kind,
    is_binary,
    is_null,
    normalize_date,
    normalize_number,
    short_value,
    type_name,
)

SHORT_WEIGHT = 2.0
TEXT_WEIGHT = 1.0
#: Rows read before the automatic choice of column kinds is made.
SAMPLE_ROWS = 1000
#: Distinct features whose hashes are kept between chunks (categories, cities, common words).
HASH_CACHE_SIZE = 1 << 20

IntArray = npt.NDArray[np.int64]


# -- the schema -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldSpec:
    """What the user says about one column: its kind (``auto`` to infer it) and weight
    (None: 2 for short kinds, 1 per word for text)."""

    name: str
    kind: str = "auto"
    weight: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"a field needs a column name; got {self.name!r}")
        if self.kind not in KINDS:
            raise ConfigError(
                f"field {self.name!r}: unknown kind {self.kind!r}; choose one of {', '.join(KINDS)}"
            )
        if self.weight is not None:
            weight = self.weight
            if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
                raise ConfigError(f"field {self.name!r}: weight must be a number; got {weight!r}")
            if weight <= 0:
                raise ConfigError(
                    f"field {self.name!r}: weight must be above 0; got {weight!r} "
                    f"(to leave the column out, use kind 'ignore')"
                )
            object.__setattr__(self, "weight", float(weight))


def parse_field(text: str) -> FieldSpec:
    """``col``, ``col:3``, ``col:text`` or ``col:text:1.5`` (split from the right, so a
    column name may itself hold a colon)."""
    parts = text.split(":")
    weight: float | None = None
    kind = "auto"
    if len(parts) > 1:
        try:
            weight = float(parts[-1])
            parts.pop()
        except ValueError:
            pass
    if len(parts) > 1 and parts[-1].strip().lower() in KINDS:
        kind = parts.pop().strip().lower()
    name = ":".join(parts)
    if not name:
        raise ConfigError(f"field {text!r} has no column name; write COLUMN[:KIND][:WEIGHT], e.g. name:3")
    return FieldSpec(name, kind, weight)


@dataclass(frozen=True)
class ResolvedField:
    """A column as it is used: its position in the source, kind, weight, and whether the
    kind was inferred (inferred number/date columns fall back to short text for odd values;
    declared ones report them as errors)."""

    name: str
    index: int
    kind: str
    weight: float
    inferred: bool

    def describe(self) -> str:
        how = " (auto)" if self.inferred else ""
        return f"{self.name}: {self.kind} ×{self.weight:g}{how}"


@dataclass(frozen=True)
class ResolvedSchema:
    key: str
    key_index: int
    fields: tuple[ResolvedField, ...]
    ignored: tuple[str, ...]

    def describe(self) -> str:
        used = "; ".join(item.describe() for item in self.fields)
        ignored = f"; ignored: {', '.join(self.ignored)}" if self.ignored else ""
        return f"key {self.key}; {used}{ignored}"


@dataclass(frozen=True)
class RecordSchema:
    """Which column is the key and how the others count. Columns not named in ``fields``
    are used with kind ``auto`` unless ``only_listed``; ``ignore`` leaves columns out."""

    key: str
    fields: tuple[FieldSpec, ...] = ()
    ignore: tuple[str, ...] = ()
    only_listed: bool = False
    short_weight: float = SHORT_WEIGHT
    text_weight: float = TEXT_WEIGHT

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ConfigError("the key column must be named (key='COLUMN')")
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "ignore", tuple(self.ignore))
        names = [spec.name for spec in self.fields]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ConfigError(f"field {repeated[0]!r} is given twice; give each column once")
        both = sorted(set(names) & set(self.ignore))
        if both:
            raise ConfigError(f"column {both[0]!r} is both a field and ignored; drop one of the two")
        if self.key in names:
            raise ConfigError(
                f"the key column {self.key!r} cannot be a field: it is unique per row, so it would "
                f"tell every row apart; remove it from the fields"
            )

    def columns_to_read(self, columns: Sequence[str]) -> list[str]:
        """The columns a source must deliver, in source order: the key and every column not
        left out by ``ignore`` or ``only_listed`` (all names are checked against ``columns``)."""
        _check_unique_columns(columns)
        _check_known(self.key, columns, "key column", "key")
        for spec in self.fields:
            _check_known(spec.name, columns, "column", "fields")
        for name in self.ignore:
            _check_known(name, columns, "column", "ignore")
        listed = {spec.name for spec in self.fields if spec.kind != "ignore"}
        return [
            name
            for name in columns
            if name == self.key or (name not in self.ignore and (name in listed or not self.only_listed))
        ]

    def resolve(self, columns: Sequence[str], sample: Sequence[Sequence[Any]]) -> ResolvedSchema:
        """Check the names against the source's columns and fix every kind and weight;
        ``sample`` holds the first rows, column by column."""
        _check_unique_columns(columns)
        _check_known(self.key, columns, "key column", "key")
        for spec in self.fields:
            _check_known(spec.name, columns, "column", "fields")
        for name in self.ignore:
            _check_known(name, columns, "column", "ignore")
        specs = {spec.name: spec for spec in self.fields}
        resolved: list[ResolvedField] = []
        ignored: list[str] = []
        for index, name in enumerate(columns):
            if name == self.key:
                continue
            given = specs.get(name)
            if name in self.ignore or (given is None and self.only_listed):
                ignored.append(name)
                continue
            spec = given or FieldSpec(name)
            kind = infer_kind(sample[index]) if spec.kind == "auto" else spec.kind
            if kind == "ignore":
                ignored.append(name)
                continue
            default = self.text_weight if kind == "text" else self.short_weight
            weight = spec.weight if spec.weight is not None else default
            resolved.append(ResolvedField(name, index, kind, weight, spec.kind == "auto"))
        if not resolved:
            raise ConfigError(
                f"no columns left to compare (columns: {', '.join(columns)}; key {self.key!r}); "
                f"name the columns to use with fields"
            )
        return ResolvedSchema(self.key, columns.index(self.key), tuple(resolved), tuple(ignored))


def schema_from_mapping(data: Mapping[str, Any], **overrides: Any) -> RecordSchema:
    """A schema from a TOML ``[records]`` table: ``key``, ``ignore`` (list), ``only_listed``
    and ``fields``, a table of column → weight, kind, or ``{kind = ..., weight = ...}``.
    ``overrides`` (from flags) replace settings; their ``fields`` replace the file's column
    by column and their ``ignore`` adds to the file's."""
    values: dict[str, Any] = {}
    specs: list[FieldSpec] = []
    for column, entry in dict(data.get("fields", {})).items():
        specs.append(_field_from_toml(column, entry))
    if specs:
        values["fields"] = tuple(specs)
    if "key" in data:
        values["key"] = data["key"]
    if "ignore" in data:
        ignore = data["ignore"]
        if isinstance(ignore, str) or not all(isinstance(item, str) for item in ignore):
            raise ConfigError(f"records.ignore must be a list of column names; got {ignore!r}")
        values["ignore"] = tuple(ignore)
    if "only_listed" in data:
        if not isinstance(data["only_listed"], bool):
            raise ConfigError(f"records.only_listed must be true or false; got {data['only_listed']!r}")
        values["only_listed"] = data["only_listed"]
    overrides = {name: value for name, value in overrides.items() if value is not None}
    if "fields" in overrides:  # flags win column by column over the file
        given = {spec.name: spec for spec in overrides.pop("fields")}
        kept = [spec for spec in specs if spec.name not in given]
        values["fields"] = (*kept, *given.values())
    if "ignore" in overrides:
        values["ignore"] = (*values.get("ignore", ()), *overrides.pop("ignore"))
    values.update(overrides)
    if "key" not in values:
        raise ConfigError("the key column must be named: key='COLUMN' (key = '...' under [records])")
    return RecordSchema(**values)


def _field_from_toml(column: str, entry: Any) -> FieldSpec:
    if isinstance(entry, str):
        return FieldSpec(column, entry)
    if isinstance(entry, int | float) and not isinstance(entry, bool):
        return FieldSpec(column, weight=float(entry))
    if isinstance(entry, Mapping):
        unknown = set(entry) - {"kind", "weight"}
        if unknown:
            raise ConfigError(f"records.fields.{column}: unknown setting(s) {', '.join(sorted(unknown))}")
        return FieldSpec(column, entry.get("kind", "auto"), entry.get("weight"))
    raise ConfigError(f"records.fields.{column} must be a weight, a kind or {{kind, weight}}; got {entry!r}")


def _check_unique_columns(columns: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in columns:
        if name in seen:
            raise ConfigError(
                f"the source has two columns named {name!r}; give them distinct names (AS ...) in the query"
            )
        seen.add(name)


def _check_known(name: str, columns: Sequence[str], what: str, option: str) -> None:
    if name in columns:
        return
    same_case = [column for column in columns if column.lower() == name.lower()]
    close = same_case or difflib.get_close_matches(name, list(columns), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(
        f"no {what} {name!r} in the source; {hint}its columns are: {', '.join(columns)} (check {option})"
    )


# -- chunks and features -----------------------------------------------------------------------


@dataclass(frozen=True)
class RowChunk:
    """Consecutive rows of a source, column by column; ``first_row`` numbers the first of
    them (1-based) for error messages."""

    columns: tuple[Sequence[Any], ...]
    count: int
    first_row: int = 1

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[Any]], width: int, first_row: int = 1) -> RowChunk:
        columns = tuple(zip(*rows, strict=True)) if rows else tuple(() for _ in range(width))
        return cls(columns, len(rows), first_row)


@dataclass
class ChunkFeatures:
    """Every weighted feature occurrence of a chunk: ``documents[k]`` (row in the chunk)
    has feature ``features[k]`` of column ``fields[k]`` with ``weights[k]``. ``problems``
    maps a row to what is wrong with one of its values (declared number/date columns)."""

    documents: IntArray
    features: list[str]
    fields: npt.NDArray[np.int16]
    weights: npt.NDArray[np.float64]
    filled: IntArray
    problems: dict[int, str] = field(default_factory=dict)


class RowFeaturizer:
    """Turns chunks of rows into feature occurrences and fingerprints under one schema, with
    the normaliser, tokenizer, stopwords and hash of a ``fields`` fingerprinter."""

    def __init__(self, schema: ResolvedSchema, config: FingerprintConfig | None = None) -> None:
        config = (config or FingerprintConfig()).replace(weighting="fields")
        self.schema = schema
        self.fingerprinter = Fingerprinter(config=config)
        self.bits = self.fingerprinter.bits
        self._hash = get_hash_function(config.hash, config.bits)
        self._cache: dict[str, int] = {}

    def features(self, chunk: RowChunk) -> ChunkFeatures:
        documents: list[IntArray] = []
        features: list[str] = []
        fields: list[npt.NDArray[np.int16]] = []
        weights: list[npt.NDArray[np.float64]] = []
        filled = np.zeros(chunk.count, dtype=np.int64)
        problems: dict[int, str] = {}
        for number, column in enumerate(self.schema.fields):
            values = chunk.columns[column.index]
            if column.kind == "text":
                rows, names = self._text_features(column, values, problems)
            else:
                rows, names = self._short_features(column, values, problems)
            documents.append(rows)
            features.extend(names)
            fields.append(np.full(len(names), number, dtype=np.int16))
            weights.append(np.full(len(names), column.weight, dtype=np.float64))
            filled[sorted_unique(rows)] += 1
        return ChunkFeatures(
            documents=np.concatenate(documents),
            features=features,
            fields=np.concatenate(fields),
            weights=np.concatenate(weights),
            filled=filled,
            problems=problems,
        )

    def hashes(self, features: Sequence[str]) -> tuple[IntArray, FingerprintArray]:
        """Each occurrence's index into a table of the distinct features' hashes."""
        index: dict[str, int] = {}
        ids = np.fromiter(
            (index.setdefault(name, len(index)) for name in features), dtype=np.int64, count=len(features)
        )
        cache, function = self._cache, self._hash
        if len(cache) > HASH_CACHE_SIZE:
            cache.clear()
        values = []
        for name in index:
            value = cache.get(name)
            if value is None:
                value = cache[name] = function(name)
            values.append(value)
        return ids, ints_to_array(values, self.bits)

    def encode(self, found: ChunkFeatures, count: int) -> tuple[IntArray, FingerprintArray, EncodedBatch]:
        """The hash-table ids of the features, the table and the fingerprints of ``count`` rows."""
        ids, table = self.hashes(found.features)
        encoded = self.fingerprinter.encode_hashed(found.documents, ids, found.weights, table, count)
        return ids, table, encoded

    def fingerprint_chunk(self, chunk: RowChunk) -> FingerprintArray:
        """The fingerprints of a chunk's rows (values that fail to parse count as nulls)."""
        return self.encode(self.features(chunk), chunk.count)[2].fingerprints

    # -- columns ----------------------------------------------------------------------------

    def _short_features(
        self, column: ResolvedField, values: Sequence[Any], problems: dict[int, str]
    ) -> tuple[IntArray, list[str]]:
        rows: list[int] = []
        texts: list[str] = []
        memo: dict[str, str] = {}  # strings repeat (dates, cities, categories); others rarely
        for row, value in enumerate(values):
            if is_null(value):
                continue
            text = memo.get(value) if type(value) is str else None
            if text is None:
                try:
                    text = _short_text(column, value)
                except ValueError as exc:
                    problems.setdefault(row, _problem(column, value, exc))
                    continue
                if type(value) is str:
                    memo[value] = text
            rows.append(row)
            texts.append(text)
        normalized = self.fingerprinter.normalizer.normalize_many(texts)
        prefix = column.name + "="
        names = [prefix + " ".join(text.split()) for text in normalized]
        return np.asarray(rows, dtype=np.int64), names

    def _text_features(
        self, column: ResolvedField, values: Sequence[Any], problems: dict[int, str]
    ) -> tuple[IntArray, list[str]]:
        rows: list[int] = []
        texts: list[str] = []
        for row, value in enumerate(values):
            if is_null(value):
                continue
            if is_binary(value):
                problems.setdefault(row, _problem(column, value, ValueError("binary data is not text")))
                continue
            rows.append(row)
            texts.append(value if isinstance(value, str) else short_value(value))
        fingerprinter = self.fingerprinter
        batch = fingerprinter.tokenizer.tokenize_batch(fingerprinter.normalizer.normalize_many(texts))
        word = np.concatenate([[0], np.cumsum(word_character_mask(batch.codepoints))])
        kept = np.flatnonzero(word[batch.ends] > word[batch.starts])
        joined = decode(batch.codepoints)
        starts, ends = batch.starts[kept].tolist(), batch.ends[kept].tolist()
        stopwords = fingerprinter.weighting.stopwords
        prefix = column.name + ":"
        occurrences = [(k, joined[s:e]) for k, s, e in zip(kept.tolist(), starts, ends, strict=True)]
        occurrences = [(k, token) for k, token in occurrences if token not in stopwords]
        positions = np.asarray(rows, dtype=np.int64)
        documents = batch.documents[[k for k, _ in occurrences]] if occurrences else np.zeros(0, np.int64)
        return positions[documents], [prefix + token for _, token in occurrences]


def _short_text(column: ResolvedField, value: Any) -> str:
    """A short value as text; declared number/date columns must parse, inferred ones fall
    back to the value's text."""
    if column.kind == "number" or column.kind == "date":
        try:
            return normalize_number(value) if column.kind == "number" else normalize_date(value)
        except ValueError:
            if not column.inferred or is_binary(value):
                raise
    return short_value(value)


def _problem(column: ResolvedField, value: Any, error: ValueError) -> str:
    if is_binary(value):
        return (
            f"column {column.name!r} holds binary data, which cannot be compared; "
            f"leave the column out with ignore=[{column.name!r}]"
        )
    fix = f"fix the value, or declare the column as text with the field {column.name}:short"
    return f"column {column.name!r} ({column.kind}): {error} ({type_name(value)}); {fix}"

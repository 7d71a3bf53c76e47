"""The learned model of a records index, as its store keeps it (``neardup records --index``).

A records index decides later rows with the model its first run learned: the compared
columns and their kinds, the key types and their caps (:mod:`neardup.records.candidates`),
the Fellegi–Sunter weights, the threshold, the word weights of text columns and the term
frequencies of exact agreement (:mod:`neardup.records.weights`), and how many rows they were
fitted on. The first run's model is in the store's meta; a refitted one
(:mod:`neardup.records.incremental`) replaces it in the store's ``state`` map. A stored row's
group is never changed by a new model, only by an explicit refit. A store made by another
:data:`MODEL_VERSION` (other normalisation, keys, comparisons or layout) is refused rather
than read with rules its rows were not made by; an older one names the refit that rebuilds
it from its stored rows.

Term frequencies keep only the values held by two rows or more: a value not listed counts
one row (:class:`~neardup.records.weights.TermFrequencies`), as it does in the batch. They
are kept by hash (:class:`~neardup.records.weights.HashedCounts`: ``hashes`` the sorted
little-endian uint64 hashes in base64, ``counts`` their uint32 counts zlib-compressed in
base64), since every run reads the model and a large table lists a value of most of its rows:
read as a JSON object of values they took most of a short run's time
(docs/results/seed002_table5_records.md). Stores written with the object (``counts``) are
read as they are.
"""

from __future__ import annotations

import base64
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, StorageDamagedError
from .candidates import KeySpec
from .weights import ColumnWeights, FieldWeights, HashedCounts, TermFrequencies

#: Bump when normalisation, key types, comparisons or the stored layout change: rows stored
#: under another version would be compared by rules they were not made by. Version 2 keeps
#: the rows fitted on and the row count, so the weights follow a growing table; version 3
#: keeps the term frequencies by hash, under version 2's rules.
MODEL_VERSION = 3
#: The versions this neardup reads: version 2's model is read as it is (its term frequencies
#: an object of values), and a run that adds rows stores it again as this version's.
READ_VERSIONS = (2, 3)
#: The meta entry that marks a store as a records index (a document index has none).
META_KEY = "records_model"


@dataclass(frozen=True)
class RecordsModel:
    """What a records index decides with: ``columns`` (name, kind) in comparison order, the
    key types ``specs`` with their ``caps``, the ``weights`` (``learned`` False: too little
    to learn from, and the agreement rule of :mod:`neardup.records.learned` decides), the
    match ``threshold``, per column its word weights (text) and term frequencies, and the
    rows the weights were ``fitted`` on. ``version`` is the one it was stored by
    (:data:`READ_VERSIONS`); it is stored again as this :data:`MODEL_VERSION`'s."""

    key: str
    columns: tuple[tuple[str, str], ...]
    specs: tuple[KeySpec, ...]
    caps: tuple[int, ...]
    weights: FieldWeights
    learned: bool
    threshold: float
    idf: tuple[Mapping[str, float] | None, ...]
    terms: Mapping[str, TermFrequencies]
    fitted: int = 0
    version: int = MODEL_VERSION

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(kind for _, kind in self.columns)

    def to_meta(self) -> dict[str, Any]:
        """The model as JSON-able meta (:data:`META_KEY` of the store's meta)."""
        weights = self.weights
        return {
            "version": MODEL_VERSION,
            "key": self.key,
            "columns": [list(column) for column in self.columns],
            "specs": [[spec.name, list(spec.columns), spec.form] for spec in self.specs],
            "caps": list(self.caps),
            "weights": {
                "prior": weights.prior,
                "iterations": weights.iterations,
                "converged": weights.converged,
                "u_source": weights.u_source,
                "columns": [[c.name, c.kind, list(c.levels), list(c.m), list(c.u)] for c in weights.columns],
            },
            "learned": self.learned,
            "threshold": self.threshold,
            "idf": [None if idf is None else dict(idf) for idf in self.idf],
            "terms": {name: _terms_meta(terms) for name, terms in self.terms.items()},
            "fitted": self.fitted,
        }

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], where: str) -> RecordsModel:
        """The model stored in a store's meta; a store of another :data:`MODEL_VERSION` is
        refused naming the fix, a malformed model as damaged."""
        settings = RefitSettings.from_meta(meta, where)
        if settings.version not in READ_VERSIONS:
            readable = " and ".join(map(str, READ_VERSIONS))
            raise ConfigError(
                f"{where} was made by records model version {settings.version}; this neardup reads "
                f"versions {readable}: rebuild it from its stored rows with `neardup records "
                f"SOURCE --key {settings.key} --index URL --refit` (SOURCE's new rows are added after)"
            )
        try:
            return _model(meta)
        except (KeyError, TypeError, ValueError, zlib.error) as exc:
            raise _damaged(where, exc) from exc


@dataclass(frozen=True)
class RefitSettings:
    """What a refit keeps of a stored model of this or an older version: the key, the
    compared columns with their kinds, and the threshold (all else is learned again)."""

    version: int
    key: str
    columns: tuple[tuple[str, str], ...]
    threshold: float

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], where: str) -> RefitSettings:
        """A model of a newer version is refused (its rules are unknown here)."""
        version = meta.get("version")
        if isinstance(version, int) and version > MODEL_VERSION:
            raise ConfigError(
                f"{where} was made by records model version {version}, newer than this neardup's "
                f"{MODEL_VERSION}: use a neardup that reads it"
            )
        try:
            return cls(
                int(meta["version"]),
                str(meta["key"]),
                tuple((str(name), str(kind)) for name, kind in meta["columns"]),
                float(meta["threshold"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _damaged(where, exc) from exc


def _damaged(where: str, exc: Exception) -> StorageDamagedError:
    return StorageDamagedError(
        f"{where}: the stored records model is incomplete ({exc!r}); the store is damaged: "
        "build a new index with `neardup records SOURCE --key KEY --index NEW_URL`"
    )


def _model(meta: Mapping[str, Any]) -> RecordsModel:
    weights = meta["weights"]
    columns = tuple(
        ColumnWeights(name, kind, tuple(levels), tuple(m), tuple(u))
        for name, kind, levels, m, u in weights["columns"]
    )
    return RecordsModel(
        key=str(meta["key"]),
        columns=tuple((str(name), str(kind)) for name, kind in meta["columns"]),
        specs=tuple(KeySpec(name, tuple(columns_), form) for name, columns_, form in meta["specs"]),
        caps=tuple(int(cap) for cap in meta["caps"]),
        weights=FieldWeights(
            columns,
            float(weights["prior"]),
            int(weights["iterations"]),
            bool(weights["converged"]),
            str(weights["u_source"]),
        ),
        learned=bool(meta["learned"]),
        threshold=float(meta["threshold"]),
        idf=tuple(None if idf is None else dict(idf) for idf in meta["idf"]),
        terms={name: _terms(terms) for name, terms in meta["terms"].items()},
        fitted=int(meta["fitted"]),
        version=int(meta["version"]),
    )


def _terms_meta(terms: TermFrequencies) -> dict[str, Any]:
    counts = terms.counts if isinstance(terms.counts, HashedCounts) else HashedCounts.of(terms.counts)
    return {
        "size": terms.size,
        "agreement": terms.agreement,
        "hashes": base64.b64encode(counts.hashes.astype("<u8").tobytes()).decode("ascii"),
        "counts": base64.b64encode(zlib.compress(counts.counts.astype("<u4").tobytes())).decode("ascii"),
    }


def _terms(meta: Mapping[str, Any]) -> TermFrequencies:
    """A column's stored term frequencies: by hash, or (stores written before) an object."""
    counts = meta["counts"]
    if isinstance(counts, Mapping):
        held = HashedCounts.of({str(value): int(count) for value, count in counts.items()})
    else:
        hashes = np.frombuffer(base64.b64decode(meta["hashes"], validate=True), dtype="<u8")
        numbers = np.frombuffer(zlib.decompress(base64.b64decode(counts, validate=True)), dtype="<u4")
        if len(hashes) != len(numbers) or np.any(hashes[1:] <= hashes[:-1]):
            raise ValueError("term frequency hashes and counts do not pair up in order")
        held = HashedCounts(hashes.astype(np.uint64), numbers.astype(np.uint32))
    return TermFrequencies(held, int(meta["size"]), float(meta["agreement"]))


def stored_terms(counts: Mapping[str, Counter[str]]) -> dict[str, TermFrequencies]:
    """Each column's term frequencies with only the values held twice or more listed."""
    out = {}
    for name, counter in counts.items():
        full = TermFrequencies.of(counter)
        common = {value: count for value, count in counter.items() if count >= 2}
        out[name] = TermFrequencies(HashedCounts.of(common), full.size, full.agreement)
    return out


def check_columns(model: RecordsModel, columns: Sequence[str], source: str) -> None:
    """Refuse a source that lacks the key or a column the model compares."""
    missing = [name for name in (model.key, *model.names) if name not in columns]
    if missing:
        raise ConfigError(
            f"{source} has no column {', '.join(repr(name) for name in missing)}, which the records "
            f"index compares (key {model.key!r}; columns {', '.join(model.names)}); give a source "
            "with the columns the index was made from, or build a new index"
        )

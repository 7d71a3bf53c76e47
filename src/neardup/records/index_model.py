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
one row (:class:`~neardup.records.weights.TermFrequencies`), as it does in the batch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, StorageDamagedError
from .candidates import KeySpec
from .weights import ColumnWeights, FieldWeights, TermFrequencies

#: Bump when normalisation, key types, comparisons or the stored layout change: rows stored
#: under another version would be compared by rules they were not made by. Version 2 keeps
#: the rows fitted on and the row count, so the weights follow a growing table.
MODEL_VERSION = 2
#: The meta entry that marks a store as a records index (a document index has none).
META_KEY = "records_model"


@dataclass(frozen=True)
class RecordsModel:
    """What a records index decides with: ``columns`` (name, kind) in comparison order, the
    key types ``specs`` with their ``caps``, the ``weights`` (``learned`` False: too little
    to learn from, and the agreement rule of :mod:`neardup.records.learned` decides), the
    match ``threshold``, per column its word weights (text) and term frequencies, and the
    rows the weights were ``fitted`` on."""

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
            "version": self.version,
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
            "terms": {
                name: {"size": terms.size, "agreement": terms.agreement, "counts": dict(terms.counts)}
                for name, terms in self.terms.items()
            },
            "fitted": self.fitted,
        }

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], where: str) -> RecordsModel:
        """The model stored in a store's meta; a store of another :data:`MODEL_VERSION` is
        refused naming the fix, a malformed model as damaged."""
        settings = RefitSettings.from_meta(meta, where)
        if settings.version != MODEL_VERSION:
            raise ConfigError(
                f"{where} was made by records model version {settings.version}; this neardup reads "
                f"version {MODEL_VERSION}: rebuild it from its stored rows with `neardup records "
                f"SOURCE --key {settings.key} --index URL --refit` (SOURCE's new rows are added after)"
            )
        try:
            return _model(meta)
        except (KeyError, TypeError, ValueError) as exc:
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
        terms={
            name: TermFrequencies(dict(terms["counts"]), int(terms["size"]), float(terms["agreement"]))
            for name, terms in meta["terms"].items()
        },
        fitted=int(meta["fitted"]),
        version=int(meta["version"]),
    )


def stored_terms(counts: Mapping[str, Counter[str]]) -> dict[str, TermFrequencies]:
    """Each column's term frequencies with only the values held twice or more listed."""
    out = {}
    for name, counter in counts.items():
        full = TermFrequencies.of(counter)
        common = {value: count for value, count in counter.items() if count >= 2}
        out[name] = TermFrequencies(common, full.size, full.agreement)
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

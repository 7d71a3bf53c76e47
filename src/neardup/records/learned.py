"""Duplicate rows by learned field weights: the default of ``neardup records``.

Simhash on short rows misses duplicates whose differing column moves the fingerprint far
(docs/records.md compares the two). This pipeline instead

1. streams the rows, keeping per used column only integer codes of its normalised values
   and the distinct values themselves (:mod:`neardup.records.compare` normalisation);
2. makes candidate pairs from exact keys (:mod:`neardup.records.candidates`), whose recall
   does not fall with the row count;
3. compares each candidate column by column (:func:`~neardup.records.compare.compare_pairs`)
   and fits Fellegi–Sunter m/u weights by EM without labels
   (:func:`~neardup.records.weights.fit_weights`, on at most :data:`FIT_PAIRS` pairs, a seeded
   sample, so large tables fit in bounded time and runs repeat exactly), without the columns
   a source rather than the entity fills, and with each column's disagreement bounded by
   pairs that agree on a near-key column (:func:`fit_model`);
4. keeps pairs whose match probability (with term frequencies) reaches ``threshold`` and
   joins them into groups, most probable first, except a pair that would join two groups
   most of whose other compared pairs are more likely non-matches (:func:`guarded_pairs`):
   two sites of one organisation share its phone number, a third row shares each one's
   address, and connected components alone chain all of them into one group;
5. clusters the kept pairs by connected components (:func:`~neardup.dedup.clusters.cluster_records`).

Rows that are exact copies (every compared value the same after normalisation:
:func:`~neardup.records.candidates.identical_rows`) are one group whatever their number: a
key held by more rows than the cap makes no candidate pairs, so 200 filings of one complaint
would otherwise stay apart. They enter step 4 already joined (the guard never splits them)
and are reported as a star of pairs to their first row, not all pairs between them.

It returns the same :class:`~neardup.records.dedup.RecordsResult` as the Simhash path, so
every output works; a pair's ``distance`` is the number of columns on which its two rows
differ (both filled), and the fingerprints are zeros.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..dedup.batch import Pairs
from ..dedup.clusters import check_keep, cluster_records
from ..errors import ConfigError, InputError
from ..io.read import ON_ERROR_CHOICES
from ..io.record import ErrorReport
from .candidates import KeyColumn, RecordCandidates, candidates_for, factorize, identical_rows
from .compare import (
    LEVELS,
    TF_KINDS,
    PairLevels,
    PreparedTable,
    compare_pairs,
    comparison_kind,
    normalize_column,
    word_weights,
)
from .dedup import RecordsResult, _sample
from .schema import RecordSchema, ResolvedField, ResolvedSchema, RowChunk
from .values import RecordKey, record_key
from .weights import (
    SEED,
    ColumnWeights,
    FieldWeights,
    bound_disagreement,
    fit_weights,
    match_probability,
    source_columns,
)

#: Default P(match) a pair needs. EM's λ is the share of duplicates among candidates, not in
#: the table, and pairs chain into clusters, so a looser threshold lets through chains of
#: plausible pairs (docs/records.md, step 4).
DEFAULT_THRESHOLD = 0.99
#: Fewer candidate pairs than this teach EM nothing (on a tiny table every weight comes out
#: 0 and λ alone decides): a pair then counts when it agrees on :data:`FEW_PAIRS_AGREEMENT`
#: of the columns both rows fill (agreeing: one of a column's two closest levels).
MIN_FIT_PAIRS = 500
FEW_PAIRS_AGREEMENT = 0.7
#: Candidate pairs EM is fitted on at most (a seeded sample of them beyond that).
FIT_PAIRS = 200_000
#: Bits by which exact agreement may weigh against, or disagreement for, a match before
#: the column is taken out of the model (:func:`fit_monotone`).
MONOTONE_SLACK = 0.5
#: Candidate pairs compared per step when scoring (bounds the temporary value arrays).
SCORE_CHUNK = 500_000
#: A pair joins two groups only if at least this share of the candidate pairs between them
#: has a match probability of at least :data:`GUARD_PROBABILITY` (:func:`guarded_pairs`).
#: Text is compared without punctuation and with word weights (:mod:`neardup.records.compare`),
#: so records that share a title but not a venue (a technical report and the paper) score
#: close, and a bare majority would let such groups join: three in four of the pairs between
#: them must be likely matches, less :data:`GUARD_SLACK` pairs: between small groups the share
#: is coarse (1 of 2, 2 of 3), and one typo-ridden pair of a person's records should not keep
#: them apart. The shares and probabilities tried: docs/records.md, step 5.
GUARD_SHARE = 0.75
GUARD_PROBABILITY = 0.5
GUARD_SLACK = 1

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class LearnedModel:
    """What the learned path decided: weights, threshold, candidate key cap and counts."""

    weights: FieldWeights
    threshold: float
    caps: str
    candidates: int
    fitted_on: int
    guarded: int = 0
    #: False when every fitted pair compared alike on every column (a table of copies):
    #: EM then cannot tell m from u, every weight comes out 0 and λ alone would decide.
    varied: bool = True
    #: Rows that are exact copies of an earlier row, joined to it whatever the keys.
    copies: int = 0

    @property
    def learned(self) -> bool:
        """False when there was nothing to learn from: too few candidates
        (:data:`MIN_FIT_PAIRS`), or all of them compared alike (``varied``)."""
        return self.candidates >= MIN_FIT_PAIRS and self.varied

    def describe(self) -> list[str]:
        """Lines for stderr: the candidates, then :meth:`FieldWeights.describe`."""
        lines = [self._describe_copies()] if self.copies else []
        if not self.learned:
            why = (
                f"too few to learn weights from (< {MIN_FIT_PAIRS})"
                if self.candidates < MIN_FIT_PAIRS
                else "all compared alike on every column, nothing to learn weights from"
            )
            return [
                f"learned: {self.candidates} candidate pairs (keys held by {self.caps} rows), {why}: "
                f"a pair counts when it agrees on {FEW_PAIRS_AGREEMENT:.0%} of the columns both rows fill",
                *lines,
            ]
        return [
            f"learned: {self.candidates} candidate pairs (keys held by {self.caps} rows), "
            f"weights fitted on {self.fitted_on}, match probability ≥ {self.threshold:g}; {self.guarded} of "
            "those left out because they would join groups whose other pairs mostly do not match",
            *lines,
            *self.weights.describe(),
        ]

    def _describe_copies(self) -> str:
        return (
            f"{self.copies} rows are exact copies of an earlier row (every compared value the same): "
            "each joins the first one's group whatever the keys"
        )


@dataclass
class _Columns:
    """The used columns as codes (per chunk) and each column's distinct values."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    positions: tuple[int, ...]
    lookups: list[dict[str, int]] = field(default_factory=list)
    codes: list[list[IntArray]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lookups = [{} for _ in self.names]
        self.codes = [[] for _ in self.names]

    def add(self, chunk: RowChunk, keep: npt.NDArray[np.bool_]) -> None:
        for column, (kind, position) in enumerate(zip(self.kinds, self.positions, strict=True)):
            values = chunk.columns[position]
            if not keep.all():
                values = [value for value, ok in zip(values, keep.tolist(), strict=True) if ok]
            normalised = normalize_column(list(values), kind).tolist()
            self.codes[column].append(factorize(normalised, self.lookups[column]))

    def finish(self) -> list[KeyColumn]:
        columns = []
        for name, kind, lookup, parts in zip(self.names, self.kinds, self.lookups, self.codes, strict=True):
            codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            columns.append(KeyColumn(name, kind, codes, list(lookup)))
        self.codes = []
        return columns


def choose_columns(schema: ResolvedSchema, sample: Sequence[Sequence[Any]]) -> list[ResolvedField]:
    """The resolved columns with their comparison kind; ``ignore`` ones left out."""
    chosen = []
    for column in schema.fields:
        kind = comparison_kind(column.name, list(sample[column.index]))
        if kind != "ignore":
            chosen.append(ResolvedField(column.name, column.index, kind, 1.0, column.inferred))
    return chosen


def learned_duplicate_records(
    columns: Sequence[str],
    chunks: Iterable[RowChunk],
    schema: RecordSchema,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    keep: str = "first",
    on_error: str = "fail",
    report: ErrorReport | None = None,
    source_name: str = "input",
    progress: Callable[[int], object] | None = None,
    on_schema: Callable[[ResolvedSchema], object] | None = None,
) -> RecordsResult:
    """Duplicate rows of a stream of chunks by learned weights (module docstring). Bad keys
    stop the run or are skipped as in :func:`~neardup.records.dedup.find_duplicate_records`."""
    check_keep(keep)
    if not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"threshold must be between 0 and 1; got {threshold!r}")
    report = report if report is not None else ErrorReport()
    resolved, keys, key_columns = read_key_columns(
        columns,
        chunks,
        schema,
        on_error=on_error,
        report=report,
        source_name=source_name,
        progress=progress,
        on_schema=on_schema,
    )
    pairs, scored = score_table(key_columns, len(keys), threshold)
    filled = np.zeros(len(keys), dtype=np.int64)
    for column in key_columns:
        filled += column.codes >= 0
    clusters = cluster_records(len(keys), pairs.i, pairs.j, keep=keep, lengths=filled)
    return RecordsResult(
        schema=resolved,
        bits=64,
        keys=keys,
        fingerprints=np.zeros(len(keys), dtype=np.uint64),
        filled=filled,
        empty=int(np.count_nonzero(filled == 0)),
        skipped=report.count,
        candidates=Pairs(scored.candidate_i, scored.candidate_j, np.zeros(len(scored.candidate_i), np.uint8)),
        pairs=pairs,
        clusters=clusters,
        max_distance=len(key_columns),
        check=None,
        model=scored.model,
    )


def read_key_columns(
    columns: Sequence[str],
    chunks: Iterable[RowChunk],
    schema: RecordSchema,
    *,
    on_error: str = "fail",
    report: ErrorReport | None = None,
    source_name: str = "input",
    progress: Callable[[int], object] | None = None,
    on_schema: Callable[[ResolvedSchema], object] | None = None,
) -> tuple[ResolvedSchema, list[RecordKey], list[KeyColumn]]:
    """The schema resolved on the first rows (columns to compare and their kinds), the
    rows' keys and the compared columns as codes of normalised values: what the learned
    path reads of a source, for the batch and for the first run of an index."""
    if on_error not in ON_ERROR_CHOICES:
        raise ConfigError(f"on_error must be 'fail' or 'skip'; got {on_error!r}")
    report = report if report is not None else ErrorReport()
    sample, stream = _sample(chunks, len(columns))
    base = schema.resolve(columns, sample)
    used = choose_columns(base, sample)
    ignored = (*base.ignored, *(c.name for c in base.fields if c.name not in {u.name for u in used}))
    resolved = ResolvedSchema(base.key, base.key_index, tuple(used), tuple(ignored))
    if on_schema is not None:
        on_schema(resolved)
    if not used:
        raise ConfigError("no columns left to compare: every column is constant, binary or ignored")
    store = _Columns(tuple(c.name for c in used), tuple(c.kind for c in used), tuple(c.index for c in used))
    keys: list[RecordKey] = []
    first_seen: dict[RecordKey, int] = {}
    for chunk in stream:
        if chunk.count:
            keep_rows = _check_keys(chunk, resolved, keys, first_seen, report, on_error, source_name)
            store.add(chunk, keep_rows)
        if progress is not None:
            progress(chunk.count)
    return resolved, keys, store.finish()


@dataclass(frozen=True)
class _Scored:
    model: LearnedModel
    candidate_i: IntArray
    candidate_j: IntArray
    #: Each key type's cap (:func:`~neardup.records.candidates.choose_caps`), in key order.
    caps: tuple[int, ...] = ()


def prepared(columns: Sequence[KeyColumn]) -> tuple[PreparedTable, dict[str, Counter[str]]]:
    """The table for :func:`compare_pairs` (value arrays sharing the distinct strings, and the
    word weights of text columns) and the term counts of the columns compared on single values."""
    keys = []
    counts: dict[str, Counter[str]] = {}
    idf: list[dict[str, float] | None] = []
    for column in columns:
        values = np.empty(len(column.values) + 1, dtype=object)
        values[: len(column.values)] = column.values
        keys.append(values[column.codes])  # code -1 reads the trailing None
        present = column.codes[column.codes >= 0]
        tally = np.bincount(present, minlength=len(column.values)).tolist()
        if column.kind in TF_KINDS:
            counts[column.name] = Counter(dict(zip(column.values, tally, strict=True)))
        idf.append(word_weights(column.values, tally, len(column.codes)) if column.kind == "text" else None)
    names, kinds = tuple(c.name for c in columns), tuple(c.kind for c in columns)
    return PreparedTable(names, kinds, tuple(keys), tuple(idf)), counts


@dataclass(frozen=True)
class TableFit:
    """What fitting a table's weights made: its candidates, the compared table and term
    counts, the weights, whether they were learned (:attr:`LearnedModel.learned`), whether the
    fitted pairs varied at all, and how many pairs they were fitted on."""

    candidates: RecordCandidates
    table: PreparedTable
    counts: dict[str, Counter[str]]
    weights: FieldWeights
    learned: bool
    varied: bool
    fitted_on: int


def fit_table(columns: Sequence[KeyColumn], rows: int) -> TableFit:
    """Candidates of the table and the weights fitted on them (on a seeded sample of at most
    :data:`FIT_PAIRS`): the learning half of :func:`score_table`, which a records index also
    runs alone to refit its weights on the rows it has stored."""
    candidates: RecordCandidates = candidates_for(columns, rows)
    table, counts = prepared(columns)
    total = len(candidates)
    sample = np.arange(total)
    if total > FIT_PAIRS:
        sample = np.sort(np.random.default_rng(SEED).choice(total, FIT_PAIRS, replace=False))
    fitted = compare_pairs(table, candidates.i[sample], candidates.j[sample])
    weights = fit_model(fitted)
    varied = bool(len(sample)) and len(np.unique(fitted.levels, axis=0)) > 1
    learn = total >= MIN_FIT_PAIRS and varied
    return TableFit(candidates, table, counts, weights, learn, varied, len(sample))


def score_table(columns: Sequence[KeyColumn], rows: int, threshold: float) -> tuple[Pairs, _Scored]:
    """Candidates, weights fitted on them, and the pairs at or above ``threshold``; exact
    copies joined to their first row however many rows hold their keys."""
    fit = fit_table(columns, rows)
    candidates, table, counts = fit.candidates, fit.table, fit.counts
    weights, learn = fit.weights, fit.learned
    total = len(candidates)
    tops = np.asarray([len(LEVELS[kind]) - 1 for kind in table.kinds], dtype=np.int8)
    probability = np.zeros(total, dtype=np.float64)
    differing = np.zeros(total, dtype=np.uint8)
    for start in range(0, total, SCORE_CHUNK):
        part = slice(start, start + SCORE_CHUNK)
        levels = compare_pairs(table, candidates.i[part], candidates.j[part])
        if learn:
            probability[part] = match_probability(weights, levels, counts)
        else:  # the share of agreeing columns stands in for a probability
            probability[part] = np.where(_agreement(levels.levels, tops) >= FEW_PAIRS_AGREEMENT, 1.0, 0.0)
        differ = ((levels.levels >= 0) & (levels.levels < tops)).sum(axis=1)
        differing[part] = np.minimum(differ, 255).astype(np.uint8)
    # with nothing to learn from, the agreement rule alone decides (not the threshold)
    accepted = np.flatnonzero(probability >= (threshold if learn else 1.0))
    first = identical_rows(columns, rows)
    index = guarded_pairs(candidates.i, candidates.j, probability, accepted, first)
    pairs = _with_copies(Pairs(candidates.i[index], candidates.j[index], differing[index]), first)
    model = LearnedModel(
        weights,
        threshold,
        candidates.describe_caps(),
        total,
        fit.fitted_on,
        len(accepted) - len(index),
        fit.varied,
        int(np.count_nonzero(first != np.arange(rows))),
    )
    return pairs, _Scored(model, candidates.i, candidates.j, candidates.caps)


def _with_copies(pairs: Pairs, first: IntArray) -> Pairs:
    """``pairs`` and each exact copy's pair with its first row (0 columns differ), sorted by
    ``(i, j)`` without repeats: a star, so n copies add n - 1 pairs, not n(n - 1)/2."""
    copy = np.flatnonzero(first != np.arange(len(first)))
    if not copy.size:
        return pairs
    rows = len(first)
    codes = np.concatenate([pairs.i * rows + pairs.j, first[copy] * rows + copy])
    distance = np.concatenate([pairs.distance, np.zeros(copy.size, dtype=pairs.distance.dtype)])
    unique, position = np.unique(codes, return_index=True)
    return Pairs(unique // rows, unique % rows, distance[position])


def guarded_pairs(
    i: IntArray,
    j: IntArray,
    probability: npt.NDArray[np.float64],
    accepted: IntArray,
    first: IntArray | None = None,
    apart: npt.NDArray[np.bool_] | None = None,
) -> IntArray:
    """The accepted pairs (positions into ``i``/``j``, ascending) that end inside one group
    when accepted pairs join groups most probable first, and a pair that would join two groups
    of which one has more than one row joins them only if at least :data:`GUARD_SHARE` of the
    candidate pairs between the two groups (less :data:`GUARD_SLACK`) have probability ≥
    :data:`GUARD_PROBABILITY`. Rows with the same ``first`` (exact copies,
    :func:`~neardup.records.candidates.identical_rows`) start as one group, so the guard
    weighs a row against all the copies and never keeps them apart. Two groups that each hold
    a row marked in ``apart`` are never joined (the stored groups of a records index, whose ids
    must not change: :mod:`neardup.records.incremental`). Deterministic: ties in probability
    are taken in pair order.

    Long: one union-find walk whose state (labels, members, each node's pairs) every step shares."""
    if not len(accepted):
        return accepted
    used = [i[accepted], j[accepted]]
    if first is not None:
        copies = np.flatnonzero(first != np.arange(len(first)))
        used += [copies, first[copies]]
    nodes = np.unique(np.concatenate(used))
    inside = np.isin(i, nodes) & np.isin(j, nodes)  # only these pairs can lie between groups
    local_i, local_j = np.searchsorted(nodes, i[inside]), np.searchsorted(nodes, j[inside])
    weight = probability[inside] >= GUARD_PROBABILITY
    count = len(nodes)
    ends = np.concatenate([local_i, local_j])
    order = np.argsort(ends, kind="stable")
    neighbours = np.concatenate([local_j, local_i])[order]
    good = np.concatenate([weight, weight])[order]
    starts = np.searchsorted(ends[order], np.arange(count + 1))
    label = np.arange(count)
    if first is not None:  # the local index of each node's first copy (a node itself)
        label = np.searchsorted(nodes, first[nodes])
    members: list[list[int]] = [[] for _ in range(count)]
    for node, group in enumerate(label.tolist()):
        members[group].append(node)
    fixed = np.zeros(count, dtype=bool)  # the groups holding a row marked apart
    if apart is not None:
        fixed[label[apart[nodes]]] = True
    by_probability = accepted[np.argsort(-probability[accepted], kind="stable")]
    for a, b in zip(
        np.searchsorted(nodes, i[by_probability]).tolist(),
        np.searchsorted(nodes, j[by_probability]).tolist(),
        strict=True,
    ):
        left, right = int(label[a]), int(label[b])
        if left == right or (fixed[left] and fixed[right]):
            continue
        if len(members[left]) > len(members[right]):
            left, right = right, left
        if len(members[right]) > 1:
            spans = [np.arange(starts[x], starts[x + 1]) for x in members[left]]
            near = np.concatenate(spans)
            between = label[neighbours[near]] == right
            if np.count_nonzero(good[near][between]) < GUARD_SHARE * np.count_nonzero(between) - GUARD_SLACK:
                continue
        label[members[left]] = right
        members[right].extend(members[left])
        members[left] = []
        fixed[right] |= fixed[left]
    same = label[np.searchsorted(nodes, i[accepted])] == label[np.searchsorted(nodes, j[accepted])]
    kept: IntArray = accepted[same]
    return kept


def _agreement(levels: npt.NDArray[np.int8], tops: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
    """Each pair's share of agreeing columns among those both rows fill (0 with none)."""
    compared = (levels >= 0).sum(axis=1)
    agreeing = (levels >= tops - 1).sum(axis=1)
    return np.where(compared > 0, agreeing / np.maximum(compared, 1), 0.0)


def fit_model(pairs: PairLevels) -> FieldWeights:
    """The weights of the learned path: :func:`fit_monotone`, fitted again without the
    columns that :func:`~neardup.records.weights.source_columns` finds filled by a source
    rather than by the entity, then disagreement bounded by anchored pairs
    (:func:`~neardup.records.weights.bound_disagreement`)."""
    weights = fit_monotone(pairs)
    sources: set[str] = set()
    while True:  # a refit may bring back columns the first fit had set to 0
        found = set(source_columns(weights, pairs)) - sources
        if not found:
            return bound_disagreement(weights, pairs)
        sources |= found
        weights = fit_monotone(pairs, exclude=sources)


def fit_monotone(
    pairs: PairLevels, u: dict[str, tuple[float, ...]] | None = None, exclude: Collection[str] = ()
) -> FieldWeights:
    """EM weights where agreement never counts against a match: EM on many correlated
    columns may learn a latent class other than "same entity" (rows of one source, which
    agree on source-specific columns), and such a class shows as columns whose exact
    agreement weighs below zero or whose disagreement weighs above. Those columns are set
    to weight 0 (their m := u) and EM is fitted again on the rest, until none is left.
    Columns named in ``exclude`` are left out (weight 0) from the start."""
    active = [position for position, name in enumerate(pairs.names) if name not in exclude]
    if not active:
        active = list(range(len(pairs.names)))
    while True:
        subset = _columns(pairs, active)
        weights = fit_weights(subset, u)
        wrong = [
            position
            for position, column in zip(active, weights.columns, strict=True)
            if column.exact < -MONOTONE_SLACK or column.different > MONOTONE_SLACK
        ]
        if not wrong or len(wrong) == len(active):
            break
        active = [position for position in active if position not in wrong]
    fitted = {column.name: column for column in weights.columns}
    columns = tuple(
        fitted.get(name) or ColumnWeights(name, kind, LEVELS[kind], _uniform(kind), _uniform(kind))
        for name, kind in zip(pairs.names, pairs.kinds, strict=True)
    )
    return dataclasses.replace(weights, columns=columns)


def _uniform(kind: str) -> tuple[float, ...]:
    size = len(LEVELS[kind])
    return tuple(1.0 / size for _ in range(size))


def _columns(pairs: PairLevels, positions: Sequence[int]) -> PairLevels:
    return PairLevels(
        tuple(pairs.names[p] for p in positions),
        tuple(pairs.kinds[p] for p in positions),
        pairs.levels[:, list(positions)],
        tuple(pairs.left[p] for p in positions),
    )


def _check_keys(
    chunk: RowChunk,
    schema: ResolvedSchema,
    keys: list[RecordKey],
    first_seen: dict[RecordKey, int],
    report: ErrorReport,
    on_error: str,
    source_name: str,
) -> npt.NDArray[np.bool_]:
    """Append the chunk's good keys; which rows are good (a null key is bad, a repeated
    key always stops the run, as on the Simhash path)."""
    keep = np.ones(chunk.count, dtype=bool)
    for row, value in enumerate(chunk.columns[schema.key_index]):
        number = chunk.first_row + row
        where = f"{source_name} row {number}"
        try:
            key = record_key(value)
        except ValueError as exc:
            error = InputError(f"key column {schema.key!r}: {exc}; every row needs a unique key", where)
            if on_error == "fail":
                raise error from None
            report.add(error)
            keep[row] = False
            continue
        if key in first_seen:
            raise InputError(
                f"duplicate key {key!r}, first seen at row {first_seen[key]}; clusters name rows by "
                f"key, so keys must be unique (choose another column as key)",
                where,
            )
        first_seen[key] = number
        keys.append(key)
    return keep

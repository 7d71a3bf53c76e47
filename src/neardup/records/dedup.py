"""Duplicate rows of a table: fingerprints of every row, all pairs within a Hamming distance,
an optional verification of each pair, and clusters.

:func:`find_duplicate_records` consumes a stream of :class:`~neardup.records.schema.RowChunk`
objects (from :mod:`neardup.records.sources` or anything else), so only the keys, fingerprints and,
when verification is on, each row's distinct feature hashes are held in memory, never the
rows. The column kinds are chosen from the first :data:`~neardup.records.schema.SAMPLE_ROWS` rows.

Verification (seed 001 shows Simhash is weak on short texts, and rows are short): a candidate
pair is kept only when

- ``fields``: the weighted share of columns filled in both rows on which they agree reaches
  the threshold; short columns agree when their normalised values are equal, text columns
  count their word Jaccard similarity;
- ``jaccard``: the Jaccard similarity of the two rows' feature sets reaches the threshold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from ..dedup.batch import Pairs, as_words, find_all_pairs, row_distances
from ..dedup.clusters import Clusters, check_keep, cluster_records
from ..distance import FingerprintArray
from ..errors import ConfigError, InputError
from ..fingerprint.config import FingerprintConfig
from ..io.read import ON_ERROR_CHOICES
from ..io.record import ErrorReport
from .schema import SAMPLE_ROWS, ChunkFeatures, RecordSchema, ResolvedSchema, RowChunk, RowFeaturizer
from .values import RecordKey, record_key

DEFAULT_MAX_DISTANCE = 8
RECORD_CHECKS: tuple[str, ...] = ("none", "fields", "jaccard")
DEFAULT_MIN_SIMILARITY: dict[str, float] = {"fields": 0.7, "jaccard": 0.5}

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Verification:
    """How candidate pairs are checked: ``mode`` fields or jaccard, and the similarity a
    pair needs (None: the mode's default, :data:`DEFAULT_MIN_SIMILARITY`)."""

    mode: str = "fields"
    min_similarity: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in RECORD_CHECKS or self.mode == "none":
            raise ConfigError(f"verification mode must be fields or jaccard; got {self.mode!r}")
        if self.min_similarity is not None and not 0.0 <= self.min_similarity <= 1.0:
            raise ConfigError(f"min_similarity must be between 0 and 1; got {self.min_similarity!r}")

    @property
    def threshold(self) -> float:
        return DEFAULT_MIN_SIMILARITY[self.mode] if self.min_similarity is None else self.min_similarity


#: The automatic search (``-k auto``): (largest row count, max_distance), each confirmed by
#: field agreement. Rows are short, so one differing column moves a fingerprint about 9 bits
#: and a narrow search misses most duplicates; a wide one needs verification to stay precise.
#: Wide searches cost more as rows grow, so above the last step the search is the plain
#: k = DEFAULT_MAX_DISTANCE and no features are kept for verification (figures and the
#: command that measures them: docs/records.md, "Matching by Simhash").
AUTO_RECORD_STEPS: tuple[tuple[int, int], ...] = ((20_000, 18), (100_000, 12))
AUTO_RECORD_LIMIT = AUTO_RECORD_STEPS[-1][0]
AUTO = "auto"


def auto_record_search(rows: int) -> tuple[int, Verification | None]:
    """The automatic distance and verification for ``rows`` rows."""
    for limit, distance in AUTO_RECORD_STEPS:
        if rows <= limit:
            return distance, Verification("fields")
    return DEFAULT_MAX_DISTANCE, None


def verification(mode: str, min_similarity: float | None = None) -> Verification | None:
    """``none`` → None, else a :class:`Verification`."""
    if mode == "none":
        return None
    return Verification(mode, min_similarity)


# -- the feature store ----------------------------------------------------------------------------


@dataclass
class FeatureStore:
    """Each row's distinct (column, feature hash) pairs, compressed-sparse by row."""

    rows: list[npt.NDArray[np.int64]] = field(default_factory=list)
    fields: list[npt.NDArray[np.int16]] = field(default_factory=list)
    hashes: list[npt.NDArray[np.uint64]] = field(default_factory=list)
    offsets: IntArray | None = None
    field_array: npt.NDArray[np.int16] | None = None
    hash_array: npt.NDArray[np.uint64] | None = None

    def add(self, found: ChunkFeatures, ids: IntArray, table: FingerprintArray, first: int) -> None:
        low = table[:, 0] if table.ndim == 2 else table
        hashes = np.asarray(low, dtype=np.uint64)[ids] if len(ids) else np.zeros(0, dtype=np.uint64)
        order = np.lexsort((hashes, found.fields, found.documents))
        rows, fields, hashes = found.documents[order], found.fields[order], hashes[order]
        fresh = np.ones(len(rows), dtype=bool)
        fresh[1:] = (rows[1:] != rows[:-1]) | (fields[1:] != fields[:-1]) | (hashes[1:] != hashes[:-1])
        self.rows.append(rows[fresh] + first)
        self.fields.append(fields[fresh])
        self.hashes.append(hashes[fresh])

    def finish(self, count: int) -> None:
        rows = np.concatenate(self.rows) if self.rows else np.zeros(0, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=count))]).astype(np.int64)
        self.field_array = np.concatenate(self.fields) if self.fields else np.zeros(0, dtype=np.int16)
        self.hash_array = np.concatenate(self.hashes) if self.hashes else np.zeros(0, dtype=np.uint64)
        self.rows, self.fields, self.hashes = [], [], []

    def row(self, index: int) -> tuple[list[int], list[int]]:
        assert self.offsets is not None and self.field_array is not None and self.hash_array is not None
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        return self.field_array[start:end].tolist(), self.hash_array[start:end].tolist()


def jaccard(a: Iterable[int], b: Iterable[int]) -> float:
    """|A ∩ B| / |A ∪ B| of two feature sets; two empty rows are identical."""
    left, right = set(a), set(b)
    union = len(left | right)
    return len(left & right) / union if union else 1.0


def field_agreement(
    a: tuple[list[int], list[int]],
    b: tuple[list[int], list[int]],
    weights: Sequence[float],
    text: Sequence[bool],
) -> float:
    """The weighted share of the columns filled in both rows on which the rows agree (short
    columns: equal values; text columns: their word Jaccard). Two empty rows agree fully,
    rows with no column filled in both not at all."""
    left, right = _by_field(*a), _by_field(*b)
    if not left and not right:
        return 1.0
    total = agreed = 0.0
    for column in left.keys() & right.keys():
        weight = weights[column]
        total += weight
        agreed += weight * (
            jaccard(left[column], right[column]) if text[column] else left[column] == right[column]
        )
    return agreed / total if total else 0.0


def _by_field(fields: list[int], hashes: list[int]) -> dict[int, set[int]]:
    grouped: dict[int, set[int]] = {}
    for column, value in zip(fields, hashes, strict=True):
        grouped.setdefault(column, set()).add(value)
    return grouped


def check_record_pairs(
    pairs: Pairs, store: FeatureStore, schema: ResolvedSchema, check: Verification
) -> npt.NDArray[np.bool_]:
    """Which candidate pairs pass the verification."""
    weights = [column.weight for column in schema.fields]
    text = [column.kind == "text" for column in schema.fields]
    threshold = check.threshold
    passed = np.zeros(len(pairs), dtype=bool)
    for position, (i, j) in enumerate(zip(pairs.i.tolist(), pairs.j.tolist(), strict=True)):
        a, b = store.row(i), store.row(j)
        score = field_agreement(a, b, weights, text) if check.mode == "fields" else jaccard(a[1], b[1])
        passed[position] = score >= threshold - 1e-12
    return passed


# -- the pipeline ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordsResult:
    """Everything about the rows, in source order: keys, fingerprints, how many columns each
    row had filled, the candidate pairs (Hamming distance only) and the accepted pairs
    (verified when verification is on), and the clusters of the accepted pairs."""

    schema: ResolvedSchema
    bits: int
    keys: list[RecordKey]
    fingerprints: FingerprintArray
    filled: IntArray
    empty: int
    skipped: int
    candidates: Pairs
    pairs: Pairs
    clusters: Clusters
    max_distance: int = DEFAULT_MAX_DISTANCE
    check: Verification | None = None
    #: The learned path's model (:class:`~neardup.records.learned.LearnedModel`); None for Simhash.
    model: Any = None

    def distances(self) -> npt.NDArray[np.uint8]:
        """Each row's Hamming distance to its cluster's representative."""
        words = as_words(self.fingerprints, self.bits)
        return row_distances(words ^ words[self.clusters.representative])

    def cluster_rows(self) -> Iterator[dict[str, Any]]:
        """``{"id": key, "cluster": representative key}`` per row (``neardup dedup``'s CLUSTERS)."""
        keys = self.keys
        for key, representative in zip(keys, self.clusters.representative.tolist(), strict=True):
            yield {"id": key, "cluster": keys[representative]}


def find_duplicate_records(
    columns: Sequence[str],
    chunks: Iterable[RowChunk],
    schema: RecordSchema,
    *,
    config: FingerprintConfig | None = None,
    max_distance: int | None = DEFAULT_MAX_DISTANCE,
    check: Verification | str | None = None,
    keep: str = "first",
    on_error: str = "fail",
    report: ErrorReport | None = None,
    source_name: str = "input",
    progress: Callable[[int], object] | None = None,
    on_schema: Callable[[ResolvedSchema], object] | None = None,
) -> RecordsResult:
    """Duplicate rows of a source given as its column names and a stream of chunks.

    Bad rows (null key, an unreadable value in a declared number/date column, binary data)
    stop the run (``on_error="fail"``) or are counted in ``report`` and left out (``skip``);
    a repeated key always stops it. ``keep`` as in :func:`~neardup.cluster_records`, with
    ``longest`` meaning the row with the most filled columns. ``on_schema`` is told the
    resolved schema once the first rows have been read. ``max_distance=None`` chooses the
    distance by the row count (:data:`AUTO_RECORD_STEPS`); ``check="auto"`` then verifies by
    field agreement when that search is wider than :data:`DEFAULT_MAX_DISTANCE`.
    """
    check_keep(keep)
    if on_error not in ON_ERROR_CHOICES:
        raise ConfigError(f"on_error must be 'fail' or 'skip'; got {on_error!r}")
    if max_distance is not None and max_distance < 0:
        raise ConfigError(f"max_distance must be >= 0; got {max_distance}")
    if isinstance(check, str) and check != AUTO:
        raise ConfigError(f"check must be a Verification, None or 'auto'; got {check!r}")
    automatic = max_distance is None and check == AUTO
    report = report if report is not None else ErrorReport()
    sample, stream = _sample(chunks, len(columns))
    resolved = schema.resolve(columns, sample)
    if on_schema is not None:
        on_schema(resolved)
    featurizer = RowFeaturizer(resolved, config)
    wants_store = isinstance(check, Verification) or automatic
    store = FeatureStore() if wants_store else None
    collector = _Collector(featurizer, report, on_error, source_name, store=store)
    for chunk in stream:
        collector.add(chunk)
        if automatic and collector.store is not None and len(collector.keys) > AUTO_RECORD_LIMIT:
            collector.store = None  # the automatic search will not verify this many rows
        if progress is not None:
            progress(chunk.count)
    distance, automatic_check = auto_record_search(len(collector.keys))
    if max_distance is not None:
        distance, automatic_check = max_distance, None
    chosen = automatic_check if check == AUTO else check
    return collector.finish(resolved, distance, chosen if isinstance(chosen, Verification) else None, keep)


def _sample(chunks: Iterable[RowChunk], width: int) -> tuple[list[list[Any]], Iterator[RowChunk]]:
    """The first SAMPLE_ROWS rows column by column, and the whole stream again."""
    iterator = iter(chunks)
    buffered: list[RowChunk] = []
    count = 0
    while count < SAMPLE_ROWS:
        chunk = next(iterator, None)
        if chunk is None:
            break
        buffered.append(chunk)
        count += chunk.count
    sample = [list(chain.from_iterable(chunk.columns[index] for chunk in buffered)) for index in range(width)]
    return [column[:SAMPLE_ROWS] for column in sample], chain(buffered, iterator)


@dataclass
class _Collector:
    featurizer: RowFeaturizer
    report: ErrorReport
    on_error: str
    source_name: str
    store: FeatureStore | None
    keys: list[RecordKey] = field(default_factory=list)
    parts: list[FingerprintArray] = field(default_factory=list)
    filled: list[IntArray] = field(default_factory=list)
    first_seen: dict[RecordKey, int] = field(default_factory=dict)
    empty: int = 0

    def add(self, chunk: RowChunk) -> None:
        if not chunk.count:
            return
        found = self.featurizer.features(chunk)
        keys, keep = self._keys(chunk, found)
        if not keep.all():
            found = _drop_rows(found, keep)
        ids, table, encoded = self.featurizer.encode(found, len(keys))
        if self.store is not None:
            self.store.add(found, ids, table, len(self.keys))
        self.keys.extend(keys)
        self.parts.append(np.asarray(encoded.fingerprints, dtype=np.uint64))
        self.filled.append(found.filled)
        self.empty += int(np.count_nonzero(encoded.feature_counts == 0))

    def _keys(self, chunk: RowChunk, found: ChunkFeatures) -> tuple[list[RecordKey], npt.NDArray[np.bool_]]:
        """The keys of the good rows and which rows are good; bad ones raise or are reported."""
        key_index = self.featurizer.schema.key_index
        key_column = self.featurizer.schema.key
        keys: list[RecordKey] = []
        keep = np.ones(chunk.count, dtype=bool)
        for row, value in enumerate(chunk.columns[key_index]):
            number = chunk.first_row + row
            where = f"{self.source_name} row {number}"
            try:
                key = record_key(value)
            except ValueError as exc:
                self._bad(
                    InputError(f"key column {key_column!r}: {exc}; every row needs a unique key", where)
                )
                keep[row] = False
                continue
            if row in found.problems:
                self._bad(InputError(found.problems[row], f"{where} (key {key!r})"))
                keep[row] = False
                continue
            if key in self.first_seen:
                raise InputError(
                    f"duplicate key {key!r}, first seen at row {self.first_seen[key]}; clusters name rows by "
                    f"key, so keys must be unique (choose another column as key)",
                    where,
                )
            self.first_seen[key] = number
            keys.append(key)
        return keys, keep

    def _bad(self, error: InputError) -> None:
        if self.on_error == "fail":
            raise error
        self.report.add(error)

    def finish(
        self, schema: ResolvedSchema, max_distance: int, check: Verification | None, keep: str
    ) -> RecordsResult:
        bits = self.featurizer.bits
        n = len(self.keys)
        if self.parts:
            fingerprints = np.concatenate(self.parts)
        else:
            fingerprints = np.zeros((0, 2) if bits == 128 else (0,), dtype=np.uint64)
        filled = np.concatenate(self.filled) if self.filled else np.zeros(0, dtype=np.int64)
        candidates = find_all_pairs(fingerprints, max_distance, bits=bits)
        pairs = candidates
        if check is not None and self.store is not None:
            self.store.finish(n)
            passed = check_record_pairs(candidates, self.store, schema, check)
            pairs = Pairs(candidates.i[passed], candidates.j[passed], candidates.distance[passed])
        clusters = cluster_records(n, pairs.i, pairs.j, keep=keep, lengths=filled)
        return RecordsResult(
            schema=schema,
            bits=bits,
            keys=self.keys,
            fingerprints=fingerprints,
            filled=filled,
            empty=self.empty,
            skipped=self.report.count,
            candidates=candidates,
            pairs=pairs,
            clusters=clusters,
            max_distance=max_distance,
            check=check,
        )


def _drop_rows(found: ChunkFeatures, keep: npt.NDArray[np.bool_]) -> ChunkFeatures:
    """The features of the kept rows only, renumbered."""
    kept = keep[found.documents]
    renumber = np.cumsum(keep) - 1
    return ChunkFeatures(
        documents=renumber[found.documents[kept]],
        features=[name for name, ok in zip(found.features, kept.tolist(), strict=True) if ok],
        fields=found.fields[kept],
        weights=found.weights[kept],
        filled=found.filled[keep],
    )

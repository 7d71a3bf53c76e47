"""Scores of near-duplicate predictions against labelled data: pairwise precision, recall and
F1, recall per edit level and per topic, and the adjusted Rand index of the clusterings.

The gold conventions are those of ``../shared/data/dev`` (and of the seeds' experiments):

* records of one ``cluster`` whose ``level`` is a near-duplicate level (``original``,
  ``light``, ``medium``, ``cut``; any record without a level) are near-duplicates of each
  other, every pair counts;
* ``unique`` (or ``non``) records are singletons whatever their cluster field says;
* *related* records (``heavy`` copies: 30-50 % rewritten) are neither right nor wrong: pairs
  involving them are left out of precision and recall, and out of the adjusted Rand index;
  how many of them were paired with the document they derive from is reported on its own.

Everything here works on record positions (numpy arrays), so the sweep can score thousands of
settings without touching ids or files; :mod:`neardup.eval.files` maps ids to positions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..arrays import sorted_unique
from ..dedup.clusters import components
from ..errors import InputError

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Levels whose records are near-duplicates of their cluster (Clough's ``cut`` included).
NEAR_LEVELS: frozenset[str] = frozenset({"original", "light", "medium", "cut"})
#: Levels that are related to a cluster but not near-duplicates: left out of the scores.
RELATED_LEVELS: frozenset[str] = frozenset({"heavy"})
#: Levels that are singletons by definition.
SINGLE_LEVELS: frozenset[str] = frozenset({"unique", "non"})
#: The order edit levels are reported in (others follow by name); a gold pair belongs to the
#: more edited of its two records.
LEVEL_ORDER: tuple[str, ...] = ("original", "cut", "light", "medium")
NO_TOPIC = "(none)"


@dataclass(frozen=True)
class Gold:
    """Gold labels of n records, by position.

    ``label[r]`` is the gold cluster as an integer (singletons and related records get labels
    of their own), ``related[r]`` marks records left out of the scores, ``level[r]`` and
    ``topic[r]`` are the annotations (``""`` when absent), ``derived_from[r]`` the position of
    the record a related copy derives from (-1 when none or unknown).
    """

    label: IntArray
    related: BoolArray
    level: list[str]
    topic: list[str]
    derived_from: IntArray

    def __len__(self) -> int:
        return int(self.label.shape[0])

    @classmethod
    def from_labels(
        cls,
        clusters: Sequence[object],
        levels: Sequence[str | None] | None = None,
        topics: Sequence[str | None] | None = None,
        derived_from: Sequence[int] | None = None,
    ) -> Gold:
        """Gold from per-record cluster values (any hashable), levels and topics."""
        n = len(clusters)
        level = [str(value or "") for value in (levels if levels is not None else [None] * n)]
        topic = [str(value or "") for value in (topics if topics is not None else [None] * n)]
        if len(level) != n or len(topic) != n:
            raise InputError(f"gold has {n} clusters but {len(level)} levels and {len(topic)} topics")
        related = np.array([value in RELATED_LEVELS for value in level], dtype=bool)
        codes: dict[object, int] = {}
        label = np.empty(n, dtype=np.int64)
        for position, (value, name) in enumerate(zip(clusters, level, strict=True)):
            grouped = name not in RELATED_LEVELS and name not in SINGLE_LEVELS
            key: object = ("cluster", value) if grouped else ("single", position)
            label[position] = codes.setdefault(key, len(codes))
        derived = np.full(n, -1, dtype=np.int64) if derived_from is None else np.asarray(derived_from)
        return cls(label, related, level, topic, derived.astype(np.int64))

    def reorder(self, order: npt.ArrayLike) -> Gold:
        """The gold of records ``order[0], order[1], ...`` (a permutation or a subset);
        ``derived_from`` links to records left out become -1."""
        positions = np.asarray(order, dtype=np.int64)
        inverse = np.full(len(self), -1, dtype=np.int64)
        inverse[positions] = np.arange(positions.size)
        source = self.derived_from[positions]
        derived = np.where(source >= 0, inverse[np.maximum(source, 0)], -1)
        return Gold(
            self.label[positions],
            self.related[positions],
            [self.level[p] for p in positions.tolist()],
            [self.topic[p] for p in positions.tolist()],
            derived.astype(np.int64),
        )

    def pairs(self) -> tuple[IntArray, IntArray]:
        """Every gold near-duplicate pair (i < j) among the scored records."""
        order = np.flatnonzero(~self.related)
        order = order[np.argsort(self.label[order], kind="stable")]
        labels = self.label[order]
        starts = np.flatnonzero(np.concatenate(([True], labels[1:] != labels[:-1])))
        sizes = np.diff(np.concatenate((starts, [labels.size])))
        left: list[IntArray] = []
        right: list[IntArray] = []
        for start, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist(), strict=True):
            members = np.sort(order[start : start + size])
            a, b = np.triu_indices(size, k=1)
            left.append(members[a])
            right.append(members[b])
        if not left:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        return np.concatenate(left), np.concatenate(right)

    def cluster_topics(self) -> IntArray:
        """Per record, the position whose topic names its gold cluster: the cluster's
        original when it has one, else its earliest record."""
        n = len(self)
        leader = np.full(int(self.label.max()) + 1 if n else 0, -1, dtype=np.int64)
        for position in range(n):
            label = self.label[position]
            if leader[label] < 0 or (
                self.level[position] == "original" and self.level[leader[label]] != "original"
            ):
                leader[label] = position
        result: IntArray = leader[self.label]
        return result


@dataclass(frozen=True)
class Prediction:
    """Predicted near-duplicates of n records: pairs (as found, no closure) or cluster labels."""

    i: IntArray | None = None
    j: IntArray | None = None
    labels: IntArray | None = None

    @classmethod
    def from_pairs(cls, i: npt.ArrayLike, j: npt.ArrayLike) -> Prediction:
        left, right = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
        return cls(i=np.minimum(left, right), j=np.maximum(left, right))

    @classmethod
    def from_labels(cls, labels: npt.ArrayLike) -> Prediction:
        return cls(labels=np.asarray(labels, dtype=np.int64))

    @property
    def kind(self) -> str:
        return "clusters" if self.labels is not None else "pairs"

    def partition(self, n: int) -> IntArray:
        """Cluster labels of all n records (connected components of the pairs)."""
        if self.labels is not None:
            return self.labels
        assert self.i is not None and self.j is not None
        return components(n, self.i, self.j)

    def closure(self, n: int) -> Prediction:
        """The clusters the pairs imply (a near-duplicate of a near-duplicate counts)."""
        return Prediction.from_labels(self.partition(n))


@dataclass(frozen=True)
class Recall:
    """Recall over one group of gold pairs."""

    found: int
    total: int

    @property
    def recall(self) -> float:
        return self.found / self.total if self.total else 1.0


@dataclass(frozen=True)
class Scores:
    """What :func:`evaluate` measures; ``as_dict`` is the ``--format json`` output."""

    predicted_pairs: int
    gold_pairs: int
    true_positives: int
    ari: float
    by_level: dict[str, Recall] = field(default_factory=dict)
    by_topic: dict[str, Recall] = field(default_factory=dict)
    related: Recall = field(default_factory=lambda: Recall(0, 0))
    kind: str = "pairs"

    @property
    def precision(self) -> float:
        return self.true_positives / self.predicted_pairs if self.predicted_pairs else 1.0

    @property
    def recall(self) -> float:
        return self.true_positives / self.gold_pairs if self.gold_pairs else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict[str, Any]:
        def groups(values: Mapping[str, Recall]) -> dict[str, dict[str, Any]]:
            return {
                name: {"found": g.found, "total": g.total, "recall": round(g.recall, 6)}
                for name, g in values.items()
            }

        return {
            "predictions": self.kind,
            "predicted_pairs": self.predicted_pairs,
            "gold_pairs": self.gold_pairs,
            "true_positives": self.true_positives,
            "precision": round(self.precision, 6),
            "recall": round(self.recall, 6),
            "f1": round(self.f1, 6),
            "adjusted_rand_index": round(self.ari, 6),
            "recall_by_level": groups(self.by_level),
            "recall_by_topic": groups(self.by_topic),
            "related": {
                "found": self.related.found,
                "total": self.related.total,
                "recall": round(self.related.recall, 6),
            },
        }


def pair_keys(i: IntArray, j: IntArray, n: int) -> IntArray:
    """One int64 per unordered pair (i < j assumed): i·n + j."""
    keys: IntArray = i.astype(np.int64) * np.int64(n) + j.astype(np.int64)
    return keys


def evaluate(
    gold: Gold, prediction: Prediction, *, gold_pairs: tuple[IntArray, IntArray] | None = None
) -> Scores:
    """Score ``prediction`` against ``gold`` (see the module docstring for the conventions).

    ``gold_pairs`` may pass :meth:`Gold.pairs` computed once, for callers scoring many
    predictions against the same gold.
    """
    n = len(gold)
    gi, gj = gold_pairs if gold_pairs is not None else gold.pairs()
    scored = ~gold.related
    if prediction.labels is not None:
        labels = prediction.labels
        if labels.shape != (n,):
            raise InputError(f"the prediction labels {labels.shape} records; the gold has {n}")
        hit = labels[gi] == labels[gj]
        predicted = _pairs_within(labels[scored])
    else:
        assert prediction.i is not None and prediction.j is not None
        keep = scored[prediction.i] & scored[prediction.j] & (prediction.i != prediction.j)
        found_keys = sorted_unique(pair_keys(prediction.i[keep], prediction.j[keep], n))
        hit = np.isin(pair_keys(gi, gj, n), found_keys)
        predicted = int(found_keys.size)
    partition = prediction.partition(n)
    return Scores(
        predicted_pairs=predicted,
        gold_pairs=int(gi.size),
        true_positives=int(np.count_nonzero(hit)),
        ari=adjusted_rand_index(gold.label[scored], partition[scored]),
        by_level=_recall_by(_pair_levels(gold, gi, gj), hit, _level_key),
        by_topic=_recall_by(_pair_topics(gold, gi), hit, lambda name: (name == NO_TOPIC, name)),
        related=_related_recall(gold, prediction),
        kind=prediction.kind,
    )


def adjusted_rand_index(truth: npt.ArrayLike, predicted: npt.ArrayLike) -> float:
    """Hubert and Arabie's adjusted Rand index of two labelings of the same records: 1 for
    identical partitions, about 0 for chance agreement. Two partitions into singletons only
    (or of fewer than two records) agree perfectly: 1.0, as scikit-learn defines it."""
    a, b = np.asarray(truth, dtype=np.int64), np.asarray(predicted, dtype=np.int64)
    n = a.size
    if n < 2:
        return 1.0
    _, a_codes = np.unique(a, return_inverse=True)
    _, b_codes = np.unique(b, return_inverse=True)
    cells = a_codes.astype(np.int64) * (int(b_codes.max()) + 1) + b_codes
    index = _pairs_within(cells)
    rows, columns = _pairs_within(a_codes), _pairs_within(b_codes)
    total = n * (n - 1) / 2
    expected = rows * columns / total
    maximum = (rows + columns) / 2
    if maximum == expected:
        return 1.0
    return float((index - expected) / (maximum - expected))


def pairwise_scores(found: int, true_positives: int, gold: int) -> tuple[float, float, float]:
    """(precision, recall, F1) from counts; empty sets count as perfect."""
    precision = true_positives / found if found else 1.0
    recall = true_positives / gold if gold else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _pairs_within(labels: npt.NDArray[np.int64]) -> int:
    """Σ over groups of equal labels of C(size, 2)."""
    if labels.size < 2:
        return 0
    counts = np.unique(labels, return_counts=True)[1].astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())


def _level_rank(level: str) -> tuple[int, str]:
    return (LEVEL_ORDER.index(level), level) if level in LEVEL_ORDER else (len(LEVEL_ORDER), level)


def _level_key(level: str) -> tuple[int, str]:
    return _level_rank(level)


def _pair_levels(gold: Gold, gi: IntArray, gj: IntArray) -> list[str]:
    """The more edited level of each pair's two records ("" when unlabelled)."""
    names = []
    for a, b in zip(gi.tolist(), gj.tolist(), strict=True):
        left, right = gold.level[a], gold.level[b]
        names.append(max(left, right, key=_level_rank) or "(none)")
    return names


def _pair_topics(gold: Gold, gi: IntArray) -> list[str]:
    if not any(gold.topic):
        return []
    leaders = gold.cluster_topics()
    return [gold.topic[leaders[a]] or NO_TOPIC for a in gi.tolist()]


def _recall_by(names: list[str], hit: BoolArray, key: Any) -> dict[str, Recall]:
    if not names or not any(name != "(none)" for name in names):
        return {}
    found: dict[str, int] = {}
    total: dict[str, int] = {}
    for name, ok in zip(names, hit.tolist(), strict=True):
        total[name] = total.get(name, 0) + 1
        found[name] = found.get(name, 0) + int(ok)
    return {name: Recall(found[name], total[name]) for name in sorted(total, key=key)}


def _related_recall(gold: Gold, prediction: Prediction) -> Recall:
    """How many related copies were paired with (or clustered with) their source."""
    copies = np.flatnonzero(gold.related & (gold.derived_from >= 0))
    if copies.size == 0:
        return Recall(0, 0)
    sources = gold.derived_from[copies]
    if prediction.labels is not None:
        hit = prediction.labels[copies] == prediction.labels[sources]
    else:
        assert prediction.i is not None and prediction.j is not None
        n = len(gold)
        keys = sorted_unique(pair_keys(prediction.i, prediction.j, n))
        low, high = np.minimum(copies, sources), np.maximum(copies, sources)
        hit = np.isin(pair_keys(low, high, n), keys)
    return Recall(int(np.count_nonzero(hit)), int(copies.size))

"""Column weights learnt from the candidate pairs themselves (Fellegi–Sunter, fitted by EM as
Splink does), so users need not say which columns matter.

Each column's comparison level (:mod:`neardup.records.compare`) is evidence: ``m[l]`` is the
chance of level ``l`` for a true duplicate, ``u[l]`` for two different entities, and the
level adds ``log2(m/u)`` bits to a pair's match weight. Expectation–maximisation finds m, u
and the share λ of duplicates among the candidates without any labels; nulls add nothing.
``u`` may instead come from random row pairs (:func:`estimate_u_random`), which are almost
all non-matches; EM then keeps it fixed. Columns that never discriminate (constant, mostly
null, unique per row, or differing between duplicates) end with m ≈ u, i.e. weight ≈ 0.

Which u: EM's is the default. Both reach the same recall on FEBRL (docs/records.md, step 3),
and EM's u also learns that blocked non-matches often share a surname (its exact weight ≈ 0);
random u does not.

Everything is deterministic: fixed starting values, iteration cap and tolerance, and a
seeded sampler.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import xxhash

from .compare import LEVELS, TF_KINDS, PairLevels, PreparedTable, compare_pairs

#: Probabilities are kept within [EPSILON, 1 - EPSILON] so no level is ever impossible.
EPSILON = 1e-6
MAX_ITERATIONS = 200
TOLERANCE = 1e-6
START_PRIOR = 0.1
#: Pairs' worth of counts added to each column in every M-step, spread over the levels as
#: the column's levels are spread over all pairs, λ of it to m and 1−λ to u: m and u shrink
#: towards the same shares, so a level seen in few pairs weighs ≈ 0 rather than a level never
#: seen among the non-matches getting u ≈ 0 and an unbounded weight (+19 bits at EPSILON).
PSEUDO_COUNT = 1.0
#: Starting m puts this share on the top (exact) level, starting u on the bottom level.
START_SKEW = 0.8
RANDOM_PAIRS = 100_000
#: Near-key columns (:func:`near_keys`): exact agreement at most this likely for a non-match
#: (EM's u among the candidates) and at least :data:`ANCHOR_M` likely for a match, seen in at
#: least :data:`MIN_ANCHORS` pairs. Pairs agreeing exactly on one are *anchored*.
ANCHOR_U = 0.005
ANCHOR_M = 0.2
MIN_ANCHORS = 30
#: A column both rows of anchored pairs fill at most this share as often as both rows of all
#: candidates do, where that rate would have given at least :data:`SOURCE_EXPECTED` anchored
#: pairs, is filled by a source (:func:`source_columns`): one file's own columns fall far
#: below this share, the entity's columns far above it.
SOURCE_SHARE = 0.5
SOURCE_EXPECTED = 10
SEED = 20240521

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ColumnWeights:
    """One column's fitted parameters; ``weights[l] = log2(m[l] / u[l])``."""

    name: str
    kind: str
    levels: tuple[str, ...]
    m: tuple[float, ...]
    u: tuple[float, ...]
    weights: tuple[float, ...] = field(init=False)

    def __post_init__(self) -> None:
        weights = tuple(math.log2(m / u) for m, u in zip(self.m, self.u, strict=True))
        object.__setattr__(self, "weights", weights)

    @property
    def exact(self) -> float:
        return self.weights[-1]

    @property
    def different(self) -> float:
        return self.weights[0]


@dataclass(frozen=True)
class FieldWeights:
    """The fitted model: per-column weights and the prior λ (share of duplicates among the
    candidate pairs). ``u_source`` is ``em`` or ``random`` (:func:`estimate_u_random`)."""

    columns: tuple[ColumnWeights, ...]
    prior: float
    iterations: int
    converged: bool
    u_source: str = "em"

    @property
    def prior_weight(self) -> float:
        return math.log2(self.prior / (1.0 - self.prior))

    def column(self, name: str) -> ColumnWeights:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    def describe(self) -> list[str]:
        """Lines for stderr: the prior, then each column's kind and the bits added by exact
        agreement and by disagreement."""
        state = "converged" if self.converged else "stopped"
        lines = [
            f"field weights: λ = {self.prior:.4f} ({self.prior_weight:+.2f} bits), u from {self.u_source}, "
            f"{state} after {self.iterations} EM iterations"
        ]
        width = max((len(column.name) for column in self.columns), default=0)
        for column in self.columns:
            lines.append(
                f"  {column.name:<{width}}  {column.kind:<6}  exact {column.exact:+6.2f}  "
                f"different {column.different:+6.2f}"
            )
        return lines


# -- fitting ------------------------------------------------------------------------------------


def start_values(size: int, top: bool) -> FloatArray:
    """Fixed starting probabilities: START_SKEW on the top (m) or bottom (u) level."""
    if size == 1:
        return np.ones(1)
    values = np.full(size, (1.0 - START_SKEW) / (size - 1))
    values[-1 if top else 0] = START_SKEW
    return values


def _normalize(counts: FloatArray, column_of: npt.NDArray[np.int64], columns: int) -> FloatArray:
    """Counts → probabilities per column (uniform for a column with no evidence), clamped."""
    sizes = np.bincount(column_of, minlength=columns)
    sums = np.bincount(column_of, weights=counts, minlength=columns)
    probabilities = np.where(sums[column_of] > 0, counts / np.maximum(sums[column_of], 1e-300), 0.0)
    probabilities = np.where(sums[column_of] > 0, probabilities, 1.0 / sizes[column_of])
    probabilities = np.clip(probabilities, EPSILON, 1.0 - EPSILON)
    return probabilities / np.bincount(column_of, weights=probabilities, minlength=columns)[column_of]


def _layout(kinds: Sequence[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    sizes = np.asarray([len(LEVELS[kind]) for kind in kinds], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return offsets, np.repeat(np.arange(len(kinds), dtype=np.int64), sizes)


def _cells(pairs: PairLevels, offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Each pair's flat (column, level) index per column; nulls point past the end."""
    levels = pairs.levels.astype(np.int64)
    return np.where(levels >= 0, levels + offsets[:-1], offsets[-1])


def _probability(bits: FloatArray) -> FloatArray:
    return 1.0 / (1.0 + np.exp2(-np.clip(bits, -200.0, 200.0)))


def _start(
    pairs: PairLevels, u: Mapping[str, Sequence[float]] | None, offsets: npt.NDArray[np.int64]
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """EM's starting m and u per level (u as given where ``u`` names the column; those are
    marked fixed)."""
    sizes = np.diff(offsets)
    m_values = np.concatenate([np.ones(0), *(start_values(int(size), top=True) for size in sizes)])
    u_values = np.concatenate([np.ones(0), *(start_values(int(size), top=False) for size in sizes)])
    fixed = np.zeros(len(u_values), dtype=bool)
    for column, name in enumerate(pairs.names):
        if u is not None and name in u:
            given = np.asarray(u[name], dtype=np.float64)
            if len(given) != sizes[column]:
                raise ValueError(f"column {name!r}: {len(given)} u values for {sizes[column]} levels")
            u_values[offsets[column] : offsets[column + 1]] = given
            fixed[offsets[column] : offsets[column + 1]] = True
    return m_values, u_values, fixed


def fit_weights(
    pairs: PairLevels,
    u: Mapping[str, Sequence[float]] | None = None,
    prior: float = START_PRIOR,
    max_iterations: int = MAX_ITERATIONS,
    tolerance: float = TOLERANCE,
) -> FieldWeights:
    """Fit m, u and λ to the candidate pairs by EM. Columns named in ``u`` keep those
    probabilities (from :func:`estimate_u_random`); the others' u is fitted too."""
    columns = len(pairs.names)
    offsets, column_of = _layout(pairs.kinds)
    m_values, u_values, fixed = _start(pairs, u, offsets)
    u_values = _normalize(u_values, column_of, columns)
    cells = _cells(pairs, offsets)
    present = cells < offsets[-1]
    flat = cells[present]
    shares = _normalize(np.bincount(flat, minlength=offsets[-1]).astype(np.float64), column_of, columns)
    pseudo = PSEUDO_COUNT * shares
    lam = float(prior)
    iterations, converged = 0, False
    while iterations < max_iterations:
        iterations += 1
        bits = np.append(np.log2(m_values / u_values), 0.0)
        p = _probability(math.log2(lam / (1.0 - lam)) + bits[cells].sum(axis=1))
        weight = np.broadcast_to(p[:, None], cells.shape)[present]
        matched = np.bincount(flat, weights=weight, minlength=offsets[-1]) + pseudo * lam
        unmatched = np.bincount(flat, weights=1.0 - weight, minlength=offsets[-1]) + pseudo * (1 - lam)
        new_m = _normalize(matched, column_of, columns)
        new_u = _normalize(unmatched, column_of, columns)
        new_u = np.where(fixed, u_values, new_u)
        new_lam = float(np.clip(p.mean() if len(p) else prior, EPSILON, 1.0 - EPSILON))
        change = max(
            float(np.abs(new_m - m_values).max(initial=0.0)),
            float(np.abs(new_u - u_values).max(initial=0.0)),
            abs(new_lam - lam),
        )
        m_values, u_values, lam = new_m, new_u, new_lam
        if change < tolerance:
            converged = True
            break
    fitted = tuple(
        ColumnWeights(
            name,
            kind,
            LEVELS[kind],
            tuple(float(x) for x in m_values[offsets[c] : offsets[c + 1]]),
            tuple(float(x) for x in u_values[offsets[c] : offsets[c + 1]]),
        )
        for c, (name, kind) in enumerate(zip(pairs.names, pairs.kinds, strict=True))
    )
    source = "random" if fixed.any() else "em"
    return FieldWeights(fitted, lam, iterations, converged, source)


def estimate_u_random(
    table: PreparedTable, pairs: int = RANDOM_PAIRS, seed: int = SEED
) -> dict[str, tuple[float, ...]]:
    """u per column from random row pairs (seeded, so repeatable): nearly all of them are
    different entities, so their level shares are P(level | non-match) of the whole table."""
    rows = table.rows
    if rows < 2:
        raise ValueError("random pairs need at least two rows")
    rng = np.random.default_rng(seed)
    count = min(pairs, rows * (rows - 1) // 2)
    first = rng.integers(0, rows, size=count)
    second = rng.integers(0, rows - 1, size=count)
    second += second >= first  # never a row with itself
    sampled = compare_pairs(table, first, second)
    offsets, column_of = _layout(sampled.kinds)
    cells = _cells(sampled, offsets)
    counts = np.bincount(cells[cells < offsets[-1]], minlength=offsets[-1]).astype(np.float64)
    u = _normalize(counts + 0.5, column_of, len(sampled.names))  # +½: unseen levels stay possible
    return {
        name: tuple(float(x) for x in u[offsets[c] : offsets[c + 1]]) for c, name in enumerate(sampled.names)
    }


# -- anchored pairs -----------------------------------------------------------------------------


def near_keys(weights: FieldWeights, levels: npt.NDArray[np.int8]) -> list[int]:
    """Positions of the near-key columns (:data:`ANCHOR_U`): a DOI, an abstract, a social
    security number, where exact agreement all but proves a duplicate."""
    return [
        position
        for position, column in enumerate(weights.columns)
        if column.u[-1] <= ANCHOR_U
        and column.m[-1] >= ANCHOR_M
        and np.count_nonzero(levels[:, position] == len(column.m) - 1) >= MIN_ANCHORS
    ]


def _anchored(
    weights: FieldWeights, levels: npt.NDArray[np.int8], keys: Sequence[int], position: int
) -> npt.NDArray[np.bool_]:
    """The pairs agreeing exactly on a near-key column other than ``position``."""
    anchored = np.zeros(len(levels), dtype=bool)
    for key in keys:
        if key != position:
            anchored |= levels[:, key] == len(weights.columns[key].m) - 1
    return anchored


def source_columns(weights: FieldWeights, pairs: PairLevels) -> list[str]:
    """Columns filled by a source rather than by the entity: anchored pairs fill both their
    rows far less often than candidates at large (:data:`SOURCE_SHARE`).

    Nulls add nothing to a match weight, which assumes a column is filled whether or not the
    pair matches. Rows merged from several files break that: one file's own columns (its
    contact person, its yes/no flags, its accreditation date) are filled in that file's rows
    only, so both rows fill them mostly when the pair comes from one file, and agreement on
    them says "same file", not "same entity". Where duplicates lie across files, EM cannot
    tell, and gives such a column a large positive weight though duplicates rarely fill it on
    both sides. Such columns are left out of the model (and EM fitted again without them)."""
    levels = pairs.levels
    keys = near_keys(weights, levels)
    found = []
    for position, column in enumerate(weights.columns):
        anchored = _anchored(weights, levels, keys, position)
        everywhere = float(np.count_nonzero(levels[:, position] >= 0)) / max(len(levels), 1)
        expected = everywhere * np.count_nonzero(anchored)
        if column.m == column.u or expected < SOURCE_EXPECTED:
            continue
        filled = np.count_nonzero(levels[anchored, position] >= 0)
        if filled <= SOURCE_SHARE * expected:
            found.append(column.name)
    return found


def bound_disagreement(weights: FieldWeights, pairs: PairLevels) -> FieldWeights:
    """Weights whose m of a column's lowest level (complete disagreement) is at most its share
    among *anchored* pairs (:func:`near_keys`) that agree exactly on a column other than it.

    EM's two classes assume the columns independent within each, and candidates made by
    shared keys hold a third group that breaks it: records related but not the same (papers
    of one author in one journal issue, sites of one organisation) agree on the columns of
    what they share and disagree on the rest. EM folds them into its match class, and it shows
    as inflated m of disagreement, so a pair that differs in title, pages and DOI would pass
    on its shared author and issue (docs/records.md gives the rates). Anchored pairs
    are duplicates all but surely and do not come from that group. Their disagreement rate
    only lowers EM's (the other levels keep their proportions): rows agreeing exactly on one
    column also tend to agree on others (one source's spelling), so anchors understate
    near-agreement. A column with fewer than :data:`MIN_ANCHORS` anchored pairs, or out of
    the model (m = u), keeps EM's m."""
    levels = pairs.levels
    keys = near_keys(weights, levels)
    columns = list(weights.columns)
    for position, column in enumerate(weights.columns):
        seen = levels[_anchored(weights, levels, keys, position), position]
        seen = seen[seen >= 0]
        if len(seen) < MIN_ANCHORS or column.m == column.u:
            continue
        tally = np.bincount(seen, minlength=len(column.m)) + 0.5  # +½: no level impossible
        lowest = float(tally[0] / tally.sum())
        if lowest < column.m[0]:
            rest = np.asarray(column.m[1:]) * (1.0 - lowest) / sum(column.m[1:])
            m = (lowest, *(float(x) for x in rest))
            columns[position] = ColumnWeights(column.name, column.kind, column.levels, m, column.u)
    return dataclasses.replace(weights, columns=tuple(columns))


# -- scoring ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class HashedCounts:
    """Counts of values kept by a 64-bit hash of each value (xxh3 of its UTF-8), sorted: two
    arrays, no Python object per value, so a records index's model of a large table loads
    without building one. Two values of one column share a hash with chance n²/2⁶⁵."""

    hashes: npt.NDArray[np.uint64]
    counts: npt.NDArray[np.uint32]

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> HashedCounts:
        hashes = value_hashes(list(counts))
        order = np.argsort(hashes, kind="stable")
        held = np.fromiter(counts.values(), dtype=np.uint64, count=len(counts))
        return cls(hashes[order], np.minimum(held[order], np.iinfo(np.uint32).max).astype(np.uint32))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, HashedCounts)
            and np.array_equal(self.hashes, other.hashes)
            and np.array_equal(self.counts, other.counts)
        )

    def lookup(self, values: Sequence[str]) -> FloatArray:
        """Each value's count, 1 for a value not held."""
        wanted = value_hashes(values)
        if not len(self.hashes):
            return np.ones(len(wanted), dtype=np.float64)
        at = np.minimum(np.searchsorted(self.hashes, wanted), len(self.hashes) - 1)
        return np.where(self.hashes[at] == wanted, self.counts[at], 1).astype(np.float64)


def value_hashes(values: Sequence[str]) -> npt.NDArray[np.uint64]:
    """xxh3-64 of each value's UTF-8 (lone surrogates passed, as values are stored)."""
    hashed = (_hash(value.encode("utf-8", "surrogatepass")) for value in values)
    return np.fromiter(hashed, dtype=np.uint64, count=len(values))


_hash = xxhash.xxh3_64_intdigest


@dataclass(frozen=True)
class TermFrequencies:
    """A column's term frequencies as :func:`match_weights` reads them: ``counts`` of values
    (a value not listed counts 1, so a stored model may list only the values held twice or
    more, by hash), ``size`` the rows holding a value and ``agreement`` Σf², the share of
    random row pairs that agree on it."""

    counts: Mapping[str, int] | HashedCounts
    size: int
    agreement: float

    def counts_of(self, values: Sequence[str]) -> FloatArray:
        """Each value's count (1 for a value not listed)."""
        counts = self.counts
        if isinstance(counts, HashedCounts):
            return counts.lookup(values)
        return np.fromiter((counts.get(value, 1) for value in values), float, len(values))

    @classmethod
    def of(cls, counter: Mapping[str, int]) -> TermFrequencies:
        """The frequencies of a column's full value counts."""
        size = sum(counter.values())
        agreement = sum(count * count for count in counter.values()) / size / size if size else 0.0
        return cls(counter, size, agreement)


def match_weights(
    weights: FieldWeights,
    pairs: PairLevels,
    counts: Mapping[str, Counter[str] | TermFrequencies] | None = None,
) -> FloatArray:
    """Each pair's match weight in bits: log2(λ/(1−λ)) plus every column's log2(m/u) at its
    level. With ``counts`` (:func:`~neardup.records.compare.term_counts`), exact agreement on
    a value held by a share f of the rows weighs log2(m_exact / (f · u_exact / Σf²)) instead:
    agreeing on a rare surname says more than on "smith". Σf² is the agreement rate of
    random pairs, so with u from :func:`estimate_u_random` this is Splink's log2(m_exact / f);
    with u fitted on blocked candidates (which share values far more often than random rows)
    the scaling keeps the average exact weight where EM put it (the unscaled form is less
    precise: docs/records.md, step 3)."""
    total = np.full(len(pairs), weights.prior_weight)
    for position, name in enumerate(pairs.names):
        column = weights.column(name)
        levels = pairs.levels[:, position].astype(np.int64)
        table = np.append(np.asarray(column.weights), 0.0)
        bits = table[np.where(levels >= 0, levels, len(column.weights))]
        counter = counts.get(name) if counts is not None else None
        terms: TermFrequencies | None = None
        if isinstance(counter, TermFrequencies):
            terms = counter
        elif counter:
            terms = TermFrequencies.of(counter)
        if terms is not None and terms.size and column.kind in TF_KINDS:
            exact = np.flatnonzero((levels == len(column.weights) - 1) & (pairs.left[position] != None))  # noqa: E711
            values = pairs.left[position][exact].tolist()
            shares = terms.counts_of(values) / terms.size
            u_values = np.clip(shares * (column.u[-1] / terms.agreement), EPSILON, 1.0 - EPSILON)
            bits[exact] = np.log2(column.m[-1] / u_values)
        total += bits
    return total


def match_probability(
    weights: FieldWeights,
    pairs: PairLevels,
    counts: Mapping[str, Counter[str] | TermFrequencies] | None = None,
) -> FloatArray:
    """P(match) of each pair: 2^w / (1 + 2^w) of its :func:`match_weights`."""
    return _probability(match_weights(weights, pairs, counts))

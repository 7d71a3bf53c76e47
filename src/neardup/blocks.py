"""Block schemes: which bits of a fingerprint key each table of the exact block index.

Two f-bit fingerprints within Hamming distance k, cut into m blocks, differ in at most k
blocks, so at least m − k blocks are equal. A table keyed on t blocks with t ≤ m − k
therefore sees every such pair in at least one of the C(m, t) tables (Manku, Jain and
Das Sarma, WWW 2007). m = k + 1, t = 1 is the pigeonhole scheme of seeds 000-002 (4 tables
of 16 bits for f = 64, k = 3).

A *key* is a run of selected bits read most-significant first and packed into one uint64.
Keys longer than 64 bits keep their first 64 bits: a shorter key only merges buckets, so it
adds candidates (all verified) and never loses a pair. The same holds for any prefix of a
key, which is how callers trade bucket size for key width.

Seed 000's second hashing splits an overloaded bucket on the bits *outside* its key, cut
into k + 1 sub-blocks: two members within distance k agree on the key, so all their differing
bits lie outside it and one sub-block is equal (pigeonhole again). :meth:`BlockScheme.sub_blocks`
gives those sub-blocks for any key.

Bucket statistics (:class:`BucketStats`) and seed 000's split threshold (:func:`split_size`)
live here too, below both batch search (:mod:`neardup.dedup.batch`) and every store
(:mod:`neardup.storage`), so the index reports and splits buckets without importing the dedup
policy above it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .distance import check_bits
from .errors import ConfigError

if TYPE_CHECKING:
    from .distance import DistanceProfile

UInt64Array = npt.NDArray[np.uint64]

#: Relative cost of verifying one candidate pair versus sorting one entry of one table; the
#: auto-tuner weighs the two. Its choice at 10^5-10^8 entries is the same for any value in
#: 0.25-1, so a rough fit is enough (benchmarks/index_speed.py fits it; docs/index.md).
PAIR_COST = 0.5
#: Largest number of tables the auto-tuner considers when no budget is given. Batch search
#: holds one table at a time, so tables cost time only; large distances need many of them
#: (k = 10 at 100 k fingerprints: 286 tables of 14 bits rather than 11 of 6 bits).
DEFAULT_MAX_TABLES = 1024


@dataclass(frozen=True)
class BitSelection:
    """An ordered set of fingerprint bits, stored as runs of adjacent bits.

    ``positions`` lists bit numbers most significant first (bit 0 is the integer's least
    significant bit); every key built from a selection reads its bits in that order.
    """

    positions: tuple[int, ...]

    @property
    def bit_count(self) -> int:
        return len(self.positions)

    def prefix(self, bit_count: int) -> BitSelection:
        """The first ``bit_count`` bits: a coarser key (same or more candidates, still exact)."""
        return BitSelection(self.positions[: max(0, bit_count)])

    @cached_property
    def segments(self) -> tuple[tuple[int, int, int], ...]:
        """Runs of adjacent bits inside one 64-bit word: ``(word, shift, length)``, in key order."""
        runs: list[tuple[int, int, int]] = []
        for position in self.positions:
            word, shift = divmod(position, 64)
            if runs:
                last_word, last_shift, last_length = runs[-1]
                if last_word == word and last_shift == shift + 1 and last_length < 64:
                    runs[-1] = (word, shift, last_length + 1)
                    continue
            runs.append((word, shift, 1))
        return tuple(runs)

    def mask(self, words: int) -> UInt64Array:
        """The selected bits as a (words,) uint64 mask over ``[low, high]`` fingerprint words."""
        out = np.zeros(words, dtype=np.uint64)
        for word, shift, length in self.segments:
            out[word] |= np.uint64(((1 << length) - 1) << shift)
        return out

    def extract(self, words: UInt64Array) -> UInt64Array:
        """Keys of a (n, w) word array: the selected bits packed into uint64 (first 64 kept)."""
        key = np.zeros(words.shape[0], dtype=np.uint64)
        for index, (shift, mask, kept) in enumerate(self._int_plan):
            word, within = divmod(shift, 64)
            part = words[:, word] >> np.uint64(within)
            if kept < 64:
                part = part & np.uint64(mask)
            key = part if index == 0 else (key << np.uint64(kept)) | part
        return key

    @cached_property
    def _int_plan(self) -> tuple[tuple[int, int, int], ...]:
        """Per kept run: (shift of the run's kept bits in the integer, their mask, their count)."""
        plan = []
        used = 0
        for word, shift, length in self.segments:
            kept = min(length, 64 - used)
            if kept <= 0:
                break
            plan.append((word * 64 + shift + length - kept, (1 << kept) - 1, kept))
            used += kept
        return tuple(plan)

    def extract_int(self, value: int) -> int:
        """The key of one fingerprint given as a Python int (same value as :meth:`extract`)."""
        plan = self._int_plan
        if len(plan) == 1:
            shift, mask, _ = plan[0]
            return (value >> shift) & mask
        key = 0
        for shift, mask, kept in plan:
            key = (key << kept) | ((value >> shift) & mask)
        return key


def _runs(positions: Sequence[int], parts: int) -> list[BitSelection]:
    """Cut an ordered bit list into ``parts`` consecutive pieces, sizes differing by at most 1."""
    size, extra = divmod(len(positions), parts)
    pieces = []
    start = 0
    for index in range(parts):
        stop = start + size + (1 if index < extra else 0)
        pieces.append(BitSelection(tuple(positions[start:stop])))
        start = stop
    return pieces


@dataclass(frozen=True)
class BlockScheme:
    """m blocks, tables keyed on t of them: exact for every pair within ``max_distance``.

    Guarantee: if ``hamming(a, b) <= max_distance`` then ``a`` and ``b`` have equal keys in
    at least one table. It holds because ``key_blocks <= num_blocks - max_distance``, which
    the constructor checks. ``BlockScheme(64, 3)`` is the pigeonhole scheme (4 tables of 16
    bits); :meth:`auto` picks (m, t) for a collection size.
    """

    bits: int = 64
    max_distance: int = 3
    num_blocks: int | None = None
    key_blocks: int = 1
    #: Set by :meth:`auto`: the scheme was tuned, not asked for, so a batch search may tune it
    #: again on the data it is given (same pairs). Not part of equality or of :meth:`to_dict`.
    tuned: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_bits(self.bits)
        k = self.max_distance
        if not isinstance(k, int) or isinstance(k, bool) or k < 0 or k >= self.bits:
            raise ConfigError(f"max_distance must be an integer from 0 to {self.bits - 1}; got {k!r}")
        if self.num_blocks is None:
            object.__setattr__(self, "num_blocks", k + 1)
        m = self.blocks_count
        t = self.key_blocks
        if not 1 <= m <= self.bits:
            raise ConfigError(f"num_blocks must be from 1 to {self.bits}; got {m}")
        if not 1 <= t <= m - k:
            raise ConfigError(
                f"num_blocks={m}, key_blocks={t} cannot guarantee max_distance={k}: "
                f"key_blocks must be from 1 to num_blocks - max_distance = {m - k}; "
                f"raise num_blocks to at least {k + t} or lower key_blocks"
            )

    @property
    def blocks_count(self) -> int:
        assert self.num_blocks is not None
        return self.num_blocks

    @property
    def words(self) -> int:
        """uint64 words per fingerprint: 1 up to 64 bits, 2 for 128."""
        return 2 if self.bits == 128 else 1

    @property
    def fingerprint_words(self) -> int:
        """uint64 words of the fingerprint in a stored record's words (all of them here; a
        :class:`~neardup.similarity.bands.BandScheme` stores band keys after them)."""
        return self.words

    @cached_property
    def blocks(self) -> tuple[BitSelection, ...]:
        """The m blocks, most significant first; the first ``bits % m`` get one extra bit."""
        return tuple(_runs(range(self.bits - 1, -1, -1), self.blocks_count))

    @cached_property
    def combinations(self) -> tuple[tuple[int, ...], ...]:
        """The t blocks of each table, in table order (lexicographic)."""
        return tuple(itertools.combinations(range(self.blocks_count), self.key_blocks))

    @cached_property
    def tables(self) -> tuple[BitSelection, ...]:
        """One key per table: the union of its t blocks, in block order."""
        return tuple(
            BitSelection(tuple(itertools.chain.from_iterable(self.blocks[i].positions for i in combination)))
            for combination in self.combinations
        )

    def earlier_blocks(self, table: int) -> tuple[BitSelection, ...]:
        """The blocks whose equality would have put a pair of ``table`` in an earlier table.

        Tables come in lexicographic order of their block sets, so the first table whose
        blocks a pair shares holds the pair's t lowest equal blocks. A pair that agrees on
        ``table``'s blocks was therefore met earlier exactly when some block below the table's
        last one, and not among its own, is equal too: m - t checks at most, however many
        tables there are.
        """
        combination = self.combinations[table]
        return tuple(self.blocks[i] for i in range(combination[-1]) if i not in combination)

    @property
    def table_count(self) -> int:
        return math.comb(self.blocks_count, self.key_blocks)

    @property
    def key_bits(self) -> int:
        """Bits in the narrowest table key (the one with the largest buckets)."""
        return min(table.bit_count for table in self.tables)

    def sub_blocks(self, key: BitSelection) -> tuple[BitSelection, ...]:
        """Seed 000's second hash: the bits outside ``key``, cut into max_distance + 1 pieces."""
        selected = set(key.positions)
        outside = [position for position in range(self.bits - 1, -1, -1) if position not in selected]
        if len(outside) <= self.max_distance:
            # Too few bits for pigeonhole: a pair may differ in all of them. One empty
            # sub-block (every member agrees) keeps the search exact.
            return (BitSelection(()),)
        return tuple(_runs(outside, self.max_distance + 1))

    def keys(self, words: UInt64Array) -> UInt64Array:
        """(n, tables) uint64 keys of a (n, w) word array."""
        out = np.empty((words.shape[0], self.table_count), dtype=np.uint64)
        for index, table in enumerate(self.tables):
            out[:, index] = table.extract(words)
        return out

    def describe(self) -> str:
        return (
            f"{self.blocks_count} blocks, tables keyed on {self.key_blocks}: {self.table_count} tables, "
            f"keys of {self.key_bits}+ bits, exact to distance {self.max_distance} at {self.bits} bits"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "bits": self.bits,
            "max_distance": self.max_distance,
            "num_blocks": self.blocks_count,
            "key_blocks": self.key_blocks,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BlockScheme:
        unknown = set(data) - {"bits", "max_distance", "num_blocks", "key_blocks"}
        if unknown:
            raise ConfigError(f"unknown block scheme settings: {', '.join(sorted(unknown))}")
        return cls(**data)

    @classmethod
    def auto(
        cls,
        size: int,
        bits: int = 64,
        max_distance: int = 3,
        max_tables: int | None = None,
    ) -> BlockScheme:
        """The exact scheme with the least expected work for ``size`` fingerprints.

        Work per table is one sort of ``size`` keys plus the verification of the expected
        collisions at :data:`PAIR_COST` each (:func:`expected_work`): ``size²/2 · 2^-key_bits``
        for uniform fingerprints, so the optimum has key bits near log2(size) (:func:`tuned_for`
        prices them on a collection's own distances instead). ``max_tables`` caps the tables
        (memory of an index grows with them). Small collections get the pigeonhole scheme.
        """
        return _tune(size, bits, max_distance, max_tables, None)


def tuned_for(profile: DistanceProfile, max_distance: int, max_tables: int | None = None) -> BlockScheme:
    """:meth:`BlockScheme.auto` with the candidates ``profile`` (a collection's pairs at each
    distance) predicts, which on templated text are far more than uniform fingerprints'."""
    return _tune(profile.size, profile.bits, max_distance, max_tables, profile)


def _tune(
    size: int, bits: int, max_distance: int, max_tables: int | None, profile: DistanceProfile | None
) -> BlockScheme:
    """The search of :meth:`BlockScheme.auto` and :func:`tuned_for`."""
    BlockScheme(bits, max_distance)  # refuses a width or distance no scheme can have
    if max_tables is not None and max_tables < max_distance + 1:
        raise ConfigError(
            f"max_tables={max_tables} is too small: an exact scheme for max_distance={max_distance} "
            f"needs at least {max_distance + 1} tables"
        )
    limit = DEFAULT_MAX_TABLES if max_tables is None else max_tables
    n = max(int(size), 2)
    best = (bits, max_distance, max_distance + 1, 1)
    best_cost = expected_work(bits, max_distance + 1, 1, n, profile)
    for m in range(max_distance + 2, min(bits, max_distance + 12) + 1):
        for t in range(1, m - max_distance + 1):
            if math.comb(m, t) > limit:
                break
            cost = expected_work(bits, m, t, n, profile)
            if cost < best_cost:
                best, best_cost = (bits, max_distance, m, t), cost
    return BlockScheme(*best, tuned=True)


def expected_work(
    bits: int, num_blocks: int, key_blocks: int, size: int, profile: DistanceProfile | None = None
) -> float:
    """Expected work of a search with ``C(num_blocks, key_blocks)`` tables over ``size``
    fingerprints, in sorted table entries: one sort per table plus :data:`PAIR_COST` per
    candidate (pairs sharing a key). Candidates follow ``profile`` (the collection's pairs
    at each distance) when given, else uniform fingerprints.

    Counted from the key widths alone (the first ``bits % m`` blocks have one bit more), so
    pricing the ~1,000 schemes the tuner weighs builds no table."""
    small, extra = divmod(bits, num_blocks)
    pairs = size * (size - 1) / 2
    work = 0.0
    for wide in range(max(0, key_blocks - (num_blocks - extra)), min(extra, key_blocks) + 1):
        tables = math.comb(extra, wide) * math.comb(num_blocks - extra, key_blocks - wide)
        width = min(key_blocks * small + wide, 64)
        collisions = pairs * 2.0**-width if profile is None else profile.collisions(width)
        work += tables * (size + PAIR_COST * collisions)
    return work


# -- bucket statistics (below batch search and every store) ------------------------------
#: Seed 000's μ: a bucket above (1 + μ) × the average bucket is split again.
DEFAULT_MU = 2.0
#: Buckets up to this size are never split: verifying their ~size²/2 pairs costs less than
#: the k + 1 extra sorts of a split (with PAIR_COST = 0.25, the break-even is near 32).
MIN_SPLIT = 32


@dataclass
class TableStats:
    """Bucket statistics of one table (buckets are the non-empty key values)."""

    table: int
    key_bits: int
    buckets: int = 0
    largest: int = 0
    mean: float = 0.0
    split: int = 0
    candidates: int = 0
    pairs: int = 0


@dataclass
class BucketStats:
    """Per-table statistics of one :func:`~neardup.dedup.batch.find_all_pairs` run or one index."""

    scheme: str = ""
    threshold: float = 0.0
    tables: list[TableStats] = field(default_factory=list)

    @property
    def largest(self) -> int:
        return max((table.largest for table in self.tables), default=0)

    @property
    def split(self) -> int:
        return sum(table.split for table in self.tables)

    @property
    def candidates(self) -> int:
        return sum(table.candidates for table in self.tables)

    def format(self) -> str:
        """A printable table; the candidate and pair columns appear for a search (an index
        has buckets but no pairs)."""
        searched = any(table.candidates for table in self.tables)
        lines = [f"scheme: {self.scheme}", f"second-hash threshold: {self.threshold:.1f} entries"]
        lines.append("table key_bits buckets largest mean split" + (" candidates pairs" if searched else ""))
        for t in self.tables:
            row = f"{t.table:5d} {t.key_bits:8d} {t.buckets:7d} {t.largest:7d} {t.mean:4.1f} {t.split:5d}"
            lines.append(row + (f" {t.candidates:10d} {t.pairs:5d}" if searched else ""))
        return "\n".join(lines)


def split_size(size: int, key_bits: int, mu: float = DEFAULT_MU) -> float:
    """Seed 000's threshold: (1 + μ) × the average bucket, size / 2^key_bits (the expected
    bucket under uniform fingerprints), but never below :data:`MIN_SPLIT`."""
    return max((1.0 + mu) * size / 2.0**key_bits, float(MIN_SPLIT))

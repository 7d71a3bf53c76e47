"""Bucket statistics and seed 000's split threshold, shared by batch search and every store.

Below both :mod:`neardup.dedup` (batch all-pairs) and :mod:`neardup.storage` (the index's
stores), so the index can report and split buckets without importing the dedup policy above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

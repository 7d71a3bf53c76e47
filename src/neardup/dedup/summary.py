"""The one-line summary of a dedup run, shared by the library, ``neardup dedup`` and the Spark job.

Its :meth:`Summary.line` is what ``neardup dedup`` prints on stderr; tools parse it, so its
wording is a contract.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .batch import Pairs
from .clusters import Clusters


@dataclass(frozen=True)
class Summary:
    """Counts of one run: records, pairs within the distance (and candidates the verification
    rejected), clusters of two or more records and the records the keep policy drops."""

    records: int
    empty: int
    skipped: int
    pairs: int
    exact: int
    max_distance: int
    clusters: int
    largest: int
    dropped: int
    keep: str
    verify: str = "none"
    rejected: int = 0
    method: str = "simhash"
    threshold: float = 0.5

    @classmethod
    def of(
        cls,
        pairs: Pairs,
        clusters: Clusters,
        *,
        empty: int,
        max_distance: int,
        keep: str,
        verify: str = "none",
        rejected: int = 0,
        skipped: int = 0,
        method: str = "simhash",
        threshold: float = 0.5,
    ) -> Summary:
        """The summary of the final ``pairs`` and ``clusters`` of ``len(clusters.cluster)`` records."""
        n = len(clusters.cluster)
        leaders = clusters.cluster == np.arange(n)
        return cls(
            records=n,
            empty=empty,
            skipped=skipped,
            pairs=len(pairs),
            exact=int(np.count_nonzero(pairs.distance == 0)),
            max_distance=max_distance,
            clusters=int(np.count_nonzero(leaders & (clusters.size >= 2))),
            largest=int(clusters.size.max()) if n else 0,
            dropped=n - int(np.count_nonzero(clusters.keep)),
            keep=keep,
            verify=verify,
            rejected=rejected,
            method=method,
            threshold=threshold,
        )

    @property
    def kind(self) -> str:
        """What the pairs are: within a distance (Simhash), or of a shingle Jaccard (LSH)."""
        if self.method == "lsh" and self.verify == "none":
            return f"found by LSH for shingle Jaccard >= {self.threshold:g}, unchecked (--verify none)"
        if self.method == "lsh":
            return f"of shingle Jaccard >= {self.threshold:g} by LSH"
        return f"within distance {self.max_distance}"

    def line(self) -> str:
        verified = f" ({self.rejected} rejected by --verify {self.verify})" if self.verify != "none" else ""
        return (
            f"neardup: {self.records} records, {self.pairs} pairs {self.kind}{verified}, "
            f"{self.clusters} clusters of 2+ records, {self.dropped} dropped "
            f"(--keep {self.keep}); {self.empty} empty; {self.skipped} skipped"
        )

    def details(self, seconds: tuple[float, float, float, float]) -> str:
        """The ``--stats`` report; ``seconds`` are set-up, reading the records (sketching them
        under LSH, fingerprinting them under Simhash), pairs and the rest."""
        setup, read, pairs, rest = seconds
        rate = self.records / read if read > 0 else math.inf
        stage = "sketches" if self.method == "lsh" else "fingerprints"
        total = sum(seconds)
        return "\n".join(
            [
                f"records: {self.records} ({self.empty} empty, {self.skipped} skipped)",
                f"pairs: {self.pairs} {self.kind} ({self.exact} at distance 0)"
                + (f", {self.rejected} rejected by --verify {self.verify}" if self.verify != "none" else ""),
                f"clusters of 2+ records: {self.clusters} (largest {self.largest})",
                f"dropped: {self.dropped} (--keep {self.keep}), kept {self.records - self.dropped}",
                f"seconds: {total:.2f} (set-up {setup:.2f}, {stage} {read:.2f} at "
                f"{rate:,.0f} records/s, pairs {pairs:.2f}, clusters and output {rest:.2f})",
            ]
        )

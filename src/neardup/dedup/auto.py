"""The default search of ``neardup dedup``: how far to look, and how to confirm, by input size.

Measured on the dev sets (``neardup sweep``, docs/results/sweep_*.md), Simhash alone at k = 3
finds only a quarter to a half of the near-duplicates (F1 0.41 on zh_news, 0.45 on en_news):
medium edits move news fingerprints 8-12 bits. Searching to k = 16 and confirming every
candidate with the shingle Jaccard of the texts (``--verify jaccard``) gives F1 0.991 and 0.986,
above every baseline and peer measured there (VSM 0.989/0.959, shingles 0.983/0.936,
datasketch MinHashLSH 0.982/0.973), and 0.949 on the short texts of zh_short.

A wide exact search costs more as the input grows (candidates grow with n² · P(H <= k)), so
the distance shrinks with the size: the steps below keep the pair search of uniform 64-bit
fingerprints near 10-20 s on two cores (``python3 benchmarks/auto_defaults.py``). Above the
last step the search is the classic k = 3 without verification, and the texts are not kept.
The rule is tuned for 64-bit fingerprints; 32- and 128-bit ones keep k = 3 unless given.
"""

from __future__ import annotations

from typing import NamedTuple

#: (largest input size, max_distance) for 64-bit fingerprints, smallest inputs first.
AUTO_STEPS: tuple[tuple[int, int], ...] = ((20_000, 16), (100_000, 12), (1_000_000, 6))
#: The distance above the last step and for other widths: the classic exact search.
CLASSIC_DISTANCE = 3
#: The verification that confirms the wider searches (exact shingle Jaccard >= 0.5).
AUTO_VERIFY = "jaccard"
#: Texts are kept for verification only while the input is no larger than this.
AUTO_TEXT_LIMIT = AUTO_STEPS[-1][0]


class Search(NamedTuple):
    """A resolved search: the distance, the verification of its candidates, and the method
    that found them (``simhash``: the exact block search within ``max_distance`` bits;
    ``lsh``: shingle LSH, pairs of shingle Jaccard >= the threshold, any distance)."""

    max_distance: int
    verify: str
    method: str = "simhash"


def auto_search(size: int, bits: int = 64) -> Search:
    """The default search for ``size`` records of ``bits``-bit fingerprints."""
    if bits == 64:
        for limit, distance in AUTO_STEPS:
            if size <= limit:
                return Search(distance, AUTO_VERIFY)
    return Search(CLASSIC_DISTANCE, "none")


def resolve_search(size: int, bits: int, max_distance: int | None, verify: str) -> Search:
    """The user's settings with ``None`` (``-k auto``) and ``"auto"`` (``--verify auto``)
    filled in: an automatic distance brings its verification; a distance given by hand is
    searched as given, confirmed only by an explicit ``--verify``."""
    auto = auto_search(size, bits)
    distance = auto.max_distance if max_distance is None else max_distance
    if verify != "auto":
        return Search(distance, verify)
    return Search(distance, auto.verify if max_distance is None else "none")

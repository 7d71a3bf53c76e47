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

That size rule cannot see templated text, where pairs within 16 bits number hundreds of
thousands at 10^4 records and each is a check of two texts. Given the fingerprints,
:func:`choose_search` chooses from the data instead: the collection's
:class:`~neardup.distance.DistanceProfile` (every pair counted up to ~3·10^7 pairs, sampled
rows beyond) says how many candidates each k brings and what the exact search for it costs,
and the widest k whose check reads at most :data:`CHECK_TEXT_PER_RECORD` characters per
record (or :data:`CHECK_PAIRS_PER_RECORD` candidates without lengths) and whose search stays
within :data:`SEARCH_WORK_PER_RECORD` is taken, for any width.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy.typing as npt

from ..blocks import expected_work, tuned_for
from ..distance import DistanceProfile, as_words, distance_profile
from .batch import SCAN_COST

#: (largest input size, max_distance) for 64-bit fingerprints, smallest inputs first.
AUTO_STEPS: tuple[tuple[int, int], ...] = ((20_000, 16), (100_000, 12), (1_000_000, 6))
#: The distance above the last step and for other widths: the classic exact search.
CLASSIC_DISTANCE = 3
#: The verification that confirms the wider searches (exact shingle Jaccard >= 0.5).
AUTO_VERIFY = "jaccard"
#: Texts are kept for verification only while the input is no larger than this.
AUTO_TEXT_LIMIT = AUTO_STEPS[-1][0]
#: The widest distance the data may choose, by fingerprint width (~1/3 of the bits: past it
#: a Simhash pair says little, benchmarks/wide_search.py).
MAX_AUTO_DISTANCE = {32: 11, 64: 22, 128: 44}
#: Characters (both texts of each candidate) the check may read per input record: its cost
#: grows with the text it shingles, so long texts get fewer candidates than short ones. On
#: Reuters stories and People's Daily paragraphs the recall goal needs 10,000 and 9,200,
#: and 18,700 and 17,500 would bring the next k (benchmarks/wide_search.py; docs/index.md).
CHECK_TEXT_PER_RECORD = 12_000
#: Candidates per record when the texts' lengths are not known.
CHECK_PAIRS_PER_RECORD = 15
#: Expected search work per record (sorted table entries, :func:`~neardup.blocks.expected_work`).
SEARCH_WORK_PER_RECORD = 2_000


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


def choose_search(
    fingerprints: npt.ArrayLike, bits: int = 64, lengths: npt.ArrayLike | None = None
) -> Search:
    """``-k auto`` from the data: the widest distance (up to :data:`MAX_AUTO_DISTANCE`) whose
    candidates and search the budgets allow, checked by :data:`AUTO_VERIFY`; past
    :data:`AUTO_TEXT_LIMIT` records the classic search (no texts are kept to check)."""
    words = as_words(fingerprints, bits)
    if words.shape[0] > AUTO_TEXT_LIMIT:
        return Search(CLASSIC_DISTANCE, "none")
    profile = distance_profile(words, bits, lengths=lengths, text_up_to=MAX_AUTO_DISTANCE[bits])
    return Search(distance_for(profile), AUTO_VERIFY)


def distance_for(profile: DistanceProfile) -> int:
    """The widest distance within the budgets of this module for ``profile``, at least
    :data:`CLASSIC_DISTANCE` (the seeds' k, which every input gets)."""
    n = max(profile.size, 1)
    for k in range(MAX_AUTO_DISTANCE[profile.bits], CLASSIC_DISTANCE, -1):
        if profile.text is not None:
            affordable = profile.text_within(k) <= CHECK_TEXT_PER_RECORD * n
        else:
            affordable = profile.within(k) <= CHECK_PAIRS_PER_RECORD * n
        if affordable and search_work(profile, k) <= SEARCH_WORK_PER_RECORD * n:
            return k
    return CLASSIC_DISTANCE


def search_work(profile: DistanceProfile, max_distance: int) -> float:
    """Expected work of the cheapest exact search within ``max_distance`` (scan or blocks)."""
    n = profile.size
    scheme = tuned_for(profile, max_distance)
    blocks = expected_work(profile.bits, scheme.blocks_count, scheme.key_blocks, n, profile)
    return min(blocks, SCAN_COST * n * (n - 1) / 2)


def resolve_search(
    size: int,
    bits: int,
    max_distance: int | None,
    verify: str,
    fingerprints: npt.ArrayLike | None = None,
    lengths: npt.ArrayLike | None = None,
) -> Search:
    """The user's settings with ``None`` (``-k auto``) and ``"auto"`` (``--verify auto``)
    filled in: an automatic distance brings its verification, chosen from ``fingerprints``
    (and the texts' ``lengths``) when given (:func:`choose_search`), else from ``size``; a
    distance given by hand is searched as given, confirmed only by an explicit ``--verify``."""
    if max_distance is None and fingerprints is not None:
        auto = choose_search(fingerprints, bits, lengths)
    else:
        auto = auto_search(size, bits)
    distance = auto.max_distance if max_distance is None else max_distance
    if verify != "auto":
        return Search(distance, verify)
    return Search(distance, auto.verify if max_distance is None else "none")

"""Candidate pairs whose recall does not fall with the collection size (DESIGN.md §4b).

The exact Hamming search of one Simhash per document finds medium edits (10-16 bits away) only
when k is wide, and a wide exact search costs n² · P(H <= k), so ``-k auto`` narrows k as n
grows and recall falls. The searches here work on the documents' shingle sets instead (made by
:func:`~neardup.similarity.shingles.shingles_of`, which ``--verify jaccard`` compares: character
bigrams of Chinese text, 5-grams of Latin text, over the normalized letters and digits), and promise
every pair whose shingle Jaccard reaches ``threshold`` whatever n is; the caller confirms each
candidate with the exact Jaccard (:meth:`Verifier.verify_texts`).

``oph`` (the default): one-permutation MinHash + LSH banding.
    Each shingle hash is mixed once with a seeded 64-bit finalizer; its top bits choose one of
    K bins, its low 32 bits are the value, and each bin keeps its minimum (Li, Owen & Zhang
    2012) — O(total shingles), against O(total shingles × K) for K independent permutations.
    Empty bins (documents with fewer shingles than bins) are filled by optimal densification
    (Shrivastava 2017: each empty bin probes bins in a fixed pseudo-random order and copies the
    first non-empty one), which keeps P[bin values equal] = Jaccard. Rows of a band agree with
    probability s^rows, and a pair is a candidate once ``hits`` of the ``bands`` band keys
    agree: with probability P[Bin(bands, s^rows) >= hits]; ``bands`` is the smallest count that
    makes that >= ``recall`` at ``threshold``. ``rows`` and ``hits`` set the background cost:
    unrelated news pairs have Jaccard ~0.01-0.05 (dev sets: median 0.012, 99th percentile
    0.05), each agreeing on a band with probability ~0.05^5 ≈ 3e-7, so one hit would make
    chance candidates grow with the collection (every document meets more strangers) and two
    hits make them the square of that. Band keys are sorted per band (one ``np.sort``), runs
    of equal keys give pairs; a key shared by more than ``max_bucket`` documents
    (boilerplate, templates, mass copies) yields only the pairs of each member with the
    bucket's first ``hub`` members, like a stopword that is kept for connectivity but not
    expanded quadratically.
``segments``: several Simhash fingerprints per document (sentence groups cut at content-defined
    boundaries, so an insertion shifts only its own segment), searched exactly at ``segment_distance``
    bits by :func:`~neardup.dedup.batch.find_all_pairs`; fingerprints shared by more than
    ``max_bucket`` documents are dropped as boilerplate. Finds pairs that share a passage, not a
    promise about Jaccard.
``minhash``: classic MinHash (``bands × rows`` universal hash functions of
    :class:`~neardup.similarity.minhash.MinHasher`) with the same banding: the reference OPH approximates,
    at K times the sketch cost.

Short documents (fewer than ``short_shingles`` shingles) get too few bins filled for banding to
mean anything, so every method searches them by exact prefix filtering (:mod:`.prefix_search`,
:mod:`.short_texts`; Bayardo et al. 2007): with
tokens ordered by document frequency, two sets of Jaccard >= t share a token among the first
|A| − ⌈t·|A|⌉ + 1 of each, and their first common token comes early enough in both to leave
room for the overlap t needs (positional filtering, Xiao et al. 2008: without it short texts
drawn from one vocabulary pair by rare tokens near the end of their prefixes, and those pairs
grow with the collection). A pair with Jaccard >= t has sizes within a factor t, so documents
below ``short_shingles / threshold`` shingles are searched that way and documents from
``short_shingles`` up by the method: every pair is covered by one of the two. Documents without
shingles get no candidates.

Documents arrive in chunks (:meth:`CandidateSearch.add`), so no stage holds every shingle set:
only band keys (``bands`` × 4 bytes a document) and the shingles of short documents are kept.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, InputError
from ..fingerprint.fingerprinter import Fingerprinter
from ..similarity.shingles import Shingles
from ..similarity.sketches import (
    TEXT_SKETCH_SEED,
    band_sketches,
    byte_bins,
    estimate_from_bins,
    hashed_band_keys,
    minhash_sketches,
)
from ..text.normalize import Normalizer
from .band_keys import BandKeys
from .batch import find_all_pairs
from .check_bins import CheckBins
from .key_buckets import as_pairs, keyed_pairs, pair_keys, unique_keys
from .pair_tiles import PairTiles
from .shingle_sets import forked_map, forked_state
from .short_texts import ShortTexts
from .workspace import Workspace, unbounded

IntArray = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]
UInt32Array = npt.NDArray[np.uint32]
FloatArray = npt.NDArray[np.float64]

METHODS: tuple[str, ...] = ("oph", "segments", "minhash")
#: Sentence ends (Chinese and Latin) and line breaks: where segments may be cut.
_SENTENCE = re.compile(r"(?<=[。！？!?；;])|(?<=[.])\s|\n+")


#: Documents from which the bands are sorted in parallel (below, a fork costs more than it saves).
PARALLEL_BANDS = 1 << 17


@dataclass(frozen=True)
class CandidateSettings:
    """How candidates are searched (see the module docstring for the methods).

    ``threshold`` is the shingle Jaccard the verification keeps (0.5, as ``--verify
    jaccard``); ``recall`` the probability, under independent bins, of finding a pair exactly
    at it (higher Jaccard is found more surely): 0.995 to keep the 0.99 promised, because the
    densified bins of shorter texts are copies of each other, which clusters the band hits
    and lowers the chance of two (docs/candidates.md). A pair is a candidate once ``hits``
    bands find it: chance collisions of unrelated texts, which grow with the collection, need
    two coincidences instead of one.
    """

    method: str = "oph"
    threshold: float = 0.5
    recall: float = 0.995
    rows: int = 5
    bands: int | None = None
    hits: int = 2
    short_shingles: int = 64
    max_bucket: int = 200
    hub: int = 2
    seed: int = TEXT_SKETCH_SEED
    segment_chars: int = 100
    segment_distance: int = 3
    check_bins: int = 0
    fingerprinter: Fingerprinter | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"unknown candidate method {self.method!r}; choose one of {', '.join(METHODS)}")
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"the candidate threshold must lie in (0, 1]; got {self.threshold!r}")
        if not 0.0 < self.recall < 1.0:
            raise ConfigError(f"the promised recall must lie in (0, 1); got {self.recall!r}")
        if self.rows < 1 or (self.bands is not None and self.bands < 1):
            raise ConfigError(f"rows and bands must be >= 1; got {self.rows!r} and {self.bands!r}")
        if not 1 <= self.hits <= self.band_count:
            raise ConfigError(f"hits must lie in [1, {self.band_count}] (the bands); got {self.hits!r}")
        if not 0 <= self.check_bins <= self.bins:
            raise ConfigError(f"check_bins must lie in [0, {self.bins}]; got {self.check_bins!r}")
        if self.max_bucket < 2 or self.hub < 1:
            raise ConfigError(f"max_bucket must be >= 2 and hub >= 1; got {self.max_bucket!r}, {self.hub!r}")

    @property
    def band_count(self) -> int:
        return (
            self.bands
            if self.bands is not None
            else bands_for(self.threshold, self.rows, self.recall, self.hits)
        )

    @property
    def bins(self) -> int:
        return self.band_count * self.rows


def collision_probability(similarity: float, rows: int, bands: int, hits: int = 1) -> float:
    """P[a pair of Jaccard ``similarity`` shares at least ``hits`` of ``bands`` band keys]: the
    binomial tail of ``bands`` trials that each succeed with probability s^rows (for one hit,
    1 − (1 − s^rows)^bands)."""
    agree = similarity**rows
    if agree >= 1.0:
        return 1.0 if bands >= hits else 0.0
    if hits == 1:
        return 1.0 - (1.0 - agree) ** bands
    below = sum(
        math.comb(bands, k) * agree**k * (1.0 - agree) ** (bands - k) for k in range(min(hits, bands + 1))
    )
    return max(0.0, 1.0 - below)


def bands_for(threshold: float, rows: int, recall: float = 0.99, hits: int = 1) -> int:
    """The fewest bands of ``rows`` rows whose keys a pair at ``threshold`` shares ``hits``
    times with probability >= ``recall``."""
    agree = threshold**rows
    if agree >= 1.0:
        return hits
    if hits == 1:  # (1 − t^r)^b <= 1 − recall, in closed form
        return max(1, math.ceil(math.log(1.0 - recall) / math.log1p(-agree) - 1e-9))
    low, high = hits - 1, hits  # the tail grows with the bands: double, then bisect
    while collision_probability(threshold, rows, high, hits) < recall:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (
            (low, middle)
            if collision_probability(threshold, rows, middle, hits) >= recall
            else (middle, high)
        )
    return high


# -- pairs from keys ---------------------------------------------------------------------------


# -- segments ----------------------------------------------------------------------------------


def segments_of(text: str, target: int = 100, seed: int = 1) -> list[str]:
    """Sentence groups of about ``target`` characters. A group ends after a sentence of at least
    ``target / 2`` characters whose own hash is even (a content-defined cut: an inserted
    sentence moves only the cuts next to it), or once it reaches ``2 · target``; groups below
    ``target / 5`` characters (titles, datelines) are dropped."""
    out: list[str] = []
    current: list[str] = []
    length = 0
    for sentence in _SENTENCE.split(text):
        sentence = sentence.strip()
        if not sentence:
            continue
        current.append(sentence)
        length += len(sentence)
        cut = length >= target // 2 and hash_text(sentence, seed) % 2 == 0
        if cut or length >= 2 * target:
            out.append(" ".join(current))
            current, length = [], 0
    if current:
        out.append(" ".join(current))
    return [segment for segment in out if len(segment) >= max(1, target // 5)]


def hash_text(text: str, seed: int) -> int:
    """A stable (process-independent) hash of a sentence's last letters and digits: Python's
    ``hash`` is salted, and punctuation is what light edits change most."""
    value = seed
    letters = [character for character in text if character.isalnum()]
    for character in letters[-8:]:
        value = (value * 1_000_003 + ord(character)) & 0xFFFFFFFF
    return value ^ (value >> 7)


def segment_pairs(
    texts: Sequence[str], owners: IntArray, settings: CandidateSettings
) -> tuple[UInt64Array, IntArray]:
    """The segments' Simhash fingerprints and the documents (``owners[t]`` for ``texts[t]``)
    they come from."""
    pieces: list[str] = []
    belongs: list[int] = []
    normalized = Normalizer().normalize_many(list(texts))
    for text, owner in zip(normalized, owners.tolist(), strict=True):
        found = segments_of(text, settings.segment_chars, settings.seed)
        pieces.extend(found)
        belongs.extend([owner] * len(found))
    fingerprinter = settings.fingerprinter or Fingerprinter()
    fingerprints = np.asarray(fingerprinter.fingerprint_many(pieces), dtype=np.uint64).reshape(-1)
    return fingerprints, np.asarray(belongs, dtype=np.int64)


def _segment_candidates(fingerprints: UInt64Array, owners: IntArray, settings: CandidateSettings) -> IntArray:
    """Pair keys of documents with segments within ``segment_distance`` bits; a fingerprint
    held by more than ``max_bucket`` documents is boilerplate and dropped."""
    if fingerprints.size < 2:
        return np.empty(0, dtype=np.int64)
    distinct = np.unique(np.stack([fingerprints, owners.astype(np.uint64)], axis=1), axis=0)
    values, holders = np.unique(distinct[:, 0], return_counts=True)
    common = values[holders > settings.max_bucket]
    keep = ~np.isin(fingerprints, common)
    fingerprints, owners = fingerprints[keep], owners[keep]
    found = find_all_pairs(fingerprints, settings.segment_distance, bits=64)
    return unique_keys([pair_keys(owners[found.i], owners[found.j])])


# -- the search --------------------------------------------------------------------------------


class CandidateSearch:
    """Candidates over documents that arrive in chunks (numbered 0, 1, ... in arrival order).

    ``add`` takes the next chunk's :class:`Shingles` (and texts, for ``segments``) and keeps
    only what the method needs later; ``pairs`` returns the (m, 2) candidate pairs, i < j,
    each once, sorted.
    """

    def __init__(self, settings: CandidateSettings | None = None, workspace: Workspace | None = None) -> None:
        self.settings = settings or CandidateSettings()
        self.workspace = workspace or unbounded()
        self.count = 0
        self._keys = BandKeys(self.workspace)
        self._owners: list[IntArray] = []
        self._short = ShortTexts(self.workspace)
        self._segments: list[tuple[UInt64Array, IntArray]] = []
        self._checks = CheckBins(self.settings.check_bins, self.workspace)
        self._cached: tuple[npt.NDArray[np.bool_], IntArray, CheckBins | None] | None = None

    def add(self, shingles: Shingles, texts: Sequence[str] | None = None) -> None:
        settings = self.settings
        if settings.method == "segments" and (texts is None or len(texts) != shingles.count):
            raise InputError(f"the segments method needs the {shingles.count} texts of the chunk")
        offset = self.count
        short_hashes, short_documents, long = split_short(shingles, settings)
        self.add_short(short_hashes, short_documents + offset, shingles.count)
        if long.size == 0:
            return
        if settings.method == "segments":
            assert texts is not None
            self._segments.append(segment_pairs([texts[k] for k in long.tolist()], long + offset, settings))
            return
        keys, checks = sketch_long(shingles, long, settings)
        self.add_sketches(long + offset, keys, checks)

    def add_sketches(self, owners: IntArray, keys: UInt32Array, checks: npt.NDArray[np.uint8] | None) -> None:
        """Band keys (bands, len(owners)) and check bins of long documents sketched elsewhere
        (:func:`sketch_long`, e.g. in a worker process); ``owners`` are global numbers."""
        self._keys.append(keys)
        self._owners.append(owners)
        if checks is not None:
            self._checks.extend(checks)

    def add_short(self, hashes: UInt64Array, documents: IntArray, count: int) -> None:
        """The shingles of short documents (global numbers) of a chunk of ``count`` documents."""
        self._short.append(hashes, documents)
        self.count += count

    def short_documents(self) -> IntArray:
        """The documents searched by their shingle sets (exact prefix filtering), ascending."""
        return self._short.documents()

    def pairs(self) -> IntArray:
        """Every candidate pair, (m, 2) int64, i < j, sorted and unique."""
        return as_pairs(self.pair_tiles().all())

    def pair_tiles(self, done: Callable[[int], object] | None = None, workers: int = 1) -> PairTiles:
        """Every candidate pair as pair keys, in tiles that each read the check bins of two
        spans of documents (one tile when they fit the budget's share); ``done(1)`` after the
        short documents and after each band. Past :data:`PARALLEL_BANDS` documents the bands
        are sorted by ``workers`` forked processes (a band at a time each; the pairs are the
        same in any order)."""
        settings = self.settings
        if self.count >= 1 << 31:
            raise InputError(f"{self.count} documents exceed the 2^31 a candidate search numbers")
        found = PairTiles(self.count, self._checks.span, self.workspace, settings.hits)
        self._short.add_pairs(found, settings.threshold, settings.max_bucket, settings.hub)
        done = done or (lambda _: None)
        done(1)
        if self._segments:
            fingerprints = np.concatenate([part[0] for part in self._segments])
            owners = np.concatenate([part[1] for part in self._segments])
            found.add(_segment_candidates(fingerprints, owners, settings), sure=True)
        if self._keys:
            owners = np.concatenate(self._owners)
            workers = workers if self.count >= PARALLEL_BANDS else 1
            bands = range(settings.band_count)
            for pairs in forked_map(_band_pairs, bands, (self._keys, owners, settings), workers):
                found.add(pairs)
                done(1)
        found.finish()
        return found

    def prepare(self) -> None:
        """Build what :meth:`similarities` reads, once (before forking workers that share it)."""
        self._lookups()
        self._short.prepare()

    def similarities(self, pairs: IntArray) -> FloatArray:
        """The shingle Jaccard of each pair (m, 2), without the texts: exact where both
        documents are short (their shingles are kept for the prefix search), else estimated
        from the first ``check_bins`` sketch bins kept at 8 bits
        (:func:`~neardup.similarity.sketches.estimate_from_bins`). A short and a long document
        have sizes more than a factor ``threshold`` apart, so they score 0."""
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        result = np.zeros(len(pairs), dtype=np.float64)
        if not len(pairs):
            return result
        is_short, row_of, checks = self._lookups()
        exact = is_short[pairs[:, 0]] & is_short[pairs[:, 1]]
        if exact.any():
            result[exact] = self._short.jaccard(pairs[exact, 0], pairs[exact, 1])
        if checks is not None and (~exact).any():
            rows_a, rows_b = row_of[pairs[:, 0]], row_of[pairs[:, 1]]
            sketched = np.flatnonzero(~exact & (rows_a >= 0) & (rows_b >= 0))
            for low in range(0, sketched.size, 1 << 16):
                chosen = sketched[low : low + (1 << 16)]
                result[chosen] = estimate_from_bins(checks.take(rows_a[chosen]), checks.take(rows_b[chosen]))
        return result

    def _lookups(self) -> tuple[npt.NDArray[np.bool_], IntArray, CheckBins | None]:
        """Which documents are short, each document's row among the check bins (-1: none)
        and the check bins: built once, for calls in chunks."""
        if self._cached is None or self._cached[0].size != self.count:
            is_short = np.zeros(self.count, dtype=bool)
            is_short[self._short.documents()] = True
            row_of = np.full(self.count, -1, dtype=np.int64)
            checks = None
            if self._checks.count:
                owners = np.concatenate(self._owners)
                self._owners = [owners]
                row_of[owners] = np.arange(owners.size)
                checks = self._checks
            self._cached = (is_short, row_of, checks)
        return self._cached

    def drop_band_keys(self) -> None:
        """Free the band keys once the pairs are taken (:meth:`pairs` cannot run again)."""
        self._keys.clear()


def _band_pairs(band: int) -> IntArray:
    """One band's pairs (in a worker: the band keys, owners and settings are the forked state)."""
    keys, owners, settings = forked_state()
    return keyed_pairs(keys.column(band), owners, settings.max_bucket, settings.hub)


def split_short(shingles: Shingles, settings: CandidateSettings) -> tuple[UInt64Array, IntArray, IntArray]:
    """The shingles (hashes, chunk-local documents) of the documents the prefix search takes,
    and the chunk-local numbers of those the sketches take (both for sizes in between)."""
    sizes = shingles.sizes
    short = (sizes > 0) & (sizes < settings.short_shingles / settings.threshold)
    long = np.flatnonzero(sizes >= settings.short_shingles)
    if not short.any():  # a chunk of long texts: no pass over its shingles
        return shingles.hashes[:0], shingles.documents[:0], long
    chosen = short[shingles.documents]
    return shingles.hashes[chosen], shingles.documents[chosen], long


def sketch_long(
    shingles: Shingles, long: IntArray, settings: CandidateSettings
) -> tuple[UInt32Array, npt.NDArray[np.uint8] | None]:
    """Band keys (bands, len(long)) and, with ``check_bins``, the check bins (len(long),
    check_bins) at 8 bits of the chunk's documents ``long``: pure, so any process may run it."""
    if long.size == shingles.count:  # every text of the chunk (news, pages): no copy
        subset = shingles
    else:
        renumber = np.full(shingles.count, -1, dtype=np.int64)
        renumber[long] = np.arange(long.size)
        chosen = renumber[shingles.documents] >= 0
        subset = Shingles(shingles.hashes[chosen], renumber[shingles.documents[chosen]], int(long.size))
    if settings.method == "oph":  # the text sketch's bins, regrouped for more bands
        sketch = band_sketches(subset, settings.rows, settings.band_count, settings.seed)
    else:
        sketch = minhash_sketches(subset, settings.bins, settings.seed)
    checks = byte_bins(sketch, settings.check_bins) if settings.check_bins else None
    return hashed_band_keys(sketch, settings.rows, settings.band_count), checks


def candidate_pairs(
    shingles: Shingles, settings: CandidateSettings | None = None, texts: Sequence[str] | None = None
) -> IntArray:
    """Candidate pairs of one batch of documents: (m, 2) int64, i < j, unique, sorted."""
    search = CandidateSearch(settings)
    search.add(shingles, texts)
    return search.pairs()

"""The batch dedup job as one library call, and the stages it is built from.

:func:`dedup_documents` runs the chosen search (:attr:`DedupSettings.method`) over an
iterable of :class:`~neardup.io.record.Record` and returns a :class:`DedupResult`; ``neardup
dedup`` is a thin adapter over it. The stages are public functions, so another mode (the
Spark job, an index, a benchmark) can run them one by one:

    collected = collect(records, fingerprinter, settings)    # LSH: sketches; Simhash: fingerprints
    candidates = search_candidates(collected, settings)      # candidate pairs, the search resolved
    pairs = check_candidates(collected, candidates, fingerprinter, settings)  # the pairs kept
    pairs = measure_distances(collected, pairs, fingerprinter)  # their Simhash distances
    clusters = cluster(collected, pairs, settings)

Under the LSH search (the default) ``collect`` sketches the records' shingles as they stream
in (in worker processes, :class:`~neardup.dedup.lsh.Sketcher`) and keeps their texts for the
check; the distances fingerprint only the records of the kept pairs. Under the Simhash search
``collect`` fingerprints every record, the candidates are the pairs within the distance, and
their distances are known from the search. One :class:`~neardup.text.normalize.Normalizer`,
the fingerprinter's, drives the shingles, the fingerprints and the check.

The input is a flat iterable of records rather than of batches: that is what readers,
database sources and Spark partitions yield, and batching is a speed knob of this module
(``batch_size`` records or about 8 million characters, whichever comes first), not something
that changes a result.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..blocks import DEFAULT_MAX_TABLES, BlockScheme
from ..errors import ConfigError
from ..fingerprint.fingerprinter import Fingerprinter
from ..io.read import BATCH_RECORDS, batches
from ..io.record import Record, RecordId
from ..similarity.minhash import DEFAULT_CONTENT_WEIGHT, DEFAULT_NUM_PERM
from ..similarity.verify import META_FIELDS, Explanation, Verifier, explain_pairs, metadata_of
from .auto import AUTO_TEXT_LIMIT, Search, resolve_search
from .batch import DEFAULT_MU, BucketStats, Pairs, find_all_pairs
from .candidates import CandidateSettings, bands_for
from .clusters import Clusters, check_keep, cluster_records
from .lsh import Sketcher, Sketches, band_candidates, confirm, explain_candidates, pair_distances
from .pair_tiles import PairTiles
from .seen_ids import PackedIds, SeenIds
from .summary import Summary
from .workspace import DEFAULT_MEMORY, Workspace

#: More tables than this from a hand-given scheme is surely a typo: each table is one sort of
#: the whole input (the auto-tuner has the same cap).
MAX_TABLES = DEFAULT_MAX_TABLES

#: The candidate searches: ``lsh`` (shingle LSH, the default) and ``simhash`` (the exact
#: Hamming search of the Simhash fingerprints, its distance narrowing with the input size
#: unless ``max_distance`` is given).
SEARCHES = ("lsh", "simhash")
#: The checks of the LSH search's candidates: ``jaccard`` (the sketch estimate, the exact
#: Jaccard of the texts near the threshold), ``sketch`` (the estimate alone, as an index
#: decides) and ``none`` (candidates unchecked). ``auto`` is ``jaccard``.
LSH_VERIFY_MODES = ("jaccard", "sketch", "none")
#: The shingle Jaccard the LSH search keeps (that of ``--verify jaccard``).
LSH_THRESHOLD = 0.5
#: Sketch bins kept per document (8 bits each) to pre-filter the LSH candidates.
LSH_CHECK_BINS = 512
#: Defaults of the settings only some searches read (None in :class:`DedupSettings` means
#: "not given", so that a setting given where it does not apply is refused, not ignored).
DEFAULT_OPTIONS: dict[str, Any] = {
    "content_weight": DEFAULT_CONTENT_WEIGHT,
    "num_perm": DEFAULT_NUM_PERM,
    "mu": DEFAULT_MU,
    "meta_fields": META_FIELDS,
    "memory": DEFAULT_MEMORY,
}

#: ``progress(stage, advance, total)``: called with advance 0 (and the total when known) as a
#: stage starts, then with the work done since the last call. Stages: ``sketch`` (LSH) or
#: ``fingerprint`` (Simhash), in records; ``bands`` (LSH: the bands paired, and the short
#: texts) or ``pairs`` (Simhash: block tables); ``check`` and ``distances`` (pairs).
Progress = Callable[[str, int, "int | None"], object]


@dataclass(frozen=True)
class DedupSettings:
    """The options of ``neardup dedup`` (see its ``--help``).

    ``search`` None is the shingle LSH, or the Simhash search when ``max_distance`` or
    ``scheme`` is given (they name it). Under the Simhash search ``max_distance`` None and
    ``verify`` "auto" choose both by input size (:mod:`neardup.dedup.auto`). A setting the
    chosen search and check do not read is refused by :meth:`check` (see
    :meth:`not_applicable`); None means "not given"."""

    max_distance: int | None = None
    verify: str = "auto"
    threshold: float | None = None
    content_weight: float | None = None
    num_perm: int | None = None
    keep: str = "first"
    scheme: tuple[int, int] | None = None
    mu: float | None = None
    explain: bool = False
    keep_records: bool = False
    meta_fields: tuple[str, ...] | None = None
    batch_size: int = BATCH_RECORDS
    search: str | None = None
    #: Bytes the LSH search holds in memory before it spills to ``tmp_dir`` (None: 4 GB).
    memory: int | None = None
    #: Where spilled parts go (None: the system's temporary directory).
    tmp_dir: str | None = None

    @property
    def method(self) -> str:
        """The search that runs: ``search``, else simhash when a distance or a block scheme
        is given, else lsh."""
        if self.search is not None:
            return self.search
        return "simhash" if self.max_distance is not None or self.scheme is not None else "lsh"

    def not_applicable(self) -> list[tuple[str, str]]:
        """The settings given that the chosen search and check do not read, each with why."""
        if self.search is not None and self.search not in SEARCHES:
            return []  # check() names the unknown search
        method, verify = self.method, self.verify
        found: list[tuple[str, str]] = []
        if method == "lsh":
            for name in ("max_distance", "scheme", "mu"):
                if getattr(self, name) is not None:
                    found.append((name, "it sets the Simhash search; add search='simhash'"))
            if verify not in ("auto", *LSH_VERIFY_MODES):
                why = f"{verify} checks Simhash candidates; LSH checks with jaccard, sketch or none"
                found.append(("verify", why))
            for name in ("content_weight", "num_perm", "meta_fields"):
                if getattr(self, name) is not None:
                    found.append((name, "it sets verify 'combined' or 'minhash' of Simhash candidates"))
            return found
        for name in ("memory", "tmp_dir"):
            if getattr(self, name) is not None:
                found.append((name, "the Simhash search holds its fingerprints in memory; it never spills"))
        if verify == "auto" and self.max_distance is not None:
            verify = "none"  # a distance given by hand is searched as given, unchecked
        explained = self.explain
        uses = {
            "content_weight": verify == "combined" or explained,
            "num_perm": verify in ("minhash", "combined") or explained,
            "meta_fields": verify == "combined" or explained,
        }
        for name, used in uses.items():
            if getattr(self, name) is not None and not used:
                found.append((name, f"verify={verify!r} does not read it"))
        if self.threshold is not None and verify == "none":
            found.append(("threshold", "verify='none' checks nothing"))
        return found

    def check(self, bits: int) -> None:
        """Refuse settings that cannot run with ``bits``-bit fingerprints, before any input."""
        if self.search is not None and self.search not in SEARCHES:
            raise ConfigError(f"unknown search {self.search!r}; choose one of {', '.join(SEARCHES)}")
        unused = self.not_applicable()
        if unused:
            name, why = unused[0]
            raise ConfigError(f"{name} does not apply to the {self.method} search: {why}")
        if self.method == "simhash":
            self.verifier("none" if self.verify == "auto" else self.verify)
        check_keep(self.keep)
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be 1 or more; got {self.batch_size!r}")
        if self.mu is not None and self.mu < 0:
            raise ConfigError(f"mu must be 0 or more; got {self.mu!r}")
        if self.scheme is not None and self.max_distance is None:
            raise ConfigError("a block scheme guarantees a distance: give max_distance with scheme")
        if self.max_distance is not None:
            block_scheme_of(bits, self.max_distance, self.scheme)

    def option(self, name: str) -> Any:
        """A setting's value, its default where it was not given."""
        value = getattr(self, name)
        return DEFAULT_OPTIONS[name] if value is None else value

    def verifier(self, mode: str) -> Verifier:
        """The verifier of ``mode`` (a resolved one, not "auto") under these settings."""
        return Verifier(mode, self.threshold, self.option("content_weight"), self.option("num_perm"))

    @property
    def lsh_verify(self) -> str:
        """The check of the LSH search's candidates (``auto`` is ``jaccard``)."""
        return "jaccard" if self.verify == "auto" else self.verify

    @property
    def auto_texts(self) -> bool:
        """Whether the automatic Simhash search may verify: texts are then kept only up to
        :data:`~neardup.dedup.auto.AUTO_TEXT_LIMIT` records."""
        return self.verify == "auto" and self.max_distance is None and not self.explain

    @property
    def keeps_texts(self) -> bool:
        """Whether the Simhash search keeps the texts (the LSH search keeps its own)."""
        return self.explain or self.verify not in ("none", "auto") or self.auto_texts

    def lsh_settings(self) -> CandidateSettings:
        """The shingle LSH: pairs of Jaccard >= the threshold found in two bands with
        probability >= 0.99, pre-filtered on 512 sketch bins kept at 8 bits. A higher threshold needs fewer
        bands; they never drop below the bins the check reads."""
        threshold = self.threshold or LSH_THRESHOLD
        rows, hits, recall = CandidateSettings.rows, CandidateSettings.hits, CandidateSettings.recall
        bands = max(bands_for(threshold, rows, recall, hits), -(-LSH_CHECK_BINS // rows), hits)
        return CandidateSettings(threshold=threshold, bands=bands, check_bins=LSH_CHECK_BINS)


DEFAULT_SETTINGS = DedupSettings()


def block_scheme_of(bits: int, max_distance: int, scheme: tuple[int, int] | None) -> BlockScheme | None:
    """The hand-given block scheme, or None for the auto-tuned one; either way the distance
    is checked against the width here, before any input is read."""
    if scheme is None:
        BlockScheme(bits, max_distance)  # raises for a distance the width cannot have
        return None
    num_blocks, key_blocks = scheme
    try:
        chosen = BlockScheme(bits, max_distance, num_blocks, key_blocks)
    except ConfigError as exc:
        raise ConfigError(f"scheme=({num_blocks}, {key_blocks}): {exc}") from exc
    if chosen.table_count > MAX_TABLES:
        raise ConfigError(
            f"scheme=({num_blocks}, {key_blocks}) means C({num_blocks},{key_blocks}) = "
            f"{chosen.table_count:,} tables, each a sort of the whole input; choose a scheme with at "
            f"most {MAX_TABLES} tables"
        )
    return chosen


# -- stage 1: sketches or fingerprints ---------------------------------------------------------


@dataclass
class Collected:
    """What later stages need of every record, in input order. ``texts`` and ``metadata``
    are empty when no verification or explanation needs them."""

    bits: int
    fingerprints: npt.NDArray[np.uint64]
    ids: PackedIds = field(default_factory=PackedIds)
    #: Text lengths, kept for ``keep="longest"`` only (8 bytes each).
    lengths: array[int] = field(default_factory=lambda: array("q"))
    records: list[Record] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    metadata: list[list[str] | None] = field(default_factory=list)
    empty: int = 0
    #: The LSH search's sketches and texts (None under the Simhash search).
    sketches: Sketches | None = None
    #: Positions of the records without features (Simhash search): they pair with nothing.
    featureless: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


def collect(
    records: Iterable[Record],
    fingerprinter: Fingerprinter,
    settings: DedupSettings = DEFAULT_SETTINGS,
    *,
    progress: Progress | None = None,
    workspace: Workspace | None = None,
) -> Collected:
    """Sketch (LSH) or fingerprint (Simhash) every record, normalized by the fingerprinter's
    normalizer; ids are checked for uniqueness as they arrive. Under LSH the sketches hold
    what exceeds ``workspace``'s budget in its directory (no workspace: all in memory), so
    the workspace must stay open until the pairs are checked. Texts and metadata are kept
    only when pairs are verified or explained, and under the automatic search only while
    there are no more than :data:`~neardup.dedup.auto.AUTO_TEXT_LIMIT` records (beyond it,
    it does not verify)."""
    keep_texts = settings.keeps_texts
    limit = AUTO_TEXT_LIMIT if settings.auto_texts else None
    collected = Collected(bits=fingerprinter.bits, fingerprints=_no_fingerprints(fingerprinter.bits))
    sketcher = None
    if settings.method == "lsh":
        # The sketches keep the texts themselves; only the records in pairs are fingerprinted.
        keep_texts, limit = False, None
        sketcher = Sketcher(settings.lsh_settings(), fingerprinter.normalizer, workspace=workspace)
    stage = "fingerprint" if sketcher is None else "sketch"
    parts: list[npt.NDArray[np.uint64]] = []
    seen = SeenIds(collected.ids)
    progress = progress or _no_progress
    progress(stage, 0, None)
    try:
        for group in batches(records, settings.batch_size):
            seen.check(group, len(collected.ids))
            if sketcher is not None:
                sketcher.add(group)
            else:
                parts.append(_fingerprint(group, fingerprinter, collected))
            collected.ids.extend(record.id for record in group)
            if settings.keep == "longest":
                collected.lengths.extend(len(record.text) for record in group)
            if settings.keep_records:
                collected.records.extend(group)
            if keep_texts:
                collected.texts.extend(record.text for record in group)
                names = settings.option("meta_fields")
                collected.metadata.extend(metadata_of(r.fields, names) for r in group)
                if limit is not None and len(collected.texts) > limit:
                    keep_texts = False
                    collected.texts, collected.metadata = [], []
            progress(stage, len(group), None)
    except BaseException:
        if sketcher is not None:
            sketcher.close()  # stop the sketching workers; the error goes on
        raise
    if parts:
        collected.fingerprints = np.concatenate(parts)
    if sketcher is not None:
        collected.sketches = sketcher.finish()
        collected.empty = collected.sketches.empty
    return collected


def _fingerprint(
    group: list[Record], fingerprinter: Fingerprinter, collected: Collected
) -> npt.NDArray[np.uint64]:
    """The group's fingerprints; its records without features are noted (they pair with nothing)."""
    encoded = fingerprinter.encode_many([r.text for r in group], [r.title for r in group])
    blank = np.flatnonzero(np.asarray(encoded.feature_counts) == 0)
    collected.featureless.extend((blank + len(collected.ids)).tolist())
    collected.empty += len(blank)
    return np.asarray(encoded.fingerprints, dtype=np.uint64)


def _no_progress(stage: str, advance: int, total: int | None) -> None:
    """What a stage reports to when nobody asked."""


def _no_fingerprints(bits: int) -> npt.NDArray[np.uint64]:
    return np.empty((0, 2) if bits == 128 else (0,), dtype=np.uint64)


# -- stage 2: candidates -----------------------------------------------------------------------


class CandidatePairs(NamedTuple):
    """The candidate pairs, the search that found them (distance and the verification it
    asks for), its block scheme and bucket statistics. The Simhash search holds its pairs
    with their distances (``pairs``); the LSH search's are in ``tiles`` (``pairs`` empty)."""

    pairs: Pairs
    search: Search
    scheme: BlockScheme | None
    stats: BucketStats
    tiles: PairTiles | None = None

    @property
    def size(self) -> int:
        """How many candidates there are."""
        return self.tiles.count if self.tiles is not None else len(self.pairs)


def search_candidates(
    collected: Collected, settings: DedupSettings = DEFAULT_SETTINGS, *, progress: Progress | None = None
) -> CandidatePairs:
    """The candidate stage of the chosen search: the band collisions of the shingle LSH, or
    every pair within the resolved distance, found exactly by the Simhash block index
    (:func:`~neardup.dedup.batch.find_all_pairs`; ``max_distance`` None and ``verify`` "auto"
    follow the fingerprints and text lengths while the texts are kept, else the input size:
    :func:`~neardup.dedup.auto.resolve_search`). Returns the candidates
    with the search that was resolved."""
    n, bits = len(collected), collected.bits
    if collected.sketches is not None:
        return _lsh_candidates(collected, collected.sketches, settings.lsh_verify, progress)
    # One rule everywhere: a text without features pairs with nothing, so it is not searched.
    searched = np.ones(n, dtype=bool)
    searched[collected.featureless] = False
    rows = np.flatnonzero(searched)
    search = _resolved_search(collected, rows, settings)
    scheme = block_scheme_of(bits, search.max_distance, settings.scheme)
    scheme = scheme or BlockScheme.auto(n, bits, search.max_distance)
    stats = BucketStats()
    if progress is not None:
        progress("pairs", 0, scheme.table_count)
    found = find_all_pairs(
        collected.fingerprints[rows],
        search.max_distance,
        bits=bits,
        scheme=scheme,
        mu=settings.option("mu"),
        stats=stats,
        progress=None if progress is None else lambda done: progress("pairs", done, scheme.table_count),
    )
    pairs = Pairs(rows[found.i], rows[found.j], found.distance)
    return CandidatePairs(pairs, search, scheme, stats)


def _resolved_search(collected: Collected, rows: npt.NDArray[np.intp], settings: DedupSettings) -> Search:
    """The Simhash search's distance and check: ``-k auto`` from the searched records'
    fingerprints and text lengths (templated text crowds within a few bits, so the input size
    alone cannot say how wide a search the check can afford), a given ``-k`` as given."""
    n, bits = len(collected), collected.bits
    if settings.max_distance is not None or len(collected.texts) != n:
        return resolve_search(n, bits, settings.max_distance, settings.verify)
    texts = collected.texts
    lengths = np.fromiter((len(texts[row]) for row in rows.tolist()), dtype=np.int64, count=len(rows))
    fingerprints = collected.fingerprints[rows]
    return resolve_search(n, bits, None, settings.verify, fingerprints=fingerprints, lengths=lengths)


def _lsh_candidates(
    collected: Collected, sketches: Sketches, verify: str, progress: Progress | None
) -> CandidatePairs:
    """The pairs of the shingle LSH (their distances are measured once they are checked)."""
    report = progress or _no_progress
    bands = sketches.search.settings.band_count + 1  # and the short texts
    report("bands", 0, bands)
    tiles = band_candidates(sketches, lambda done: report("bands", done, bands))
    search = Search(collected.bits, verify, "lsh")
    none = np.zeros(0, dtype=np.int64)
    return CandidatePairs(Pairs(none, none, np.zeros(0, dtype=np.uint8)), search, None, BucketStats(), tiles)


# -- stage 3: the check -------------------------------------------------------------------------


def check_candidates(
    collected: Collected,
    candidates: CandidatePairs,
    fingerprinter: Fingerprinter,
    settings: DedupSettings = DEFAULT_SETTINGS,
    *,
    progress: Progress | None = None,
) -> Pairs:
    """The candidates that the resolved verification confirms, texts compared as the
    fingerprinter's normalizer sees them (the same text to the fingerprint and its check).
    Under the LSH search their distances are 0 until :func:`measure_distances`."""
    pairs, mode = candidates.pairs, candidates.search.verify
    if progress is not None:
        progress("check", 0, candidates.size)
    if collected.sketches is not None and candidates.tiles is not None:
        report = progress or _no_progress
        total = candidates.size
        step = lambda done: report("check", done, total)  # noqa: E731 - a callback
        kept = confirm(collected.sketches, candidates.tiles, mode, fingerprinter.normalizer, step)
        pairs = Pairs(kept[:, 0], kept[:, 1], np.zeros(len(kept), dtype=np.uint8))
    elif mode != "none" and len(pairs):
        _require_texts(collected, f"verify {mode}")
        result = settings.verifier(mode).verify_texts(
            pairs.distance,
            pairs.i,
            pairs.j,
            collected.texts,
            collected.metadata,
            fingerprinter,
            normalizer=fingerprinter.normalizer,
        )
        kept_rows = result.kept
        pairs = Pairs(pairs.i[kept_rows], pairs.j[kept_rows], pairs.distance[kept_rows])
    if progress is not None and collected.sketches is None:
        progress("check", candidates.size, candidates.size)
    return pairs


def measure_distances(
    collected: Collected, pairs: Pairs, fingerprinter: Fingerprinter, *, progress: Progress | None = None
) -> Pairs:
    """The pairs with the Hamming distance of their Simhash fingerprints (the ``distance`` of
    each output row): under the LSH search only the records in pairs are fingerprinted; the
    Simhash search measured them as it searched."""
    if collected.sketches is None:
        return pairs
    if progress is not None:
        progress("distances", 0, len(pairs))
    distance = pair_distances(collected.sketches, fingerprinter, pairs.i, pairs.j)
    if progress is not None:
        progress("distances", len(pairs), len(pairs))
    return Pairs(pairs.i, pairs.j, distance)


def _require_texts(collected: Collected, what: str) -> None:
    if len(collected.texts) != len(collected):
        raise ConfigError(
            f"{what} needs the texts, which collect() kept only for "
            f"{len(collected.texts)} of {len(collected)} records; collect with settings that verify"
        )


def explain(
    collected: Collected,
    pairs: Pairs,
    search: Search,
    fingerprinter: Fingerprinter,
    settings: DedupSettings = DEFAULT_SETTINGS,
) -> list[Explanation]:
    """Why each pair was kept: under the LSH search the check's evidence (the estimate it
    read, the exact shingle Jaccard) and the shared features; under the Simhash search the
    shingle Jaccard, the metadata estimate, the combined score and the shared features."""
    if not len(pairs):
        return []
    if collected.sketches is not None:
        return explain_candidates(collected.sketches, pairs, fingerprinter)
    _require_texts(collected, "explain")
    return explain_pairs(
        settings.verifier(search.verify),
        fingerprinter,
        collected.texts,
        collected.metadata,
        pairs.i,
        pairs.j,
        pairs.distance,
        normalizer=fingerprinter.normalizer,
    )


# -- stage 4: clusters and the keep policy -----------------------------------------------------


def cluster(collected: Collected, pairs: Pairs, settings: DedupSettings = DEFAULT_SETTINGS) -> Clusters:
    """Connected components of the pairs, each with the representative the keep policy picks."""
    lengths = collected.lengths if settings.keep == "longest" else None
    return cluster_records(len(collected), pairs.i, pairs.j, keep=settings.keep, lengths=lengths)


# -- the whole job -----------------------------------------------------------------------------


@dataclass(frozen=True)
class DedupResult:
    """One run: record ids in input order; pairs and clusters by position in ``ids``; the
    summary ``neardup dedup`` prints; bucket statistics; seconds per stage; the records when
    ``keep_records`` asked; one explanation per pair when ``explain`` asked."""

    ids: Sequence[RecordId]
    pairs: Pairs
    clusters: Clusters
    summary: Summary
    search: Search
    candidates: int
    bucket_stats: BucketStats
    seconds: dict[str, float]
    records: list[Record] | None = None
    explanations: list[Explanation] | None = None

    def pair_rows(self) -> Iterator[dict[str, Any]]:
        """``{"a": id, "b": id, "distance": d}`` per pair (plus the explanation when asked)."""
        ids = self.ids
        rows = zip(self.pairs.i.tolist(), self.pairs.j.tolist(), self.pairs.distance.tolist(), strict=True)
        explanations: list[Explanation | None] = [None] * len(self.pairs)
        if self.explanations is not None:
            explanations = list(self.explanations)
        for (a, b, distance), explanation in zip(rows, explanations, strict=True):
            row: dict[str, Any] = {"a": ids[a], "b": ids[b], "distance": distance}
            yield row if explanation is None else {**row, **explanation.as_dict()}

    def cluster_rows(self) -> Iterator[dict[str, Any]]:
        """``{"id": id, "cluster": representative id}`` for every record, in input order."""
        ids = self.ids
        for record_id, representative in zip(ids, self.clusters.representative.tolist(), strict=True):
            yield {"id": record_id, "cluster": ids[representative]}

    def selected_records(self, kept: bool = True) -> Iterator[Record]:
        """The records the keep policy keeps (or, ``kept=False``, drops), in input order."""
        if self.records is None:
            raise ConfigError("the records were not kept: run with DedupSettings(keep_records=True)")
        for record, keep in zip(self.records, self.clusters.keep.tolist(), strict=True):
            if keep == kept:
                yield record


def dedup_documents(
    records: Iterable[Record],
    *,
    fingerprinter: Fingerprinter | None = None,
    settings: DedupSettings = DEFAULT_SETTINGS,
    progress: Progress | None = None,
) -> DedupResult:
    """Find the near-duplicates of ``records`` (ids unique): sketches or fingerprints,
    candidate pairs, their check and distances, clusters and the keep policy, as ``neardup
    dedup`` does with the same settings, within ``settings.memory`` (what exceeds it goes to
    files under ``settings.tmp_dir``, removed when the call returns or raises).
    ``fingerprinter`` defaults to ``Fingerprinter()``."""
    fingerprinter = fingerprinter or Fingerprinter()
    settings.check(fingerprinter.bits)
    timer = _StageTimer()
    with Workspace(settings.option("memory"), settings.tmp_dir) as workspace:
        collected = collect(records, fingerprinter, settings, progress=progress, workspace=workspace)
        timer.lap("sketches" if collected.sketches is not None else "fingerprints")
        candidates = search_candidates(collected, settings, progress=progress)
        timer.lap("candidates")
        pairs = check_candidates(collected, candidates, fingerprinter, settings, progress=progress)
        timer.lap("verification")
        pairs = measure_distances(collected, pairs, fingerprinter, progress=progress)
        timer.lap("distances")
        clusters = cluster(collected, pairs, settings)
        timer.lap("clusters")
        explanations = None
        if settings.explain:
            explanations = explain(collected, pairs, candidates.search, fingerprinter, settings)
            timer.lap("explanations")
    search, sketches = candidates.search, collected.sketches
    summary = Summary.of(
        pairs,
        clusters,
        empty=collected.empty,
        max_distance=search.max_distance,
        keep=settings.keep,
        verify=search.verify,
        rejected=candidates.size - len(pairs),
        method=search.method,
        threshold=LSH_THRESHOLD if sketches is None else sketches.search.settings.threshold,
    )
    return DedupResult(
        ids=collected.ids,
        pairs=pairs,
        clusters=clusters,
        summary=summary,
        search=search,
        candidates=candidates.size,
        bucket_stats=candidates.stats,
        seconds=timer.seconds,
        records=collected.records if settings.keep_records else None,
        explanations=explanations,
    )


class _StageTimer:
    """Seconds per stage, each lap ending the stage named."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._clock = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage], self._clock = now - self._clock, now

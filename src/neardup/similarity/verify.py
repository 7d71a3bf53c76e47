"""Verification of Simhash candidate pairs: exact shingle Jaccard, its MinHash estimate, or
seed 000's combined score of content distance and metadata similarity; and explanations.

Simhash alone is weak in two regimes (measured in docs/verification.md): short texts, where a
light edit moves the fingerprint by 10-16 bits, and searches with a large ``max_distance``
(k = 10 or more, for recall), where unrelated documents fall within k. Both are served by
searching wide and then confirming each candidate with a second, independent similarity:

==========  ==================================================================================
none        keep every candidate (Simhash alone)
jaccard     exact Jaccard of the texts' character shingles >= threshold (needs the texts)
minhash     MinHash estimate of that Jaccard >= threshold (needs only stored signatures)
combined    μ/(H + 1) + (1 − μ)·Ĵ(metadata) >= threshold (seed 000 eq. 1; metadata signatures)
==========  ==================================================================================

Shingles are character n-grams of the letters and digits of the normalized text (spaces and
punctuation dropped): bigrams for text with Chinese characters, 5-grams otherwise. A pair
whose normalized texts are identical is never rejected, whatever the mode and the metadata.
Metadata are the record's ``tags``/``keywords``/``refs`` lists (or fields the caller names),
or the text's top weighted words when a record has none.

Texts and metadata are normalized by the fingerprinter's :class:`Normalizer` when one is given
(``normalizer=``, else ``fingerprinter.normalizer``), so a setting such as ``to_simplified``
means the same thing to the fingerprints and to their verification.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ..arrays import sorted_unique
from ..errors import ConfigError, InputError
from ..fingerprint.fingerprinter import Fingerprinter
from ..text.normalize import Normalizer
from .minhash import (
    DEFAULT_CONTENT_WEIGHT,
    DEFAULT_NUM_PERM,
    DEFAULT_SEED,
    MinHasher,
    combined_score,
    estimate_jaccard,
    hash_elements,
)
from .shingles import Shingles, legacy_shingle_keys
from .sketches import (
    CHECK_MARGIN,
    SKETCH_VERSION,
    SKETCH_WORDS,
    shingle_signatures,
    sketch_similarity,
    text_sketches,
)

if TYPE_CHECKING:
    from ..index.simhash_index import Match
    from ..storage.base import Key, StoredRecord

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
UInt64Array = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]

VERIFY_MODES: tuple[str, ...] = ("none", "minhash", "jaccard", "combined", "sketch")
#: Decision thresholds per mode, chosen on the dev sets (docs/verification.md): shingle
#: Jaccard 0.5 (gold near-duplicates of zh_short have median 0.9, unrelated candidates < 0.3);
#: the combined score 0.2, which keeps H <= 3 whatever the metadata and asks more metadata
#: agreement at each further bit (H = 4: Ĵ >= 0.2, 5: 0.5, 6: 0.71, 7: 0.875, 8: 1).
DEFAULT_THRESHOLDS: Mapping[str, float] = {
    "none": 0.0,
    "jaccard": 0.5,
    "minhash": 0.5,
    "combined": 0.2,
    "sketch": 0.5,
}
#: The shingle keys MinHash signatures are made of (see ``Verifier.shingle_version``).
SHINGLE_VERSION = 2
#: Record fields read as metadata sets when the caller names none.
META_FIELDS: tuple[str, ...] = ("tags", "keywords", "refs")
#: Top weighted words of the text that stand in for missing metadata.
KEYWORDS = 10
_SPLIT = re.compile(r"[,;|，；、]")


# -- sets: shingles of texts, metadata of records ----------------------------------------------


def metadata_of(fields: Mapping[str, Any] | None, names: Sequence[str] = META_FIELDS) -> list[str] | None:
    """The metadata set of one record: the values of the named fields (lists, or strings
    split at , ; | and their Chinese forms), or None when the record has none of them."""
    if fields is None:
        return None
    values: list[str] = []
    for name in names:
        value = fields.get(name)
        if value is None:
            continue
        if isinstance(value, str):
            values.extend(part for part in _SPLIT.split(value))
        elif isinstance(value, (list, tuple)):
            values.extend(str(item) for item in value if item is not None)
        else:
            values.append(str(value))
    cleaned = [value.strip() for value in values if value.strip()]
    return cleaned or None


def top_keywords(
    fingerprinter: Fingerprinter, texts: Sequence[str], count: int = KEYWORDS
) -> list[list[str]]:
    """The ``count`` heaviest features of each text under the fingerprinter's weighting:
    the stand-in for metadata a record lacks (seed 000 uses keywords first of all)."""
    return [[feature.token for feature in fingerprinter.features(text)[:count]] for text in texts]


def metadata_sets(
    metadata: Sequence[Sequence[str] | None],
    texts: Sequence[str],
    fingerprinter: Fingerprinter | None,
    normalizer: Normalizer | None = None,
) -> list[list[str]]:
    """Normalized metadata sets, the text's top keywords filling in where a record has none
    (which needs ``fingerprinter``)."""
    normalizer = normalizer or Normalizer()
    missing = [i for i, values in enumerate(metadata) if not values]
    if missing and fingerprinter is None:
        raise InputError("records without metadata need a fingerprinter for their top keywords")
    keywords = top_keywords(fingerprinter, [texts[i] for i in missing]) if fingerprinter and missing else []
    filled: list[Sequence[str]] = [values or [] for values in metadata]
    for position, words in zip(missing, keywords, strict=True):
        filled[position] = words
    flat = normalizer.normalize_many([value for values in filled for value in values])
    result: list[list[str]] = []
    start = 0
    for values in filled:
        result.append(sorted({value.strip() for value in flat[start : start + len(values)] if value.strip()}))
        start += len(values)
    return result


def text_digests(texts: Sequence[str], normalizer: Normalizer | None = None) -> UInt64Array:
    """A 64-bit digest of each normalized text, so identical texts are recognised cheaply."""
    normalized = (normalizer or Normalizer()).normalize_many(list(texts))
    return hash_elements(" ".join(text.split()) for text in normalized)


# -- the verifier ------------------------------------------------------------------------------


class HasDistance(Protocol):
    @property
    def distance(self) -> int: ...


M = TypeVar("M", bound=HasDistance)


@dataclass(frozen=True)
class Verdicts:
    """Per candidate pair: the similarity the mode compares (Jaccard, estimate or combined
    score; 1.0 for ``none``) and whether the pair is kept."""

    similarity: FloatArray
    kept: BoolArray


@dataclass(frozen=True)
class Verifier:
    """Confirms or rejects Simhash candidates (see the module docstring for the modes).

    ``threshold`` defaults to :data:`DEFAULT_THRESHOLDS` of the mode; ``content_weight`` is
    μ of the combined score; ``num_perm`` and ``seed`` fix the MinHash functions, so they
    must match the settings the stored signatures were made with.
    """

    mode: str = "none"
    threshold: float | None = None
    content_weight: float = DEFAULT_CONTENT_WEIGHT
    num_perm: int = DEFAULT_NUM_PERM
    seed: int = DEFAULT_SEED
    #: The text sketch of mode ``sketch`` (:data:`~neardup.similarity.sketches.SKETCH_LAYOUTS`).
    sketch_version: int = SKETCH_VERSION
    #: The shingle keys of mode ``minhash``: 2 those of :func:`shingles_of`, 1 those of
    #: indexes made before (:func:`~neardup.similarity.shingles.legacy_shingle_keys`).
    shingle_version: int = SHINGLE_VERSION
    #: Mode ``sketch``: a candidate whose estimate lies within :data:`CHECK_MARGIN` of the
    #: threshold is decided by the exact Jaccard of the texts, as batch dedup decides (an
    #: index with it keeps its texts; :meth:`near_threshold` says which candidates).
    check_texts: bool = False
    minhasher: MinHasher = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in VERIFY_MODES:
            raise ConfigError(f"unknown verification {self.mode!r}; choose one of {', '.join(VERIFY_MODES)}")
        if self.shingle_version not in (1, SHINGLE_VERSION):
            raise ConfigError(f"unknown shingle version {self.shingle_version!r}; this neardup knows 1 and 2")
        if self.check_texts and self.mode != "sketch":
            raise ConfigError(f"check_texts refines the sketch estimate; verification {self.mode!r} has none")
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"the verification threshold must lie in [0, 1]; got {self.threshold!r}")
        if not 0.0 <= self.content_weight <= 1.0:
            raise ConfigError(f"the content weight mu must lie in [0, 1]; got {self.content_weight!r}")
        object.__setattr__(self, "minhasher", MinHasher(self.num_perm, self.seed))

    @property
    def cutoff(self) -> float:
        return DEFAULT_THRESHOLDS[self.mode] if self.threshold is None else self.threshold

    @property
    def uses_signatures(self) -> bool:
        """Whether the mode compares stored signatures (what an index keeps per key)."""
        return self.mode in ("minhash", "combined", "sketch")

    def settings(self) -> dict[str, Any]:
        """Every field, as an index's meta records its verifier (``Verifier(**settings)``)."""
        settings: dict[str, Any] = {
            "mode": self.mode,
            "threshold": self.cutoff,
            "content_weight": self.content_weight,
            "num_perm": self.num_perm,
            "seed": self.seed,
        }
        if self.mode == "sketch":
            settings["sketch_version"] = self.sketch_version
            settings["check_texts"] = self.check_texts
        if self.mode == "minhash":
            settings["shingle_version"] = self.shingle_version
        return settings

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Verifier:
        """The verifier an index's meta records (:meth:`settings`); a sketch index that
        records no sketch version was made with version 1."""
        return cls(**stored_settings(settings))

    @property
    def signature_words(self) -> int:
        """uint64 words of one signature: the 512-byte text sketch, or num_perm MinHash values."""
        return SKETCH_WORDS if self.mode == "sketch" else self.num_perm

    # -- signatures: what an index stores beside each fingerprint ------------------------------

    def signatures(
        self,
        texts: Sequence[str],
        metadata: Sequence[Sequence[str]] | None = None,
        normalizer: Normalizer | None = None,
    ) -> UInt64Array:
        """(n, num_perm) uint64 signatures to store beside the fingerprints: of the text
        shingles for ``minhash`` (texts normalized by ``normalizer``), of the metadata sets for
        ``combined`` (normalized sets from :func:`metadata_sets`)."""
        if self.mode == "sketch":
            return text_sketches(texts, normalizer, self.sketch_version)
        if self.mode == "minhash" and self.shingle_version == 1:
            return self.minhasher.signatures_of_keys(*legacy_shingle_keys(texts, normalizer))
        if self.mode == "minhash":
            return shingle_signatures(Shingles.of(texts, normalizer), self.minhasher)
        if self.mode == "combined":
            if metadata is None or len(metadata) != len(texts):
                raise InputError("combined verification needs one metadata set per text (see metadata_sets)")
            return self.minhasher.signatures(metadata)
        raise ConfigError(
            f"verification {self.mode!r} compares no signatures; use sketch, minhash or combined"
        )

    # -- decisions -----------------------------------------------------------------------------

    def similarity(self, distances: npt.ArrayLike, jaccard: npt.ArrayLike) -> FloatArray:
        """What the mode compares with the threshold: the Jaccard (estimate) itself, or the
        combined score of the distances and the metadata estimate."""
        if self.mode == "combined":
            return combined_score(distances, jaccard, self.content_weight)
        if self.mode == "none":
            return np.ones(np.shape(distances), dtype=np.float64)
        return np.asarray(jaccard, dtype=np.float64)

    def decide(
        self, distances: npt.ArrayLike, jaccard: npt.ArrayLike, identical: npt.ArrayLike | None = None
    ) -> Verdicts:
        """Keep a candidate when its similarity reaches the threshold, or its texts are
        identical (``identical``, when the caller knows)."""
        similarity = self.similarity(distances, jaccard)
        kept = similarity >= self.cutoff - 1e-12
        if identical is not None:
            kept |= np.asarray(identical, dtype=bool)
        return Verdicts(similarity=similarity, kept=np.asarray(kept, dtype=bool))

    def near_threshold(self, similarity: npt.ArrayLike) -> BoolArray:
        """Which sketch estimates lie so near the threshold that the texts decide them
        (none unless :attr:`check_texts`)."""
        values = np.asarray(similarity, dtype=np.float64)
        if not self.check_texts:
            return np.zeros(values.shape, dtype=bool)
        return np.asarray(np.abs(values - self.cutoff) <= CHECK_MARGIN, dtype=bool)

    def verify_signatures(
        self,
        distances: npt.ArrayLike,
        left: npt.ArrayLike,
        right: npt.ArrayLike,
        identical: npt.ArrayLike | None = None,
    ) -> Verdicts:
        """Candidates with their signatures (rows of ``left`` against rows of ``right``, or one
        query signature against many): the index query path."""
        if self.mode in ("none", "jaccard"):
            if self.mode == "jaccard":
                raise ConfigError("jaccard verification needs the texts; use verify_texts or minhash")
            return self.decide(distances, np.ones(np.shape(distances)), identical)
        if self.mode == "sketch":
            return self.decide(distances, sketch_similarity(left, right), identical)
        return self.decide(distances, estimate_jaccard(left, right), identical)

    def verify_matches(
        self, matches: Sequence[M], query_signature: npt.ArrayLike, signatures: npt.ArrayLike
    ) -> list[M]:
        """The matches of one query that survive: ``signatures[t]`` is the stored signature of
        ``matches[t]`` (any object with a ``distance``, e.g. :class:`neardup.Match`)."""
        if not matches or self.mode == "none":
            return list(matches)
        distances = np.array([match.distance for match in matches], dtype=np.int64)
        query = np.asarray(query_signature, dtype=np.uint64).reshape(1, -1)
        result = self.verify_signatures(distances, query, np.asarray(signatures, dtype=np.uint64))
        return [match for match, keep in zip(matches, result.kept.tolist(), strict=True) if keep]

    def verify_texts(
        self,
        distances: npt.ArrayLike,
        i: npt.ArrayLike,
        j: npt.ArrayLike,
        texts: Sequence[str],
        metadata: Sequence[Sequence[str] | None] | None = None,
        fingerprinter: Fingerprinter | None = None,
        normalizer: Normalizer | None = None,
    ) -> Verdicts:
        """Candidate pairs (i[t], j[t]) of a batch of texts at ``distances``: the batch path.

        ``metadata`` holds each record's raw metadata (None where it has none: the text's top
        keywords under ``fingerprinter`` stand in). Texts are compared as ``normalizer``
        (default: the fingerprinter's) sees them. Only the texts of candidates are read."""
        normalizer = _normalizer_of(normalizer, fingerprinter)
        involved, left, right = _involved(i, j)
        chosen = [texts[k] for k in involved.tolist()]
        digests = text_digests(chosen, normalizer)
        identical = digests[left] == digests[right]
        if self.mode == "none":
            return self.decide(distances, np.ones(len(left)), identical)
        if self.mode == "jaccard":
            return self.decide(distances, Shingles.of(chosen, normalizer).jaccard(left, right), identical)
        sets = None
        if self.mode == "combined":
            sets = _metadata_for(involved, chosen, metadata, fingerprinter, normalizer)
        signatures = self.signatures(chosen, sets, normalizer)
        return self.verify_signatures(distances, signatures[left], signatures[right], identical)


def stored_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Verifier settings as recorded, with what older indexes left implicit filled in."""
    filled = dict(settings)
    if filled.get("mode") == "sketch":
        filled.setdefault("sketch_version", 1)
        filled.setdefault("check_texts", False)
    if filled.get("mode") == "minhash":
        filled.setdefault("shingle_version", 1)
    return filled


def _normalizer_of(normalizer: Normalizer | None, fingerprinter: Fingerprinter | None) -> Normalizer | None:
    """The normalizer to compare texts with: the one given, else the fingerprinter's (so a
    verification never sees texts differently from the fingerprints it confirms)."""
    if normalizer is not None:
        return normalizer
    return fingerprinter.normalizer if fingerprinter is not None else None


def _involved(i: npt.ArrayLike, j: npt.ArrayLike) -> tuple[IntArray, IntArray, IntArray]:
    """The records named by the pairs, and the pairs renumbered into that list."""
    left, right = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
    involved = np.asarray(sorted_unique(np.concatenate([left, right])), dtype=np.int64)
    return involved, np.searchsorted(involved, left), np.searchsorted(involved, right)


def _metadata_for(
    involved: IntArray,
    texts: Sequence[str],
    metadata: Sequence[Sequence[str] | None] | None,
    fingerprinter: Fingerprinter | None,
    normalizer: Normalizer | None = None,
) -> list[list[str]]:
    raw = [None if metadata is None else metadata[k] for k in involved.tolist()]
    return metadata_sets(raw, texts, fingerprinter, normalizer)


# -- explanations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Explanation:
    """Why a pair was kept: its distance, the texts' shingle Jaccard, the heaviest features
    both texts share and the evidence of the check that kept it: the metadata estimate and
    the combined score (Simhash search), or the estimate the LSH check read."""

    distance: int
    jaccard: float
    metadata_jaccard: float | None
    score: float | None
    shared: list[str]
    estimate: float | None = None

    def as_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"jaccard": round(self.jaccard, 4)}
        for name in ("estimate", "metadata_jaccard", "score"):
            value = getattr(self, name)
            if value is not None:
                row[name] = round(value, 4)
        row["shared"] = self.shared
        return row


def shared_features(
    fingerprinter: Fingerprinter, texts: Sequence[str], i: Iterable[int], j: Iterable[int], top: int = 5
) -> list[list[str]]:
    """The ``top`` features of each pair that occur in both texts, heaviest (by the smaller of
    the two weights) first; each text's features are computed once."""
    cache: dict[int, dict[str, float]] = {}

    def weights(index: int) -> dict[str, float]:
        if index not in cache:
            cache[index] = {feature.token: feature.weight for feature in fingerprinter.features(texts[index])}
        return cache[index]

    result: list[list[str]] = []
    for a, b in zip(i, j, strict=True):
        left, right = weights(a), weights(b)
        common = sorted(
            left.keys() & right.keys(), key=lambda token: (-min(left[token], right[token]), token)
        )
        result.append(common[:top])
    return result


def explain_pairs(
    verifier: Verifier,
    fingerprinter: Fingerprinter,
    texts: Sequence[str],
    metadata: Sequence[Sequence[str] | None] | None,
    i: npt.ArrayLike,
    j: npt.ArrayLike,
    distances: npt.ArrayLike,
    top: int = 5,
    normalizer: Normalizer | None = None,
) -> list[Explanation]:
    """Explanations of pairs (i[t], j[t]) whatever the verification mode: exact shingle
    Jaccard, MinHash estimate of the metadata sets (top keywords where a record has none) and
    seed 000's combined score; texts normalized as in :meth:`Verifier.verify_texts`."""
    hamming = np.asarray(distances, dtype=np.int64)
    if not len(hamming):
        return []
    normalizer = _normalizer_of(normalizer, fingerprinter)
    involved, left, right = _involved(i, j)
    chosen = [texts[k] for k in involved.tolist()]
    jaccard = Shingles.of(chosen, normalizer).jaccard(left, right)
    sets = _metadata_for(involved, chosen, metadata, fingerprinter, normalizer)
    signatures = verifier.minhasher.signatures(sets)
    estimate = estimate_jaccard(signatures[left], signatures[right])
    scores = combined_score(hamming, estimate, verifier.content_weight)
    shared = shared_features(fingerprinter, chosen, left.tolist(), right.tolist(), top)
    return [
        Explanation(int(d), float(jac), float(est), float(score), words)
        for d, jac, est, score, words in zip(
            hamming.tolist(), jaccard.tolist(), estimate.tolist(), scores.tolist(), shared, strict=True
        )
    ]


def check_verifiable(verifier: Verifier, signatures: npt.ArrayLike | None) -> None:
    """Refuse a verification an index cannot do before anything is read."""
    if not verifier.uses_signatures:
        raise ConfigError(
            f"Verifier({verifier.mode!r}) needs the texts, which an index does not keep; "
            "use sketch, minhash or combined (signatures stored beside the fingerprints)"
        )
    if signatures is None:
        raise InputError(f"{verifier.mode} verification needs the queries' signatures (Verifier.signatures)")


def verify_with_records(
    found: list[list[Match]],
    verifier: Verifier,
    signatures: npt.ArrayLike | None,
    stored: Mapping[Key, StoredRecord],
    refine: Callable[[IntArray, list[Key], FloatArray], FloatArray] | None = None,
) -> list[list[Match]]:
    """Keep the matches that their stored signatures confirm (``stored``: the records the
    caller read, which check-and-add reuses for their cluster ids). A stored record without
    a signature cannot be verified and is kept as Simhash found it. ``refine`` (query rows,
    keys, estimates → similarities) replaces estimates the caller can decide better, e.g.
    by the exact Jaccard of texts near the threshold."""
    check_verifiable(verifier, signatures)
    queries = np.asarray(signatures, dtype=np.uint64)
    width = verifier.signature_words
    if queries.ndim != 2 or queries.shape != (len(found), width):
        raise InputError(f"the query signatures must be ({len(found)}, {width}); got {queries.shape}")
    # Every (query, signed match) pair in one comparison: a call per query cost a third of a
    # band index's check-and-add in numpy overheads alone.
    rows: list[int] = []
    blobs: list[bytes] = []
    signed: list[Match] = []
    for row, matches in enumerate(found):
        for match in matches:
            record = stored.get(match.key)
            if record is not None and record.signature is not None:
                rows.append(row)
                blobs.append(record.signature)
                signed.append(match)
    if not signed:
        return found
    stacked = stacked_signatures(blobs, width)
    distances = np.array([match.distance for match in signed], dtype=np.int64)
    verdict = verifier.verify_signatures(distances, queries[rows], stacked)
    if refine is not None:
        similarity = refine(
            np.asarray(rows, dtype=np.int64), [match.key for match in signed], verdict.similarity
        )
        verdict = verifier.decide(distances, similarity)
    dropped = {id(match) for match, keep in zip(signed, verdict.kept.tolist(), strict=True) if not keep}
    return [[match for match in matches if id(match) not in dropped] for matches in found]


def stacked_signatures(blobs: Sequence[bytes], width: int) -> npt.NDArray[np.uint64]:
    """Stored signatures (little-endian uint64 bytes, as an index stores them) back as one
    (n, width) array, refusing a blob of another width (a store written under other settings)."""
    wrong = next((len(blob) for blob in blobs if len(blob) != 8 * width), None)
    if wrong is not None:
        raise InputError(f"a stored signature has {wrong} bytes; expected {8 * width}")
    return np.frombuffer(b"".join(blobs), dtype="<u8").astype(np.uint64).reshape(len(blobs), width)

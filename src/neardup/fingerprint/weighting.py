"""Feature weighting schemes, selected by name.

A scheme splits the weight of token t in document d into a *static* factor that depends on
the token alone (computed once per distinct token and cached by the fingerprinter) and a
*per-occurrence* part that needs the document (term frequency, word length relative to the
document, presence in the title). Every occurrence adds ``static(t) · occurrence(t, d)``, so
repeated tokens sum to their term frequency without a per-token Python loop.

=============  ================================================================================
``tf``         weight = count of the token in the document (seeds 001, 004)
``tfidf``      tf · idf, tf = n_td / Σ_k n_kd
``tfidf-len``  tf · idf · (1 + len(ℓ)), len(ℓ) = exp(−(ℓ − μ)² / (2σ²)) (seed 000 eq. 6): μ = 4.51,
               σ = 2.207 for Chinese words (the seed's normal fit to 10,000 CSSCI terms); for Latin
               words μ = 6.1, σ = 2.4, the lengths of Reuters content words (the seed's Chinese fit
               would favour 4-letter English words over longer, more topical ones)
``composite``  seed 003: tf · idf · pos(t) · (1 + (ℓ − ℓmin)/(ℓmax − ℓmin)) · 5^signal · 5^title, where
               ℓmin/ℓmax are the shortest/longest kept word of the document, signal words come from
               ``zh_signal.txt`` and title words are body words that also occur in the title. The
               paper's constants are lost; :data:`POS_WEIGHTS` are ours (nouns and verbs, which carry
               subject and predicate, above modifiers and function words)
``fields``     seed 002, for database rows (see :mod:`neardup.records`): features are given with
               their weights, so there is no text weighting to apply here
=============  ================================================================================

Stopwords and tokens without a letter or digit (punctuation, spaces) get weight 0 in every
scheme and are dropped; in ``composite`` signal words are kept even when they are stopwords.

Saturation (every scheme). A token's ``count`` in the formulas above is its term frequency
after :func:`saturate`: ``raw`` is the count itself (the seeds' classic weight), ``log`` is
1 + ln n, ``bm25`` is n·(k1 + 1)/(n + k1) (BM25's saturation without its length part, which a
Simhash, being scale-free per document, does not need). Linear counts let one token repeated
on every line (``n`` of a ``\\n`` left in the text, a boilerplate word) outweigh the rest of the
document and set every bit. Then no feature may hold more than ``max_share`` of a document's
total weight (:func:`cap_shares`; not in ``tf``, see :meth:`Weighting.share_cap`). Both are
settings of :class:`~neardup.fingerprint.config.FingerprintConfig`; docs/fingerprints.md has
the measurements behind the defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError
from ..text.tokenize import han_character_mask, word_character_mask
from .idf import IdfModel

WEIGHTINGS: tuple[str, ...] = ("tf", "tfidf", "tfidf-len", "composite", "fields")
TERM_FREQUENCIES: tuple[str, ...] = ("raw", "log", "bm25")
#: BM25's usual k1: a count's weight approaches k1 + 1 = 2.2 times a single occurrence's.
BM25_K1 = 1.2
#: How much of its uncapped weight a capped feature keeps above the cap (see cap_shares).
ORDER_MARGIN = 1e-12

CHINESE_LENGTH_MEAN, CHINESE_LENGTH_SD = 4.51, 2.207
LATIN_LENGTH_MEAN, LATIN_LENGTH_SD = 6.1, 2.4
SIGNAL_FACTOR = 5.0
TITLE_FACTOR = 5.0

# jieba part-of-speech tag → weight for `composite`; the first matching prefix wins.
POS_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("vn", 1.0),  # verbal noun
    ("n", 1.0),  # nouns: n, nr, ns, nt, nz, ng
    ("eng", 1.0),  # Latin words (names, codes, English text)
    ("ngram", 1.0),  # character n-grams carry no tag
    ("i", 0.9),  # idioms
    ("l", 0.9),  # fixed phrases
    ("j", 0.9),  # abbreviations
    ("v", 0.8),  # verbs
    ("a", 0.6),  # adjectives
    ("t", 0.5),  # time words
    ("s", 0.5),  # place words
    ("m", 0.4),  # numerals
    ("q", 0.4),  # measure words
    ("d", 0.3),  # adverbs
    ("f", 0.3),  # direction words
    ("r", 0.3),  # pronouns
)
DEFAULT_POS_WEIGHT = 0.2  # prepositions, conjunctions, particles, interjections, unknown

FIELDS_ON_TEXT = (
    "the 'fields' weighting applies to database rows, not text; choose another weighting, "
    "or use Fingerprinter.fingerprint_features_many (or `neardup records`) for rows"
)


def pos_weight(tag: str) -> float:
    for prefix, weight in POS_WEIGHTS:
        if tag.startswith(prefix):
            return weight
    return DEFAULT_POS_WEIGHT


@dataclass(frozen=True)
class Weighting:
    """A named scheme plus the word lists and IDF model it reads."""

    name: str
    idf: IdfModel | None
    stopwords: frozenset[str]
    signal_words: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.name not in WEIGHTINGS:
            raise ConfigError(f"unknown weighting {self.name!r}; choose one of {', '.join(WEIGHTINGS)}")

    @property
    def needs_pos(self) -> bool:
        return self.name == "composite"

    @property
    def uses_title(self) -> bool:
        return self.name == "composite"

    def share_cap(self, max_share: float) -> float:
        """The cap :func:`cap_shares` applies: none in ``tf``, the seeds' weighting, whose
        examples it would change (seed 004's two features, counted 4 and 5, would tie)."""
        return 1.0 if self.name == "tf" else max_share

    def static_weight(self, token: str, pos: str = "") -> float:
        """The per-token factor of one token; 0 drops it."""
        codepoints = np.frombuffer(token.encode("utf-32-le"), dtype="<u4")
        return float(
            self.static_weights(
                [token],
                [pos],
                lengths=np.array([len(token)]),
                has_word_character=np.array([word_character_mask(codepoints).any()]),
                has_han=np.array([han_character_mask(codepoints).any()]),
            )[0]
        )

    def static_weights(
        self,
        tokens: Sequence[str],
        tags: Sequence[str],
        lengths: npt.NDArray[np.int64],
        has_word_character: npt.NDArray[np.bool_],
        has_han: npt.NDArray[np.bool_],
    ) -> npt.NDArray[np.float64]:
        """The per-token factors of many tokens at once (the fingerprinter's cache fill)."""
        if self.name == "fields":
            raise ConfigError(FIELDS_ON_TEXT)
        count = len(tokens)
        stop = np.fromiter(map(self.stopwords.__contains__, tokens), dtype=bool, count=count)
        signal = np.zeros(count, dtype=bool)
        if self.name == "composite":
            signal = np.fromiter(map(self.signal_words.__contains__, tokens), dtype=bool, count=count)
            stop &= ~signal
        weights: npt.NDArray[np.float64] = (has_word_character & ~stop).astype(np.float64)
        if self.name == "tf":
            return weights
        if self.idf is not None:
            lookup, default = self.idf.idf.get, self.idf.default
            weights *= np.fromiter(map(lookup, tokens, repeat(default)), dtype=np.float64, count=count)
        if self.name == "tfidf-len":
            mean = np.where(has_han, CHINESE_LENGTH_MEAN, LATIN_LENGTH_MEAN)
            sd = np.where(has_han, CHINESE_LENGTH_SD, LATIN_LENGTH_SD)
            weights *= 1.0 + np.exp(-((lengths - mean) ** 2) / (2 * sd * sd))
        elif self.name == "composite":
            by_tag = {tag: pos_weight(tag) for tag in set(tags)}
            weights *= np.fromiter((by_tag[tag] for tag in tags), dtype=np.float64, count=count)
            weights *= np.where(signal, SIGNAL_FACTOR, 1.0)
        return weights


def saturated_counts(counts: npt.NDArray[np.int64], term_frequency: str) -> npt.NDArray[np.float64]:
    """The weight of ``counts`` occurrences of a token relative to one (1 stays 1 in every
    form, so a document without repeats keeps its fingerprint)."""
    n = counts.astype(np.float64)
    if term_frequency == "raw":
        return n
    if term_frequency == "log":
        return 1.0 + np.log(n)
    if term_frequency == "bm25":
        return n * (BM25_K1 + 1.0) / (n + BM25_K1)
    raise ConfigError(f"term_frequency must be one of {', '.join(TERM_FREQUENCIES)}; got {term_frequency!r}")


def cap_shares(
    weights: npt.NDArray[np.float64], documents: npt.NDArray[np.int64], count: int, max_share: float
) -> npt.NDArray[np.float64]:
    """``weights`` (one per distinct feature of a document, documents non-decreasing) with
    none above ``max_share`` of its document's total before capping. A single cut against
    the uncapped total, not an iteration to a fixed point: it takes an outlier down towards
    the rest and never reorders two features. A document of fewer than 1/max_share features
    ends with them all equal, so a heading or a byline is no longer the hash of its one
    heaviest word (two such lines sharing that word collided at -k 3)."""
    if max_share >= 1.0 or not len(weights):
        return weights
    totals = np.bincount(documents, weights=np.abs(weights), minlength=count)
    limit = max_share * totals[documents]
    # Capped features keep the order of their uncapped weights by a margin far below the
    # Simhash tie tolerance (1e-9 of the total): the fingerprint sees them equal, an
    # explanation (``Fingerprinter.features``) still lists the heavier first.
    capped: npt.NDArray[np.float64] = np.where(weights > limit, limit + ORDER_MARGIN * weights, weights)
    return capped


def saturate(
    columns: npt.NDArray[np.int64],
    documents: npt.NDArray[np.int64],
    weights: npt.NDArray[np.float64],
    count: int,
    term_frequency: str,
    max_share: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Occurrences ``(column, document, weight)``, documents non-decreasing → one entry per
    distinct (document, column), grouped by column (:func:`group_pairs`), its weight the
    per-occurrence weight times :func:`saturated_counts`, capped by :func:`cap_shares`.
    Every occurrence of a token in a document carries the same weight (static factor, title
    and length factors), so the first one stands for all."""
    if term_frequency == "raw" and max_share >= 1.0:
        return columns, documents, weights
    if not len(columns):
        return columns, documents, weights
    first, counts = group_pairs(documents, columns)
    documents, columns = documents[first], columns[first]
    return (
        columns,
        documents,
        saturated_weights(weights[first], counts, documents, count, term_frequency, max_share),
    )


def saturated_weights(
    weights: npt.NDArray[np.float64],
    counts: npt.NDArray[np.int64],
    documents: npt.NDArray[np.int64],
    count: int,
    term_frequency: str,
    max_share: float,
) -> npt.NDArray[np.float64]:
    """The weights of distinct (document, feature) pairs occurring ``counts`` times, each
    occurrence weighing ``weights``: saturated, then capped."""
    return cap_shares(weights * saturated_counts(counts, term_frequency), documents, count, max_share)


def dense_ranks(values: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct values of non-negative ``values`` (ascending) and the rank of each value
    among them, by a scatter over ``max + 1`` flags instead of a sort: the values are token
    cache columns, a dense range."""
    present = np.zeros(int(values.max()) + 1 if len(values) else 0, dtype=bool)
    present[values] = True
    distinct = np.flatnonzero(present)
    rank = np.empty(len(present), dtype=np.int64)
    rank[distinct] = np.arange(len(distinct), dtype=np.int64)
    return distinct, rank[values]


def stable_order(values: npt.NDArray[np.int64], limit: int) -> npt.NDArray[np.intp]:
    """``np.argsort(values, kind="stable")`` for values in ``[0, limit)``, as radix passes
    over 16-bit digits: numpy sorts uint16 by radix, in linear time, where int64 keys go
    through a comparison sort several times slower."""
    order: npt.NDArray[np.intp] = np.argsort(values.astype(np.uint16), kind="stable")
    shift = 16
    while limit > 1 << shift:
        digits = (values[order] >> shift).astype(np.uint16)
        order = order[np.argsort(digits, kind="stable")]
        shift += 16
    return order


def group_pairs(
    documents: npt.NDArray[np.int64], columns: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]:
    """Each distinct (document, column) pair of occurrences whose documents are non-decreasing,
    as the index of its first occurrence and its number of occurrences, ordered by column
    and, within a column, by document. One stable radix sort by column does it: it keeps the
    occurrences of a column in document order. Per document the pairs come in column order,
    as from ``np.unique(documents · width + columns, return_index=True, return_counts=True)``,
    so sums over a document's pairs add in the same order."""
    distinct, rank = dense_ranks(columns)
    order = stable_order(rank, len(distinct))
    documents, rank = documents[order], rank[order]
    starts = np.empty(len(rank), dtype=bool)
    starts[:1] = True
    np.not_equal(rank[1:], rank[:-1], out=starts[1:])
    starts[1:] |= documents[1:] != documents[:-1]
    boundaries = np.flatnonzero(starts)
    counts = np.diff(np.append(boundaries, len(rank)))
    return order[boundaries], counts

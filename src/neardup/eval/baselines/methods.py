"""The methods the seeds compare Simhash with, and two external peers, for evaluation only.

Each takes a batch of texts and returns every near-duplicate pair it finds as
:class:`ScoredPairs` (``i < j``, sorted), the same shape ``neardup dedup`` produces, so the
same scorer and the same PAIRS/CLUSTERS writers serve all of them:

==============  =================================================================================
classic         seeds 001/002's classic Simhash: tf weights, the seed-001 Java hash, 64 bits, four
                16-bit tables (k = 3), no second hash
shingle         Broder's DSC: w-word shingles, mod-m sampling, resemblance of the samples >= t
imatch          Chowdhury's I-Match: the document's words with collection IDF in a band, one
                digest of the sorted survivors; equal digests are duplicates
vsm             vector space model: cosine of tf·idf word vectors >= t
pypi-simhash    the PyPI ``simhash`` package (char 4-grams, md5), pairs within k found exactly
minhash-lsh     datasketch MinHashLSH over the shingles ``--verify jaccard`` uses, candidates
                confirmed by their MinHash estimate >= t
==============  =================================================================================

``distance`` is the Hamming distance for the fingerprint methods and 1 − similarity for the
set and vector methods (0 for I-Match's digest collisions). The set methods build sparse
document × feature matrices and multiply them in row chunks: fine for the dev sets (10^4
documents), not meant for millions.
"""

from __future__ import annotations

import hashlib
import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ...blocks import BlockScheme
from ...dedup.batch import find_all_pairs
from ...errors import ConfigError, MissingDependencyError
from ...fingerprint.fingerprinter import Fingerprinter
from ...fingerprint.hashing import hash_tokens
from ...similarity.shingles import Shingles

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
UInt64Array = npt.NDArray[np.uint64]
#: Rows of the similarity product computed at a time: bounds the dense temporaries.
ROW_CHUNK = 512
_MIX = np.uint64(0x9E3779B97F4A7C15)


class ScoredPairs(NamedTuple):
    """Pairs ``i < j`` sorted by (i, j), with a distance (Hamming, or 1 − similarity)."""

    i: IntArray
    j: IntArray
    distance: FloatArray

    def __len__(self) -> int:
        return int(self.i.shape[0])


@dataclass(frozen=True)
class Baseline:
    """One method: its run function, the parameter its threshold means, and its default."""

    name: str
    run: Callable[..., ScoredPairs]
    parameter: str
    default: float
    summary: str


def _empty() -> ScoredPairs:
    return ScoredPairs(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))


def _sorted(i: IntArray, j: IntArray, distance: FloatArray) -> ScoredPairs:
    low, high = np.minimum(i, j), np.maximum(i, j)
    order = np.lexsort((high, low))
    return ScoredPairs(low[order], high[order], np.asarray(distance, dtype=np.float64)[order])


# -- tokens and sets ---------------------------------------------------------------------------


def _word_tokens(texts: Sequence[str]) -> list[list[str]]:
    """Normalized words (jieba for Chinese, words for Latin scripts), stopwords kept: the
    seeds tokenize before weighting, and the set methods need the raw sequence."""
    return Fingerprinter(idf="none").word_tokens_many(list(texts))


def _vocabulary(documents: list[list[str]]) -> tuple[IntArray, IntArray, int]:
    """(document of each occurrence, token id of each occurrence, vocabulary size)."""
    index: dict[str, int] = {}
    ids = [index.setdefault(token, len(index)) for tokens in documents for token in tokens]
    rows = np.repeat(np.arange(len(documents)), [len(tokens) for tokens in documents])
    return rows.astype(np.int64), np.asarray(ids, dtype=np.int64), len(index)


def word_shingles(documents: list[list[str]], width: int) -> tuple[IntArray, UInt64Array]:
    """(document, hash) of every w-word shingle; documents shorter than w give one shingle of
    all their words. The hash mixes the words' xxh3 hashes, so it is stable across runs."""
    vocabulary: dict[str, int] = {}
    token_ids = [[vocabulary.setdefault(t, len(vocabulary)) for t in tokens] for tokens in documents]
    token_hashes = hash_tokens(list(vocabulary), "xxh3_64") if vocabulary else np.zeros(0, np.uint64)
    rows: list[IntArray] = []
    hashes: list[UInt64Array] = []
    with np.errstate(over="ignore"):
        for document, ids in enumerate(token_ids):
            if not ids:
                continue
            values = token_hashes[np.asarray(ids, dtype=np.int64)]
            span = min(width, values.size)
            count = values.size - span + 1
            mixed = np.zeros(count, dtype=np.uint64)
            for offset in range(span):
                mixed = mixed * _MIX + values[offset : offset + count]
            rows.append(np.full(count, document, dtype=np.int64))
            hashes.append(mixed)
    if not rows:
        return np.empty(0, np.int64), np.empty(0, np.uint64)
    return np.concatenate(rows), np.concatenate(hashes)


def _binary_matrix(rows: IntArray, keys: npt.NDArray[Any], n: int) -> Any:
    """The n × distinct-keys 0/1 CSR matrix of (row, key) occurrences."""
    from scipy import sparse  # loaded on use: `neardup --help` must stay fast

    if keys.size == 0:
        return sparse.csr_matrix((n, 0), dtype=np.float64)
    _, columns = np.unique(keys, return_inverse=True)
    matrix = sparse.csr_matrix(
        (np.ones(rows.size), (rows, columns.reshape(-1))), shape=(n, int(columns.max()) + 1)
    )
    matrix.data[:] = 1.0  # repeated occurrences count once
    return matrix


def _pairs_above(
    matrix: Any, threshold: float, similarity: Callable[[IntArray, IntArray, FloatArray], FloatArray]
) -> ScoredPairs:
    """Pairs whose ``similarity(i, j, dot product)`` reaches ``threshold``, by row chunks of
    the sparse product (only pairs sharing a feature are ever looked at)."""
    n = matrix.shape[0]
    transposed = matrix.T.tocsc()
    left: list[IntArray] = []
    right: list[IntArray] = []
    distance: list[FloatArray] = []
    for start in range(0, n, ROW_CHUNK):
        product = (matrix[start : start + ROW_CHUNK] @ transposed).tocoo()
        a = product.row.astype(np.int64) + start
        b = product.col.astype(np.int64)
        upper = a < b
        a, b, dot = a[upper], b[upper], product.data[upper]
        value = similarity(a, b, dot)
        keep = value >= threshold - 1e-12
        left.append(a[keep])
        right.append(b[keep])
        distance.append(1.0 - value[keep])
    if not left:
        return _empty()
    return _sorted(np.concatenate(left), np.concatenate(right), np.concatenate(distance))


def _optional(package: str, purpose: str) -> Any:
    """An eval-extra package, imported only when its baseline runs (untyped: Any)."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise MissingDependencyError(package, "eval", purpose) from exc


# -- the methods -------------------------------------------------------------------------------


def classic_simhash(texts: Sequence[str], max_distance: float = 3) -> ScoredPairs:
    """Seeds 001/002: tf-weighted words, Java hash, 64 bits, k + 1 blocks of 64/(k + 1) bits."""
    k = int(max_distance)
    fingerprints = Fingerprinter(weighting="tf", hash="java", idf="none").fingerprint_many(list(texts))
    scheme = BlockScheme(64, k, k + 1, 1)
    pairs = find_all_pairs(fingerprints, k, scheme=scheme, split_threshold=float("inf"))
    return ScoredPairs(pairs.i, pairs.j, pairs.distance.astype(np.float64))


def shingle_dsc(
    texts: Sequence[str], threshold: float = 0.5, *, width: int = 4, sample: int = 4
) -> ScoredPairs:
    """Broder's DSC: resemblance of the sampled w-shingle sets (hash mod ``sample`` == 0)."""
    n = len(texts)
    rows, hashes = word_shingles(_word_tokens(texts), width)
    chosen = (hashes >> np.uint64(32)) % np.uint64(sample) == 0
    matrix = _binary_matrix(rows[chosen], hashes[chosen], n)
    sizes = np.asarray(matrix.sum(axis=1)).reshape(-1)

    def resemblance(a: IntArray, b: IntArray, common: FloatArray) -> FloatArray:
        union = sizes[a] + sizes[b] - common
        result: FloatArray = np.divide(common, union, out=np.zeros_like(common), where=union > 0)
        return result

    return _pairs_above(matrix, threshold, resemblance)


def imatch(texts: Sequence[str], max_df: float = 0.1, *, min_df: int = 1, min_terms: int = 1) -> ScoredPairs:
    """Chowdhury et al.'s I-Match: drop words in more than ``max_df`` of the documents (low
    IDF: they add no meaning), hash the sorted set of the rest; equal digests collide. A
    document left with fewer than ``min_terms`` words gets no digest (it matches nothing)."""
    documents = [sorted(set(tokens)) for tokens in _word_tokens(texts)]
    _, ids, size = _vocabulary(documents)
    frequency = np.bincount(ids, minlength=size)
    kept_token = (frequency <= max(max_df * len(texts), 1.0)) & (frequency >= min_df)
    groups: dict[bytes, list[int]] = {}
    start = 0
    for document, words in enumerate(documents):
        keep = kept_token[ids[start : start + len(words)]].tolist()
        start += len(words)
        survivors = [word for word, kept in zip(words, keep, strict=True) if kept]
        if len(survivors) < min_terms:
            continue
        digest = hashlib.sha1("\x1f".join(survivors).encode("utf-8")).digest()
        groups.setdefault(digest, []).append(document)
    left: list[int] = []
    right: list[int] = []
    for members in groups.values():
        for position, a in enumerate(members):
            left.extend([a] * (len(members) - position - 1))
            right.extend(members[position + 1 :])
    if not left:
        return _empty()
    i, j = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    return _sorted(i, j, np.zeros(i.size))


def vsm_cosine(texts: Sequence[str], threshold: float = 0.8) -> ScoredPairs:
    """Cosine of tf·idf word vectors (IDF fitted on the batch, smoothed) >= ``threshold``."""
    from scipy import sparse  # loaded on use: `neardup --help` must stay fast

    n = len(texts)
    rows, ids, size = _vocabulary(_word_tokens(texts))
    if size == 0:
        return _empty()
    counts = sparse.csr_matrix((np.ones(ids.size), (rows, ids)), shape=(n, size))
    counts.sum_duplicates()
    frequency = np.bincount(counts.indices, minlength=size)
    idf = np.log((1 + n) / (1 + frequency)) + 1.0
    weighted = counts.multiply(idf.reshape(1, -1)).tocsr()
    norms = np.sqrt(np.asarray(weighted.multiply(weighted).sum(axis=1)).reshape(-1))
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    unit = sparse.diags(scale) @ weighted

    def cosine(a: IntArray, b: IntArray, dot: FloatArray) -> FloatArray:
        return np.minimum(dot, 1.0)

    return _pairs_above(unit.tocsr(), threshold, cosine)


def pypi_simhash(texts: Sequence[str], max_distance: float = 3) -> ScoredPairs:
    """The PyPI ``simhash`` package's fingerprints (its own features), pairs within k found
    exactly by :func:`find_all_pairs`: the same answer its SimhashIndex gives, faster."""
    Simhash = _optional("simhash", "the pypi-simhash baseline").Simhash
    k = int(max_distance)
    fingerprints = np.array([Simhash(text).value for text in texts], dtype=np.uint64)
    pairs = find_all_pairs(fingerprints, k)
    return ScoredPairs(pairs.i, pairs.j, pairs.distance.astype(np.float64))


def minhash_lsh(
    texts: Sequence[str], threshold: float = 0.5, *, num_perm: int = 128, seed: int = 1
) -> ScoredPairs:
    """datasketch's MinHashLSH at ``threshold`` over the texts' character shingles (bigrams
    for Chinese, 5-grams otherwise), each candidate confirmed by its MinHash estimate."""
    datasketch = _optional("datasketch", "the minhash-lsh baseline")
    MinHash, MinHashLSH = datasketch.MinHash, datasketch.MinHashLSH
    shingles = Shingles.of(list(texts))
    bounds = np.searchsorted(shingles.documents, np.arange(len(texts) + 1))
    raw = shingles.hashes.astype("<u8").view(np.uint8).reshape(-1, 8)
    sketches: list[Any] = []
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    for document in range(len(texts)):
        sketch = MinHash(num_perm=num_perm, seed=seed)
        members = raw[bounds[document] : bounds[document + 1]]
        if len(members):
            sketch.update_batch([row.tobytes() for row in members])
            lsh.insert(document, sketch)
        sketches.append(sketch)
    left: list[int] = []
    right: list[int] = []
    distance: list[float] = []
    for document in range(len(texts)):
        if bounds[document + 1] == bounds[document]:
            continue
        for other in lsh.query(sketches[document]):
            if other > document:
                estimate = float(sketches[document].jaccard(sketches[other]))
                if estimate >= threshold:
                    left.append(document)
                    right.append(int(other))
                    distance.append(1.0 - estimate)
    if not left:
        return _empty()
    return _sorted(np.asarray(left, np.int64), np.asarray(right, np.int64), np.asarray(distance))


BASELINES: dict[str, Baseline] = {
    baseline.name: baseline
    for baseline in (
        Baseline("classic", classic_simhash, "max_distance", 3, "tf + Java hash Simhash, 4x16 blocks"),
        Baseline("shingle", shingle_dsc, "threshold", 0.5, "Broder DSC, 4-word shingles sampled 1/4"),
        Baseline("imatch", imatch, "max_df", 0.1, "I-Match: digest of words with df <= 10%"),
        Baseline("vsm", vsm_cosine, "threshold", 0.8, "VSM: tf-idf cosine"),
        Baseline("pypi-simhash", pypi_simhash, "max_distance", 3, "PyPI simhash package"),
        Baseline("minhash-lsh", minhash_lsh, "threshold", 0.5, "datasketch MinHashLSH"),
    )
}


def run_baseline(name: str, texts: Sequence[str], parameter: float | None = None) -> ScoredPairs:
    """Run baseline ``name`` with its threshold parameter (its default when None)."""
    if name not in BASELINES:
        raise ConfigError(f"unknown baseline {name!r}; choose one of {', '.join(BASELINES)}")
    baseline = BASELINES[name]
    value = baseline.default if parameter is None else parameter
    if not math.isfinite(value):  # int(nan) and int(inf) would fail deep inside
        raise ConfigError(f"the {baseline.parameter} of {name} must be a finite number; got {value!r}")
    return baseline.run(texts, value)

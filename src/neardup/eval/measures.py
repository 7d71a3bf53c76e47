"""The measurements behind the HTML report, as plain data (numpy arrays and dicts), so they
can be tested and tabulated without matplotlib.

Quality curves use labelled records; the speed and bucket figures use synthetic fingerprints
(uniform random, with planted near-duplicates, optionally skewed into one block value as in
seed 000's fig. 6), because their point is how the search scales, not what the texts say.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..blocks import BlockScheme
from ..dedup.batch import BucketStats, find_all_pairs, single_pass
from ..dedup.clusters import components
from ..fingerprint.fingerprinter import Fingerprinter
from ..fingerprint.hashing import HASH_NAMES, get_hash_function
from .metrics import Gold, pair_keys

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
UInt64Array = npt.NDArray[np.uint64]
SKEW_VALUE = np.uint64(0xBEEF)


@dataclass(frozen=True)
class Curve:
    """Precision and recall of Simhash alone at each max distance 0..K, for one weighting."""

    weighting: str
    distances: IntArray
    precision: FloatArray
    recall: FloatArray


def distance_curves(
    texts: Sequence[str],
    gold: Gold,
    weightings: Sequence[str],
    max_distance: int = 16,
    titles: Sequence[str | None] | None = None,
) -> tuple[list[Curve], dict[str, tuple[IntArray, IntArray]]]:
    """Per weighting: the P/R curve over k, and the Hamming distances of the gold
    near-duplicate pairs and of a sample of the other pairs (for the histograms)."""
    n = len(texts)
    gi, gj = gold.pairs()
    gold_keys = np.sort(pair_keys(gi, gj, n))
    scored = ~gold.related
    rng = np.random.default_rng(0)
    sample_i = rng.integers(0, n, 200_000)
    sample_j = rng.integers(0, n, 200_000)
    low, high = np.minimum(sample_i, sample_j), np.maximum(sample_i, sample_j)
    other = (low != high) & scored[low] & scored[high] & ~np.isin(pair_keys(low, high, n), gold_keys)
    low, high = low[other], high[other]
    curves: list[Curve] = []
    histograms: dict[str, tuple[IntArray, IntArray]] = {}
    for weighting in weightings:
        fingerprints = np.asarray(Fingerprinter(weighting=weighting).fingerprint_many(list(texts), titles))
        pairs = find_all_pairs(fingerprints, max_distance)
        keep = scored[pairs.i] & scored[pairs.j]
        found_distance = pairs.distance[keep].astype(np.int64)
        right = np.isin(pair_keys(pairs.i[keep], pairs.j[keep], n), gold_keys)
        ks = np.arange(max_distance + 1)
        found = np.array([np.count_nonzero(found_distance <= k) for k in ks], dtype=np.float64)
        hits = np.array([np.count_nonzero(right & (found_distance <= k)) for k in ks], dtype=np.float64)
        precision = np.divide(hits, found, out=np.ones_like(hits), where=found > 0)
        recall = hits / max(gi.size, 1)
        curves.append(Curve(weighting, ks, precision, recall))
        duplicate = np.bitwise_count(fingerprints[gi] ^ fingerprints[gj]).astype(np.int64)
        others = np.bitwise_count(fingerprints[low] ^ fingerprints[high]).astype(np.int64)
        histograms[weighting] = (duplicate, others)
    return curves, histograms


def planted(n: int, seed: int = 0, rate: float = 0.01, skew: float = 0.0, k: int = 3) -> UInt64Array:
    """n uniform fingerprints, ``rate`` of them copies within k bits of another; with ``skew``
    that share of them first gets one value in its top 16 bits (one oversized bucket)."""
    rng = np.random.default_rng(seed)
    fingerprints = rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)
    if skew:
        chosen = rng.random(n) < skew
        fingerprints[chosen] = (fingerprints[chosen] & np.uint64((1 << 48) - 1)) | (
            SKEW_VALUE << np.uint64(48)
        )
    copies = int(n * rate)
    target = rng.permutation(n)[:copies]
    source = rng.integers(0, n, copies)
    masks = np.zeros(copies, dtype=np.uint64)
    for _ in range(k):
        flip = rng.random(copies) < 0.7
        masks[flip] |= np.left_shift(np.uint64(1), rng.integers(0, 64, copies).astype(np.uint64))[flip]
    fingerprints[target] = fingerprints[source] ^ masks
    return fingerprints


def scaling_times(sizes: Sequence[int], k: int = 3, single_pass_limit: int = 20_000) -> dict[str, FloatArray]:
    """Seconds to cluster n fingerprints with the block index (all pairs + components) and with
    seed 002's Single-Pass baseline (skipped above ``single_pass_limit``: it is quadratic)."""
    index_s, single_s = [], []
    for n in sizes:
        fingerprints = planted(n, seed=n)
        started = time.perf_counter()
        pairs = find_all_pairs(fingerprints, k)
        components(n, pairs.i, pairs.j)
        index_s.append(time.perf_counter() - started)
        if n <= single_pass_limit:
            started = time.perf_counter()
            single_pass(fingerprints, k)
            single_s.append(time.perf_counter() - started)
        else:
            single_s.append(float("nan"))
    return {
        "n": np.asarray(sizes, dtype=np.float64),
        "index": np.array(index_s),
        "single_pass": np.array(single_s),
    }


def hash_measures(
    tokens: Sequence[str], names: Sequence[str] = HASH_NAMES
) -> dict[str, tuple[float, FloatArray]]:
    """Per hash function: tokens per second (pure calls, no cache) and the share of ones at
    each of the 64 bit positions over ``tokens`` (0.5 everywhere is a balanced hash)."""
    result: dict[str, tuple[float, FloatArray]] = {}
    shifts = np.arange(64, dtype=np.uint64)
    for name in names:
        function = get_hash_function(name, 64)
        started = time.perf_counter()
        values = [function(token) for token in tokens]
        rate = len(tokens) / max(time.perf_counter() - started, 1e-9)
        array = np.array(values, dtype=np.uint64)
        ones = ((array[:, None] >> shifts) & np.uint64(1)).mean(axis=0)
        result[name] = (rate, ones.astype(np.float64))
    return result


def bucket_measures(n: int, skew: float, k: int = 3) -> dict[str, object]:
    """Bucket sizes of the first table of BlockScheme(64, k) on a skewed collection, and the
    candidates and seconds of the exact search without and with seed 000's second hash."""
    fingerprints = planted(n, seed=6, skew=skew, k=k)
    scheme = BlockScheme(64, k)
    table = scheme.tables[0]
    keys = table.extract(fingerprints.reshape(-1, 1))
    sizes = np.unique(keys, return_counts=True)[1].astype(np.int64)
    runs: dict[str, tuple[float, int, int]] = {}
    for label, threshold in (("without", float("inf")), ("with", None)):
        stats = BucketStats()
        started = time.perf_counter()
        pairs = find_all_pairs(fingerprints, k, scheme=scheme, split_threshold=threshold, stats=stats)
        runs[label] = (time.perf_counter() - started, stats.candidates, len(pairs))
    return {"bucket_sizes": sizes, "runs": runs, "scheme": scheme.describe()}

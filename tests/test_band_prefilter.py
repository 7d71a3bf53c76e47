"""The band bins' prefilter of a band index: candidates whose band bins rule out a match are
dropped before their records are read, and the answers stay those of the unfiltered search."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from neardup import Index
from neardup.similarity.bands import BandScheme
from neardup.similarity.sketches import (
    CHECK_MARGIN,
    PREFILTER_MISS,
    estimate_floor,
    estimate_from_bins,
    estimate_from_packed_bins,
)
from neardup.storage.base import Candidates

from .conftest import REPOSITORY


def binomial_below(bins: int, p: float, count: int) -> float:
    """P(Binomial(bins, p) < count)."""
    return sum(math.comb(bins, k) * p**k * (1 - p) ** (bins - k) for k in range(count))


@pytest.mark.parametrize("jaccard", [0.0, 0.2, 0.42, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("bins", [1, 48, 120])
def test_the_floor_is_the_binomial_quantile(bins: int, jaccard: float) -> None:
    floor = estimate_floor(bins, jaccard)
    # the fewest agreeing bins whose estimate reaches the floor
    estimates = [estimate_from_bins([1] * k + [0] * (bins - k), [1] * bins) for k in range(bins + 1)]
    kept = next(k for k, estimate in enumerate(estimates) if estimate >= floor)
    p = jaccard + (1 - jaccard) / 256
    assert binomial_below(bins, p, kept) <= PREFILTER_MISS
    assert kept == 0 or binomial_below(bins, p, kept + 1) > PREFILTER_MISS
    assert estimate_floor(bins, min(1.0, jaccard + 0.05)) >= floor


def test_packed_bins_estimate_what_their_bytes_estimate() -> None:
    """Bins packed eight to a word (a compact record's band bins) give the estimate of their
    bytes, for every count of agreeing bytes in a word, top bits included, one row against
    many."""
    rng = np.random.default_rng(8)
    left = np.frombuffer(rng.bytes(4000 * 48), dtype=np.uint64).reshape(4000, 6).copy()
    right = left.copy()
    changed = rng.random((4000, 48)) < rng.random((4000, 1))  # from no byte to every byte
    right.view(np.uint8)[changed] ^= rng.integers(1, 256, size=int(changed.sum())).astype(np.uint8)
    right.view(np.uint8)[:10] ^= np.uint8(0x80)  # bytes differing in their top bit alone
    assert np.array_equal(
        estimate_from_packed_bins(left, right), estimate_from_bins(left.view(np.uint8), right.view(np.uint8))
    )
    assert np.array_equal(
        estimate_from_packed_bins(left[0], right),
        estimate_from_bins(left[0].view(np.uint8), right.view(np.uint8)),
    )
    with pytest.raises(Exception, match="cannot be compared"):
        estimate_from_packed_bins(left[:, :2], right[:, :3])


def test_the_floor_refuses_no_bins() -> None:
    with pytest.raises(Exception, match="one bin or more"):
        estimate_floor(0, 0.5)


def test_a_chance_collision_is_dropped_and_a_near_duplicate_kept() -> None:
    scheme = BandScheme()
    rng = np.random.default_rng(7)
    width = scheme.bands * scheme.rows
    query = rng.integers(0, 256, size=512, dtype=np.uint8)
    chance = rng.integers(0, 256, size=512, dtype=np.uint8)
    chance[:3] = query[:3]  # one band shared, nothing else
    other = rng.integers(0, 256, size=512, dtype=np.uint8)
    near = np.where(rng.random(512) < 0.5, query, other).astype(np.uint8)
    near[:3] = query[:3]

    def words(sketch: np.ndarray) -> np.ndarray:
        return scheme.compose(np.zeros((1, 1), dtype=np.uint64), sketch.view(np.uint64).reshape(1, -1))

    stored = np.vstack([words(chance), words(near)])
    floor = estimate_floor(width, 0.5 - CHECK_MARGIN)
    similar = estimate_from_bins(scheme.bins(np.vstack([words(query)] * 2)), scheme.bins(stored))
    assert similar[0] < floor <= similar[1]
    found = Candidates(np.array([0, 0]), ["chance", "near"], stored)
    assert found.subset(np.flatnonzero(similar >= floor)).keys == ["near"]


def read_texts(name: str) -> list[tuple[str, str]]:
    lines = (REPOSITORY / "examples" / name).read_text(encoding="utf-8").splitlines()
    return [(str(row["id"]), row["text"]) for row in map(json.loads, lines)]


@pytest.mark.parametrize("name", ["en_news.jsonl", "zh_news.jsonl"])
def test_the_prefilter_changes_no_answer(name: str, tmp_path: Path) -> None:
    texts = read_texts(name)
    stored, asked = texts[::2], [text for _, text in texts[1::2]]
    with Index.open(str(tmp_path / "index.db")) as index:
        index.add_texts(stored)
        prefilter = index.deduper.prefilter
        assert prefilter is not None
        seen = {"in": 0, "out": 0}

        def counted(queries: np.ndarray, rows: np.ndarray, words: np.ndarray) -> np.ndarray:
            kept = prefilter(queries, rows, words)
            seen["in"] += rows.size
            seen["out"] += int(kept.sum())
            return kept

        index.deduper.prefilter = counted
        filtered = index.query_texts(asked)
        index.deduper.prefilter = None
        unfiltered = index.query_texts(asked)
    assert seen["in"] > 0 and seen["out"] <= seen["in"]
    assert [[(m.key, m.distance) for m in row] for row in filtered] == [
        [(m.key, m.distance) for m in row] for row in unfiltered
    ]
    assert sum(map(len, filtered)) > 0


def test_a_simhash_index_has_no_prefilter(tmp_path: Path) -> None:
    from neardup.index.config import IndexConfig

    with Index.open(str(tmp_path / "simhash.db"), IndexConfig(max_distance=3)) as index:
        assert index.deduper.prefilter is None

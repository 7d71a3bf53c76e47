"""The default search of ``dedup_documents`` / ``neardup dedup`` (shingle LSH) against brute
force: every pair of exact shingle Jaccard >= 0.5 among dev documents is found and kept, and
nothing below it is, whether the texts decide (small inputs) or the kept sketch bins do
(inputs above LSH_TEXT_LIMIT, forced here by lowering the limit)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import neardup.dedup.pipeline as pipeline
from neardup import Fingerprinter
from neardup.dedup.pipeline import DedupSettings, dedup_documents
from neardup.dedup.verify import Shingles
from neardup.io import read_records

from .conftest import shared_file


def exact_pairs(texts: list[str], normalizer: Any) -> dict[tuple[int, int], float]:
    """Every pair i < j with its exact shingle Jaccard, for the pairs sharing any shingle."""
    shingles = Shingles.of(texts, normalizer)
    matrix, sizes = shingles.matrix(), shingles.sizes
    common = (matrix @ matrix.T).tocoo()
    upper = common.row < common.col
    i, j, shared = common.row[upper], common.col[upper], common.data[upper]
    jaccard = shared / (sizes[i] + sizes[j] - shared)
    return {(int(a), int(b)): float(s) for a, b, s in zip(i, j, jaccard, strict=True)}


@pytest.fixture(scope="module")
def dev_sample() -> list[Any]:
    records = list(read_records(shared_file("dev/zh_news.jsonl")))
    return records[:700]


@pytest.mark.parametrize("text_limit", [200_000, 0], ids=["texts decide", "sketch decides"])
def test_the_default_finds_what_brute_force_finds(
    dev_sample: list[Any], text_limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "LSH_TEXT_LIMIT", text_limit)
    fingerprinter = Fingerprinter()
    result = dedup_documents(dev_sample, fingerprinter=fingerprinter)
    assert result.search.method == "lsh"
    truth = exact_pairs([r.text for r in dev_sample], fingerprinter.normalizer)
    wanted = {pair for pair, similarity in truth.items() if similarity >= 0.5}
    found = set(zip(result.pairs.i.tolist(), result.pairs.j.tolist(), strict=True))
    assert len(wanted) > 50
    if text_limit:
        # The texts decide: exactly the brute-force pairs, barring an LSH miss (p < 0.01 each
        # at J = 0.5, far less above; none expected in a few hundred pairs of higher J).
        assert found <= wanted and len(wanted - found) <= 2
    else:
        # The 512 kept bins decide: only pairs near the threshold may be judged wrongly.
        wrong = (wanted ^ found) - {pair for pair in wanted | found if abs(truth.get(pair, 0) - 0.5) < 0.1}
        assert not wrong
        assert len(wanted ^ found) <= 0.05 * len(wanted)
    # Every pair carries the Hamming distance of its fingerprints.
    fingerprints = result_fingerprints(fingerprinter, dev_sample)
    for a, b, distance in zip(result.pairs.i, result.pairs.j, result.pairs.distance, strict=True):
        assert distance == bin(fingerprints[a] ^ fingerprints[b]).count("1")


def result_fingerprints(fingerprinter: Fingerprinter, records: list[Any]) -> list[int]:
    return [int(value) for value in np.asarray(fingerprinter.fingerprint_many([r.text for r in records]))]


def test_simhash_search_stays_available_and_exact() -> None:
    records = list(read_records(shared_file("dev/zh_short.jsonl")))[:400]
    result = dedup_documents(records, settings=DedupSettings(candidates="simhash"))
    assert result.search.method == "simhash" and result.search.max_distance == 16
    by_hand = dedup_documents(records, settings=DedupSettings(max_distance=3))
    assert by_hand.search == (3, "none", "simhash")

"""On the labelled dev sets, gold near-duplicate pairs must be much closer in Hamming distance
than unrelated pairs. The figures are printed (run with ``-s`` to see them) and
benchmarks/dev_separation.py gives the full precision/recall table."""

from __future__ import annotations

import random
from itertools import combinations

import numpy as np
import pytest

from neardup import Fingerprinter

from .conftest import read_jsonl, shared_file

NEAR_LEVELS = {"original", "light", "medium"}


def _pairs(records: list[dict]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    groups: dict[str, list[int]] = {}
    for position, record in enumerate(records):
        if record["level"] in NEAR_LEVELS:
            groups.setdefault(record["cluster"], []).append(position)
    near = [pair for members in groups.values() for pair in combinations(members, 2)]
    rng = random.Random(7)
    unrelated: list[tuple[int, int]] = []
    while len(unrelated) < 5000:
        a, b = rng.randrange(len(records)), rng.randrange(len(records))
        if a != b and records[a]["cluster"] != records[b]["cluster"]:
            unrelated.append((a, b))
    return near, unrelated


@pytest.mark.parametrize("name", ["zh_news", "en_news"])
@pytest.mark.parametrize("weighting", ["tfidf-len", "tf", "composite"])
def test_near_duplicates_are_closer_than_unrelated_pairs(name: str, weighting: str, capsys) -> None:
    records = read_jsonl(shared_file(f"dev/{name}.jsonl"))
    fingerprints = Fingerprinter(weighting=weighting).fingerprint_many(
        [record["text"] for record in records], [record.get("title") for record in records]
    )
    near, unrelated = _pairs(records)

    def distances(pairs: list[tuple[int, int]]) -> np.ndarray:
        index = np.array(pairs)
        return np.bitwise_count(fingerprints[index[:, 0]] ^ fingerprints[index[:, 1]])

    near_mean, unrelated_mean = distances(near).mean(), distances(unrelated).mean()
    with capsys.disabled():
        print(
            f"\n{name} {weighting}: mean Hamming distance {near_mean:.2f} for {len(near)} near-duplicate "
            f"pairs vs {unrelated_mean:.2f} for {len(unrelated)} unrelated pairs"
        )
    assert near_mean < 10 < 25 < unrelated_mean
    assert np.median(distances(near)) < np.percentile(distances(unrelated), 1)

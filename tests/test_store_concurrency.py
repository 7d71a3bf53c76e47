"""Check-and-add from several processes at once: the writer lock must make every family of
near-duplicates end up in one cluster (never two records both starting one) and store every
acknowledged record exactly once."""

from __future__ import annotations

import multiprocessing
import random
from pathlib import Path

import pytest

from neardup import IncrementalDeduper, SimhashIndex
from neardup.index.config import IndexConfig

WORKERS = 4
FAMILIES = 40


def family_fingerprints() -> list[int]:
    """One random 64-bit base per family; variant w flips bit w (within distance 2 of each other)."""
    rng = random.Random(3)
    return [rng.getrandbits(64) & ~0xF for _ in range(FAMILIES)]


def worker(url: str, number: int, start: multiprocessing.synchronize.Barrier) -> list[tuple[str, str]]:
    bases = family_fingerprints()
    with SimhashIndex.open(url, create=False) as index:
        start.wait()
        answers = []
        for family, base in enumerate(bases):
            result = IncrementalDeduper(index).check_and_add(f"f{family}-w{number}", base ^ (1 << number))
            answers.append((str(result.key), str(result.cluster)))
        return answers


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "mysql", "redis"])
def test_concurrent_check_and_add_never_splits_a_family(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = {
        "sqlite": lambda: f"sqlite:///{tmp_path}/concurrent.db",
        "postgres": lambda: str(request.getfixturevalue("fresh_postgres_url")),
        "mysql": lambda: str(request.getfixturevalue("fresh_mysql_url")),
        "redis": lambda: str(request.getfixturevalue("fresh_redis_url")),
    }[backend]()
    SimhashIndex.open(url, IndexConfig()).close()
    context = multiprocessing.get_context("spawn")
    barrier = context.Manager().Barrier(WORKERS)
    with context.Pool(WORKERS) as pool:
        results = pool.starmap(worker, [(url, number, barrier) for number in range(WORKERS)])
    answered = dict(pair for answers in results for pair in answers)
    with SimhashIndex.open(url, create=False) as index:
        assert len(index) == WORKERS * FAMILIES
        stored = {str(record.key): str(record.cluster) for batch in index.storage.scan() for record in batch}
    assert stored == answered  # every acknowledged answer is what was stored
    for family in range(FAMILIES):
        clusters = {stored[f"f{family}-w{number}"] for number in range(WORKERS)}
        assert len(clusters) == 1, f"family {family} was split into clusters {clusters}"
        assert clusters.pop().startswith(f"f{family}-")

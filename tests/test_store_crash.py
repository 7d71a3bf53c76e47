"""Crash safety: SIGKILL a real `neardup index add` in mid-run, then reopen the store.

Every batch the command reported (acknowledged) must be stored, no batch may be half
written, the postings must agree with a brute-force scan of the stored records, and running
the same command again must add exactly the rest.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neardup import SimhashIndex
from neardup.similarity.minhash import signature_from_bytes

from .conftest import write_lines

DOCUMENTS = 6000
BATCH = 100
WORDS = [f"w{number}" for number in range(3000)]


def corpus(path: Path) -> list[str]:
    """Short synthetic documents, a third of them edited copies of earlier ones."""
    rng = random.Random(11)
    texts: list[list[str]] = []
    lines: list[dict[str, object]] = []
    for number in range(DOCUMENTS):
        if texts and rng.random() < 0.33:
            words = list(rng.choice(texts))
            words[rng.randrange(len(words))] = rng.choice(WORDS)
        else:
            words = rng.choices(WORDS, k=40)
        texts.append(words)
        lines.append({"id": f"d{number}", "text": " ".join(words)})
    write_lines(path, *lines)
    return [str(line["id"]) for line in lines]


def add_command(url: str, path: Path) -> list[str]:
    code = "from neardup.cli.main import main; main()"
    return [sys.executable, "-c", code, "index", "add", url, str(path), "--batch-size", str(BATCH),
            "--report-batches", "--lang", "en"]  # fmt: skip


def kill_after(url: str, path: Path, acknowledgements: int) -> list[dict[str, object]]:
    """Run the add, SIGKILL it once it has acknowledged that many batches; the acks seen."""
    command = add_command(url, path)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    acked: list[dict[str, object]] = []
    for line in process.stdout:
        acked.append(json.loads(line))
        if len(acked) >= acknowledgements:
            os.kill(process.pid, signal.SIGKILL)
            break
    process.wait(timeout=60)
    assert process.stderr is not None
    assert process.returncode == -signal.SIGKILL, f"the add ended before the kill: {process.stderr.read()}"
    return acked


def check_consistent(index: SimhashIndex) -> dict[object, int]:
    """The index answers every stored record exactly like a brute-force scan: within the
    distance (block index), or sharing a band key of its stored sketch (band index)."""
    stored = dict(index.items())
    keys = list(stored)
    values = np.array([stored[key] for key in keys], dtype=np.uint64)
    sketches = None
    if index.bands is not None:
        records = index.get_many(keys)
        sketches = np.stack([signature_from_bytes(record.signature) for record in records])  # type: ignore[arg-type,union-attr]
        band_keys = index.bands.keys(index.bands.compose(values.reshape(-1, 1), sketches))
    answers = index.query_many(values, signatures=sketches)
    for row, matches in enumerate(answers):
        distances = np.bitwise_count(values ^ values[row])
        if sketches is None:
            near = np.flatnonzero(distances <= index.max_distance)
        else:
            near = np.flatnonzero(np.any(band_keys == band_keys[row], axis=1))
        expected = sorted((int(distances[i]), str(keys[i])) for i in near)
        assert sorted((m.distance, str(m.key)) for m in matches) == expected
    return stored


@pytest.mark.parametrize("backend", ["sqlite", "redis", "postgres"])
def test_killed_add_keeps_every_acknowledged_batch(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = {
        "sqlite": lambda: f"sqlite:///{tmp_path}/crash.db",
        "redis": lambda: str(request.getfixturevalue("fresh_redis_url")),
        "postgres": lambda: str(request.getfixturevalue("fresh_postgres_url")),
    }[backend]()
    path = tmp_path / "docs.jsonl"
    ids = corpus(path)
    acked = kill_after(url, path, acknowledgements=8)
    acknowledged = sum(int(str(ack["added"])) for ack in acked)
    assert acked[-1]["last_id"] == ids[acknowledged - 1]

    with SimhashIndex.open(url, create=False) as index:
        stored = check_consistent(index)
        # Every acknowledged record is there; whole batches only, in input order (the batch
        # in flight may have committed just before the kill, but never half of it).
        assert len(stored) >= acknowledged and len(stored) % BATCH == 0
        assert set(stored) == set(ids[: len(stored)])

    finished = subprocess.run(add_command(url, path), capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    reports = [json.loads(line) for line in finished.stdout.splitlines()]
    assert sum(int(report["added"]) for report in reports) == DOCUMENTS - len(stored)
    with SimhashIndex.open(url, create=False) as index:
        assert set(check_consistent(index)) == set(ids)

"""Bounded answers (issue 28, item 1): thousands of near-identical stored documents must not
make an answer, or the work behind it, grow without bound.

- The library keeps the nearest ``max_matches`` (smallest distance, then smallest id) and
  flags the cut; check-and-add decides the same clusters with or without the cap.
- The service lists at most ``--max-matches`` matches per document (a request may ask for
  fewer, never more) with ``"matches_truncated": true`` when it cut.
- A job whose request was cancelled (its client left) is dropped before it runs, and a real
  server stops working on a query whose client closed the connection.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neardup import IncrementalDeduper, SimhashIndex
from neardup.dedup.documents import DocumentIndex, text_index_config
from neardup.errors import ConfigError
from neardup.fingerprint.config import FingerprintConfig
from neardup.index.simhash_index import match_order
from neardup.io.record import Record
from neardup.service.engine import Batcher

STORED = 3000
BASE = (
    "The city council approved the new budget on Tuesday after a long debate about schools, "
    "roads and the public library, which will open on Sundays from next year"
)


def near_identical(count: int) -> list[Record]:
    """``count`` documents that differ in one number at their end: one family."""
    return [Record(f"d{i:05d}", f"{BASE} {i}", None, f"line {i}") for i in range(count)]


# -- the library -------------------------------------------------------------------------------


def family_fingerprints(count: int, seed: int = 7) -> tuple[list[Any], list[int]]:
    """Fingerprints within a few bits of a handful of centres, under int and str keys."""
    rng = np.random.default_rng(seed)
    centres = [int(value) for value in rng.integers(0, 2**63, 20, dtype=np.uint64)]
    keys: list[Any] = []
    values = []
    for i in range(count):
        value = centres[i % len(centres)]
        for bit in rng.choice(64, int(rng.integers(0, 4)), replace=False).tolist():
            value ^= 1 << bit
        keys.append(i if i % 3 == 0 else f"k{i}")
        values.append(value)
    return keys, values


@pytest.mark.parametrize("cap", [1, 4, 30])
def test_query_keeps_the_nearest_max_matches_and_flags_the_cut(cap: int) -> None:
    keys, values = family_fingerprints(STORED)
    index = SimhashIndex(64, 6)
    index.add_many(keys, values)
    queries = values[:25]
    every = index.query_many(queries)
    capped = index.query_many(queries, max_matches=cap)
    for whole, cut in zip(every, capped, strict=True):
        assert sorted(whole, key=match_order) == whole
        assert list(cut) == whole[:cap]
        assert cut.truncated == (len(whole) > cap)
        assert not whole.truncated
    one = index.query(queries[0], max_matches=cap)
    assert list(one) == every[0][:cap] and one.truncated == (len(every[0]) > cap)
    with pytest.raises(ConfigError, match="max_matches"):
        index.query_many(queries, max_matches=0)


def test_check_and_add_decides_the_same_clusters_under_a_cap() -> None:
    keys, values = family_fingerprints(1200, seed=11)
    free, bounded = IncrementalDeduper(SimhashIndex(64, 6)), IncrementalDeduper(SimhashIndex(64, 6))
    for start in range(0, len(keys), 200):
        part = slice(start, start + 200)
        for every, cut in zip(
            free.check_and_add_many(keys[part], values[part]),
            bounded.check_and_add_many(keys[part], values[part], max_matches=2),
            strict=True,
        ):
            assert (cut.cluster, cut.duplicate, cut.added) == (every.cluster, every.duplicate, every.added)
            assert cut.matches == every.matches[:2]
            assert cut.truncated == (len(every.matches) > 2)
    # A retry (the same ids again) gets its stored cluster, and the cap does not count itself.
    for every, cut in zip(
        free.check_and_add_many(keys[:100], values[:100]),
        bounded.check_and_add_many(keys[:100], values[:100], max_matches=2),
        strict=True,
    ):
        assert not cut.added and cut.cluster == every.cluster and cut.matches == every.matches[:2]


def test_a_verified_query_checks_few_more_candidates_than_the_cap(tmp_path: Path) -> None:
    index = SimhashIndex.open(f"sqlite:///{tmp_path}/bands.db", text_index_config(FingerprintConfig()))
    documents = DocumentIndex(index)
    documents.add(documents.prepare(near_identical(600)))
    asked = documents.prepare([Record(row, f"{BASE} {row}", None, "query") for row in range(10)])
    every = documents.query(asked)
    capped = documents.query(asked, max_matches=7)
    assert all(len(matches) > 7 for matches in every)
    for whole, cut in zip(every, capped, strict=True):
        assert list(cut) == whole[:7] and cut.truncated
    # Copies in a batch are searched once, and each gets the answer it would get alone.
    rows = [3, 0, 3, 3, 9, 0]
    again = documents.query(_rows(asked, rows), max_matches=7)
    assert [list(matches) for matches in again] == [list(capped[row]) for row in rows]
    index.close()


def _rows(batch: Any, rows: list[int]) -> Any:
    from neardup.dedup.documents import Prepared

    signatures = None if batch.signatures is None else batch.signatures[rows]
    return Prepared([batch.keys[row] for row in rows], batch.fingerprints[rows], signatures)


def test_index_query_takes_max_matches_and_never_counts_the_record_itself(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from neardup.cli.main import main

    url = f"sqlite:///{tmp_path}/family.db"
    lines = [json.dumps({"id": record.id, "text": record.text}) for record in near_identical(40)]
    source = tmp_path / "family.jsonl"
    source.write_text("\n".join(lines) + "\n")
    runner = CliRunner()
    assert runner.invoke(main, ["index", "add", url, str(source)]).exit_code == 0
    every = runner.invoke(main, ["index", "query", url, str(source)])
    capped = runner.invoke(main, ["index", "query", url, str(source), "--max-matches", "3"])
    assert every.exit_code == 0 and capped.exit_code == 0, capped.stderr
    for whole, cut in zip(every.stdout.splitlines(), capped.stdout.splitlines(), strict=True):
        full, short = json.loads(whole), json.loads(cut)
        assert len(full["matches"]) > 3 and "matches_truncated" not in full
        assert short["matches"] == full["matches"][:3] and short["matches_truncated"] is True
        assert short["id"] not in {match["id"] for match in short["matches"]}
    refused = runner.invoke(main, ["index", "query", url, str(source), "--max-matches", "0"])
    assert refused.exit_code == 2


# -- the service in process --------------------------------------------------------------------


@pytest.fixture
def crowded(tmp_path: Path) -> Iterator[SimhashIndex]:
    """A default (band) index on SQLite holding 3,000 near-identical documents."""
    index = SimhashIndex.open(f"sqlite:///{tmp_path}/crowded.db", text_index_config(FingerprintConfig()))
    documents = DocumentIndex(index)
    records = near_identical(STORED)
    for start in range(0, STORED, 1000):
        documents.add(documents.prepare(records[start : start + 1000]))
    yield index
    index.close()


def test_a_batch_of_copies_gets_a_bounded_answer(crowded: SimhashIndex) -> None:
    pytest.importorskip("fastapi", reason="the service tests need the 'service' extra")
    from fastapi.testclient import TestClient

    from neardup.service import ServiceSettings, create_app

    copies = {"documents": [{"text": BASE}] * 100}
    with TestClient(create_app(crowded, ServiceSettings(max_matches=20))) as client:
        answer = client.post("/v1/query", json=copies)
        assert answer.status_code == 200, answer.text[:300]
        # 100 copies x 3,000 matches were 18 MB; 20 matches each are about 100 bytes apiece.
        assert len(answer.content) < 100 * 20 * 120
        for result in answer.json()["results"]:
            assert result["duplicate"] and result["matches_truncated"] is True
            assert len(result["matches"]) == 20
            order = [(match["distance"], match["id"]) for match in result["matches"]]
            assert order == sorted(order)
        fewer = client.post("/v1/query", json={**copies, "max_matches": 3}).json()["results"]
        assert {len(result["matches"]) for result in fewer} == {3}
        one = client.post("/v1/query", json={"text": BASE, "max_matches": 2}).json()
        assert len(one["matches"]) == 2 and one["matches_truncated"] is True
        # Copies are searched once, and each document still gets its own answer.
        mixed = [{"text": BASE, "id": "x"}, {"text": f"{BASE} 5"}, {"text": BASE, "id": "y"}]
        mixed += [{"text": "..."}, {"text": f"{BASE} 5"}, {"text": "!!"}]
        first, second, third, empty, fifth, other_empty = client.post(
            "/v1/query", json={"documents": mixed}
        ).json()["results"]
        assert (first["id"], third["id"]) == ("x", "y") and first["matches"] == third["matches"]
        assert second == fifth == {**client.post("/v1/query", json={"text": f"{BASE} 5"}).json(), "id": None}
        assert empty["matches"] == other_empty["matches"] == [] and second["matches"]
        assert client.get("/v1/stats").json()["service"]["max_matches"] == 20
        over = client.post("/v1/query", json={**copies, "max_matches": 21})
        assert over.status_code == 422 and "max_matches=21" in over.json()["error"]["message"]

        checked = client.post(
            "/v1/check", json={"documents": [{"id": f"c{i}", "text": f"{BASE} {i}"} for i in range(50)]}
        )
        assert checked.status_code == 200, checked.text[:300]
        results = checked.json()["results"]
        assert all(len(result["matches"]) == 20 and result["matches_truncated"] for result in results)
        # Each joined its nearest match's cluster (a stored document's is its own id).
        cluster_of = {result["id"]: result["cluster"] for result in results}
        for result in results:
            nearest = result["matches"][0]["id"]
            assert result["cluster"] == (nearest if nearest.startswith("d") else cluster_of[nearest])
        single = client.post("/v1/check", json={"id": "s1", "text": f"{BASE} 7", "max_matches": 1}).json()
        assert len(single["matches"]) == 1 and single["matches_truncated"] is True
        alone = client.post("/v1/check", json={"id": "s2", "text": "nothing like the others at all"}).json()
        assert "matches_truncated" not in alone and alone["matches"] == []


# -- cancellation ------------------------------------------------------------------------------


def test_a_job_cancelled_before_it_runs_is_dropped() -> None:
    started, release = threading.Event(), threading.Event()
    seen: list[Any] = []

    def handler(_: object, payloads: list[Any]) -> list[Any]:
        seen.extend(payloads)
        started.set()
        release.wait(10)
        return payloads

    batcher = Batcher("test", {"job": handler}, max_items=1)
    first = batcher.submit("job", "first")
    assert started.wait(10)
    second = batcher.submit("job", "second")
    assert second.cancel()  # what asyncio does to it when the awaiting request is cancelled
    third = batcher.submit("job", "third")
    release.set()
    assert first.result(10) == "first" and third.result(10) == "third"
    with pytest.raises(concurrent.futures.CancelledError):
        second.result(0)
    batcher.close()
    assert seen == ["first", "third"]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads CPU time from /proc")
def test_a_real_server_stops_a_query_whose_client_left(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn", reason="the server test needs the 'service' extra")
    import httpx

    from tests.test_service_server import Served

    store = f"sqlite:///{tmp_path}/crowded.db"
    index = SimhashIndex.open(store, text_index_config(FingerprintConfig()))
    documents = DocumentIndex(index)
    records = near_identical(STORED)
    for start in range(0, STORED, 1000):
        documents.add(documents.prepare(records[start : start + 1000]))
    index.close()
    served = Served(store)
    try:
        # Different texts (copies would be one search, done at once), each near all 3,000.
        body = json.dumps({"documents": [{"text": f"{BASE} q{i}"} for i in range(1000)]}).encode()
        head = f"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(head + body)
            time.sleep(1.5)  # the query is under way
        left = time.monotonic()
        # The store thread is free for others at once, not after the whole query ...
        stats = httpx.get(f"{served.base}/v1/stats", timeout=30)
        assert stats.status_code == 200 and time.monotonic() - left < 3
        time.sleep(1.0)
        # ... and the work the departed client started has stopped: the process is idle.
        before = cpu_seconds(served.process.pid)
        time.sleep(2.0)
        assert cpu_seconds(served.process.pid) - before < 0.5
        health = httpx.get(f"{served.base}/healthz", timeout=5)
        assert health.status_code == 200
    finally:
        code, stderr = served.stop()
    assert code == 0, stderr
    assert "Traceback" not in stderr  # (the one line it logs is at info level, below --log-level warning)

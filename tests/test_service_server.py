"""The real thing: ``neardup serve`` as its own process on 127.0.0.1, spoken to over HTTP.

Two server processes share one SQLite file while threads post near-duplicates to both: the
store's writer lock must keep every family in one cluster across processes. SIGTERM must
stop a server cleanly with everything acknowledged stored, and a lost Redis must give 503.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn", reason="the server test needs the 'service' extra (uvicorn, httpx)")
import httpx

from neardup import SimhashIndex
from tests.servers import servers
from tests.test_service_concurrency import FAMILIES, VARIANTS, family_texts

TOKEN = "t0ken-for-tests"
START_TIMEOUT = 60.0


class Served:
    """A running ``neardup serve`` process and its base URL."""

    def __init__(self, store: str, *options: str) -> None:
        self.port = servers.free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "neardup", "serve", store, "--port", str(self.port), *options]
        self.process = subprocess.Popen(
            [*command, "--log-level", "warning"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"neardup serve exited: {self.process.communicate()[1]}")
            try:
                if httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise AssertionError("neardup serve did not answer /healthz in time")

    def stop(self) -> tuple[int, str]:
        """SIGTERM by PID (SIGKILL if it hangs); the exit code and stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            _, stderr = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, stderr = self.process.communicate()
        return self.process.returncode, stderr


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[Served] = []

    def start(store: str, *options: str) -> Served:
        served = Served(store, *options)
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


def test_real_server_with_token(tmp_path: Path, serve: Any) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    store = f"sqlite:///{tmp_path}/news.db"
    served = serve(store, "--token-file", str(token_file))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=served.base, headers=headers, timeout=30) as client:
        assert httpx.post(f"{served.base}/v1/check", json={"id": "a", "text": "x"}).status_code == 401
        first = client.post(
            "/v1/check", json={"id": "a", "text": "Breaking news: the river flooded the town"}
        )
        assert first.json()["cluster"] == "a"
        second = client.post(
            "/v1/check", json={"id": "b", "text": "BREAKING NEWS: the river flooded the town"}
        )
        assert second.json()["cluster"] == "a" and second.json()["duplicate"]
        assert client.post("/v1/query", json={"text": "breaking news: the river flooded the town"}).json()[
            "duplicate"
        ]
        assert client.get("/v1/stats").json()["documents"] == 2
        assert "swagger" in client.get("/docs").text.lower()
    code, stderr = served.stop()
    assert code == 0, stderr
    with SimhashIndex.open(store, create=False) as index:
        assert {record.key: record.cluster for record in index.get_many(["a", "b"]) if record} == {
            "a": "a",
            "b": "a",
        }


def check_families_from_threads(bases: list[str], store: str, servers: list[Served]) -> None:
    """Post every family member to /v1/check from 16 threads, spread over ``bases``; stop the
    servers; then every answer must be what the store holds and no family may be split."""
    texts = family_texts()

    def post(job: tuple[int, str]) -> dict[str, Any]:
        number, key = job
        base = bases[number % len(bases)]
        response = httpx.post(f"{base}/v1/check", json={"id": key, "text": texts[key]}, timeout=60)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(post, enumerate(texts)))
    for served in servers:
        code, stderr = served.stop()
        assert code == 0, stderr
    with SimhashIndex.open(store, create=False) as index:
        assert len(index) == len(texts)
        stored = {record.key: record.cluster for record in index.get_many(list(texts)) if record}
    assert stored == {answer["id"]: answer["cluster"] for answer in answers}
    for family in range(FAMILIES):
        clusters = {stored[f"f{family}-v{variant}"] for variant in range(VARIANTS)}
        assert len(clusters) == 1, f"family {family} was split across server processes: {clusters}"


def test_two_servers_on_one_sqlite_file_never_split_a_family(tmp_path: Path, serve: Any) -> None:
    store = f"sqlite:///{tmp_path}/shared.db"
    first = serve(store)
    second = serve(store)  # opens the index the first one created
    check_families_from_threads([first.base, second.base], store, [first, second])


def test_worker_processes_share_one_store(tmp_path: Path, serve: Any) -> None:
    store = f"sqlite:///{tmp_path}/workers.db"
    served = serve(store, "--workers", "2")
    check_families_from_threads([served.base], store, [served])


def test_memory_index_refuses_workers(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "neardup", "serve", "memory://", "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and "lives in one process" in result.stderr


def test_lost_redis_gives_503_in_the_one_error_shape(throwaway_server: Any, serve: Any) -> None:
    redis = throwaway_server("redis")
    served = serve(redis.url)
    with httpx.Client(base_url=served.base, timeout=30) as client:
        assert client.post("/v1/check", json={"id": 1, "text": "first document"}).status_code == 200
        redis.stop()
        response = client.post("/v1/check", json={"id": 2, "text": "second document"})
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["code"] == "storage_unavailable" and "Redis" in error["message"]
        assert client.get("/healthz").status_code == 503

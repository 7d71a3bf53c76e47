"""Many clients at once against the service, on SQLite, Redis and PostgreSQL: no lost or
duplicated adds, and near-duplicates sent at the same moment never both start a cluster.

The app runs in process (httpx's ASGI transport, no port), so the requests really overlap in
its event loop and meet in its worker threads, where they are coalesced into batch calls.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the service tests need the 'service' extra (fastapi, httpx)")
import httpx

from neardup import SimhashIndex
from neardup.errors import InputError
from neardup.fingerprint.config import FingerprintConfig
from neardup.index.config import IndexConfig
from neardup.service import create_app
from neardup.service.engine import Batcher

FAMILIES = 24
VARIANTS = 4
CLIENTS = 32


def family_texts() -> dict[str, str]:
    """FAMILIES unrelated texts; each has VARIANTS spellings the normalizer folds together
    (case, spacing, full-width letters), so each family is one set of exact near-duplicates."""
    rng = random.Random(11)
    vocabulary = [f"w{number}x{rng.randrange(10**6)}" for number in range(4000)]
    texts = {}
    for family in range(FAMILIES):
        words = rng.sample(vocabulary, 40)
        base = " ".join(words)
        spellings = [base, base.upper(), "  ".join(words), base.replace("w", "ｗ")]
        for variant in range(VARIANTS):
            texts[f"f{family}-v{variant}"] = spellings[variant]
    return texts


def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return {
        "sqlite": lambda: f"sqlite:///{tmp_path}/service.db",
        "redis": lambda: str(request.getfixturevalue("fresh_redis_url")),
        "postgres": lambda: str(request.getfixturevalue("fresh_postgres_url")),
    }[backend]()


async def post_all(app: Any, jobs: list[tuple[str, dict[str, Any]]]) -> list[httpx.Response]:
    """Send every (path, body) with CLIENTS requests in flight at once."""
    transport = httpx.ASGITransport(app=app)
    gate = asyncio.Semaphore(CLIENTS)
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:

        async def send(path: str, body: dict[str, Any]) -> httpx.Response:
            async with gate:
                return await client.post(path, json=body)

        return list(await asyncio.gather(*(send(path, body) for path, body in jobs)))


@pytest.mark.parametrize("backend", ["sqlite", "redis", "postgres"])
def test_concurrent_check_and_add_keeps_families_whole(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = store_url(backend, tmp_path, request)
    texts = family_texts()
    keys = list(texts)
    random.Random(5).shuffle(keys)
    # Singles and small batches mixed, and every tenth document sent twice (a client retry).
    jobs: list[tuple[str, dict[str, Any]]] = []
    position = 0
    while position < len(keys):
        size = 1 if position % 3 else 3
        chunk = keys[position : position + size]
        documents = [{"id": key, "text": texts[key]} for key in chunk]
        jobs.append(("/v1/check", documents[0] if size == 1 else {"documents": documents}))
        position += size
    jobs += [("/v1/check", {"id": key, "text": texts[key]}) for key in keys[::10]]
    with SimhashIndex.open(url, IndexConfig(fingerprint=FingerprintConfig())) as index:
        app = create_app(index)
        try:
            responses = asyncio.run(post_all(app, jobs))
            calls, served = app.state.engine.store_worker.calls, app.state.engine.store_worker.payloads
        finally:
            app.state.engine.close()
    assert all(response.status_code == 200 for response in responses), [r.text for r in responses][:3]
    answers: list[dict[str, Any]] = []
    for response in responses:
        body = response.json()
        answers += body.get("results", [body])
    added = [answer["id"] for answer in answers if answer["added"]]
    assert sorted(added) == sorted(keys)  # every document added exactly once, retries not again
    cluster_of = {answer["id"]: answer["cluster"] for answer in answers}
    assert all(cluster_of[answer["id"]] == answer["cluster"] for answer in answers)  # retries agree
    with SimhashIndex.open(url, create=False) as reopened:
        assert len(reopened) == len(keys)
        stored = {record.key: record.cluster for record in reopened.get_many(keys) if record is not None}
    assert stored == cluster_of  # every acknowledged answer is what was stored
    for family in range(FAMILIES):
        members = [f"f{family}-v{variant}" for variant in range(VARIANTS)]
        clusters = {stored[member] for member in members}
        assert len(clusters) == 1, f"family {family} was split into {clusters}"
        starters = [a for a in answers if a["id"] in members and a["added"] and not a["duplicate"]]
        assert len(starters) == 1 and starters[0]["id"] == clusters.pop()
    assert served == len(jobs) and calls < len(jobs)  # concurrent requests shared store calls


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_concurrent_adds_with_overlapping_ids_store_each_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = store_url(backend, tmp_path, request)
    # 40 requests of 5 ids each over 100 ids: every id is sent by two requests.
    jobs = [
        (
            "/v1/documents",
            {
                "documents": [
                    {"id": (start + step) % 100, "text": f"text {start + step}"} for step in range(5)
                ]
            },
        )
        for start in range(0, 200, 5)
    ]
    with SimhashIndex.open(url, IndexConfig(fingerprint=FingerprintConfig())) as index:
        app = create_app(index)
        try:
            responses = asyncio.run(post_all(app, jobs))
        finally:
            app.state.engine.close()
        statuses = {response.status_code for response in responses}
        assert statuses <= {201, 409}
        acknowledged = [key for r in responses if r.status_code == 201 for key in r.json()["ids"]]
        assert len(acknowledged) == len(set(acknowledged)) == 100
        assert len(index) == 100
        for response in responses:
            if response.status_code == 409:
                assert response.json()["error"]["code"] == "key_exists"


# -- the batcher itself ------------------------------------------------------------------------


def test_batcher_coalesces_and_keeps_errors_with_their_request() -> None:
    seen: list[list[int]] = []
    release = threading.Event()

    def double(_: object, payloads: list[int]) -> list[int]:
        release.wait(5)
        seen.append(list(payloads))
        if any(value < 0 for value in payloads):
            raise InputError(f"negative value in {payloads}")
        return [value * 2 for value in payloads]

    batcher = Batcher("test", {"double": double}, max_items=100)
    try:
        first = batcher.submit("double", 1)
        time.sleep(0.05)  # the thread holds the first job; the rest queue up behind it
        futures = [batcher.submit("double", value) for value in (2, -3, 4)]
        release.set()
        assert first.result(5) == 2
        assert [future.exception(5) is None for future in futures] == [True, False, True]
        assert futures[0].result() == 4 and futures[2].result() == 8
        assert "-3" in str(futures[1].exception())
        assert seen[:2] == [[1], [2, -3, 4]]  # one call for the three waiting jobs, then retries alone
        assert sorted(map(tuple, seen[2:])) == [(-3,), (2,), (4,)]
    finally:
        batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit("double", 1)


def test_batcher_groups_by_option_and_respects_the_size_limit() -> None:
    calls: list[tuple[Any, list[str]]] = []
    gate = threading.Event()

    def echo(option: Any, payloads: list[str]) -> list[str]:
        gate.wait(5)
        calls.append((option, list(payloads)))
        return payloads

    batcher = Batcher("test", {"echo": echo}, max_items=4)
    submit: Callable[..., Any] = batcher.submit
    try:
        futures = [submit("echo", "hold", option="a")]
        time.sleep(0.05)
        futures += [
            submit("echo", name, option=option, size=2)
            for name, option in (("x", "a"), ("y", "b"), ("z", "a"), ("w", "a"))
        ]
        gate.set()
        assert [future.result(5) for future in futures] == ["hold", "x", "y", "z", "w"]
    finally:
        batcher.close()
    # After the first job: x, y (4 items, the limit), grouped by option; then z and w.
    assert calls == [("a", ["hold"]), ("a", ["x"]), ("b", ["y"]), ("a", ["z", "w"])]

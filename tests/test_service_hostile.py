"""``neardup serve`` under hostile clients: a real server process on 127.0.0.1, attacked with
raw sockets and httpx (issue 15, probes 6, 8, 9 and 10, service part).

- Slow clients (half a request line, then nothing) are disconnected after ``--header-timeout``;
  a body trickling below ``--min-body-rate`` is cut; ``--max-connections`` bounds the file
  descriptors a flood of idle connections takes, and evicts slow clients so others get in.
- A large body is parsed off the event loop: ``/healthz`` is answered while it is.
- Every malformed body (deep nesting, a 5,000-digit integer) is a 422 in the error shape, on a
  connection that stays open.
- A failing request never makes its batch neighbours re-run one by one.
- URL ids are strings (no digit folding); ids with ``/`` work; ``?type=int`` names an integer id.
- A store driver's error is a 503; the start-up line never shows the store's password.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn", reason="the server tests need the 'service' extra (uvicorn, httpx)")
import httpx

from neardup.dedup.documents import DocumentIndex
from neardup.errors import KeyExistsError
from neardup.io.record import Record, record_from_mapping
from neardup.service.engine import Engine
from neardup.service.settings import ServiceSettings
from tests import test_service_server as server_tests
from tests.servers import servers
from tests.test_service import open_index

serve = server_tests.serve  # the fixture: real `neardup serve` processes, stopped afterwards

TEXT = "Breaking news: the river flooded the town after a week of rain in the hills"
OTHER = "The city council approved the new library budget for the coming year today"


def sockets_closed(sockets: list[socket.socket], within: float) -> int:
    """How many of ``sockets`` the server closed within ``within`` seconds."""
    closed, deadline = 0, time.monotonic() + within
    for sock in sockets:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            closed += sock.recv(1024) == b""
        except (ConnectionResetError, BrokenPipeError):
            closed += 1
        except TimeoutError:
            pass
        sock.close()
    return closed


def exchange(sock: socket.socket, method: str, path: str, body: bytes = b"") -> tuple[int, dict[str, Any]]:
    """One HTTP/1.1 request on a kept-alive socket; the status and the JSON answer."""
    head = f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
    sock.sendall(head.encode() + body)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    header, _, rest = data.partition(b"\r\n\r\n")
    lines = header.decode().split("\r\n")
    fields = dict(line.lower().split(": ", 1) for line in lines[1:])
    assert fields.get("connection") != "close", lines
    length = int(fields["content-length"])
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        rest += chunk
    return int(lines[0].split()[1]), json.loads(rest)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[server_tests.Served]:
    """One server with the default settings, for the tests that leave it whole."""
    served = server_tests.Served(f"sqlite:///{tmp_path_factory.mktemp('shared')}/shared.db")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[server_tests.Served]:
    """One server with the connection guards scaled down."""
    store = f"sqlite:///{tmp_path_factory.mktemp('guarded')}/guarded.db"
    served = server_tests.Served(
        store, "--header-timeout", "1", "--max-connections", "50", "--min-body-rate", "100"
    )
    yield served
    served.stop()


def record(key: str, text: str) -> Record:
    return record_from_mapping({"id": key, "text": text}, "test")


def open_fds(process: subprocess.Popen[str]) -> int:
    return len(os.listdir(f"/proc/{process.pid}/fd"))


# -- probe 8: slow clients, floods, trickled bodies --------------------------------------------


def test_slow_clients_are_disconnected_and_others_still_served(guarded: server_tests.Served) -> None:
    served = guarded
    port = served.port
    slow = []
    for _ in range(60):  # more than the cap: the oldest slow clients make room
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"GET /healthz HT")
        slow.append(sock)
    started = time.monotonic()
    answer = httpx.get(f"{served.base}/healthz", timeout=5)
    assert answer.status_code == 200 and time.monotonic() - started < 1
    assert sockets_closed(slow, within=3) == 60  # every slow client is cut after the timeout
    assert httpx.get(f"{served.base}/healthz", timeout=5).status_code == 200


def test_a_flood_of_idle_connections_cannot_exhaust_file_descriptors(guarded: server_tests.Served) -> None:
    served = guarded
    baseline = open_fds(served.process)
    flood = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(400)]
    time.sleep(0.3)
    assert open_fds(served.process) <= baseline + 55  # at most the cap, not one per client
    assert httpx.get(f"{served.base}/healthz", timeout=5).status_code == 200
    for sock in flood:
        sock.close()


def test_serve_raises_its_open_file_limit(tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip("needs a finite hard limit above 256")

    def lowered() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    port = servers.free_port()
    command = [sys.executable, "-m", "neardup", "serve", "memory://", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--log-level", "warning"],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lowered,
    )
    try:
        for _ in range(300):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        limits = Path(f"/proc/{process.pid}/limits").read_text()
        line = next(line for line in limits.splitlines() if line.startswith("Max open files"))
        assert line.split()[3] == str(hard), line
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_a_trickled_body_is_cut(guarded: server_tests.Served) -> None:
    served = guarded
    sock = socket.create_connection(("127.0.0.1", served.port))
    sock.sendall(b"POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n{")
    started, cut = time.monotonic(), False
    while time.monotonic() - started < 6:
        try:
            sock.sendall(b" ")  # one byte every 0.2 s: 5 bytes/s, under the floor of 100
        except (BrokenPipeError, ConnectionResetError):
            cut = True
            break
        time.sleep(0.2)
    assert cut and time.monotonic() - started < 5
    sock.close()


def test_healthz_is_answered_while_a_large_body_is_parsed(shared: server_tests.Served) -> None:
    served = shared
    tiny = [{"id": number, "text": "w"} for number in range(480_000)]  # ~14 MB, under 16 MiB
    under = json.dumps({"documents": tiny}).encode()
    over = under + b" " * (17 * 1024 * 1024 - len(under))  # the same, padded over the limit
    for body in (under, over):
        answers: list[int] = []

        def post(body: bytes = body, answers: list[int] = answers) -> None:
            answers.append(httpx.post(f"{served.base}/v1/check", content=body, timeout=60).status_code)

        poster = threading.Thread(target=post)
        latencies = []
        with httpx.Client(base_url=served.base, timeout=30) as client:
            client.get("/healthz")
            poster.start()
            while poster.is_alive():
                started = time.monotonic()
                assert client.get("/healthz").status_code == 200
                latencies.append(time.monotonic() - started)
        poster.join()
        assert answers == [413]  # too many documents; too many bytes
        assert latencies and max(latencies) < 1, latencies


# -- probe 8: malformed bodies are 422 on a kept connection -------------------------------------


MALFORMED = [
    b"[" * 100_000,
    b'{"id": 1, "text": "x", "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"id": 1, "text": "x", "deep": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",
    b'{"id": ' + b"7" * 5_000 + b', "text": "x"}',
    b'{"id": 1, "text": "x", "n": ' + b"9" * 5_000 + b"}",
    b'{"documents": [{"id": 1, "text": "x", "n": -' + b"9" * 5_000 + b"}]}",
    b'{"id": 1e400, "text": "x"}',
    b'{"id": NaN, "text": "x"}',
    b'{"id": 1, "text": "\\ud800"}',
    b'{"id": 1, "text": "x"',
    b"\xff\xfe{}",
]


def test_every_malformed_body_is_a_422_on_a_kept_connection(shared: server_tests.Served) -> None:
    served = shared
    sock = socket.create_connection(("127.0.0.1", served.port))
    sock.settimeout(30)
    for route in ("/v1/check", "/v1/query", "/v1/documents", "/v1/fingerprint"):
        for body in MALFORMED:
            status, answer = exchange(sock, "POST", route, body)
            assert status == 422, (route, body[:60], answer)
            assert set(answer["error"]) == {"status", "code", "message", "details"}
    status, answer = exchange(sock, "POST", "/v1/check", json.dumps({"id": "ok", "text": TEXT}).encode())
    assert status == 200 and answer["added"]  # the same connection still serves
    sock.close()


# -- probe 8: a failing request never degrades its batch neighbours ------------------------------


def test_conflicting_clients_never_make_good_ones_rerun(shared: server_tests.Served) -> None:
    served = shared
    conflicts = [f"taken{number}" for number in range(8)]
    with httpx.Client(base_url=served.base, timeout=60) as client:
        stored = [{"id": key, "text": f"{OTHER} {key}"} for key in conflicts]
        assert client.post("/v1/check", json={"documents": stored}).status_code == 200
    jobs, expected = [], []
    for number in range(48):  # a conflicting client between every two good ones
        jobs.append((f"good{number}", f"{TEXT} {number}"))
        expected.append(200)
        if number % 2:
            jobs.append((conflicts[number % 8], f"another text {number}"))
            expected.append(409)

    with httpx.Client(base_url=served.base, timeout=60) as client:

        def post(job: tuple[str, str]) -> int:
            return client.post("/v1/check", json={"id": job[0], "text": job[1]}).status_code

        with ThreadPoolExecutor(16) as pool:
            assert list(pool.map(post, jobs)) == expected
        service = client.get("/v1/stats").json()["service"]
    assert service["retried_requests"] == 0, service


def test_a_failing_request_is_served_alone_and_its_group_shares_one_call(tmp_path: Path) -> None:
    """Deterministic: the store thread is held while 4 requests queue, so they form one group."""
    with open_index(tmp_path / "group.db") as index:
        engine = Engine(DocumentIndex(index), ServiceSettings())
        try:
            documents = engine.documents
            documents.check_and_add(documents.prepare([record("x", OTHER)]))
            entered, gate = threading.Event(), threading.Event()

            def hold() -> None:
                entered.set()
                gate.wait()

            held = engine.store_worker.submit("call", hold)
            assert entered.wait(timeout=30)
            texts = {"a": TEXT, "x": "other text for a stored id", "b": f"{TEXT} again", "c": OTHER}
            futures = {
                key: engine.store_worker.submit("check", documents.prepare([record(key, text)]))
                for key, text in texts.items()
            }
            gate.set()
            held.result(timeout=30)
            with pytest.raises(KeyExistsError):
                futures["x"].result(timeout=30)
            answers = {key: futures[key].result(timeout=30)[0] for key in ("a", "b", "c")}
            assert answers["a"].added and answers["b"].cluster == "a" and answers["c"].cluster == "x"
            worker = engine.store_worker
            assert (worker.calls, worker.isolated, worker.retried) == (2, 1, 0)
        finally:
            engine.close()


# -- probe 6: URL ids ----------------------------------------------------------------------------


def test_url_ids_are_strings_and_may_hold_slashes(shared: server_tests.Served) -> None:
    served = shared
    with httpx.Client(base_url=served.base, timeout=30) as client:
        documents = [
            {"id": "a/b", "text": TEXT},
            {"id": 3, "text": OTHER},
            {"id": "3", "text": "a third text about something else entirely"},
            {"id": "c/d/e", "text": "yet another text, unlike the others in every way"},
        ]
        assert client.post("/v1/documents", json={"documents": documents}).status_code == 201
        assert client.get("/v1/documents/a%2Fb").json()["id"] == "a/b"
        assert client.get("/v1/documents/a/b").json()["id"] == "a/b"
        assert client.get("/v1/documents/3").json()["id"] == "3"
        assert client.get("/v1/documents/3", params={"type": "int"}).json()["id"] == 3
        for odd in ("%D9%A3", "%C2%B2", "%C2%B3", "--5", "03"):  # ٣ ² ³ --5 03: strings, not 3
            for method in ("GET", "DELETE"):
                answer = client.request(method, f"/v1/documents/{odd}")
                assert answer.status_code == 404, (method, odd, answer.text)
                assert answer.json()["error"]["code"] == "key_not_found"
        answer = client.get("/v1/documents/%D9%A3", params={"type": "int"})
        assert answer.status_code == 422 and "plain decimal" in answer.json()["error"]["message"]
        assert client.delete("/v1/documents/a%2Fb").json() == {"id": "a/b", "removed": True}
        assert client.delete("/v1/documents/c/d/e").json() == {"id": "c/d/e", "removed": True}
        assert client.delete("/v1/documents/3", params={"type": "int"}).json() == {"id": 3, "removed": True}
        assert client.get("/v1/documents/3").json()["id"] == "3"  # the string id is untouched
        for gone in ("a%2Fb", "c/d/e", "3?type=int"):
            assert client.get(f"/v1/documents/{gone}").status_code == 404


# -- probes 9 and 10: storage failures, secrets ----------------------------------------------------


def test_a_store_driver_error_is_a_503_on_a_kept_connection(tmp_path: Path, serve: Any) -> None:
    path = tmp_path / "corrupt.db"
    served = serve(f"sqlite:///{path}")
    sock = socket.create_connection(("127.0.0.1", served.port))
    sock.settimeout(30)
    documents = [{"id": number, "text": f"{TEXT} {number}"} for number in range(300)]
    status, _ = exchange(sock, "POST", "/v1/check", json.dumps({"documents": documents}).encode())
    assert status == 200
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page * 2 :] = b"\xa5" * (len(data) - page * 2)  # every page after the first two
    path.write_bytes(bytes(data))
    status, answer = exchange(sock, "GET", "/v1/stats?buckets=true")
    assert status == 503, answer
    assert answer["error"]["code"].startswith("storage")
    status, _ = exchange(sock, "GET", "/v1/documents/nothing")  # the connection still serves
    assert status in (404, 503)
    sock.close()


def test_the_start_up_line_masks_the_store_password(fresh_postgres_url: str, serve: Any) -> None:
    url = fresh_postgres_url.replace("postgres@", "postgres:s3cr3t-pw@", 1)
    assert "s3cr3t-pw" in url
    served = serve(url)
    code, stderr = served.stop()
    assert code == 0 and "neardup: serving" in stderr, stderr
    assert "s3cr3t-pw" not in stderr and ":***@" in stderr

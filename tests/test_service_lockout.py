"""No client locks the others out of ``neardup serve`` (issue 28, items 1, 2, 6 and 14): a real
server process on 127.0.0.1, attacked with raw sockets from this process.

Fast tests, one a guard:

- request lines and headers are capped (``--max-header-bytes``): 431, then the connection closes;
- a body must arrive whole within ``--body-timeout`` seconds, whatever its rate;
- one client (one address) holds at most ``--max-client-connections`` connections, and a new
  connection closes the oldest slow body rather than being refused;
- a client that leaves mid-body is one log line at most, never a traceback.

Slow tests (the issue's acceptance criterion, listed in conftest.SLOW_TESTS): ``/healthz`` and a
legitimate ``/v1/check`` answered within 2 s at p99 while an endless header, 2,100 slow bodies
at the minimum rate, or the amplification request (3,000 near-identical stored documents, a
165 KB ``/v1/query`` of 1,000 copies of one text) runs. The legitimate client has the
attacker's address (127.0.0.1), so no allow-list can explain the result.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("uvicorn", reason="the server tests need the 'service' extra (uvicorn, httpx)")
import httpx

from tests import test_service_server as server_tests

Served = server_tests.Served
ROOT = Path(__file__).resolve().parents[1]

TEXT = "Breaking news: the river flooded the town after a week of rain in the hills"
#: ~165 characters: 1,000 copies in one /v1/query batch are the issue's 165 KB request.
LONG_TEXT = (
    "Heavy rain over the weekend flooded the lower town, closing the bridge and the market "
    "square, and the council asked residents near the river to leave their homes tonight."
)
#: The acceptance bound and how many probes it is measured over (p99 by nearest rank).
P99_BOUND = 2.0
PROBES = 100
PROBE_TIMEOUT = 10.0


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[max(math.ceil(0.99 * len(ordered)) - 1, 0)]


def report(attack: str, latencies: list[float]) -> float:
    """The p99 (printed with ``pytest -s``, for docs/service.md's table)."""
    value = p99(latencies)
    median = sorted(latencies)[len(latencies) // 2]
    print(
        f"\n{attack}: p99 {value:.3f} s, median {median:.3f} s, max {max(latencies):.3f} s, "
        f"{len(latencies)} probes"
    )
    return value


def probe(base: str, count: int = PROBES, pause: float = 0.1, within: float = 60.0) -> list[float]:
    """Latencies of ``count`` legitimate requests, alternately ``GET /healthz`` and a
    ``POST /v1/check`` of a new document, each on a new connection (a timeout or an error
    counts as ``PROBE_TIMEOUT``, so a lock-out shows as a large p99, not a crash); fewer if
    ``within`` seconds pass first, so a locked-out server fails the test in bounded time."""
    latencies: list[float] = []
    deadline = time.monotonic() + within
    for number in range(count):
        if time.monotonic() > deadline:
            break
        started = time.monotonic()
        try:
            if number % 2:
                body = {"id": f"legit-{os.getpid()}-{number}-{started}", "text": f"{TEXT} {number}"}
                answer = httpx.post(f"{base}/v1/check", json=body, timeout=PROBE_TIMEOUT)
                ok = answer.status_code == 200 and answer.json()["added"]
            else:
                answer = httpx.get(f"{base}/healthz", timeout=PROBE_TIMEOUT)
                ok = answer.status_code == 200
        except httpx.HTTPError:
            ok = False
        latencies.append(time.monotonic() - started if ok else PROBE_TIMEOUT)
        time.sleep(pause)
    return latencies


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def slow_body(
    port: int, length: int = 1 << 20, first: bytes = b"{", host: str = "127.0.0.1"
) -> socket.socket:
    """A connection from ``host`` (any 127.x.y.z address is this machine) that sent a
    /v1/check request's headers and the first bytes of its body."""
    sock = socket.create_connection(("127.0.0.1", port), source_address=(host, 0))
    head = f"POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-length: {length}\r\n\r\n"
    sock.sendall(head.encode() + first)
    return sock


def is_closed(sock: socket.socket, within: float) -> bool:
    """Did the server close ``sock`` within ``within`` seconds (anything it sent is skipped)."""
    deadline = time.monotonic() + within
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            if sock.recv(65536) == b"":
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False


def stream_until_answered(sock: socket.socket, head: bytes, filler: bytes, most: int) -> tuple[int, bytes]:
    """Send ``head`` then ``filler`` in 8 KiB steps, pausing so the server reads each, until
    the server answers or closes; (bytes sent, what it answered)."""
    sock.sendall(head)
    sent = len(head)
    while sent < most:
        readable, _, _ = select.select([sock], [], [], 0.005)
        if readable:
            break
        try:
            sock.sendall(filler)
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += len(filler)
    sock.settimeout(5)
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return sent, answer


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[server_tests.Served]:
    """One server with every guard scaled down, for the fast tests that leave it whole."""
    store = f"sqlite:///{tmp_path_factory.mktemp('guarded')}/guarded.db"
    server = Served(
        store,
        *("--max-header-bytes", "16384", "--max-connections", "50", "--max-client-connections", "10"),
        *("--header-timeout", "1", "--min-body-rate", "10", "--body-timeout", "4"),
    )
    yield server
    server.stop()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Callable[..., server_tests.Served]]:
    """Start real servers (each on its own SQLite file); stopped by PID afterwards."""
    started: list[server_tests.Served] = []

    def start(*options: str) -> server_tests.Served:
        server = Served(f"sqlite:///{tmp_path}/lockout{len(started)}.db", *options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


# -- item 2: request lines and headers have a size limit -------------------------------------------


@pytest.mark.parametrize(
    ("head", "filler"),
    [
        (b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-endless: ", b"a" * 8192),  # one endless header
        (b"GET /healthz HTTP/1.1\r\nhost: x\r\n", b"x-many: 0123456789abcdef\r\n" * 300),  # many
        (b"GET /", b"a" * 8192),  # an endless request line
    ],
    ids=["endless-header", "many-headers", "endless-request-line"],
)
def test_oversized_request_heads_are_answered_431_and_closed(
    guarded: server_tests.Served, head: bytes, filler: bytes
) -> None:
    server = guarded
    sock = socket.create_connection(("127.0.0.1", server.port))
    sent, answer = stream_until_answered(sock, head, filler, most=8 << 20)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 431 "), (sent, answer[:200])
    assert b"header_too_large" in answer
    assert sent < 1 << 20  # the server stopped reading near the limit, not after 10 s of header
    assert httpx.get(f"{server.base}/healthz", timeout=5).status_code == 200


def test_a_head_just_under_the_limit_is_served(guarded: server_tests.Served) -> None:
    server = guarded
    answer = httpx.get(f"{server.base}/healthz", headers={"x-padding": "p" * 15_000}, timeout=5)
    assert answer.status_code == 200
    # a kept-alive connection counts each request's head on its own
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.settimeout(5)
    request = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-padding: " + b"p" * 10_000 + b"\r\n\r\n"
    for _ in range(5):
        sock.sendall(request)
        answer_bytes = b""
        while b'"status"' not in answer_bytes:
            chunk = sock.recv(65536)
            assert chunk, answer_bytes
            answer_bytes += chunk
        assert answer_bytes.startswith(b"HTTP/1.1 200 "), answer_bytes[:200]
    sock.close()


# -- item 6: a per-client connection cap and an overall body deadline ------------------------------


def test_when_every_slot_holds_a_slow_body_a_new_client_still_gets_in(guarded: server_tests.Served) -> None:
    """The connection cap full of bodies in progress (from six hosts, ten each: the most one
    host may hold) used to refuse every new client with 503."""
    server = guarded
    baseline = open_fds(server.process.pid)
    bodies = []
    for host in range(2, 8):
        bodies += [slow_body(server.port, first=b"{" * 200, host=f"127.0.0.{host}") for _ in range(10)]
        time.sleep(0.1)  # each host's bodies are being read before the next host's arrive
    time.sleep(0.2)
    assert httpx.get(f"{server.base}/healthz", timeout=5).status_code == 200
    assert not is_closed(bodies[-1], within=0.05)  # the newest bodies are still being read
    assert open_fds(server.process.pid) <= baseline + 52
    for _ in range(4):
        assert httpx.get(f"{server.base}/healthz", timeout=5).status_code == 200
    answer = httpx.post(f"{server.base}/v1/check", json={"id": "legit", "text": TEXT}, timeout=5)
    assert answer.status_code == 200 and answer.json()["added"]
    assert is_closed(bodies[0], within=2)  # the oldest bodies made room
    for sock in bodies:
        sock.close()


def test_one_client_holds_at_most_max_client_connections(guarded: server_tests.Served) -> None:
    server = guarded
    baseline = open_fds(server.process.pid)
    bodies = [slow_body(server.port, first=b"{" * 200) for _ in range(30)]
    time.sleep(0.3)
    assert open_fds(server.process.pid) <= baseline + 11
    assert all(is_closed(sock, within=1) for sock in bodies[:20])  # the oldest twenty were cut
    assert not any(is_closed(sock, within=0.05) for sock in bodies[20:])
    answer = httpx.post(f"{server.base}/v1/check", json={"id": "legit", "text": TEXT}, timeout=5)
    assert answer.status_code == 200  # the same address still gets in: a slow body makes room
    for sock in bodies:
        sock.close()


@pytest.mark.parametrize("length", ["20000000", "0" * 30 + "20000000", "9" * 5_000])
def test_a_body_declared_over_the_limit_is_refused_before_it_is_sent(
    guarded: server_tests.Served, length: str
) -> None:
    """The app waits for a body before it starts, except one it will refuse anyway."""
    sock = socket.create_connection(("127.0.0.1", guarded.port))
    sock.settimeout(5)
    sock.sendall(f"POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-length: {length}\r\n\r\n".encode())
    answer = sock.recv(65536)
    sock.close()
    assert answer.startswith((b"HTTP/1.1 413 ", b"HTTP/1.1 400 ")), answer[:200]


def test_a_body_must_arrive_within_the_body_timeout(guarded: server_tests.Served) -> None:
    server = guarded
    sock = slow_body(server.port, length=100_000)
    started, cut = time.monotonic(), False
    while time.monotonic() - started < 10:
        try:
            sock.sendall(b" " * 100)  # 1,000 bytes/s: far above the rate floor, but never done
        except (BrokenPipeError, ConnectionResetError):
            cut = True
            break
        time.sleep(0.1)
    elapsed = time.monotonic() - started
    sock.close()
    assert cut and 3.5 < elapsed < 8, elapsed  # --body-timeout 4


# -- item 14: a client that leaves mid-body is one log line at most --------------------------------


def logged_so_far(server: server_tests.Served) -> str:
    """What the running server has written to its stderr (a pipe nobody else reads yet)."""
    assert server.process.stderr is not None
    descriptor = server.process.stderr.fileno()
    os.set_blocking(descriptor, False)
    chunks = []
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(descriptor, 1 << 20):
            chunks.append(chunk)
    os.set_blocking(descriptor, True)
    return b"".join(chunks).decode("utf-8", "replace")


def test_clients_leaving_mid_body_log_no_tracebacks(guarded: server_tests.Served) -> None:
    """Only this test's clients leave while the app reads their body (the other tests' bodies
    are under 64 KiB, so no app ever starts on them), so the lines counted are its own."""
    server = guarded
    first = b'{"id": "x", "text": "' + b"a" * 70_000  # over 64 KiB: the app is reading it
    for _ in range(100):
        sock = slow_body(server.port, length=1_000_000, first=first)
        time.sleep(0.01)
        sock.close()
    time.sleep(1)
    assert httpx.get(f"{server.base}/healthz", timeout=5).status_code == 200
    stderr = logged_so_far(server)
    assert "Traceback" not in stderr, stderr[:3000]
    lines = [line for line in stderr.splitlines() if "disconnect" in line]
    assert 1 <= len(lines) <= 3, stderr[:3000]  # aggregated: one line, then a count per interval


# -- the acceptance criterion: p99 under 2 s while each attack runs (slow) -------------------------
#
# Each attack runs in a process of its own (``attack_*`` below, started by ``attacking``), so its
# threads never compete with the probes for this process's GIL: the probes time the server.


def _keep_reporting(status: Path, counters: dict[str, int]) -> None:
    """The attack's counters, written to ``status`` twice a second until the process is killed."""
    while True:
        status.write_text(json.dumps(counters))
        time.sleep(0.5)


def attack_endless_header(port: int, status: str) -> None:
    """Four connections stream an endless header as fast as the server reads, reconnecting
    when cut."""
    counters = {"streamed": 0, "connections": 0}

    def endless() -> None:
        filler = b"a" * 65536
        while True:
            sock = socket.create_connection(("127.0.0.1", port))
            counters["connections"] += 1
            try:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-endless: ")
                while True:
                    sock.sendall(filler)
                    counters["streamed"] += len(filler)
            except OSError:
                pass
            finally:
                sock.close()

    for _ in range(4):
        threading.Thread(target=endless, daemon=True).start()
    _keep_reporting(Path(status), counters)


def attack_slow_bodies(port: int, count: int, status: str) -> None:
    """``count`` bodies at 1,024 bytes/s each (the default --min-body-rate); a body that is cut
    is reopened at the next tick, so the pressure never lets up."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    counters = {"opened": 0, "open": 0}

    def trickle() -> None:
        sockets: list[socket.socket | None] = [None] * count
        chunk = b" " * 1024
        while True:
            tick = time.monotonic()
            for number in range(count):
                sock = sockets[number]
                try:
                    if sock is None:
                        sock = sockets[number] = slow_body(port, first=b"{" + chunk)
                        sock.setblocking(False)
                        counters["opened"] += 1
                    else:
                        sock.send(chunk)
                except OSError:
                    if sock is not None:
                        sock.close()
                    sockets[number] = None
            counters["open"] = sum(sock is not None for sock in sockets)
            time.sleep(max(1.0 - (time.monotonic() - tick), 0))

    threading.Thread(target=trickle, daemon=True).start()
    _keep_reporting(Path(status), counters)


def attack_amplification(base: str, batch: str, status: str) -> None:
    """A client posts the amplification batch over and over, giving up after 30 s (and posting
    it again), so the request is always running."""
    body = Path(batch).read_bytes()
    counters = {"sent": 0, "answered": 0, "refused": 0, "gave_up": 0, "largest": 0}

    def amplify() -> None:
        while True:
            counters["sent"] += 1
            try:
                answer = httpx.post(f"{base}/v1/query", content=body, timeout=30)
            except httpx.TimeoutException:
                counters["gave_up"] += 1
                continue
            if answer.status_code == 200:
                counters["answered"] += 1
                counters["largest"] = max(counters["largest"], len(answer.content))
            else:
                counters["refused"] += 1

    threading.Thread(target=amplify, daemon=True).start()
    _keep_reporting(Path(status), counters)


@contextlib.contextmanager
def attacking(tmp_path: Path, name: str, *args: object) -> Iterator[Callable[[], dict[str, int]]]:
    """Run ``attack_<name>(*args, status)`` in its own process while the block runs (stopped
    by PID after); yields a reader of its counters."""
    status = tmp_path / f"{name}.json"
    status.write_text("")
    code = (
        f"from tests.test_service_lockout import attack_{name} as attack; attack(*{(*args, str(status))!r})"
    )
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE, text=True)

    def counters() -> dict[str, int]:
        return dict(json.loads(status.read_text() or "{}"))

    try:
        deadline = time.monotonic() + 60
        while not counters():  # started (imports take seconds on a loaded machine)
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"the {name} attack did not start: {process.communicate()[1]}")
            time.sleep(0.1)
        yield counters
    finally:
        process.kill()
        process.communicate(timeout=30)


def test_p99_under_an_endless_header(tmp_path: Path, served: Callable[..., server_tests.Served]) -> None:
    """As in the issue's probe that stalled /healthz for 30 s and grew memory by 260 MB."""
    server = served()
    rss = rss_bytes(server.process.pid)
    with attacking(tmp_path, "endless_header", server.port) as counters:
        time.sleep(1)
        latencies = probe(server.base)
        grown = rss_bytes(server.process.pid) - rss
        streamed = counters()["streamed"]
    assert streamed > 4 << 20  # the attack ran
    assert report("endless header", latencies) < P99_BOUND, sorted(latencies)[-5:]
    assert grown < 100 << 20, grown


def test_p99_under_slow_bodies_at_the_minimum_rate(
    tmp_path: Path, served: Callable[..., server_tests.Served]
) -> None:
    """2,100 bodies from 127.0.0.1 at the default --min-body-rate (2.1 MB/s in all), more than
    the default --max-connections (2,048), as in the issue's probe (every request 503 for 45 s)."""
    count = 2_100
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < count + 512:
        pytest.skip(f"needs {count + 512} open files; the hard limit is {hard}")
    server = served()
    with attacking(tmp_path, "slow_bodies", server.port, count) as counters:
        time.sleep(5)  # every body is open
        latencies = probe(server.base)
        opened = counters()["opened"]
    assert opened >= count
    assert report("2,100 slow bodies", latencies) < P99_BOUND, sorted(latencies)[-5:]


def test_p99_under_the_amplification_request(
    tmp_path: Path, served: Callable[..., server_tests.Served]
) -> None:
    """3,000 near-identical stored documents and a 165 KB /v1/query of 1,000 copies of one text
    (3 million matches unbounded: a 188 MB answer after 62 s that held every client)."""
    server = served()
    with httpx.Client(base_url=server.base, timeout=120) as client:
        for start in range(0, 3_000, 1_000):
            documents = [{"id": f"s{n}", "text": f"{LONG_TEXT} {n}"} for n in range(start, start + 1_000)]
            assert client.post("/v1/documents", json={"documents": documents}).status_code == 201
    batch = json.dumps({"documents": [{"text": LONG_TEXT}] * 1_000}).encode()
    assert 160_000 < len(batch) < 200_000
    (tmp_path / "batch.json").write_bytes(batch)
    with attacking(tmp_path, "amplification", server.base, str(tmp_path / "batch.json")) as counters:
        time.sleep(1)
        latencies = probe(server.base)
        done = counters()
    print(f"amplification requests: {done}")
    assert report("amplification", latencies) < P99_BOUND, sorted(latencies)[-5:]
    assert done["sent"] > 0 and done["refused"] == 0, done  # the server took on the work

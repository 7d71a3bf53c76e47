"""``neardup serve`` at its edges (issue 28, items 13, 15 and 16, service parts): every mistake
is one ``neardup: error:`` line and exit 1, never a traceback or a server that cannot work.

- ``--port 0`` announces the port the system gave, and a port in use is named as such.
- A bearer token that is not printable ASCII could never match what a client sends
  (headers are not UTF-8), so it is refused at start; so is a token file that is not UTF-8.
- ``GET`` / ``DELETE /v1/documents/<5,000 digits>?type=int`` is a 422, not a 500.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("uvicorn", reason="the serve tests need the 'service' extra (uvicorn, httpx)")
import httpx

from neardup import SimhashIndex
from neardup.fingerprint.config import FingerprintConfig
from neardup.index.config import IndexConfig
from neardup.service import ServiceSettings, create_app

START_TIMEOUT = 60.0


def serve_command(tmp_path: Path, *options: str) -> list[str]:
    store = f"sqlite:///{tmp_path}/edges.db"
    return [sys.executable, "-m", "neardup", "serve", store, "--log-level", "warning", *options]


def refused(tmp_path: Path, *options: str) -> str:
    """stderr of a serve that must stop at start with one error line and exit 1."""
    command = serve_command(tmp_path, *options)
    if "--port" not in options:
        command += ["--port", "0"]  # if it did start, never on a port another test uses
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("neardup: error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def test_port_zero_announces_the_port_it_listens_on(tmp_path: Path) -> None:
    process = subprocess.Popen(
        serve_command(tmp_path, "--port", "0"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        deadline, line = time.monotonic() + START_TIMEOUT, ""
        while time.monotonic() < deadline and "serving" not in line:
            line = process.stderr.readline()
            assert line or process.poll() is None, "neardup serve exited"
        found = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        assert found, line
        port = int(found.group(1))
        assert port != 0
        for _ in range(100):
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert answer.status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert process.returncode == 0


def test_a_port_in_use_is_one_error_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = refused(tmp_path, "--port", str(port))
    assert f"port {port} on 127.0.0.1 is in use" in line and "--port" in line


@pytest.mark.parametrize("token", ["tökén-123", "s3cret\x7f", "日本語"])
def test_a_token_no_client_could_send_is_refused_at_start(tmp_path: Path, token: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n", encoding="utf-8")
    line = refused(tmp_path, "--token-file", str(token_file))
    assert str(token_file) in line and "ASCII" in line


def test_a_token_file_that_is_not_utf8_is_one_error_line(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_bytes(b"\xff\xfesecret\n")
    line = refused(tmp_path, "--token-file", str(token_file))
    assert str(token_file) in line and "UTF-8" in line


def test_settings_refuse_a_token_that_is_not_printable_ascii() -> None:
    from neardup.errors import ConfigError

    with pytest.raises(ConfigError, match="ASCII"):
        ServiceSettings(token="tökén")


def test_an_int_id_of_5000_digits_is_a_422(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    index = SimhashIndex.open(f"sqlite:///{tmp_path}/ids.db", IndexConfig(fingerprint=FingerprintConfig()))
    try:
        with TestClient(create_app(index), raise_server_exceptions=False) as client:
            path = "/v1/documents/" + "7" * 5000
            for method in ("GET", "DELETE"):
                answer = client.request(method, path, params={"type": "int"})
                assert answer.status_code == 422, answer.text[:300]
                error = answer.json()["error"]
                assert error["code"] == "invalid_request" and "\n" not in error["message"]
                assert "5,000" in error["message"]
    finally:
        index.close()


@pytest.mark.parametrize("workers", ["65", "99999999999999999999"])
def test_a_worker_count_past_the_cap_is_refused_before_any_process_starts(
    tmp_path: Path, workers: str
) -> None:
    """An unbounded ``--workers`` started processes until the machine ran out of memory."""
    done = subprocess.run(
        [*serve_command(tmp_path, "--port", "0"), "--workers", workers],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "'--workers'" in done.stderr and "1<=x<=64" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "edges.db").exists()

"""Start and stop real database servers on 127.0.0.1 for neardup's storage tests and benchmarks.

Real servers rather than mocks, because the storage backends must be tested against the same
wire protocols, transactions and durability settings they meet in production. Each server keeps
its data in its own temporary folder, listens on 127.0.0.1 only, and is stopped by its PID, so
that tests never touch a system service or another user's server. Standard library only, so it
runs before `pip install` (CI) and from benchmarks without the test dependencies.

As a module::

    server = start_redis(Path("/tmp/x"))  # -> Server(name, url, pid, dir, port, log)
    ...
    server.stop()

As a command (the server outlives the command; stop it with `stop`)::

    python3 scripts/servers.py start redis|postgres|mariadb|mongo [--dir D] [--port P]
    python3 scripts/servers.py stop --pid PID | --dir D

Install the servers with `bash scripts/install-servers.sh`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "SERVER_NAMES",
    "Server",
    "ServerError",
    "ServerMissing",
    "find_binary",
    "free_port",
    "pid_alive",
    "start",
    "start_mariadb",
    "start_mongo",
    "start_postgres",
    "start_redis",
    "stop_dir",
    "stop_pid",
]

SERVER_NAMES = ("redis", "postgres", "mariadb", "mongo")
INSTALL_HINT = "bash scripts/install-servers.sh"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
STATE_FILE = "server.json"
LOOPBACK = "127.0.0.1"
PR_SET_PDEATHSIG = 1
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:
    _LIBC = None


class ServerError(RuntimeError):
    """A server failed to start or stop; the message carries the tail of its log."""


class ServerMissing(ServerError):
    """The server's binary is not installed (callers may skip rather than fail)."""


@dataclass
class Server:
    """A running server that this process (or an earlier `start` command) launched.

    `pid` is the server process itself (the postmaster for PostgreSQL), never a wrapper, so
    that stopping it by PID really stops the server.
    """

    name: str
    url: str
    pid: int
    dir: Path
    port: int
    log: Path
    stop_signal: int = signal.SIGTERM
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return pid_alive(self.pid)

    def stop(self, timeout: float = STOP_TIMEOUT, remove_dir: bool = False) -> None:
        """Signal the server, wait up to `timeout`, then SIGKILL it; the folder stays unless asked."""
        stop_pid(self.pid, self.stop_signal, timeout, self.process)
        if remove_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.url,
            "pid": self.pid,
            "dir": str(self.dir),
            "port": self.port,
            "log": str(self.log),
        }

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------
# Processes


def pid_alive(pid: int) -> bool:
    """True while `pid` runs; a zombie counts as gone (orphans are reaped by PID 1, maybe late)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stop_pid(
    pid: int,
    sig: int = signal.SIGTERM,
    timeout: float = STOP_TIMEOUT,
    process: subprocess.Popen[bytes] | None = None,
) -> None:
    """Send `sig` to `pid`, wait for it to exit, SIGKILL it after `timeout` seconds."""

    def gone(wait: float) -> bool:
        if process is not None:
            try:
                process.wait(wait)
            except subprocess.TimeoutExpired:
                return False
            return True
        deadline = time.monotonic() + wait
        while pid_alive(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    if gone(0):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    if gone(timeout):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if not gone(10):
        raise ServerError(f"process {pid} survived SIGKILL")


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when the launching thread dies (e.g. pytest
    killed hard), so no server outlives its test run on this shared machine."""
    if _LIBC is not None and sys.platform == "linux":
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port() -> int:
    """A port that is free right now on 127.0.0.1 (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


def _run(args: Sequence[str], log: Path, *, user: str | None = None, timeout: float = START_TIMEOUT) -> None:
    """Run a set-up command (initdb, mariadb-install-db), appending its output to `log`."""
    with log.open("ab") as out:
        out.write(f"$ {shlex.join(args)}\n".encode())
        out.flush()
        result = subprocess.run(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
            cwd=log.parent,
            **_as_user(user),
        )
    if result.returncode != 0:
        raise ServerError(f"{args[0]} failed with status {result.returncode}; {log}:\n{_tail(log)}")


def _as_user(user: str | None) -> dict[str, Any]:
    """Popen arguments that drop root to `user` in the child itself, so that the PID we get is
    the server's own (runuser/su would fork and leave us holding the wrapper's PID)."""
    if user is None or os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _launch(
    args: Sequence[str], log: Path, *, detach: bool, user: str | None = None
) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        out.write(f"$ {shlex.join(args)}\n".encode())
        out.flush()
        return subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=log.parent,
            start_new_session=detach,
            preexec_fn=None if detach else _die_with_parent,
            **_as_user(user),
        )


def _wait_ready(
    name: str,
    process: subprocess.Popen[bytes],
    log: Path,
    ready: Callable[[], bool],
    timeout: float,
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise ServerError(
                f"{name} exited with status {process.returncode} while starting; {log}:\n{_tail(log)}"
            )
        try:
            if ready():
                return
        except OSError:
            pass
        if time.monotonic() >= deadline:
            stop_pid(process.pid, signal.SIGKILL, 5, process)
            raise ServerError(f"{name} did not become ready within {timeout:.0f} s; {log}:\n{_tail(log)}")
        time.sleep(0.05)


def _prepare_dir(name: str, directory: Path | str | None) -> Path:
    if directory is None:
        return Path(tempfile.mkdtemp(prefix=f"neardup-{name}-"))
    path = Path(directory).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _save_state(server: Server) -> None:
    """Write dir/server.json so that `stop --dir` can find the PID later."""
    (server.dir / STATE_FILE).write_text(json.dumps(server.as_dict()) + "\n")


def _start_with_retries(
    name: str, port: int | None, attempt: Callable[[int], Server], retries: int = 3
) -> Server:
    """Retry with a new free port when one we picked was taken meanwhile (a rare race)."""
    for tries_left in range(retries - 1, -1, -1):
        try:
            return attempt(port if port is not None else free_port())
        except ServerError as exc:
            if port is not None or tries_left == 0 or "in use" not in str(exc).lower():
                raise
    raise AssertionError("unreachable")


# ---------------------------------------------------------------------------------------------
# Binaries


def _cache_dir() -> Path:
    if "NEARDUP_CACHE" in os.environ:
        return Path(os.environ["NEARDUP_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neardup"


def _postgres_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin (Debian), else wherever `postgres` is on PATH."""
    override = os.environ.get("NEARDUP_PG_BINDIR")
    if override:
        return Path(override)
    versions = []
    for candidate in Path("/usr/lib/postgresql").glob("*/bin/postgres"):
        with contextlib.suppress(ValueError):
            versions.append((float(candidate.parent.parent.name), candidate.parent))
    if versions:
        return max(versions)[1]
    found = shutil.which("postgres")
    return Path(found).parent if found else None


def find_binary(name: str) -> Path:
    """The executable that runs server `name`, or ServerMissing naming the install script."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])
    path: str | Path | None
    if name == "redis":
        path = shutil.which("redis-server", path=search)
    elif name == "postgres":
        bindir = _postgres_bindir()
        path = bindir / "postgres" if bindir else None
    elif name == "mariadb":
        path = shutil.which("mariadbd", path=search)
    elif name == "mongo":
        path = os.environ.get("NEARDUP_JONGODB") or _cache_dir() / "jongodb" / "package" / "bin" / "jongodb"
    else:
        raise ValueError(f"unknown server {name!r}; choose from {', '.join(SERVER_NAMES)}")
    if path is None or not os.access(path, os.X_OK):
        raise ServerMissing(f"no {name} server binary ({path or 'not on PATH'}); run `{INSTALL_HINT}`")
    return Path(path)


def _tool(name: str, tool: str) -> Path:
    """A helper binary installed next to `name`'s server (initdb, psql, mariadb-install-db)."""
    server = find_binary(name)
    candidates = [server.parent / tool]
    found = shutil.which(tool, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin", "/usr/sbin"]))
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return candidate
    raise ServerMissing(f"no {tool} beside {server}; run `{INSTALL_HINT}`")


# ---------------------------------------------------------------------------------------------
# Readiness probes (raw protocol, so the module needs no client library)


def _redis_ping(port: int) -> bool:
    with socket.create_connection((LOOPBACK, port), timeout=1) as sock:
        sock.sendall(b"*1\r\n$4\r\nPING\r\n")
        return sock.recv(64).startswith(b"+PONG")


def _bson(document: dict[str, int | str]) -> bytes:
    body = b""
    for key, value in document.items():
        if isinstance(value, int):
            body += b"\x10" + key.encode() + b"\0" + struct.pack("<i", value)
        else:
            encoded = value.encode() + b"\0"
            body += b"\x02" + key.encode() + b"\0" + struct.pack("<i", len(encoded)) + encoded
    return struct.pack("<i", len(body) + 5) + body + b"\0"


def _mongo_ping(port: int) -> bool:
    """Send OP_MSG {ping: 1} and check for an OP_MSG reply with ok: 1.0."""
    section = b"\0" + _bson({"ping": 1, "$db": "admin"})
    message = struct.pack("<iiiiI", 16 + 4 + len(section), 1, 0, 2013, 0) + section
    with socket.create_connection((LOOPBACK, port), timeout=2) as sock:
        sock.sendall(message)
        reply = b""
        while len(reply) < 4 or len(reply) < struct.unpack("<i", reply[:4])[0]:
            chunk = sock.recv(4096)
            if not chunk:
                return False
            reply += chunk
    ok = b"\x01ok\0" + struct.pack("<d", 1.0)
    return struct.unpack("<i", reply[12:16])[0] == 2013 and ok in reply


# ---------------------------------------------------------------------------------------------
# Servers


def start_redis(
    directory: Path | str | None = None,
    port: int | None = None,
    *,
    detach: bool = False,
    timeout: float = START_TIMEOUT,
) -> Server:
    """Redis with the append-only file fsynced on every write, so crash tests mean something.

    256 logical databases (instead of 16) so that tests can each take a fresh one.
    """
    binary = find_binary("redis")
    root = _prepare_dir("redis", directory)
    log = root / "redis.log"

    def attempt(port: int) -> Server:
        args = [
            str(binary),
            "--port", str(port),
            "--bind", LOOPBACK,
            "--dir", str(root),
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--daemonize", "no",
            "--databases", "256",
            "--protected-mode", "yes",
        ]  # fmt: skip
        process = _launch(args, log, detach=detach)
        _wait_ready("redis", process, log, lambda: _redis_ping(port), timeout)
        return Server("redis", f"redis://{LOOPBACK}:{port}/0", process.pid, root, port, log, process=process)

    server = _start_with_retries("redis", port, attempt)
    _save_state(server)
    return server


#: Extra ``postgres -c`` settings from NEARDUP_POSTGRES_SETTINGS (space-separated), for
#: measurements at sizes the default 128 MB of shared buffers does not hold.
EXTRA_POSTGRES_SETTINGS = os.environ.get("NEARDUP_POSTGRES_SETTINGS", "").split()


def start_postgres(
    directory: Path | str | None = None,
    port: int | None = None,
    *,
    detach: bool = False,
    timeout: float = START_TIMEOUT,
) -> Server:
    """PostgreSQL with fsync on and trust authentication on 127.0.0.1, plus a `neardup` database.

    initdb and postgres refuse to run as root, so as root the folder is handed to the `postgres`
    user and both run as that user (the folder's parents must let that user through, as /tmp
    does). Stopped with SIGINT (fast shutdown): SIGTERM would wait for every client to leave.
    """
    binary = find_binary("postgres")
    initdb, psql = _tool("postgres", "initdb"), _tool("postgres", "psql")
    root = _prepare_dir("postgres", directory)
    data, log = root / "data", root / "postgres.log"
    user = None
    if os.geteuid() == 0:
        user = "postgres"
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
        log.touch()
        os.chown(log, entry.pw_uid, entry.pw_gid)
        probe = subprocess.run(
            ["test", "-w", str(root), "-a", "-x", str(root)], check=False, **_as_user(user)
        )
        if probe.returncode != 0:
            raise ServerError(
                f"the postgres user cannot enter {root}: as root, PostgreSQL runs as `postgres`, which needs"
                " search (x) permission on every parent folder; pass no folder (a new one is made in the"
                " temporary directory) or `chmod o+x` the parents"
            )
    if not (data / "PG_VERSION").exists():
        _run(
            [
                str(initdb),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            log,
            user=user,
            timeout=timeout,
        )

    def attempt(port: int) -> Server:
        args = [
            str(binary),
            "-D", str(data),
            "-k", str(root),
            "-h", LOOPBACK,
            "-p", str(port),
            "-c", "fsync=on",
            "-c", "synchronous_commit=on",
            "-c", "max_connections=200",
            # More settings for measurements, e.g. "shared_buffers=1GB max_wal_size=4GB".
            *[part for setting in EXTRA_POSTGRES_SETTINGS for part in ("-c", setting)],
        ]  # fmt: skip
        process = _launch(args, log, detach=detach, user=user)
        query = [str(psql), "-X", "-q", "-h", LOOPBACK, "-p", str(port), "-U", "postgres", "-d", "postgres"]

        def ready() -> bool:
            exists = subprocess.run(
                [*query, "-tAc", "SELECT 1 FROM pg_database WHERE datname = 'neardup'"],
                capture_output=True,
                check=False,
                timeout=10,
            )
            if exists.returncode != 0:
                return False
            if exists.stdout.strip() != b"1":
                subprocess.run(
                    [*query, "-c", "CREATE DATABASE neardup"], capture_output=True, check=True, timeout=30
                )
            return True

        _wait_ready("postgres", process, log, ready, timeout)
        url = f"postgresql://postgres@{LOOPBACK}:{port}/neardup"
        return Server("postgres", url, process.pid, root, port, log, signal.SIGINT, process)

    server = _start_with_retries("postgres", port, attempt)
    _save_state(server)
    return server


#: Extra ``mariadbd --NAME=VALUE`` settings from NEARDUP_MARIADB_SETTINGS (space-separated,
#: ``NAME=VALUE`` each, after the defaults so they override them), as for PostgreSQL.
EXTRA_MARIADB_SETTINGS = os.environ.get("NEARDUP_MARIADB_SETTINGS", "").split()


def start_mariadb(
    directory: Path | str | None = None,
    port: int | None = None,
    *,
    detach: bool = False,
    timeout: float = START_TIMEOUT,
) -> Server:
    """MariaDB with a passwordless root (a real account, not --skip-grant-tables, so that the
    backends meet normal privileges) and a `neardup` database; durable InnoDB settings."""
    binary = find_binary("mariadb")
    install_db = _tool("mariadb", "mariadb-install-db")
    client = _tool("mariadb", "mariadb")
    root = _prepare_dir("mariadb", directory)
    data, log, sock = root / "data", root / "mariadb.log", root / "mysql.sock"
    user = pwd.getpwuid(os.geteuid()).pw_name
    common = [
        "--no-defaults",
        f"--datadir={data}",
        f"--user={user}",
        "--innodb-buffer-pool-size=64M",
        "--innodb-log-file-size=32M",
    ]
    if not (data / "mysql").exists():
        _run(
            [
                str(install_db),
                *common,
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ],
            log,
            timeout=timeout,
        )

    def attempt(port: int) -> Server:
        args = [
            str(binary),
            *common,
            f"--socket={sock}",
            f"--port={port}",
            f"--bind-address={LOOPBACK}",
            f"--pid-file={root / 'mariadb.pid'}",
            f"--tmpdir={root}",
            "--innodb-flush-log-at-trx-commit=1",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_bin",
            "--max-connections=200",
            *(f"--{setting}" for setting in EXTRA_MARIADB_SETTINGS),
        ]
        process = _launch(args, log, detach=detach)
        query = [str(client), "--no-defaults", "--protocol=tcp", "-h", LOOPBACK, "-P", str(port), "-uroot"]

        def ready() -> bool:
            result = subprocess.run(
                [*query, "-e", "CREATE DATABASE IF NOT EXISTS neardup"],
                capture_output=True,
                check=False,
                timeout=10,
            )
            return result.returncode == 0

        _wait_ready("mariadb", process, log, ready, timeout)
        return Server(
            "mariadb",
            f"mysql://root@{LOOPBACK}:{port}/neardup",
            process.pid,
            root,
            port,
            log,
            process=process,
        )

    server = _start_with_retries("mariadb", port, attempt)
    _save_state(server)
    return server


def start_mongo(
    directory: Path | str | None = None,
    port: int | None = None,
    *,
    detach: bool = False,
    timeout: float = START_TIMEOUT,
) -> Server:
    """jongodb, an in-memory MongoDB-wire-protocol test server (no real MongoDB installs here).

    It keeps nothing on disk and lacks some admin commands (listDatabases, listCollections,
    dropDatabase); set NEARDUP_MONGODB_URL to test against a real MongoDB.
    """
    binary = find_binary("mongo")
    root = _prepare_dir("mongo", directory)
    log = root / "jongodb.log"

    def attempt(port: int) -> Server:
        process = _launch([str(binary), f"--host={LOOPBACK}", f"--port={port}"], log, detach=detach)
        _wait_ready("mongo", process, log, lambda: _mongo_ping(port), timeout)
        return Server(
            "mongo", f"mongodb://{LOOPBACK}:{port}/neardup", process.pid, root, port, log, process=process
        )

    server = _start_with_retries("mongo", port, attempt)
    _save_state(server)
    return server


STARTERS: dict[str, Callable[..., Server]] = {
    "redis": start_redis,
    "postgres": start_postgres,
    "mariadb": start_mariadb,
    "mongo": start_mongo,
}


def start(
    name: str,
    directory: Path | str | None = None,
    port: int | None = None,
    *,
    detach: bool = False,
    timeout: float = START_TIMEOUT,
) -> Server:
    """Start server `name` (one of SERVER_NAMES; "mysql" and "mongodb" are accepted aliases).

    `directory` defaults to a new temporary folder; `port` to a free one. With `detach`, the
    server gets its own session and outlives this process; otherwise it is SIGTERMed if the
    thread that started it dies, so start long-lived servers from the main thread.
    """
    name = {"mysql": "mariadb", "mongodb": "mongo", "postgresql": "postgres"}.get(name, name)
    if name not in STARTERS:
        raise ValueError(f"unknown server {name!r}; choose from {', '.join(SERVER_NAMES)}")
    return STARTERS[name](directory, port, detach=detach, timeout=timeout)


def _signal_for(pid: int) -> int:
    """SIGINT for a postmaster (fast shutdown), SIGTERM for everything else."""
    try:
        command = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return signal.SIGTERM
    return signal.SIGINT if command in ("postgres", "postmaster") else signal.SIGTERM


def stop_dir(directory: Path | str, timeout: float = STOP_TIMEOUT) -> dict[str, Any]:
    """Stop the server whose `start` wrote directory/server.json; the folder is left in place."""
    state = json.loads((Path(directory) / STATE_FILE).read_text())
    pid = int(state["pid"])
    stop_pid(pid, signal.SIGINT if state["name"] == "postgres" else signal.SIGTERM, timeout)
    return dict(state)


def main(argv: Sequence[str] | None = None, out: IO[str] = sys.stdout) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    start_parser = commands.add_parser("start", help="start a server; print {url, pid, dir, ...} as JSON")
    start_parser.add_argument("name", choices=[*SERVER_NAMES, "mysql", "mongodb", "postgresql"])
    start_parser.add_argument("--dir", help="folder for data and log (default: a new temporary folder)")
    start_parser.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
    start_parser.add_argument("--timeout", type=float, default=START_TIMEOUT)
    stop_parser = commands.add_parser("stop", help="stop a server by PID, or by the folder it was started in")
    which = stop_parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--pid", type=int)
    which.add_argument("--dir")
    stop_parser.add_argument("--timeout", type=float, default=STOP_TIMEOUT)
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            server = start(args.name, args.dir, args.port, detach=True, timeout=args.timeout)
            print(json.dumps(server.as_dict()), file=out)
        elif args.pid is not None:
            stop_pid(args.pid, _signal_for(args.pid), args.timeout)
            print(json.dumps({"stopped": args.pid}), file=out)
        else:
            state = stop_dir(args.dir, args.timeout)
            print(json.dumps({"stopped": state["pid"], "dir": state["dir"]}), file=out)
    except ServerError as exc:
        print(f"servers.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

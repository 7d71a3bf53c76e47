"""pytest plugin: real Redis, PostgreSQL, MariaDB and MongoDB-protocol servers for storage tests.

Storage backends are tested against real servers because their behaviour (transactions,
durability, wire protocol quirks) is the thing under test. Each server starts lazily, once per
session, on 127.0.0.1 in its own temporary folder (scripts/servers.py) and is stopped by PID at
the end. When a server is not installed, tests that need it skip naming
`bash scripts/install-servers.sh`; under CI=true they fail instead, so CI cannot pass vacuously.

Fixtures (URLs are what `neardup.storage.open_storage` takes):

* session: `redis_url` (redis://127.0.0.1:P/0), `postgres_url` (postgresql://postgres@127.0.0.1:P/neardup),
  `mysql_url` (mysql://root@127.0.0.1:P/neardup), `mongodb_url` (mongodb://127.0.0.1:P/neardup).
* per test, empty: `fresh_redis_url` (its own flushed DB number, 1-255), `fresh_postgres_url`,
  `fresh_mysql_url` (a new database, dropped afterwards), `fresh_mongodb_url` (a new database name).
* `throwaway_server(name)`: start a private server for one test (e.g. to kill it), stopped and
  removed after the test; `name` is redis, postgres, mariadb or mongo. `restart_server(server)`
  stops one by PID and starts it again on the same port and folder (its data kept).

NEARDUP_REDIS_URL, NEARDUP_POSTGRES_URL, NEARDUP_MYSQL_URL and NEARDUP_MONGODB_URL point the
session fixtures at existing servers instead (the fresh_* fixtures then create and drop
databases there, and fresh_redis_url flushes DB numbers 1-255 on it).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn
from urllib.parse import unquote, urlsplit, urlunsplit

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]


def _load_servers_module() -> ModuleType:
    """scripts/ is not a package (the script must run before neardup is installed), so load it by path."""
    name = "neardup_test_servers"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPOSITORY / "scripts" / "servers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


servers = _load_servers_module()
Server = servers.Server

#: server name in scripts/servers.py → the variable that names an existing server instead
ENVIRONMENT = {
    "redis": "NEARDUP_REDIS_URL",
    "postgres": "NEARDUP_POSTGRES_URL",
    "mariadb": "NEARDUP_MYSQL_URL",
    "mongo": "NEARDUP_MONGODB_URL",
}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def skip_or_fail(reason: str) -> NoReturn:
    """Skip locally, fail under CI=true: CI must exercise every backend."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def require_servers_marker(request: pytest.FixtureRequest) -> None:
    """Fail a test that reaches a server without the ``servers`` marker (tests/conftest.py
    applies it by fixture name and by parameter value): otherwise the fast lane,
    ``-m "not servers and not spark"``, would start servers unnoticed."""
    node = request.node
    if isinstance(node, pytest.Item) and node.get_closest_marker("servers") is None:
        pytest.fail(
            f"{node.nodeid} uses {request.fixturename} but is not marked `servers`: name the "
            "fixture or the parameter value in tests/conftest.py (SERVER_FIXTURES, SERVER_PARAMETERS)",
            pytrace=False,
        )


def driver(module: str) -> Any:
    """Import a client library or skip/fail naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        pass  # skip outside the handler, so a CI failure is not reported as a chained traceback
    skip_or_fail(f"needs the {module} client: python3 -m pip install -e '.[stores]'")


def require_binary(name: str) -> Path:
    """The server binary for `name`, or skip/fail with a reason naming the install script."""
    try:
        return Path(servers.find_binary(name))
    except servers.ServerMissing as exc:
        reason = str(exc)
    skip_or_fail(reason)


def start_server(name: str, **options: Any) -> Any:
    """Start server `name` in a new temporary folder, or skip/fail if it is not installed."""
    try:
        return servers.start(name, **options)
    except servers.ServerMissing as exc:
        reason = str(exc)
    skip_or_fail(reason)


def _session_url(request: pytest.FixtureRequest, name: str) -> str:
    external = os.environ.get(ENVIRONMENT[name])
    if external:
        return external
    server = start_server(name)
    request.addfinalizer(lambda: server.stop(remove_dir=True))
    return str(server.url)


@pytest.fixture(scope="session")
def redis_url(request: pytest.FixtureRequest) -> str:
    """redis://127.0.0.1:P/0: one server per session (or $NEARDUP_REDIS_URL)."""
    return _session_url(request, "redis")


@pytest.fixture(scope="session")
def postgres_url(request: pytest.FixtureRequest) -> str:
    """postgresql://postgres@127.0.0.1:P/neardup: one server per session (or $NEARDUP_POSTGRES_URL)."""
    return _session_url(request, "postgres")


@pytest.fixture(scope="session")
def mysql_url(request: pytest.FixtureRequest) -> str:
    """mysql://root@127.0.0.1:P/neardup: one server per session (or $NEARDUP_MYSQL_URL)."""
    return _session_url(request, "mariadb")


@pytest.fixture(scope="session")
def mongodb_url(request: pytest.FixtureRequest) -> str:
    """mongodb://127.0.0.1:P/neardup: one server per session (or $NEARDUP_MONGODB_URL)."""
    return _session_url(request, "mongo")


# ---------------------------------------------------------------------------------------------
# A fresh, empty database per test

_counter = itertools.count(1)


def unique_name(prefix: str = "t") -> str:
    """A database name unique across tests and concurrent pytest runs (lowercase, < 64 chars)."""
    return f"{prefix}_{os.getpid()}_{next(_counter)}_{secrets.token_hex(3)}"


def with_database(url: str, database: str) -> str:
    """`url` with its path (the database name or number) replaced."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def _mysql_connect(url: str, database: str | None = None) -> Any:
    pymysql = driver("pymysql")
    parts = urlsplit(url)
    return pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        database=database,
        autocommit=True,
    )


_redis_databases = itertools.cycle(range(1, 256))


@pytest.fixture
def fresh_redis_url(redis_url: str, request: pytest.FixtureRequest) -> str:
    """A flushed Redis DB number of its own (DB 0 stays the session's)."""
    require_servers_marker(request)
    redis = driver("redis")
    url = with_database(redis_url, str(next(_redis_databases)))
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()
    return url


@pytest.fixture
def fresh_postgres_url(postgres_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new, empty database on the session server, dropped (even if still connected) afterwards."""
    require_servers_marker(request)
    psycopg = driver("psycopg")
    name = unique_name()
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    yield with_database(postgres_url, name)
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def fresh_mysql_url(mysql_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new, empty database on the session server, dropped afterwards."""
    require_servers_marker(request)
    name = unique_name()
    connection = _mysql_connect(mysql_url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    finally:
        connection.close()
    yield with_database(mysql_url, name)
    connection = _mysql_connect(mysql_url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        connection.close()


@pytest.fixture
def fresh_mongodb_url(mongodb_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database name nobody used; dropped afterwards where the server supports it (jongodb
    lacks dropDatabase, but it keeps everything in memory and dies with the session)."""
    require_servers_marker(request)
    pymongo = driver("pymongo")
    name = unique_name()
    url = with_database(mongodb_url, name)
    yield url
    client = pymongo.MongoClient(mongodb_url, serverSelectionTimeoutMS=5000)
    try:
        client.drop_database(name)
    except pymongo.errors.OperationFailure:
        pass
    finally:
        client.close()


# ---------------------------------------------------------------------------------------------
# Private servers


def restart_server(server: Any, down_s: float = 0.0) -> Any:
    """Stop ``server`` by its PID, wait ``down_s`` seconds, and start it again on the same port
    and folder (so its data survives: PostgreSQL's and MariaDB's data directories, Redis's
    AOF; jongodb keeps nothing). The ``Server`` object is updated in place (new PID and
    process), so the fixture that started it still stops the right process; it is returned."""
    server.stop()
    if down_s:
        time.sleep(down_s)
    again = start_server(server.name, directory=server.dir, port=server.port)
    server.pid, server.process, server.log = again.pid, again.process, again.log
    return server


@pytest.fixture
def throwaway_server(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """A factory: `throwaway_server("redis")` starts a private server (a `Server` with name, url,
    pid, dir, port, log and .stop()) that is stopped and deleted after the test, for tests that
    kill or restart a server without disturbing the session's."""
    require_servers_marker(request)
    started: list[Any] = []

    def start(name: str, **options: Any) -> Any:
        server = start_server(name, **options)
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop(remove_dir=True)

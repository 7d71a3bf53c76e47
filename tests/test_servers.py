"""The real database servers that storage tests run against (scripts/servers.py, tests/servers.py):
each starts on 127.0.0.1 only, answers its real client, hands out empty per-test databases, and
really ends when stopped by PID, so that no test run leaves servers behind on a shared machine."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.servers import REPOSITORY, driver, require_binary, servers, skip_or_fail

SCRIPT = REPOSITORY / "scripts" / "servers.py"


def listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as in /proc/net/tcp*) with a listening socket on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


LOOPBACK_HEX = {
    "0100007F",  # 127.0.0.1
    "0000000000000000FFFF00000100007F",  # ::ffff:127.0.0.1 (Java's listener, jongodb)
}


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


# ---------------------------------------------------------------------------------------------
# Round trips with the real clients


def test_redis_round_trip(redis_url: str) -> None:
    redis = driver("redis")
    client = redis.Redis.from_url(redis_url)
    client.set("neardup:test", "1")
    assert client.get("neardup:test") == b"1"
    assert client.config_get("appendfsync") == {"appendfsync": "always"}
    client.close()
    assert listening_addresses(port_of(redis_url)) <= LOOPBACK_HEX


def test_postgres_round_trip(postgres_url: str) -> None:
    psycopg = driver("psycopg")
    assert postgres_url.startswith("postgresql://postgres@127.0.0.1:") and postgres_url.endswith("/neardup")
    with psycopg.connect(postgres_url) as connection:
        connection.execute("CREATE TEMP TABLE t (k text PRIMARY KEY, v bigint)")
        connection.execute("INSERT INTO t VALUES (%s, %s)", ("a", 2**63 - 1))
        assert connection.execute("SELECT v FROM t").fetchone() == (2**63 - 1,)
        assert connection.execute("SHOW fsync").fetchone() == ("on",)
    assert listening_addresses(port_of(postgres_url)) <= LOOPBACK_HEX


def test_mysql_round_trip(mysql_url: str) -> None:
    pymysql = driver("pymysql")
    assert mysql_url.startswith("mysql://root@127.0.0.1:") and mysql_url.endswith("/neardup")
    connection = pymysql.connect(host="127.0.0.1", port=port_of(mysql_url), user="root", database="neardup")
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMPORARY TABLE t (k VARCHAR(32) PRIMARY KEY, v BIGINT UNSIGNED) ENGINE=InnoDB"
        )
        cursor.execute("INSERT INTO t VALUES (%s, %s)", ("a", 2**64 - 1))
        cursor.execute("SELECT v FROM t")
        assert cursor.fetchone() == (2**64 - 1,)
        cursor.execute("SELECT @@innodb_flush_log_at_trx_commit")
        assert cursor.fetchone() == (1,)
    connection.close()
    assert listening_addresses(port_of(mysql_url)) <= LOOPBACK_HEX


def test_mongo_round_trip(mongodb_url: str) -> None:
    pymongo = driver("pymongo")
    client = pymongo.MongoClient(mongodb_url, serverSelectionTimeoutMS=5000)
    collection = client.get_default_database()["round_trip"]
    collection.insert_one({"_id": "a", "hashcode": 2**63 - 1})
    assert collection.find_one({"_id": "a"}) == {"_id": "a", "hashcode": 2**63 - 1}
    client.close()


# ---------------------------------------------------------------------------------------------
# Fresh databases are empty and separate from the session's


def test_fresh_redis_url_is_empty_and_separate(redis_url: str, fresh_redis_url: str) -> None:
    redis = driver("redis")
    assert fresh_redis_url != redis_url
    fresh, session = redis.Redis.from_url(fresh_redis_url), redis.Redis.from_url(redis_url)
    assert fresh.dbsize() == 0
    fresh.set("only-here", "1")
    assert session.get("only-here") is None
    fresh.close()
    session.close()


def test_fresh_postgres_url_is_empty_and_separate(postgres_url: str, fresh_postgres_url: str) -> None:
    psycopg = driver("psycopg")
    assert fresh_postgres_url != postgres_url
    with psycopg.connect(fresh_postgres_url) as connection:
        tables = "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        assert connection.execute(tables).fetchone() == (0,)
        connection.execute("CREATE TABLE only_here (k int)")
    with psycopg.connect(postgres_url) as connection:
        assert connection.execute("SELECT to_regclass('only_here')").fetchone() == (None,)


def test_fresh_mysql_url_is_empty_and_separate(mysql_url: str, fresh_mysql_url: str) -> None:
    pymysql = driver("pymysql")
    name = fresh_mysql_url.rsplit("/", 1)[1]
    assert name != "neardup"
    connection = pymysql.connect(host="127.0.0.1", port=port_of(mysql_url), user="root", database=name)
    with connection.cursor() as cursor:
        cursor.execute("SHOW TABLES")
        assert cursor.fetchall() == ()
        cursor.execute("SELECT @@character_set_database, @@collation_database")
        assert cursor.fetchone() == ("utf8mb4", "utf8mb4_bin")
    connection.close()


def test_fresh_mongodb_url_names_a_new_database(mongodb_url: str, fresh_mongodb_url: str) -> None:
    pymongo = driver("pymongo")
    client = pymongo.MongoClient(fresh_mongodb_url, serverSelectionTimeoutMS=5000)
    database = client.get_default_database()
    assert database.name != "neardup"
    assert database["anything"].count_documents({}) == 0
    client.close()


# ---------------------------------------------------------------------------------------------
# Stopping by PID really ends the server


@pytest.mark.parametrize("name", ["redis", "postgres", "mariadb", "mongo"])
def test_stop_by_pid_ends_the_server(name: str, throwaway_server: Callable[..., Any]) -> None:
    server = throwaway_server(name)
    assert server.alive() and not refuses(server.port)
    assert listening_addresses(server.port) <= LOOPBACK_HEX
    assert json.loads((server.dir / "server.json").read_text())["pid"] == server.pid
    server.stop()
    assert not server.alive()
    assert not servers.pid_alive(server.pid)
    assert refuses(server.port)


def test_redis_keeps_acknowledged_writes_across_kill_9(throwaway_server: Callable[..., Any]) -> None:
    """AOF with appendfsync=always: a restart on the same folder sees every acknowledged write."""
    redis = driver("redis")
    server = throwaway_server("redis")
    client = redis.Redis.from_url(server.url)
    client.set("k", "v")
    client.close()
    os.kill(server.pid, signal.SIGKILL)
    server.stop()  # reaps it
    restarted = throwaway_server("redis", directory=server.dir)
    client = redis.Redis.from_url(restarted.url)
    assert client.get("k") == b"v"
    client.close()


def test_command_line_start_and_stop() -> None:
    """`start` detaches the server (it outlives the command); `stop --pid` / `stop --dir` end it."""
    require_binary("redis")
    run = [sys.executable, str(SCRIPT)]
    for how in ("--pid", "--dir"):
        started = subprocess.run(
            [*run, "start", "redis"], capture_output=True, text=True, check=True, timeout=60
        )
        state = json.loads(started.stdout)
        assert state["url"] == f"redis://127.0.0.1:{state['port']}/0"
        assert servers.pid_alive(state["pid"])
        target = str(state["pid"]) if how == "--pid" else state["dir"]
        subprocess.run([*run, "stop", how, target], capture_output=True, check=True, timeout=60)
        assert not servers.pid_alive(state["pid"])
        assert Path(state["dir"], "redis.log").exists()  # stopping removes nothing
        subprocess.run(["rm", "-rf", state["dir"]], check=True)


def test_start_failure_names_the_log(tmp_path: Path) -> None:
    """A server that cannot start (its port is taken) fails fast with the tail of its log."""
    require_binary("redis")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(servers.ServerError, match=r"(?s)exited with status.*in use"):
            servers.start_redis(tmp_path, port=taken.getsockname()[1], timeout=20)


def test_missing_server_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEARDUP_JONGODB", "/nonexistent/jongodb")
    with pytest.raises(servers.ServerMissing, match=r"bash scripts/install-servers\.sh"):
        servers.find_binary("mongo")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        skip_or_fail("absent")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception):
        skip_or_fail("absent")

"""``records --write-table`` appears whole or not at all (issue 28 item 5): a write that fails
half-way (a full disk, a bad row) or a process killed at any statement of it leaves the
previous table whole, never an empty or partial one, on SQLite, PostgreSQL and MariaDB (real
servers from tests/servers.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from neardup.errors import NeardupError
from neardup.records.sources import GroupRows, driver_url, write_groups

from .test_records_sql import fresh_database_url

sa = pytest.importorskip("sqlalchemy")

#: Rows of the table a replacing write must not lose (the size the issue's probe lost).
OLD_ROWS = 60_000


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database holding ``people`` (30 rows, rows 1-2 and 10-12 duplicates) and the
    ``groups`` table of an earlier run (:data:`OLD_ROWS` rows, distance 7 everywhere)."""
    url = fresh_database_url(request, tmp_path / "people.db")
    engine = sa.create_engine(driver_url(url))
    metadata = sa.MetaData()
    people = sa.Table(
        "people",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(50)),
        sa.Column("city", sa.String(50)),
        sa.Column("born", sa.String(10)),
    )
    metadata.create_all(engine)
    cities = ["Boston", "Leeds", "Perth", "Lyon", "Graz", "Turku"]
    rows = [
        {
            "id": n,
            "name": f"Person{n} Surname{n * 7}",
            "city": cities[n % 6],
            "born": f"19{n + 40}-01-0{n % 9 + 1}",
        }
        for n in range(1, 31)
    ]
    rows[1].update(name=rows[0]["name"], city=rows[0]["city"], born=rows[0]["born"])
    for n in (10, 11):
        rows[n].update(name=rows[9]["name"], city=rows[9]["city"], born=rows[9]["born"])
    with engine.begin() as connection:
        connection.execute(people.insert(), rows)
    write_groups(engine, "groups", _old_rows())
    engine.dispose()
    yield url


def _old_rows() -> GroupRows:
    keys = list(range(1, OLD_ROWS + 1))
    return GroupRows(keys, keys, keys, [7] * OLD_ROWS)


def _state(url: str) -> tuple[int | None, set[str]]:
    """The rows of ``groups`` (None if there is no such table) and every table's name."""
    engine = sa.create_engine(driver_url(url))
    try:
        names = set(sa.inspect(engine).get_table_names())
        if "groups" not in names:
            return None, names
        with engine.connect() as connection:
            count = connection.execute(sa.text("SELECT count(*) FROM groups")).scalar_one()
            sevens = connection.execute(
                sa.text("SELECT count(*) FROM groups WHERE distance = 7")
            ).scalar_one()
        assert sevens in (0, count), "a table mixing old and new rows"
        return int(count), names
    finally:
        engine.dispose()


def _assert_old_table_whole(url: str) -> None:
    count, names = _state(url)
    assert count == OLD_ROWS
    assert "people" in names


# -- a write that fails half-way ---------------------------------------------------------------


def test_a_failing_write_leaves_the_previous_table_whole(database: str) -> None:
    """A bad row after 20,000 good ones (a repeated key) fails the write: the previous table
    stays as it was, and no half-written or temporary table is left."""
    keys = [*range(1, 20_001), 5]
    bad = GroupRows(keys, [1] * len(keys), keys, [0] * len(keys))
    with pytest.raises(NeardupError):
        write_groups(database, "groups", bad, replace=True)
    _assert_old_table_whole(database)
    assert _state(database)[1] == {"people", "groups"}


def test_a_failing_first_write_leaves_no_table(database: str) -> None:
    keys = [1, 2, 3, 1]
    with pytest.raises(NeardupError):
        write_groups(database, "fresh_groups", GroupRows(keys, keys, keys, [0] * 4))
    assert _state(database)[1] == {"people", "groups"}


def test_a_full_disk_leaves_the_previous_sqlite_table_whole(tmp_path: Path) -> None:
    """SQLite's page limit stands in for a full disk: the write fails with a one-line error,
    the previous table is whole (before: an empty ``groups`` read as "no duplicates")."""
    url = f"sqlite:///{tmp_path / 'full.db'}"
    engine = sa.create_engine(url)
    write_groups(engine, "groups", _old_rows())
    with engine.connect() as connection:
        pages = connection.exec_driver_sql("PRAGMA page_count").scalar_one()
    engine.dispose()
    engine = sa.create_engine(url)
    sa.event.listen(
        engine, "connect", lambda dbapi, _: dbapi.execute(f"PRAGMA max_page_count = {pages + 40}")
    )
    keys = list(range(1, 2 * OLD_ROWS))
    with pytest.raises(NeardupError, match="full"):
        write_groups(engine, "groups", GroupRows(keys, keys, keys, [0] * len(keys)), replace=True)
    engine.dispose()
    assert _state(url) == (OLD_ROWS, {"groups"})


# -- a process killed at every statement of the write -------------------------------------------

#: The child: ``neardup records`` killed (SIGKILL) at the Nth event of its table write (before
#: every statement and every commit), counted from the first statement that writes
#: (the reads and checks before it cannot lose a table, and each child costs seconds).
CHILD = textwrap.dedent(
    """
    import os, re, signal, sys
    import sqlalchemy as sa

    kill_at, events, writing = int(sys.argv[1]), [0], [False]
    WRITES = re.compile(r"\\s*(BEGIN|CREATE|DROP|RENAME|INSERT|SELECT GET_LOCK)", re.I)

    def step(_connection, *args):
        if not writing[0] and args and isinstance(args[1], str) and WRITES.match(args[1]):
            writing[0] = True
        if writing[0]:
            events[0] += 1
            if events[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    for name in ("before_cursor_execute", "commit"):  # after a statement = before the next
        sa.event.listen(sa.engine.Engine, name, step)
    from neardup.cli.main import main
    main(sys.argv[2:])
    """
)


def _run_killed_at(url: str, kill_at: int) -> int:
    command = [
        sys.executable,
        "-c",
        CHILD,
        str(kill_at),
        "records",
        url,
        "--table",
        "people",
        "--key",
        "id",
        "--write-table",
        "groups",
        "--replace-table",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, -signal.SIGKILL), done.stderr
    return done.returncode


@pytest.mark.parametrize("database", ["sqlite", "mariadb"], indirect=True)
def test_sigkill_at_any_point_of_replace_table_keeps_one_whole_table(database: str) -> None:
    """Killed before any statement of the write, or at a commit: ``groups`` is
    the previous table whole or the new one whole. Leftovers of a killed run are removed by
    the next one, which touches no other table."""
    seen_new = False
    for kill_at in range(1, 200):
        code = _run_killed_at(database, kill_at)
        count, names = _state(database)
        assert count in (OLD_ROWS, 30), f"killed at event {kill_at}: groups has {count} rows"
        if count == 30:
            seen_new = True
        assert {"people", "groups"} <= names
        if code == 0:
            break
        if count == 30:  # swapped in before the kill: start again from the old table
            write_groups(database, "groups", _old_rows(), replace=True)
    else:
        pytest.fail("the write never finished")
    print(f"{kill_at - 1} kill points")
    assert seen_new and kill_at > 3
    _run_killed_at(database, 10_000)  # a whole run: it removes what killed runs left
    count, names = _state(database)
    assert count == 30
    assert names == {"people", "groups"}


@pytest.mark.parametrize("database", ["mariadb"], indirect=True)
def test_only_leftovers_of_dead_writers_are_dropped(database: str) -> None:
    """MariaDB: a temporary table whose writer still holds its lock (a write in progress in
    another process) is kept; one whose lock is free (its writer was killed) is dropped; a
    user's table named almost like them is never touched."""
    from neardup.records.sources import TEMPORARY_TABLE

    live, dead = "0123456789abcdef", "fedcba9876543210"
    user_tables = ("neardup_tmp_new_0123", "neardup_tmp_users")
    engine = sa.create_engine(driver_url(database))
    holder = engine.connect()
    try:
        holder.exec_driver_sql("SELECT GET_LOCK(%s, 0)", (f"neardup_tmp_{live}",))
        for name in (f"neardup_tmp_new_{live}", f"neardup_tmp_old_{dead}", *user_tables):
            assert TEMPORARY_TABLE.fullmatch(name) or name in user_tables
            holder.exec_driver_sql(f"CREATE TABLE {name} (x INT)")
        keys = [1, 2]
        write_groups(engine, "groups", GroupRows(keys, keys, keys, [0, 0]), replace=True)
        names = set(sa.inspect(engine).get_table_names())
        assert names == {"people", "groups", f"neardup_tmp_new_{live}", *user_tables}
    finally:
        holder.close()
        engine.dispose()

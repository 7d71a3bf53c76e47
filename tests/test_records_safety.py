"""``neardup records`` never changes what it reads (issue 15): ``--query`` runs read-only
(a parser check and a read-only transaction, each tested alone), ``--write-table`` never
replaces a table the source reads, and CSV quoting is strict. Real SQLite, PostgreSQL and
MariaDB (tests/servers.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from neardup import ConfigError, NeardupError
from neardup.cli.main import main
from neardup.records.sources import SqlSource, driver_url, read_only_connection
from neardup.records.sql_guard import read_only_query

from .test_records_sql import count_rows, fresh_database_url

sa = pytest.importorskip("sqlalchemy")

ROWS = 50


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL holding ``people`` (50 rows) and a view ``everyone`` over it."""
    url = fresh_database_url(request, tmp_path / "crm.db")
    engine = sa.create_engine(driver_url(url))
    metadata = sa.MetaData()
    people = sa.Table(
        "people",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(50)),
    )
    metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(people.insert(), [{"id": key, "name": f"person {key}"} for key in range(ROWS)])
        connection.exec_driver_sql("CREATE VIEW everyone AS SELECT id, name FROM people")
    engine.dispose()
    yield url


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["records", *args])


def refused(result: Result, *words: str) -> None:
    """Exit 1 with a one-line message holding ``words``, never a traceback."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    message = result.output.strip()
    assert "\n" not in message and "Traceback" not in message, message
    for word in words:
        assert word in message, message


def test_query_check_refuses_writes_wherever_they_hide() -> None:
    writes = {
        "WITH x AS (SELECT 1) DELETE FROM people": "DELETE",
        "with x as (select 1) insert into people values (1, 'a')": "INSERT",
        "WITH x AS (SELECT 1) UPDATE people SET name = 'a'": "UPDATE",
        "WITH d AS (DELETE FROM people RETURNING *) SELECT * FROM d": "DELETE",
        "SELECT * FROM people INTO OUTFILE '/tmp/neardup-probe'": "INTO",
        "SELECT name INTO @v FROM people LIMIT 1": "INTO",
        "SELECT * INTO people_copy FROM people": "INTO",
        "SELECT 1; DELETE FROM people": "one SELECT",
        "DELETE FROM people": "must be one SELECT",
        # a string one database ends early must not hide a statement from the others
        "SELECT '\\'; DELETE FROM people; -- ' AS x": "one SELECT",
        "SELECT 1 /*!50000 INTO OUTFILE '/tmp/x' */": "/*!",
        "/* /* */ ' */ DELETE FROM people; --'": "SELECT",
        "SELECT $$ ; DELETE FROM people; $$": "one SELECT",
        "SELECT 'unclosed FROM people": "not closed",
    }
    for query, word in writes.items():
        with pytest.raises(ConfigError, match=r"^query") as caught:
            read_only_query(query)
        assert word in str(caught.value), (query, str(caught.value))
    reads = {
        "SELECT replace(name, 'a', 'b') AS n FROM people;": "SELECT replace(name, 'a', 'b') AS n FROM people",
        "select 'DELETE; INTO' x, \"update\" from t -- no\n": "select 'DELETE; INTO' x, \"update\" from t -- no",  # noqa: E501
        "(SELECT 1) UNION (SELECT 2)": "(SELECT 1) UNION (SELECT 2)",
        "VALUES (1, 'a')": "VALUES (1, 'a')",
    }  # fmt: skip
    for query, text in reads.items():
        assert read_only_query(query) == text


def test_a_query_that_writes_is_refused_and_the_table_untouched(database: str, tmp_path: Path) -> None:
    out = str(tmp_path / "g.jsonl")
    delete = run(
        database, "--query", "WITH x AS (SELECT 1) DELETE FROM people", "--key", "id", "--clusters", out
    )
    refused(delete, "must only read", "DELETE")
    outfile = tmp_path / "outfile.txt"
    into = run(
        database,
        "--query",
        f"SELECT * FROM people INTO OUTFILE '{outfile}'",
        "--key",
        "id",
        "--clusters",
        out,
    )
    refused(into, "INTO")
    assert count_rows(database, "people") == ROWS and not outfile.exists()
    # a plain SELECT still runs, and the connection it read through can write the groups afterwards
    good = run(
        database, "--query", "SELECT * FROM people;", "--key", "id", "--clusters", out, "--write-table", "grp"
    )
    assert good.exit_code == 0, good.output
    assert len(Path(out).read_text(encoding="utf-8").splitlines()) == ROWS
    engine = sa.create_engine(driver_url(database))
    with engine.connect() as connection:  # key 0 stays 0 (no MySQL AUTO_INCREMENT on row_key)
        keys = connection.exec_driver_sql("SELECT row_key FROM grp ORDER BY row_key").scalars().all()
    engine.dispose()
    assert keys == list(range(ROWS))


def test_the_read_only_transaction_refuses_writes_the_parser_would_miss(database: str) -> None:
    engine = sa.create_engine(driver_url(database))
    try:
        with read_only_connection(engine) as connection, pytest.raises(sa.exc.DBAPIError):
            connection.exec_driver_sql("DELETE FROM people")
        source = SqlSource(engine, query="SELECT * FROM people")
        source.statement = sa.text(  # as if the check had been bypassed
            "DELETE FROM people"
            if engine.dialect.name != "sqlite"
            else "WITH x AS (SELECT 1) DELETE FROM people"
        )
        with pytest.raises(NeardupError, match="read-only"):
            source.open()
        source.close()
    finally:
        engine.dispose()
    assert count_rows(database, "people") == ROWS


def test_write_table_never_replaces_what_the_source_reads(database: str, tmp_path: Path) -> None:
    common = ("--key", "id", "--replace-table")
    refused(run(database, "--table", "people", *common, "--write-table", "PEOPLE"), "source table")
    refused(
        run(database, "--query", "SELECT * FROM people", *common, "--write-table", "people"), "named by query"
    )
    refused(
        run(database, "--query", "select * from PEOPLE", *common, "--write-table", "People"), "named by query"
    )
    refused(run(database, "--table", "everyone", *common, "--write-table", "people"), "view 'everyone'")
    refused(run(database, "--query", "SELECT * FROM everyone", *common, "--write-table", "people"), "view")
    assert count_rows(database, "people") == ROWS
    # a table the source does not read can be written and replaced
    for _ in range(2):
        written = run(database, "--query", "SELECT * FROM everyone", *common, "--write-table", "grp")
        assert written.exit_code == 0, written.output
    assert count_rows(database, "grp") == ROWS and count_rows(database, "people") == ROWS


def test_a_table_function_in_the_query_keeps_an_existing_target(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crm.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT)")
        connection.exec_driver_sql("INSERT INTO people VALUES (1, 'a'), (2, 'b')")
    engine.dispose()
    query = 'SELECT key AS id, value AS name FROM json_each(\'["x", "y"]\')'
    refused(
        run(url, "--query", query, "--key", "id", "--write-table", "people", "--replace-table"),
        "table function",
    )
    assert count_rows(url, "people") == 2
    fresh = run(url, "--query", query, "--key", "id", "--write-table", "grp", "--replace-table")
    assert fresh.exit_code == 0, fresh.output


PROBE_CSV = 'id,text\n1,"a stray quote\n2,second row\n3,third row\n4,fourth "row"\n5,fifth\n'


def clusters(path: Path) -> list[Any]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_csv_quoting_is_strict(tmp_path: Path) -> None:
    source = tmp_path / "s.csv"
    source.write_text(PROBE_CSV, encoding="utf-8")
    out = tmp_path / "c.jsonl"
    refused(run(str(source), "--key", "id", "--clusters", str(out)), f"{source}:", "line 2", "quote")
    skipped = run(str(source), "--key", "id", "--clusters", str(out), "--on-error", "skip")
    assert skipped.exit_code == 0, skipped.output
    assert "2 skipped" in skipped.output and "line 5" in skipped.output
    assert clusters(out) == ["2", "3", "5"]
    unclosed = tmp_path / "u.csv"
    unclosed.write_text('id,text\n1,ok\n2,"never closed\n3,x\n', encoding="utf-8")
    refused(run(str(unclosed), "--key", "id", "--clusters", str(out)), "line 3", "lines 3-4")
    # a quoted field may hold newlines, commas and doubled quotes
    multi = tmp_path / "m.csv"
    multi.write_text('id,text\n1,"two\nlines, and ""quotes"""\n2,x\n', encoding="utf-8")
    assert run(str(multi), "--key", "id", "--clusters", str(out)).exit_code == 0
    assert clusters(out) == ["1", "2"]

"""Duplicate rows read from real databases: SQLite, PostgreSQL and MariaDB (servers from
tests/servers.py; they skip locally when absent and fail under CI=true)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from neardup import ConfigError
from neardup.cli.main import main
from neardup.records.dedup import find_duplicate_records
from neardup.records.schema import RecordSchema
from neardup.records.sources import SqlSource, driver_url, open_source

sa = pytest.importorskip("sqlalchemy")

HOSTILE_TABLE = 'complaints"; DROP TABLE complaints; --'
HOSTILE_COLUMN = "name`); DROP TABLE complaints; --"
CHUNK = 7
#: Planted groups: key → the key of the group's first row.
PLANTED = {100: 100, 101: 100, 200: 200, 201: 200, 300: 300, 301: 300, 302: 300}
#: The DBAPI cursor class SQLAlchemy streams through: server-side on the servers.
STREAMING_CURSOR = {"sqlite": "Cursor", "postgresql": "ServerCursor", "mysql": "SSCursor"}


def _rows() -> list[dict[str, Any]]:
    """Random distinct complaints plus planted near-duplicates: width, case, spacing, a
    changed word, amounts written as 1000 vs 1000.00, nulls, Chinese, English and both."""
    rng = random.Random(5)
    names = ["王伟", "李娜", "Emma Brown", "刘强", "David Evans", "陈静", "Sarah Wilson", "赵磊"]
    words = [
        "road",
        "water",
        "noise",
        "light",
        "park",
        "school",
        "bus",
        "tree",
        "道路",
        "积水",
        "噪音",
        "路灯",
        "公园",
        "学校",
        "公交",
        "树木",
    ]
    rows = []
    for key in range(1, 41):
        rows.append(
            {
                "id": key,
                "name": f"{rng.choice(names)}{key}",
                "phone": None if key % 5 == 0 else f"1{rng.randrange(10**10):010d}",
                "filed": date(2010 + key % 12, 1 + key % 12, 1 + key % 28),
                "amount": None if key % 3 == 0 else Decimal(rng.randrange(1, 10**6)) / 100,
                "score": rng.random() if key % 4 else None,
                "category": rng.choice(["教育", "城市管理", "城乡建设", "transport", None]),
                "content": " ".join(rng.sample(words, 6)) + f" case {key}",
            }
        )
    zh = "小区门口垃圾长期无人清理，气味难闻，希望城管部门尽快处理，已经反映多次仍未解决"
    en = "The street light outside number 12 has been broken for two weeks and the road is dark at night"
    zh_copy = zh.replace("难闻", "很难闻")
    mixed = "Wi-Fi 信号很差，building 5 的住户无法上网，希望运营商 China Telecom 尽快派人检修"
    planted = [
        (100, "张三", "13800138000", date(2015, 12, 14), Decimal("1000"), 0.5, "城市管理", zh),
        (101, "张三", "13800138000", date(2015, 12, 14), Decimal("1000.00"), 0.5, "城市管理", zh_copy),
        (200, "John  Smith", None, date(2016, 1, 2), Decimal("250"), None, "transport", en),
        (201, "JOHN SMITH", "", date(2016, 1, 2), Decimal("250.0"), None, "transport", en + "!"),
        (300, "李四", "13900000000", date(2017, 3, 4), None, 1.25, "城乡建设", mixed),
        (301, "李四", "13900000000", date(2017, 3, 4), None, 1.25, "城乡建设", mixed + "。"),
        (302, "李四", "13900000000", date(2017, 3, 4), None, 1.25, "城乡建设", mixed.replace("很差", "太差")),
    ]  # fmt: skip
    columns = ["id", "name", "phone", "filed", "amount", "score", "category", "content"]
    rows.extend(dict(zip(columns, row, strict=True)) for row in planted)
    return rows


def _table(metadata: Any, name: str = "complaints", name_column: str = "name") -> Any:
    return sa.Table(
        name,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column(name_column, sa.String(100)),
        sa.Column("phone", sa.String(30)),
        sa.Column("filed", sa.Date),
        sa.Column("amount", sa.Numeric(12, 2)),
        sa.Column("score", sa.Float),
        sa.Column("category", sa.String(50)),
        sa.Column("content", sa.Text),
    )


def fresh_database_url(request: pytest.FixtureRequest, sqlite_file: Path) -> str:
    """An empty database of the kind a fixture is parametrised with ("sqlite", "postgresql",
    "mariadb"): SQLite in ``sqlite_file``, else a real server from tests/servers.py."""
    if request.param == "sqlite":
        return f"sqlite:///{sqlite_file}"
    server = {"postgresql": "fresh_postgres_url", "mariadb": "fresh_mysql_url"}[request.param]
    return str(request.getfixturevalue(server))


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL (as a user writes it) holding the complaints table."""
    url = fresh_database_url(request, tmp_path / "complaints.db")
    engine = sa.create_engine(driver_url(url))
    metadata = sa.MetaData()
    table = _table(metadata)
    metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(table.insert(), _rows())
    engine.dispose()
    yield url


def count_rows(url: str, table: str) -> int:
    """The rows of ``table``, counted on a connection of its own."""
    engine = sa.create_engine(driver_url(url))
    try:
        with engine.connect() as connection:
            return int(
                connection.execute(sa.select(sa.func.count()).select_from(sa.table(table))).scalar_one()
            )
    finally:
        engine.dispose()


def _clusters(result: Any) -> dict[Any, Any]:
    return {row["id"]: row["cluster"] for row in result.cluster_rows()}


def _expected() -> dict[int, int]:
    return {row["id"]: PLANTED.get(row["id"], row["id"]) for row in _rows()}


def test_planted_duplicates_are_found_reading_in_chunks(database: str) -> None:
    engine = sa.create_engine(driver_url(database))
    source = SqlSource(engine, table="complaints", chunk_size=CHUNK)
    sizes: list[int] = []

    def chunks() -> Iterator[Any]:
        for chunk in source.chunks():
            sizes.append(chunk.count)
            yield chunk

    result = find_duplicate_records(source.columns, chunks(), RecordSchema("id"), source_name=source.name)
    engine.dispose()
    assert _clusters(result) == _expected()
    total = len(_rows())
    assert sum(sizes) == total and max(sizes) == CHUNK and source.fetches == -(-total // CHUNK)
    assert source.cursor == STREAMING_CURSOR[engine.dialect.name]
    kinds = {field.name: field.kind for field in result.schema.fields}
    assert kinds == {
        "name": "short",
        "phone": "number",
        "filed": "date",
        "amount": "number",
        "score": "number",
        "category": "short",
        "content": "text",
    }


def test_a_query_is_streamed_too(database: str) -> None:
    source = open_source(
        database, query="SELECT id, name, content FROM complaints WHERE id >= 100;", chunk_size=3
    )
    assert isinstance(source, SqlSource)
    source.open()
    assert source.columns == ["id", "name", "content"]
    result = find_duplicate_records(source.columns, source.chunks(), RecordSchema("id"))
    source.dispose()
    assert _clusters(result) == {key: PLANTED[key] for key in sorted(PLANTED)}
    assert source.fetches == 3


def test_hostile_names_are_quoted_or_refused(database: str) -> None:
    engine = sa.create_engine(driver_url(database))
    metadata = sa.MetaData()
    hostile = _table(metadata, HOSTILE_TABLE, HOSTILE_COLUMN)
    metadata.create_all(engine)
    rows = [
        {HOSTILE_COLUMN if key == "name" else key: value for key, value in row.items()} for row in _rows()
    ]
    with engine.begin() as connection:
        connection.execute(hostile.insert(), rows)
    # an existing table with a hostile name is read as data, through quoted identifiers
    source = SqlSource(engine, table=HOSTILE_TABLE, chunk_size=CHUNK)
    assert HOSTILE_COLUMN in source.columns
    result = find_duplicate_records(source.columns, source.chunks(), RecordSchema("id"))
    assert _clusters(result) == _expected()
    # a name that is not a table is refused before any SQL is built from it
    with pytest.raises(ConfigError, match="no table or view 'complaints; DROP TABLE complaints'"):
        SqlSource(engine, table="complaints; DROP TABLE complaints")
    with pytest.raises(ConfigError, match="must be one SELECT"):
        SqlSource(engine, query="DELETE FROM complaints")
    engine.dispose()
    assert count_rows(database, "complaints") == len(_rows())


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_cli_writes_clusters_and_a_groups_table(database: str, tmp_path: Path) -> None:
    clusters = tmp_path / "groups.jsonl"
    common = [database, "--table", "complaints", "--key", "id", "--chunk-size", str(CHUNK)]
    result = run("records", *common, "--clusters", str(clusters), "--write-table", "neardup_groups")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in clusters.read_text(encoding="utf-8").splitlines()]
    assert {line["id"]: line["cluster"] for line in lines} == _expected()
    assert "47 rows" in result.output and "3 groups of 2+ rows" in result.output

    engine = sa.create_engine(driver_url(database))
    with engine.connect() as connection:
        table = sa.table("neardup_groups", sa.column("row_key"), sa.column("group_id"))
        stored = connection.execute(
            sa.text("SELECT row_key, group_id, representative, distance FROM neardup_groups ORDER BY row_key")
        ).all()
        assert table is not None
    engine.dispose()
    assert len(stored) == len(_rows())
    by_key = {row[0]: row for row in stored}
    assert by_key[101][1] == by_key[100][1] and by_key[101][2] == 100
    assert by_key[302][2] == 300 and by_key[1][2] == 1 and by_key[1][3] == 0
    assert len({row[1] for row in stored}) == len(_rows()) - 4
    assert count_rows(database, "complaints") == len(_rows())

    again = CliRunner().invoke(main, ["records", *common, "--write-table", "neardup_groups"])
    assert again.exit_code == 1 and "already exists" in again.output and "--replace-table" in again.output
    replaced = run(
        "records", *common, "--write-table", "neardup_groups", "--replace-table", "--verify", "fields"
    )
    assert replaced.exit_code == 0, replaced.output
    source = CliRunner().invoke(main, ["records", *common, "--write-table", "complaints", "--replace-table"])
    assert source.exit_code == 1 and "is the source table" in source.output
    assert count_rows(database, "complaints") == len(_rows())


def test_cli_errors_name_the_problem(database: str, tmp_path: Path) -> None:
    out = str(tmp_path / "g.jsonl")
    missing = CliRunner().invoke(
        main, ["records", database, "--table", "complaint", "--key", "id", "--clusters", out]
    )
    assert missing.exit_code == 1 and "no table or view 'complaint'" in missing.output
    key = CliRunner().invoke(
        main, ["records", database, "--table", "complaints", "--key", "ID", "--clusters", out]
    )
    assert key.exit_code == 1 and "no key column 'ID'" in key.output and "did you mean 'id'" in key.output
    field = CliRunner().invoke(
        main,
        ["records", database, "--table", "complaints", "--key", "id", "--field", "nmae:3", "--clusters", out],
    )
    assert field.exit_code == 1 and "did you mean 'name'" in field.output
    both = CliRunner().invoke(main, ["records", database, "--key", "id", "--clusters", out])
    assert both.exit_code == 1 and "exactly one of table=TABLE or query=SQL" in both.output

"""Edge cases of ``neardup records`` found by probing a fresh install (issue 28): tables whose
rows all duplicate each other, and the record size limit named by its own error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup.cli.main import main
from neardup.records.learned import learned_duplicate_records
from neardup.records.schema import RecordSchema, RowChunk


@pytest.mark.parametrize("copies", [2, 5, 40])
def test_a_table_whose_rows_all_duplicate_each_other_is_one_group(copies: int) -> None:
    """Every column is constant, so every key is held by every row: still one group. With 40
    rows (780 pairs, enough to fit) every pair compares alike, so EM cannot tell m from u."""
    header = ["id", "name", "city"]
    rows = [[str(n), "John Smith", "Boston"] for n in range(1, copies + 1)]
    result = learned_duplicate_records(header, [RowChunk.from_rows(rows, len(header), 1)], RecordSchema("id"))
    assert len(set(result.clusters.cluster.tolist())) == 1
    assert int(result.clusters.size.max()) == copies


@pytest.mark.parametrize("copies", [2, 5])
def test_all_duplicate_csv_through_the_cli(tmp_path: Path, copies: int) -> None:
    source = tmp_path / "same.csv"
    source.write_text("id,name,city\n" + "".join(f"{n},John Smith,Boston\n" for n in range(copies)))
    clusters = tmp_path / "groups.jsonl"
    result = CliRunner().invoke(main, ["records", str(source), "--key", "id", "--clusters", str(clusters)])
    assert result.exit_code == 0, result.output
    assert {json.loads(line)["cluster"] for line in clusters.read_text().splitlines()} == {"0"}
    assert "1 groups of 2+ rows" in result.output


def test_one_value_and_nulls_is_still_a_key() -> None:
    """A column holding one value in a few rows and nulls elsewhere pairs those rows."""
    header = ["id", "name", "email", "phone"]
    given = [
        ["1", "Ann Lee", "ann@example.org", "555 0101"],
        ["2", "Ann Lees", "ann@example.org", "555 0101"],  # no other key in common with 1
        ["3", "Bob Ray", "", ""],
        ["4", "Cy Dunn", "", ""],
    ]
    rows = [[value or None for value in row] for row in given]
    result = learned_duplicate_records(header, [RowChunk.from_rows(rows, len(header), 1)], RecordSchema("id"))
    pairs = {(result.keys[a], result.keys[b]) for a, b in zip(result.pairs.i, result.pairs.j, strict=True)}
    assert pairs == {("1", "2")}


# -- the record size limit and the flags messages name (issue 28 item 16) ------------------------


def _long_row_csv(tmp_path: Path, size: int) -> Path:
    path = tmp_path / "long.csv"
    path.write_text(f"id,name,notes\n1,Ann Lee,{'a' * size}\n2,Ann Lee,short\n3,Bob Ray,other\n")
    return path


def test_records_names_and_honours_its_max_bytes_flag(tmp_path: Path) -> None:
    """The limit's error named ``max_bytes``, which ``records`` did not have: it names the
    flag now, and the flag raises the limit."""
    path = _long_row_csv(tmp_path, 3000)
    refused = CliRunner().invoke(
        main, ["records", str(path), "--key", "id", "--clusters", "-", "--max-bytes", "2K"]
    )
    assert refused.exit_code == 1
    message = refused.stderr.strip().splitlines()[-1]
    assert "over the limit of 2,048 bytes" in message and "--max-bytes" in message
    assert "max_bytes" not in message.replace("--max-bytes", "")
    allowed = CliRunner().invoke(
        main, ["records", str(path), "--key", "id", "--clusters", "-", "--max-bytes", "4K"]
    )
    assert allowed.exit_code == 0, allowed.output
    assert len(allowed.stdout.splitlines()) == 3


def test_an_existing_write_table_names_the_replace_table_flag(tmp_path: Path) -> None:
    """The refusal of an existing table named the Python keyword ``replace=True``."""
    import sqlite3

    database = tmp_path / "people.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, city TEXT)")
        connection.executemany(
            "INSERT INTO people VALUES (?, ?, ?)", [(1, "Ann Lee", "Leeds"), (2, "Ann Lee", "Leeds")]
        )
        connection.execute("CREATE TABLE groups (x INTEGER)")
    connection.close()
    args = ["records", f"sqlite:///{database}", "--table", "people", "--key", "id", "--write-table", "groups"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    message = result.stderr.strip().splitlines()[-1]
    assert "--replace-table" in message and "replace=True" not in message, message
    assert "key id;" not in result.stderr  # refused before any row was read or compared


def test_a_missing_text_column_names_the_flag_in_dedup(tmp_path: Path) -> None:
    path = tmp_path / "docs.csv"
    path.write_text("id,body\n1,hello\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["dedup", str(path), "--clusters", "-"])
    assert result.exit_code == 1
    message = result.stderr.strip().splitlines()[-1]
    assert "--text-field" in message and "text_field" not in message.replace("--text-field", ""), message

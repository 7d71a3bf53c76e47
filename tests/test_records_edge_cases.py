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
    rows = [
        ["1", "Ann Lee", "ann@example.org", "555 0101"],
        ["2", "Ann Lees", "ann@example.org", "555 0101"],  # no other key in common with 1
        ["3", "Bob Ray", "", ""],
        ["4", "Cy Dunn", "", ""],
    ]
    rows = [[value or None for value in row] for row in rows]
    result = learned_duplicate_records(header, [RowChunk.from_rows(rows, len(header), 1)], RecordSchema("id"))
    pairs = {(result.keys[a], result.keys[b]) for a, b in zip(result.pairs.i, result.pairs.j, strict=True)}
    assert pairs == {("1", "2")}

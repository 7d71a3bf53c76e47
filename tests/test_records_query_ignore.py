"""`neardup records --query ... --ignore COL` leaves COL out, in batch and with `--index`, as
`--table` does: a query source's rows are cut to the columns the schema reads (the ignore list
was once dropped for queries, so a gold column was compared)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from neardup.cli.main import main
from neardup.records.incremental import stored_model
from neardup.storage import open_storage

from .conftest import REPOSITORY

QUERY = "SELECT * FROM complaints WHERE id <= 600"


def database(tmp_path: Path) -> str:
    shutil.copyfile(REPOSITORY / "examples" / "complaints.db", tmp_path / "complaints.db")
    return f"sqlite:///{tmp_path / 'complaints.db'}"


def groups(path: Path) -> dict[object, object]:
    return {
        row["id"]: row["cluster"] for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())
    }


def test_a_query_leaves_the_ignored_column_out_as_a_table_does(tmp_path: Path) -> None:
    url = database(tmp_path)
    runs = {}
    for name, source in (
        ("query", ["--query", "SELECT * FROM complaints"]),
        ("table", ["--table", "complaints"]),
    ):
        out = tmp_path / f"{name}.jsonl"
        result = CliRunner().invoke(
            main, ["records", url, *source, "--key", "id", "--ignore", "cluster", "--clusters", str(out)]
        )
        assert result.exit_code == 0, result.output
        assert "cluster:" not in result.output
        runs[name] = groups(out)
    assert runs["query"] == runs["table"]


def test_an_index_made_from_a_query_leaves_the_ignored_column_out(tmp_path: Path) -> None:
    url, index = database(tmp_path), str(tmp_path / "index.db")
    arguments = ["records", url, "--query", QUERY, "--key", "id", "--ignore", "cluster", "--index", index]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    store = open_storage(index)
    try:
        model = stored_model(store, index)
    finally:
        store.close()
    assert model is not None
    names = [name for name, _ in model.columns]
    assert "cluster" not in names and "complaint" in names

"""CLI rough edges a newcomer hits first: a slow ``--help``, ``| head`` failing, a missing
SQLite file created empty, and long commands silent in logs. (CSV gold files: test_eval.py.)"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

import neardup
from neardup.cli import common
from neardup.cli.main import COMMANDS, main

from .conftest import write_lines

HEAVY = (
    *("numpy", "scipy", "pandas", "pyarrow", "jieba", "rjieba", "fastapi", "pyspark", "psycopg"),
    *("redis", "pymongo", "sqlalchemy", "matplotlib", "tqdm", "opencc"),
)
TEXTS = [
    "the city council approved the new budget for public libraries on monday",
    "the city council approved a new budget for public libraries on monday",
    "heavy rain flooded the northern districts and closed two bridges",
    "heavy rain flooded the northern districts, closing two bridges",
    "a local bakery won the national bread contest with a rye loaf",
    "scientists mapped the genome of a rare alpine flower species",
]


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(arg) for arg in args])


def docs(path: Path, count: int = len(TEXTS)) -> Path:
    lines = [{"id": f"d{i}", "text": TEXTS[i % len(TEXTS)] + f" {i}"} for i in range(count)]
    return write_lines(path, *lines)


def loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    loaded: list[str] = json.loads(completed.stdout.splitlines()[-1])
    return loaded


# -- 1. start-up: `neardup --help` imports no heavy module ---------------------------------------


def test_help_and_version_import_no_heavy_module() -> None:
    """scipy alone took ~0.2 s of `neardup --help`; commands load when they run."""
    for args in (["--help"], ["--version"]):
        code = f"from neardup.cli.main import main\ntry:\n    main({args!r})\nexcept SystemExit:\n    pass"
        assert loaded_after(code) == []


def test_importing_the_package_imports_no_heavy_module() -> None:
    assert loaded_after("import neardup, neardup.cli.main") == []
    assert loaded_after("from neardup import __version__, NeardupError") == []


def test_public_names_load_on_first_use() -> None:
    """`from neardup import X`, `import *` and submodule attributes work as with eager imports."""
    namespace: dict[str, object] = {}
    exec("from neardup import *", namespace)
    assert set(neardup.__all__) <= set(namespace)
    assert namespace["Fingerprinter"] is neardup.Fingerprinter
    assert set(neardup.__all__) <= set(dir(neardup))
    assert neardup.io.read.read_records is not None  # a submodule, as after an eager import
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        _ = neardup.nonsense


def test_help_lists_the_short_help_of_each_command() -> None:
    """The list `neardup --help` prints without importing the commands is theirs, word for word."""
    context = click.Context(main)
    for name, lazy in COMMANDS.items():
        command = main.get_command(context, name)
        assert command is not None and command.get_short_help_str() == lazy.short_help
    help_text = run("--help").stdout
    assert all(name in help_text for name in COMMANDS)
    index = main.get_command(context, "index")
    assert isinstance(index, click.Group) and "rebuild" in index.commands


# -- 2. a closed stdout pipe ends the command quietly with exit 0 --------------------------------


def test_closed_stdout_pipe_exits_0_quietly(tmp_path: Path) -> None:
    """`neardup fingerprint big.jsonl | head -1`: the reader goes, neardup stops, exit 0."""
    source = docs(tmp_path / "big.jsonl", 5000)  # ~240 KB of output: more than a pipe holds
    with subprocess.Popen(
        [sys.executable, "-m", "neardup", "fingerprint", str(source), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        assert json.loads(process.stdout.readline())["id"] == "d0"
        process.stdout.close()  # `head -1` exits
        _, errors = process.communicate(timeout=120)
    stderr = errors.decode()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "error" not in stderr.lower()


def test_broken_pipe_in_any_command_or_help_exits_0(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Handled once in the entry point: commands writing with click.echo, and --help itself."""

    def closed(*_: object, **__: object) -> str:
        raise BrokenPipeError(32, "Broken pipe")

    gold = write_lines(tmp_path / "gold.jsonl", {"id": "a", "cluster": "a"})
    pairs = write_lines(tmp_path / "pairs.jsonl", {"a": "a", "b": "a", "distance": 0})
    monkeypatch.setattr("neardup.cli.eval.format_scores", closed)
    result = run("eval", gold, pairs)
    assert (result.exit_code, result.output) == (0, "")
    monkeypatch.setattr(type(main), "format_help", closed)
    result = run("--help")
    assert (result.exit_code, result.output) == (0, "")


# -- 3. a missing SQLite source is an error, not a new empty file --------------------------------


def test_missing_sqlite_source_is_not_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("sqlalchemy")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "groups.jsonl"
    for url, shown in (
        ("sqlite:///missing.db", "missing.db"),
        (f"sqlite:///{tmp_path}/sub/missing.db", f"{tmp_path}/sub/missing.db"),
    ):
        result = run("records", url, "--table", "people", "--key", "id", "--clusters", out)
        assert result.exit_code == 1
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert f"no SQLite database file {shown}" in result.stderr and "sqlite:////" in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_missing_sqlite_source_through_the_library(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    from neardup.errors import InputError
    from neardup.records.sources import open_source

    missing = tmp_path / "missing.db"
    with pytest.raises(InputError, match="no SQLite database file"):
        open_source(f"sqlite:///{missing}", query="SELECT 1 AS id")
    assert not missing.exists()
    with sqlite3.connect(missing) as connection:  # an existing database still reads
        connection.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT)")
        connection.execute("INSERT INTO people VALUES (1, 'Zhang San')")
    with open_source(f"sqlite:///{missing}", table="people") as source:
        assert source.columns == ["id", "name"] and [chunk.count for chunk in source.chunks()] == [1]


# -- 5. long commands report progress and a summary off a terminal -------------------------------


@pytest.fixture
def every_update(monkeypatch: pytest.MonkeyPatch) -> None:
    """A progress line at every update, as a run longer than the interval would print."""
    monkeypatch.setattr(common, "PROGRESS_INTERVAL", 0.0)


def progress_lines(result: Result, stage: str) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith(f"neardup: {stage}: ")]


def test_progress_lines_are_throttled_plain_lines(capsys: pytest.CaptureFixture[str]) -> None:
    clock = iter([100.0, 101.0, 111.0, 112.0])
    bar = common.ProgressLines("sweep", unit=" settings", total=40, clock=lambda: next(clock))
    bar.update(4)  # 1 s in: too soon
    bar.update(6)  # 11 s in: shown
    bar.update(1)  # 1 s after the last line: too soon
    assert capsys.readouterr().err == "neardup: sweep: 10/40 settings (25%), 11 s\n"
    assert common.ProgressLines("rows", unit=" rows").line(3.2) == "neardup: rows: 0 rows, 3 s"


@pytest.mark.usefixtures("every_update")
def test_dedup_records_and_index_add_report_progress_off_a_terminal(tmp_path: Path) -> None:
    source = docs(tmp_path / "docs.jsonl")
    dedup = run("dedup", source, "--pairs", tmp_path / "pairs.jsonl")
    assert dedup.exit_code == 0, dedup.output
    assert progress_lines(dedup, "sketch")[-1].startswith("neardup: sketch: 6 records, ")
    assert dedup.stderr.splitlines()[-1].startswith("neardup: 6 records, ")
    added = run("index", "add", tmp_path / "news.db", source)
    assert added.exit_code == 0, added.output
    assert progress_lines(added, "index add")[-1].startswith("neardup: index add: 6 records, ")
    assert added.stderr.splitlines()[-1].startswith("neardup: added 6")
    table = tmp_path / "people.csv"
    table.write_text("id,name,city\n1,Zhang San,Guangzhou\n2,zhang san,Guangzhou\n3,Li Si,Beijing\n")
    records = run("records", table, "--key", "id", "--clusters", tmp_path / "groups.jsonl")
    assert records.exit_code == 0, records.output
    assert progress_lines(records, "rows") and records.stderr.splitlines()[-1].startswith("neardup: 3 rows")
    quiet = run("dedup", source, "--pairs", tmp_path / "pairs.jsonl", "--no-progress")
    assert not progress_lines(quiet, "fingerprint") and quiet.stderr.count("\n") == 1


def test_a_short_run_prints_no_progress_line(tmp_path: Path) -> None:
    result = run("fingerprint", docs(tmp_path / "docs.jsonl"))
    assert result.exit_code == 0 and result.stderr.startswith("neardup: wrote 6 fingerprints")
    assert result.stderr.count("\n") == 1


@pytest.mark.usefixtures("every_update")
def test_sweep_reports_progress_and_ends_with_a_summary(tmp_path: Path) -> None:
    rows = [{"id": f"d{i}", "text": text, "cluster": f"c{i // 2}"} for i, text in enumerate(TEXTS)]
    gold = write_lines(tmp_path / "docs.jsonl", *rows)
    args: list[str | Path] = ["sweep", gold, gold, "--weighting", "tf", "--hash", "city64", "-k", "3,16"]
    args += ["--verify", "none"]
    result = run(*args, "--output-format", "json")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 3  # stdout keeps only the rows (and the default's)
    assert any(
        line.startswith("neardup: sweep: 3/3 settings (100%), ") for line in result.stderr.splitlines()
    )
    summary = result.stderr.splitlines()[-1]
    assert summary.startswith("neardup: sweep: 3 settings on 6 records in ") and "; recommended: " in summary
    assert "(F1 " in summary and summary.endswith("; 0 skipped")

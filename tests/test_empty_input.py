"""An input that holds no records at all (a 0-byte file, an empty stdin) is not an error (an
empty daily feed is normal) but is often a mistake upstream: the commands that read records
say so in one warning line on stderr, write their (empty) outputs and exit 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup.cli.main import main

WARNING = "holds no records; the outputs are empty"


@pytest.mark.parametrize(
    "command",
    [
        ["dedup", "{input}", "--pairs", "{out}"],
        ["dedup", "{input}", "--index", "{db}", "--pairs", "{out}"],
        ["index", "add", "{db}", "{input}"],
        ["index", "query", "{db}", "{input}", "-o", "{out}"],
    ],
    ids=["dedup", "dedup-index", "index-add", "index-query"],
)
def test_an_empty_input_warns_and_exits_0(tmp_path: Path, command: list[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    places = {"input": str(empty), "out": str(tmp_path / "out.jsonl"), "db": str(tmp_path / "x.db")}
    if command[:2] == ["index", "query"]:  # a store to query
        seeded = tmp_path / "one.jsonl"
        seeded.write_text('{"id": "a", "text": "A short note about the weather."}\n', encoding="utf-8")
        assert CliRunner().invoke(main, ["index", "add", places["db"], str(seeded)]).exit_code == 0
    result = CliRunner().invoke(main, [part.format(**places) for part in command])
    assert result.exit_code == 0, result.output
    assert f"neardup: warning: {empty} {WARNING}" in result.stderr
    assert (tmp_path / "out.jsonl").exists() or ("-o" not in command and "--pairs" not in command)


def test_stdin_is_named_and_a_file_with_records_gives_no_warning(tmp_path: Path) -> None:
    out = str(tmp_path / "p.jsonl")
    result = CliRunner().invoke(main, ["dedup", "-", "--pairs", out], input="")
    assert result.exit_code == 0 and f"neardup: warning: stdin {WARNING}" in result.stderr
    one = tmp_path / "one.jsonl"
    one.write_text('{"id": "a", "text": "A short note about the weather."}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["dedup", str(one), "--pairs", out])
    assert result.exit_code == 0 and "warning" not in result.stderr


def test_only_bad_records_are_reported_as_skipped_not_as_empty(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    result = CliRunner().invoke(
        main, ["dedup", str(bad), "--on-error", "skip", "--pairs", str(tmp_path / "p.jsonl")]
    )
    assert result.exit_code == 0, result.output
    assert "skipped" in result.stderr and WARNING not in result.stderr

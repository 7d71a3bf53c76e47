"""A CSV header naming one column twice is refused (issue 28 item 9): the reader would keep
only the last of the two, silently. Every command that reads CSV goes through
:class:`neardup.io.csv_strict.StrictCsvReader`, so each gets the same one-line error naming
the file, the column and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup.cli.main import main
from neardup.errors import InputError
from neardup.io.read import read_records

REPEATED = "id,text,text\n1,hello world,foo\n2,hello world,bar\n"


def _one_line_error(args: list[str]) -> str:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("neardup: error:")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "command",
    [
        ["dedup", "{path}", "--clusters", "-"],
        ["records", "{path}", "--key", "id", "--clusters", "-"],
        ["fingerprint", "{path}"],
    ],
)
def test_a_repeated_column_is_refused_by_every_command(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "docs.csv"
    path.write_text(REPEATED, encoding="utf-8")
    message = _one_line_error([part.format(path=path) for part in command])
    assert str(path) in message and "'text'" in message and "columns 2 and 3" in message
    assert "rename" in message


def test_the_library_reader_refuses_it_too(tmp_path: Path) -> None:
    path = tmp_path / "docs.csv"
    path.write_text(REPEATED, encoding="utf-8")
    with pytest.raises(InputError, match="'text' twice"):
        list(read_records(path))


def test_distinct_columns_still_read(tmp_path: Path) -> None:
    path = tmp_path / "docs.csv"
    path.write_text("id,text,title\n1,hello world,a\n", encoding="utf-8")
    assert [record.text for record in read_records(path)] == ["hello world"]

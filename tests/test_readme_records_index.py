"""The README's incremental records example runs as written on the example database: the
first line learns and stores 1,000 rows, the second checks and adds the other 336 without
changing a stored row's group, the third answers JSON lines and adds nothing."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import REPOSITORY

README = REPOSITORY / "README.md"


def records_index_lines() -> list[list[str]]:
    """The ```sh block whose lines run `neardup records ... --index`."""
    text = README.read_text(encoding="utf-8")
    for match in re.finditer(r"^```sh[ \t]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        code = match.group(1).replace("\\\n", " ")
        lines = [shlex.split(line, comments=True) for line in code.splitlines() if line.strip()]
        if lines and all(line[:2] == ["neardup", "records"] and "--index" in line for line in lines):
            return lines
    raise AssertionError("no README block of `neardup records ... --index` lines")


def run(arguments: list[str], where: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "neardup", *arguments[1:]]
    done = subprocess.run(command, cwd=where, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def read_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_incremental_records_lines_run_as_written(tmp_path: Path) -> None:
    shutil.copytree(REPOSITORY / "examples", tmp_path / "examples")
    first, second, third = records_index_lines()
    assert "learned" in run(first, tmp_path).stderr
    day1 = read_lines(tmp_path / "day1.jsonl")
    assert [row["id"] for row in day1] == list(range(1, 1001))

    added = run(second, tmp_path).stderr
    assert "336 added" in added, added
    day2 = read_lines(tmp_path / "day2.jsonl")
    assert [row["id"] for row in day2] == list(range(1001, 1337))
    groups = {row["id"] for row in day1} | {row["id"] for row in day2}
    assert {row["cluster"] for row in day2} <= groups  # a stored row's key, or the row's own

    answers = [json.loads(line) for line in run(third, tmp_path).stdout.splitlines()]
    assert [answer["id"] for answer in answers] == list(range(1331, 1337))
    assert any(answer["duplicate"] for answer in answers)
    assert all(match["id"] != answer["id"] for answer in answers for match in answer["matches"])
    again = run(third, tmp_path).stdout  # a query adds nothing: the same answers
    assert [json.loads(line) for line in again.splitlines()] == answers

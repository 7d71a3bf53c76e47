"""The README's "Run" section runs as written on a fresh clone: each ```sh block's `neardup`
lines run in order in a temporary folder laid out like the repository root (examples/ copied
in, no ../shared beside it), and what they print and write is what the prose around them says:
the quoted summary lines, the F1 (precision, recall) of each `neardup eval`, and output files
that parse, one pair per line and one cluster line per record."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPOSITORY

README = REPOSITORY / "README.md"


def run_section(text: str) -> str:
    start = text.index("\n## Run\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def sh_blocks(section: str) -> list[list[str]]:
    """The `neardup` command lines of each ```sh block (a trailing backslash joins lines)."""
    blocks = []
    for match in re.finditer(r"^```sh[ \t]*\n(.*?)^```", section, re.MULTILINE | re.DOTALL):
        code = match.group(1).replace("\\\n", " ")
        blocks.append([line.strip() for line in code.splitlines() if line.strip().startswith("neardup ")])
    return blocks


def flat(text: str) -> str:
    """Text with every run of whitespace one space, as a quote wrapped over lines reads."""
    return " ".join(text.split())


SECTION = run_section(README.read_text(encoding="utf-8"))
PROSE = flat(SECTION)
BLOCKS = sh_blocks(SECTION)


def test_the_run_section_has_commands() -> None:
    assert BLOCKS and all(BLOCKS)
    assert "../shared" not in "\n".join(line for block in BLOCKS for line in block)


def option(arguments: list[str], name: str) -> str | None:
    return arguments[arguments.index(name) + 1] if name in arguments else None


def read_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def check_dedup(arguments: list[str], stderr: str, where: Path) -> list[str]:
    wrong = []
    summary = next(line for line in stderr.splitlines() if re.match(r"neardup: \d+ records", line))
    if flat(summary) not in PROSE:
        wrong.append(f"the summary {summary!r} is not quoted in the Run section")
    records, pairs = (int(number) for number in re.findall(r"(\d+) (?:records|pairs)", summary)[:2])
    ids = [record["id"] for record in read_lines(where / arguments[2])]
    if (name := option(arguments, "--pairs")) is not None:
        rows = read_lines(where / name)
        assert all(set(row) == {"a", "b", "distance"} for row in rows)
        assert all(ids.index(row["a"]) < ids.index(row["b"]) for row in rows)  # a: the earlier record
        if len(rows) != pairs:
            wrong.append(f"{name} has {len(rows)} pairs, the summary says {pairs}")
    if (name := option(arguments, "--clusters")) is not None:
        rows = read_lines(where / name)
        assert all(set(row) == {"id", "cluster"} for row in rows)
        if [row["id"] for row in rows] != ids or len(ids) != records:
            wrong.append(f"{name} is not one line per record in input order")
    return wrong


def check_records(arguments: list[str], stderr: str, where: Path) -> list[str]:
    summary = next(line for line in stderr.splitlines() if re.match(r"neardup: \d+ rows,", line))
    untimed = re.sub(r"; [\d.]+ s \([\d,.]+ rows/s\)$", "", summary)
    wrong = [] if flat(untimed) in PROSE else [f"the summary {untimed!r} is not quoted in the Run section"]
    rows = read_lines(where / str(option(arguments, "--clusters")))
    assert all(set(row) == {"id", "cluster"} for row in rows)
    count = int(re.findall(r"(\d+) rows", summary)[0])
    if len(rows) != count:
        wrong.append(f"--clusters has {len(rows)} lines, the summary says {count} rows")
    return wrong


def check_eval(stdout: str) -> list[str]:
    scores = dict(re.findall(r"^(precision|recall|F1) +([\d.]+)$", stdout, re.MULTILINE))
    quoted = f"F1 {scores['F1']} (precision {scores['precision']}, recall {scores['recall']})"
    return [] if quoted in PROSE else [f"`neardup eval` printed {quoted!r}, not quoted in the Run section"]


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{number}" for number in range(1, len(BLOCKS) + 1)])
def test_run_section_block(block: list[str], tmp_path: Path) -> None:
    shutil.copytree(REPOSITORY / "examples", tmp_path / "examples")
    assert not (tmp_path.parent / "shared").exists()
    wrong = []
    for line in block:
        arguments = shlex.split(line)
        done = subprocess.run(
            [sys.executable, "-m", *arguments], cwd=tmp_path, capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, f"{line}\nexit status {done.returncode}\n{done.stderr}"
        if arguments[1] == "dedup":
            wrong += check_dedup(arguments, done.stderr, tmp_path)
        elif arguments[1] == "records":
            wrong += check_records(arguments, done.stderr, tmp_path)
        elif arguments[1] == "eval":
            wrong += check_eval(done.stdout)
    assert not wrong, "\n".join(wrong)

"""Every command, subcommand and option of the ``neardup`` command line is documented: each
appears in README.md or a page of docs/ (docs/cli.md holds the reference table)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from neardup.cli.main import main as cli

ROOT = Path(__file__).resolve().parents[1]


def _commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Each command under ``group`` by its path of names (lazy commands loaded by name)."""
    context = click.Context(group, info_name="neardup")
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None, f"{' '.join((*path, name))} does not load"
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


def _documents() -> str:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def _options(command: click.Command) -> Iterator[str]:
    for param in command.params:
        if isinstance(param, click.Option):
            for flag in (*param.opts, *param.secondary_opts):
                if flag.startswith("--") and flag != "--help":
                    yield flag


def test_the_walk_finds_the_commands() -> None:
    names = {" ".join(path) for path, _ in _commands(cli)}
    assert {"dedup", "index", "index add", "index query", "records"} <= names


def test_every_command_and_option_is_documented() -> None:
    text = _documents()
    missing = []
    for path, command in _commands(cli):
        shown = "neardup " + " ".join(path)
        if not re.search(r"neardup +" + r" +".join(map(re.escape, path)) + r"(?![\w-])", text):
            missing.append(shown)
        for flag in _options(command):
            if not re.search(re.escape(flag) + r"(?![\w-])", text):
                missing.append(f"{shown} {flag}")
    for flag in _options(cli):
        if not re.search(re.escape(flag) + r"(?![\w-])", text):
            missing.append(f"neardup {flag}")
    if missing:
        pytest.fail("not in README.md or docs/*.md:\n" + "\n".join(missing))

"""Every command, subcommand and option of the ``neardup`` command line is documented: each
appears in README.md or a page of docs/, and docs/cli.md is the reference generated from the
commands' own help."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from neardup.cli.main import main as cli
from neardup.cli.reference import REGENERATE, HelpDefect, cli_reference

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


def test_cli_md_is_the_generated_reference() -> None:
    """docs/cli.md is generated from the commands' help, so it says what --help says."""
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    if page != cli_reference():
        pytest.fail(f"docs/cli.md differs from the commands' help: regenerate it with `{REGENERATE}`")


def test_no_option_row_is_empty() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `-")]
    assert len(rows) > 200
    cells = [re.split(r"(?<!\\)\|", row)[1:-1] for row in rows]
    assert all(len(row) == 4 for row in cells), "a row has a stray unescaped |"
    assert [row for row in cells if not row[3].strip()] == []


def test_an_option_without_help_is_refused() -> None:
    @click.command()
    @click.option("--quiet", is_flag=True)
    def bare(quiet: bool) -> None:
        """A command with an undocumented option."""

    with pytest.raises(HelpDefect, match="bare --quiet has no help text"):
        cli_reference(bare, name="bare")


def test_a_no_rewrap_marker_inside_a_paragraph_is_refused() -> None:
    """Click prints a \\b that does not open a paragraph as a control character."""

    @click.command(help="Modes:\n\b\n  a   one\n  b   two")
    def marked() -> None:
        pass

    with pytest.raises(HelpDefect, match=r"marked: a \\b inside a paragraph"):
        cli_reference(marked, name="marked")


def test_the_reference_is_markdown_not_terminal_output() -> None:
    """Click's markers and terminal styles do not leak, and the terminal width does not matter."""
    text = cli_reference()
    assert "\b" not in text and "\f" not in text and "\x1b" not in text
    assert "```text\nExample:\n  neardup dedup docs.jsonl" in text  # a \b block, as written
    assert "| `--memory` | `TEXT` | `4G` |" in text


def test_the_reference_does_not_depend_on_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    wide = cli_reference()
    monkeypatch.setenv("COLUMNS", "40")
    assert cli_reference() == wide

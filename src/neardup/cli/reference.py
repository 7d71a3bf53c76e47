"""docs/cli.md, generated from the commands' own help so the reference cannot drift from it.

``python3 -m neardup.cli.reference > docs/cli.md`` rewrites the page; tests/test_cli_docs.py
fails when the page differs from :func:`cli_reference`. The text is built from the raw help
strings, never from click's terminal formatter, so it does not depend on the terminal width.
A defect in the help (:class:`HelpDefect`), such as an option without help, is refused.
"""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
from collections.abc import Iterator

import click

from .main import main

REGENERATE = "python3 -m neardup.cli.reference > docs/cli.md"

PREAMBLE = f"""\
# Command-line reference

Every command, subcommand and option of `neardup`, with its full help: the text
`neardup COMMAND --help` prints, and a table of the options with their values and defaults
(every command also takes `-h`, `--help`). The pages linked from the README explain them in
context.

This page is generated from the commands' own help by `{REGENERATE}`
(`src/neardup/cli/reference.py`); edit the help in `src/neardup/cli/` and regenerate, never
this page. `tests/test_cli_docs.py` fails when the page differs from the generated text, when
an option has no help, or when a command or option is missing from README.md and docs/*.md.

Output files are written whole or not at all: to a hidden temporary file beside the output,
`.NAME.HOST-PID.XXXXXXXX.tmp`, renamed onto it once complete. A run that is killed outright
(SIGKILL, SIGTERM, a power cut) leaves that temporary behind; the next run writing the same
output removes it if the process named by PID no longer exists on this host (HOST is a hash
of the host name), and touches nothing else. An output that is an input, or two outputs that
are one file (the same path, a symbolic or hard link to it, or `-` twice), is bad usage
(exit 2) before anything is read.
"""

#: Characters markdown would read as formatting outside code spans: ``<`` where it could open
#: an HTML tag, ``_`` at a word's edge where it could start or end emphasis (``|`` is escaped
#: in table cells only).
_MARKUP = re.compile(r"[\\*~]|<(?=[A-Za-z/!?])|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


class HelpDefect(ValueError):
    """A help text the reference cannot show: an option without help (its row would be
    empty), or a ``\\b`` that does not open a paragraph (click prints it as a control
    character)."""


def cli_reference(root: click.Command = main, name: str = "neardup") -> str:
    """The markdown of docs/cli.md: the preamble, then each command as ``--help`` lists it."""
    context = click.Context(root, info_name=name)
    sections = [PREAMBLE]
    sections.extend(_section(command, ctx) for ctx, command in _walk(root, context))
    return "\n".join(sections)


def _walk(command: click.Command, ctx: click.Context) -> Iterator[tuple[click.Context, click.Command]]:
    """``command`` and every command under it, in the order ``--help`` lists them."""
    yield ctx, command
    if isinstance(command, click.Group):
        for name, sub in _subcommands(command, ctx):
            yield from _walk(sub, click.Context(sub, info_name=name, parent=ctx))


def _subcommands(group: click.Group, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)  # loads a lazy command
        if sub is None:
            raise RuntimeError(f"{ctx.command_path} {name} does not load")
        if not sub.hidden:
            yield name, sub


def _section(command: click.Command, ctx: click.Context) -> str:
    heading = "#" * min(max(ctx.command_path.count(" "), 1) + 1, 4)  # commands as ## too
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    parts = [f"{heading} `{ctx.command_path}`", f"Usage: `{usage}`"]
    text = _unstyled(inspect.cleandoc(command.help or "").partition("\f")[0])
    if text:
        parts.append(_help_markdown(text, ctx.command_path))
    if isinstance(command, click.Group):
        parts.append(_commands_table(command, ctx))
    rows = [_option_row(param, ctx) for param in command.params if _shown(param)]
    if rows:
        parts.append("\n".join(["| option | value | default | what it does |", "|---|---|---|---|", *rows]))
    return "\n\n".join(parts) + "\n"


def _shown(param: click.Parameter) -> bool:
    return isinstance(param, click.Option) and not param.hidden


def _commands_table(group: click.Group, ctx: click.Context) -> str:
    rows = ["| command | what it does |", "|---|---|"]
    for name, sub in _subcommands(group, ctx):
        path = f"{ctx.command_path} {name}"
        anchor = path.replace(" ", "-")
        summary = _cell(_unstyled(sub.get_short_help_str(limit=sys.maxsize)))
        rows.append(f"| [`{path}`](#{anchor}) | {summary} |")
    return "\n".join(rows)


def _option_row(option: click.Parameter, ctx: click.Context) -> str:
    """One table row: flags, value, default as ``--help`` shows them, and the whole help."""
    assert isinstance(option, click.Option)
    flags = ", ".join(f"`{flag}`" for flag in (*option.opts, *option.secondary_opts))
    text = " ".join(_unstyled(option.help or "").split())
    if not text:
        raise HelpDefect(
            f"{ctx.command_path} {'/'.join(option.opts)} has no help text: give it help= in "
            "its command's source under src/neardup/cli/"
        )
    extra = option.get_help_extra(ctx)
    value = "" if option.is_flag else f"`{_table_code(option.make_metavar(ctx))}`"
    if "range" in extra:
        value += f" ({_cell(extra['range'])})"
    shown = [f"`{_table_code(extra['default'])}`"] if "default" in extra else []
    if "envvars" in extra:
        shown.append("env " + ", ".join(f"`{var}`" for var in extra["envvars"]))
    if "required" in extra:
        shown.append("required")
    return f"| {flags} | {value} | {'; '.join(shown)} | {_cell(text)} |"


def _help_markdown(text: str, path: str) -> str:
    """Paragraphs joined into lines, as click rewraps them; a ``\\b`` paragraph, which click
    prints as written, becomes a code block."""
    blocks = []
    for paragraph in re.split(r"\n[ \t]*\n", text.strip()):
        lines = paragraph.splitlines()
        if any(line.strip() == "\b" for line in lines[1:]):
            raise HelpDefect(f"{path}: a \\b inside a paragraph; put an empty line before it")
        if lines[0].strip() == "\b":
            verbatim = textwrap.dedent("\n".join(line.rstrip() for line in lines[1:]))
            blocks.append(f"```text\n{verbatim}\n```")
        else:
            blocks.append(_escaped(" ".join(line.strip() for line in lines)))
    return "\n\n".join(blocks)


def _escaped(text: str, table: bool = False) -> str:
    """``text`` as markdown shows it literally; code spans are kept (help texts use them)."""
    out = []
    end = 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_escape_plain(text[end : span.start()], table))
        out.append(_table_code(span.group(0)) if table else span.group(0))
        end = span.end()
    out.append(_escape_plain(text[end:], table))
    return "".join(out)


def _escape_plain(text: str, table: bool) -> str:
    text = _MARKUP.sub(lambda match: "\\" + match.group(0), text)
    return text.replace("|", "\\|") if table else text


def _cell(text: str) -> str:
    return _escaped(text, table=True)


def _table_code(text: str) -> str:
    """A table cell ends at any ``|``, inside code spans too; GitHub reads ``\\|`` there as ``|``."""
    return text.replace("|", "\\|")


def _unstyled(text: str) -> str:
    return click.unstyle(text)


if __name__ == "__main__":
    sys.stdout.write(cli_reference())

"""Guards around the user's own SQL: ``--query`` must only read, and ``--write-table`` must
never replace a table the source reads.

The query check is one layer of two (the other is the read-only transaction
:mod:`neardup.records.sources` opens): the query is tokenized, skipping string literals, quoted
identifiers and comments, and must be exactly one SELECT/WITH/VALUES/TABLE statement with no
data-changing word (``WITH … DELETE``, ``SELECT … INTO OUTFILE``) anywhere. Databases read
strings and comments differently (backslash escapes and ``#`` comments in MySQL, nested
comments and ``$$`` strings in PostgreSQL), so the query is tokenized the way each of them
would and must pass every time: a string one database ends early cannot hide a statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

#: Words that change data or write files when they appear anywhere in a statement; the only
#: statements allowed are reads, so DDL and session statements can never follow.
WRITES = frozenset(
    {"insert", "update", "delete", "merge", "upsert", "replace", "into", "outfile", "dumpfile"}
    | {"create", "drop", "alter", "truncate"}
)
#: MySQL/SQLite string functions spelled like a write: ``replace(s, a, b)``, ``insert(s, …)``.
FUNCTIONS = frozenset(("replace", "insert"))
FIRST_WORDS = frozenset(("select", "with", "values", "table"))
#: Words after FROM/JOIN that take parentheses without being a table function.
_NOT_FUNCTIONS = frozenset(("using", "on", "index", "key", "as", "lateral", "values", "select", "with"))
_CLAUSES = frozenset(
    ("select", "where", "group", "order", "having", "limit", "union", "except", "intersect", "window")
)
_INTO = frozenset(("into", "outfile", "dumpfile"))
_WORD = re.compile(r"[^\W\d][\w$]*")
_NUMBER = re.compile(r"\d[\w.]*")
_DOLLAR = re.compile(r"\$(?:[^\W\d]\w*)?\$")


@dataclass(frozen=True)
class Lexer:
    """How one family of databases reads strings, identifiers and comments."""

    name: str
    backslash: bool = False  # backslash escapes inside '…' and "…"
    hash_comment: bool = False  # "# …" comments, "-- " needs the space, /*! … */ runs
    nested: bool = False  # /* /* */ */ nests
    dollar: bool = False  # $tag$ … $tag$ strings, E'…' escapes
    brackets: bool = False  # [name] identifiers


LEXERS = (
    Lexer("MySQL/MariaDB", backslash=True, hash_comment=True),
    Lexer("PostgreSQL", nested=True, dollar=True),
    Lexer("SQLite", brackets=True),
)


@dataclass(frozen=True)
class Token:
    kind: str  # word, quoted (identifier), string, number, punct
    text: str
    at: int


class Unreadable(ConfigError):
    """The query cannot be tokenized with certainty."""


def tokens(sql: str, lexer: Lexer) -> list[Token]:
    """The tokens of ``sql`` as ``lexer``'s databases read it; comments and spaces dropped."""
    out: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif _line_comment(sql, i, lexer):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            i = _block_comment(sql, i, lexer)
        elif c in "'\"`" or (c == "[" and lexer.brackets):
            escape = (lexer.backslash and c in "'\"") or _e_string(out, i, lexer)
            end, text = _quoted(sql, i, "]" if c == "[" else c, escape)
            out.append(Token("string" if c == "'" else "quoted", text, i))
            i = end
        elif lexer.dollar and c == "$" and (match := _DOLLAR.match(sql, i)) and not _after_word(sql, i):
            end = sql.find(match.group(), match.end())
            if end < 0:
                raise Unreadable(f"the {match.group()} string is not closed")
            out.append(Token("string", sql[match.end() : end], i))
            i = end + len(match.group())
        elif match := _WORD.match(sql, i):
            out.append(Token("word", match.group().lower(), i))
            i = match.end()
        elif match := _NUMBER.match(sql, i):
            out.append(Token("number", match.group(), i))
            i = match.end()
        else:
            out.append(Token("punct", c, i))
            i += 1
    return out


def _line_comment(sql: str, i: int, lexer: Lexer) -> bool:
    if lexer.hash_comment and sql[i] == "#":
        return True
    if not sql.startswith("--", i):
        return False
    # MySQL reads "--" as a comment only before a space or control character ("1--1" is 2).
    return not lexer.hash_comment or i + 2 >= len(sql) or sql[i + 2].isspace() or ord(sql[i + 2]) < 32


def _block_comment(sql: str, i: int, lexer: Lexer) -> int:
    if lexer.hash_comment and (sql.startswith("/*!", i) or sql.startswith("/*M!", i)):
        raise Unreadable("MySQL runs /*! … */ comments as SQL; remove them")
    depth, j = 1, i + 2
    while depth:
        close = sql.find("*/", j)
        if close < 0:
            raise Unreadable("a /* comment is not closed")
        opening = sql.find("/*", j, close) if lexer.nested else -1
        if opening >= 0:
            depth, j = depth + 1, opening + 2
        else:
            depth, j = depth - 1, close + 2
    return j


def _e_string(out: list[Token], i: int, lexer: Lexer) -> bool:
    """PostgreSQL's E'…' strings take backslash escapes."""
    last = out[-1] if out else None
    return lexer.dollar and last is not None and last.text == "e" and last.at + 1 == i


def _after_word(sql: str, i: int) -> bool:
    return i > 0 and (sql[i - 1].isalnum() or sql[i - 1] in "_$")


def _quoted(sql: str, i: int, close: str, backslash: bool) -> tuple[int, str]:
    """The end of the quoted text starting at ``i`` and its content; a doubled closing
    quote is one quote character."""
    j, parts = i + 1, []
    while True:
        if j >= len(sql):
            raise Unreadable(f"a {sql[i]}…{close} is not closed")
        c = sql[j]
        if backslash and c == "\\":
            parts.append(sql[j : j + 2])
            j += 2
        elif c == close:
            if sql.startswith(close * 2, j):
                parts.append(close)
                j += 2
            else:
                return j + 1, "".join(parts)
        else:
            parts.append(c)
            j += 1


def read_only_query(query: str) -> str:
    """``query`` without trailing semicolons if it is one statement that only reads; else a
    ConfigError naming the problem and the fix."""
    text = query.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    shown = " ".join(query.split())[:60]
    for lexer in LEXERS:
        try:
            found = tokens(text, lexer)
        except Unreadable as exc:
            raise ConfigError(
                f"query {shown!r} cannot be checked as read-only ({exc}, as {lexer.name})"
            ) from exc
        _check_statement(found, shown)
    return text


def _check_statement(found: list[Token], shown: str) -> None:
    first = next((token for token in found if token.text != "("), None)
    if first is None or first.kind != "word" or first.text not in FIRST_WORDS:
        raise ConfigError(
            f"query must be one SELECT statement (or WITH/VALUES/TABLE); got {shown!r}; "
            f"to read a whole table pass table=NAME"
        )
    for index, token in enumerate(found):
        if token.kind == "punct" and token.text == ";":
            raise ConfigError(
                f"query must be one SELECT statement; {shown!r} has another after ';'; give a single SELECT"
            )
        if token.kind != "word" or token.text not in WRITES:
            continue
        following = found[index + 1] if index + 1 < len(found) else None
        if token.text in FUNCTIONS and following is not None and following.text == "(":
            continue
        fix = "remove the INTO clause" if token.text in _INTO else "give a plain SELECT"
        raise ConfigError(
            f"query must only read, but {shown!r} contains {token.text.upper()}; "
            f"neardup runs the query read-only: {fix}"
        )


def referenced_names(sql: str) -> tuple[set[str], list[str]]:
    """Every name ``sql`` mentions (words and quoted identifiers, lower case, under every
    lexer) and the table functions it reads FROM (which may read any table)."""
    names: set[str] = set()
    functions: list[str] = []
    for lexer in LEXERS:
        try:
            found = tokens(sql, lexer)
        except Unreadable:
            continue
        names.update(token.text.lower() for token in found if token.kind in ("word", "quoted"))
        functions.extend(_table_functions(found))
    return names, functions


def _table_functions(found: list[Token]) -> list[str]:
    """Names followed by ``(`` in a FROM clause: ``FROM f(x)``, ``JOIN s.f(x)``, ``FROM t, f()``."""
    out: list[str] = []
    in_from = [False]
    for index, token in enumerate(found):
        if token.text == "(":
            in_from.append(False)
        elif token.text == ")" and len(in_from) > 1:
            in_from.pop()
        elif token.kind == "word" and token.text in ("from", "join"):
            in_from[-1] = True
        elif token.kind == "word" and token.text in _CLAUSES:
            in_from[-1] = False
        elif (
            in_from[-1]
            and token.kind in ("word", "quoted")
            and token.text not in _NOT_FUNCTIONS
            and index + 1 < len(found)
            and found[index + 1].text == "("
        ):
            out.append(token.text)
    return out


def check_write_target(
    engine: Any, target: str, *, schema: str | None = None, table: str | None = None, query: str | None = None
) -> None:
    """Refuse a ``--write-table`` the source reads, before anything is written. Names are
    compared case-insensitively and without their schema (SQLite and MySQL fold case, and
    a quoted PostgreSQL name refused here is only a name to change), through the views the
    source reads; a query reading a table function is refused when the target exists."""
    import sqlalchemy as sa

    inspector = sa.inspect(engine)
    views = {name.lower(): name for name in inspector.get_view_names(schema=schema)}
    wanted = target.lower()
    fix = "neardup never replaces a table the source reads; write to a new table name"
    if table is not None and table.lower() == wanted:
        raise ConfigError(f"the write table {target!r} is the source table; {fix}")
    origin: dict[str, str] = {}
    functions: list[str] = []
    pending: list[tuple[str, str]] = [(table.lower(), "table")] if table is not None else []
    if query is not None:
        names, functions = referenced_names(query)
        pending.extend((name, "query") for name in names)
    while pending:
        name, where = pending.pop()
        if name in origin:
            continue
        origin[name] = where
        if name in views:
            definition = inspector.get_view_definition(views[name], schema=schema)
            if not definition:
                raise ConfigError(
                    f"cannot read the definition of view {views[name]!r} the source reads; {fix}"
                )
            names, more = referenced_names(str(definition))
            pending.extend((found, f"view {views[name]!r}") for found in names)
            functions.extend(more)
    if wanted in origin:
        raise ConfigError(f"the write table {target!r} is named by {origin[wanted]} of the source; {fix}")
    if functions and inspector.has_table(target, schema=schema):
        raise ConfigError(
            f"the source reads the table function {functions[0]!r}, which may read {target!r}; {fix}"
        )

"""The ```python blocks of README.md run as written, each after the blocks before it, in one
namespace (later blocks use names earlier ones define, as a reader following along would).

A line of the form ``expression  # VALUE: explanation`` (or ``# VALUE`` alone) claims a result:
where VALUE is a Python literal (``43``, ``[0, 1], [2, 3]``, ``False, 2``), the expression must
equal it (numpy arrays compared as lists); a claimed ``[Match(key='b', ...)]`` list must find
those keys in that order. Other claims are only run. Paths under ``../shared/data`` resolve
beside the clone; a block that needs them (or a database server) is skipped with the reason, and
the others still run; files the blocks write go to a temporary folder.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .conftest import REPOSITORY, SHARED_DATA

README = REPOSITORY / "README.md"
SHARED_PREFIX = "../shared/data/"


@dataclass(frozen=True)
class Block:
    number: int  # 1-based, among the python blocks
    line: int  # line of README.md where the code starts
    code: str

    @property
    def needs_shared_data(self) -> bool:
        return SHARED_PREFIX in self.code

    @property
    def needs_server(self) -> bool:
        return re.search(r"\b(redis|postgres(?:ql)?|mysql|mariadb|mongodb)://", self.code) is not None


def python_blocks(text: str) -> list[Block]:
    blocks = []
    for match in re.finditer(r"^```python[ \t]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        line = text.count("\n", 0, match.start(1)) + 1
        blocks.append(Block(len(blocks) + 1, line, match.group(1)))
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 4
    assert all(block.code.strip() for block in BLOCKS)


def claimed_value(comment: str) -> tuple[bool, Any]:
    """(True, value) when the comment starts with a Python literal (up to ': ' if any)."""
    text = comment.strip()
    for candidate in (text.split(": ", 1)[0], text):
        try:
            return True, ast.literal_eval(candidate)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return False, None


def claimed_match_keys(comment: str) -> list[Any] | None:
    """The keys of a claimed ``[Match(key='b', ...), ...]`` list, in order; None for another claim."""
    text = comment.strip()
    if not text.startswith("[Match("):
        return None
    return [ast.literal_eval(key) for key in re.findall(r"Match\(key=('[^']*'|-?\d+)", text)]


def plain(value: Any) -> Any:
    """numpy arrays and scalars → lists and Python scalars, tuples element-wise."""
    if isinstance(value, tuple):
        return tuple(plain(item) for item in value)
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return value


def comments_by_line(code: str) -> dict[int, str]:
    """Line number (1-based, within the block) → its trailing comment text."""
    import io
    import tokenize

    found = {}
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string[1:]
    return found


def run_block(block: Block, namespace: dict[str, Any]) -> list[str]:
    """Run the block statement by statement; the claims that do not hold, as messages."""
    code = block.code.replace(SHARED_PREFIX, f"{SHARED_DATA.as_posix()}/")
    tree = ast.parse(code, filename=f"README.md:{block.line}")
    comments = comments_by_line(code)
    # A claim belongs to the last statement on its line ("x.remove(k); k in x, len(x)  # False, 2").
    last_on_line = {statement.end_lineno: statement for statement in tree.body}
    wrong = []
    for statement in tree.body:
        where = f"README.md:{block.line + statement.lineno - 1}"
        single = ast.Module(body=[statement], type_ignores=[])
        claimed = statement.end_lineno in comments and last_on_line[statement.end_lineno] is statement
        if isinstance(statement, ast.Expr) and claimed:
            value = eval(compile(ast.Expression(statement.value), where, "eval"), namespace)
            literal, expected = claimed_value(comments[statement.end_lineno])
            keys = claimed_match_keys(comments[statement.end_lineno])
            if keys is not None and [match.key for match in value] != keys:
                shown = ast.get_source_segment(code, statement)
                wrong.append(
                    f"{where}: {shown} finds keys {[m.key for m in value]!r}, the README says {keys!r}"
                )
            elif literal and plain(value) != expected:
                shown = ast.get_source_segment(code, statement)
                wrong.append(f"{where}: {shown} is {plain(value)!r}, the README says {expected!r}")
        else:
            exec(compile(single, where, "exec"), namespace)
    return wrong


def test_the_claim_parser() -> None:
    assert claimed_value(" 43: (feature hash, weight) pairs") == (True, 43)
    assert claimed_value(" [0, 1], [2, 3], [0, 0]: numpy arrays, i < j") == (True, ([0, 1], [2, 3], [0, 0]))
    assert claimed_value(" False, 2") == (True, (False, 2))
    assert claimed_value(" [Match(key='b', fingerprint=..., distance=0)]")[0] is False
    assert claimed_match_keys(" [Match(key='a', ...), Match(key='c', ...)]") == ["a", "c"]
    assert claimed_match_keys(" False, 2") is None
    assert claimed_value(" numpy uint64 array")[0] is False
    assert plain((np.array([1, 2]), np.uint64(3))) == ([1, 2], 3)


def skip_reason(block: Block) -> str | None:
    if block.needs_server:
        return f"README python block {block.number} (line {block.line}) needs a database server"
    if block.needs_shared_data and not SHARED_DATA.is_dir():
        return f"README python block {block.number} (line {block.line}) needs {SHARED_DATA}"
    return None


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{b.number}" for b in BLOCKS])
def test_readme_python_block(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One block, after the earlier blocks that can run here (they define the names it uses,
    as for a reader following along); its claims are checked, theirs by their own tests."""
    reason = skip_reason(block)
    if reason is not None:
        pytest.skip(reason)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    for earlier in BLOCKS[: block.number - 1]:
        if skip_reason(earlier) is None:
            run_block(earlier, namespace)
    wrong = run_block(block, namespace)
    assert not wrong, "\n".join(wrong)

"""The error tree drawn in neardup.errors' docstring is the class hierarchy, class by class."""

from __future__ import annotations

import inspect
import re
import textwrap
from pathlib import Path

import neardup
from neardup import errors

ROOT = Path(__file__).resolve().parents[1]
#: A line of the tree: its prefix (depth = prefix length / 4), the class, its built-in bases.
LINE = re.compile(
    r"^(?P<prefix>(?:[│ ]   )*(?:[├└]── )?)(?P<name>[A-Z]\w*Error)(?: \((?P<builtins>[\w, ]+)\))?"
)


def _tree(text: str) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """Each class of the drawn tree: its parent in the tree and its built-in bases."""
    block = text.split("::", 1)[1]
    found: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    stack: list[str] = []
    for line in block.splitlines():
        match = LINE.match(line.strip("\n")[4:] if line.startswith("    ") else "")
        if match is None:
            continue
        depth = len(match["prefix"]) // 4
        del stack[depth:]
        name = match["name"]
        assert name not in found, f"{name} is drawn twice"
        builtins = tuple(part.strip() for part in (match["builtins"] or "").split(",") if part.strip())
        found[name] = (stack[-1] if stack else None, builtins)
        stack.append(name)
    return found


def _defined() -> dict[str, type[BaseException]]:
    return {
        name: value
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == errors.__name__
    }


def test_the_docstring_draws_every_error_with_its_parent() -> None:
    tree = _tree(errors.__doc__ or "")
    defined = _defined()
    assert set(tree) == set(defined)
    for name, cls in defined.items():
        parent, builtins = tree[name]
        ours = [base.__name__ for base in cls.__bases__ if base.__module__ == errors.__name__]
        theirs = tuple(base.__name__ for base in cls.__bases__ if base.__module__ == "builtins")
        if name == "NeardupError":
            assert parent is None and ours == []
        else:
            assert ours == [parent], f"{name}: drawn under {parent}, derives from {ours}"
            assert builtins == theirs, f"{name}: drawn with {builtins}, derives from {theirs}"


def test_docs_errors_md_lists_every_error() -> None:
    text = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    block = text.split("```text", 1)[1].split("```", 1)[0]
    assert _tree("::" + textwrap.indent(block, "    ")) == _tree(errors.__doc__ or "")


def test_every_error_is_public() -> None:
    assert set(_defined()) <= set(neardup.__all__)


def test_no_library_call_raises_a_bare_base_class() -> None:
    """A caller can tell a full disk from a lost server: StorageError and NeardupError are
    only ever raised through a subclass."""
    bare = re.compile(r"raise (StorageError|NeardupError)\(")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "src" / "neardup").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if bare.search(line)
    ]
    assert found == []

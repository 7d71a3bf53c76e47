"""The ``>>>`` examples in neardup's docstrings run and print what they show.

Modules are found by reading the source (every ``src/neardup/**/*.py`` whose text holds
``>>>``), so a new example is checked without being listed here; only those modules are
imported, so optional extras (pyspark, fastapi) are not needed unless a module with examples
needs them, and then that module is skipped naming the missing package.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import neardup

PACKAGE = Path(neardup.__file__).resolve().parent
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def modules_with_examples() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>>" not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = modules_with_examples()


def test_some_docstrings_have_examples() -> None:
    assert "neardup.fingerprint.fingerprinter" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra that is not installed
        pytest.skip(f"{name} needs {exc.name or exc}")
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    tests = [test for test in finder.find(module, name) if test.examples]
    assert tests, f"{name} holds '>>>' but doctest finds no example in its docstrings"
    report: list[str] = []
    failed = attempted = 0
    for test in tests:
        result = runner.run(test, out=report.append)
        failed, attempted = failed + result.failed, attempted + result.attempted
    assert attempted > 0
    if failed:
        pytest.fail("".join(report), pytrace=False)

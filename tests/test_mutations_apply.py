"""scripts/mutations.py judges deliberate bugs only while each one's text is in the source
exactly once; this keeps the list in step with the code (the script itself runs pytest per
mutation, too slow for every run of the suite)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]


def load_script() -> object:
    spec = importlib.util.spec_from_file_location("mutations_script", REPOSITORY / "scripts" / "mutations.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_mutation_still_applies_to_the_source(tmp_path: Path) -> None:
    script = load_script()
    source = tmp_path / "src"
    shutil.copytree(REPOSITORY / "src", source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for mutation in script.MUTATIONS:  # type: ignore[attr-defined]
        problem, changed = script.apply(mutation, source)  # type: ignore[attr-defined]
        assert problem is None, f"{mutation.name}: {problem}; update scripts/mutations.py with the code"
        assert changed.startswith("src/neardup/")
        for test in mutation.tests:
            if not (REPOSITORY / test).exists():
                pytest.fail(f"{mutation.name} names {test}, which does not exist")

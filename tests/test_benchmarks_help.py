"""Every benchmark script answers ``--help`` with its usage and runs nothing (a benchmark can
take an hour: asking how to call it must not start it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPOSITORY

SCRIPTS = sorted(
    path.name
    for path in (REPOSITORY / "benchmarks").glob("*.py")
    if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")
)


def test_there_are_benchmarks() -> None:
    assert len(SCRIPTS) > 20


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_prints_usage_and_runs_nothing(script: str) -> None:
    path: Path = REPOSITORY / "benchmarks" / script
    done = subprocess.run(
        [sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.lstrip().startswith("usage:"), done.stdout[:500]

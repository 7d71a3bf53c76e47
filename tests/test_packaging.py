"""A plain `pip install neardup` pulls only the core: no server drivers, Spark or web framework."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
HEAVY = (
    "redis",
    "psycopg",
    "pymysql",
    "pymongo",
    "sqlalchemy",
    "pyspark",
    "fastapi",
    "uvicorn",
    "pyarrow",
    "matplotlib",
    "datasketch",
    "flask",
    "django",
)


def _name(requirement: str) -> str:
    return re.split(r"[<>=\[; ]", requirement, maxsplit=1)[0].lower()


def test_core_dependencies_are_light() -> None:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    core = {_name(requirement) for requirement in project["dependencies"]}
    assert not core & set(HEAVY)
    extras = project["optional-dependencies"]
    assert {"stores", "service", "spark", "eval"} <= set(extras)
    assert project["scripts"]["neardup"] == "neardup.cli.main:main"


def test_package_is_typed() -> None:
    assert (PYPROJECT.parent / "src" / "neardup" / "py.typed").exists()


def test_package_data_covers_every_data_file() -> None:
    """Each file under src/neardup that is not Python matches a package-data pattern, so the
    wheel carries it (scripts/check-wheel.sh checks the built wheel itself, in .ci/run)."""
    from fnmatch import fnmatch

    patterns = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    package = PYPROJECT.parent / "src" / "neardup"
    data = [
        path.relative_to(package).as_posix()
        for path in package.rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"} and "__pycache__" not in path.parts
    ]
    assert "py.typed" in data
    uncovered = [name for name in data if not any(fnmatch(name, pattern) for pattern in patterns["neardup"])]
    assert not uncovered, f"not in [tool.setuptools.package-data] of pyproject.toml: {uncovered}"


def test_ci_checks_the_wheel() -> None:
    ci = (PYPROJECT.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash scripts/check-wheel.sh" in ci
    assert (PYPROJECT.parent / "scripts" / "check-wheel.sh").is_file()

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

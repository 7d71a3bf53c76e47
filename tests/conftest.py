"""Shared fixtures: the labelled data in ../shared/data (beside the clone) and a few
fingerprinters, which are built once per session because loading the default IDF costs ~0.3 s."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from neardup import Fingerprinter, SimhashIndex
from neardup.config import IndexConfig

pytest_plugins = ["tests.servers"]

REPOSITORY = Path(__file__).resolve().parents[1]
SHARED_DATA = REPOSITORY.parent / "shared" / "data"


def shared_file(relative: str) -> Path:
    """A file under ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"needs {relative} from ../shared/data beside the clone ({path} is absent)")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_lines(path: Path, *lines: bytes | str | dict[str, Any]) -> Path:
    """A JSONL file from raw bytes, text lines or objects (objects are JSON-encoded)."""
    parts = []
    for line in lines:
        if isinstance(line, dict):
            line = json.dumps(line, ensure_ascii=False)
        parts.append(line.encode("utf-8") if isinstance(line, str) else line)
    path.write_bytes(b"\n".join(parts) + b"\n")
    return path


@pytest.fixture(scope="session")
def default_fingerprinter() -> Fingerprinter:
    return Fingerprinter()


def with_option(url: str, option: str) -> str:
    """The store URL with one more query option (``prefix=P``, ``table=T``)."""
    return url + ("&" if "?" in url else "?") + option


@pytest.fixture
def opened() -> Iterator[Callable[..., SimhashIndex]]:
    """``SimhashIndex.open`` whose indexes are closed after the test (some test modules
    define their own ``opened`` over a parametrised store)."""
    indexes: list[SimhashIndex] = []

    def open_index(url: str, config: IndexConfig | None = None) -> SimhashIndex:
        index = SimhashIndex.open(url, config)
        indexes.append(index)
        return index

    yield open_index
    for index in indexes:
        index.close()

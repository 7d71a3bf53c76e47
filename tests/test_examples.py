"""examples/ is what scripts/make_examples.py writes: running it again gives the same bytes,
and the files are small and shaped as examples/README.md says."""

from __future__ import annotations

import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

from .conftest import REPOSITORY, read_jsonl

EXAMPLES = REPOSITORY / "examples"
SCRIPT = REPOSITORY / "scripts" / "make_examples.py"
GENERATED = [
    "zh_news.jsonl",
    "zh_news.gold.jsonl",
    "en_news.jsonl",
    "en_news.gold.jsonl",
    "complaints.db",
    "complaints.gold.jsonl",
]


def sqlite_writer(path: Path) -> int:
    """SQLITE_VERSION_NUMBER of the library that last wrote the database (header bytes 96-99)."""
    return int(struct.unpack(">I", path.read_bytes()[96:100])[0])


def dump(path: Path) -> list[str]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()


def test_the_script_reproduces_examples(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], check=True, capture_output=True)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(GENERATED)
    for name in GENERATED:
        committed, fresh = EXAMPLES / name, tmp_path / name
        if committed.read_bytes() == fresh.read_bytes():
            continue
        # Another SQLite library may lay out the same rows in other bytes; then the rows must agree.
        assert name.endswith(".db") and sqlite_writer(committed) != sqlite_writer(fresh), (
            f"examples/{name} is not what scripts/make_examples.py writes; run it and commit the result"
        )
        assert dump(committed) == dump(fresh), f"examples/{name} holds other rows than the script writes"


def test_examples_are_small_and_labelled() -> None:
    assert sum((EXAMPLES / name).stat().st_size for name in GENERATED) < 1_500_000
    for name in ("zh_news", "en_news"):
        data = read_jsonl(EXAMPLES / f"{name}.jsonl")
        gold = read_jsonl(EXAMPLES / f"{name}.gold.jsonl")
        assert all(set(record) == {"id", "text"} for record in data)
        assert [record["id"] for record in data] == [label["id"] for label in gold]
        assert len({record["id"] for record in data}) == len(data)
        levels = {label["level"] for label in gold}
        assert levels == {"original", "light", "medium", "heavy", "unique"}
    connection = sqlite3.connect(f"file:{EXAMPLES / 'complaints.db'}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT id, cluster FROM complaints ORDER BY id").fetchall()
    finally:
        connection.close()
    labels = read_jsonl(EXAMPLES / "complaints.gold.jsonl")
    assert rows == [(label["id"], label["cluster"]) for label in labels]
    assert len({cluster for _, cluster in rows}) < len(rows)  # there are duplicates

"""Issue 28 item 10: an SQLite store on a read-only file system whose write-ahead log holds
committed batches but has no ``-shm`` beside it. SQLite cannot read such a log without
creating the ``-shm``, and reading the file as immutable would answer from the main file
alone (2,500 records instead of 2,600): the store is refused with a one-line error naming
the file and the fix, never read stale. Real read-only bind mounts (the tests run as root,
which ignores file permissions)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from neardup import SimhashIndex
from neardup.errors import StorageUnavailableError
from neardup.index.config import IndexConfig

from .test_index_safety import mount, mounts, one_line_error, run

__all__ = ["mounts"]  # the fixture, used by name


def store_with_a_wal(folder: Path) -> Path:
    """A store of 2,500 records checkpointed into the file and 100 more committed in its WAL
    only; copies of the file and the WAL (no ``-shm``) in ``folder``."""
    source = folder.parent / "source"
    source.mkdir()
    path = source / "index.db"
    values = np.random.default_rng(1).integers(0, 2**63, size=2600, dtype=np.uint64)
    with SimhashIndex.open(str(path), IndexConfig()) as index:
        index.add_many(list(range(2500)), values[:2500])
    holder = sqlite3.connect(path)  # the last connection to close would checkpoint the WAL
    try:
        holder.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        with SimhashIndex.open(str(path), create=False) as index:
            index.add_many(list(range(2500, 2600)), values[2500:])
        assert Path(f"{path}-wal").stat().st_size > 0
        shutil.copy(path, folder / "index.db")
        shutil.copy(f"{path}-wal", folder / "index.db-wal")
    finally:
        holder.close()
    return folder / "index.db"


def test_a_read_only_store_with_an_unreadable_wal_is_refused(tmp_path: Path, mounts: list[Path]) -> None:
    data, read_only = tmp_path / "data", tmp_path / "ro"
    data.mkdir()
    read_only.mkdir()
    store_with_a_wal(data)
    assert not (data / "index.db-shm").exists()
    mount(mounts, "--bind", "-o", "ro", str(data), str(read_only))
    path = read_only / "index.db"
    with (
        pytest.raises(StorageUnavailableError) as caught,
        SimhashIndex.open(str(path), create=False) as index,
    ):
        pytest.fail(f"read without its WAL: {len(index)} records instead of 2600")
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "-wal" in message and "writable" in message
    code, _, err = run("index", "stats", str(path))
    line = one_line_error(err)
    assert code == 1 and str(path) in line and "-wal" in line


def test_a_read_only_store_whose_wal_can_be_read_answers_from_it(tmp_path: Path, mounts: list[Path]) -> None:
    """With its ``-shm`` beside it (or no WAL at all) the same store is read whole."""
    data, read_only = tmp_path / "data", tmp_path / "ro"
    data.mkdir()
    read_only.mkdir()
    path = store_with_a_wal(data)
    with sqlite3.connect(path) as connection:  # recreates the -shm from the WAL, keeps the WAL
        connection.execute("PRAGMA wal_autocheckpoint = 0")
        connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        shutil.copy(path, tmp_path / "copy.db")
        shutil.copy(f"{path}-wal", tmp_path / "copy.db-wal")
        shutil.copy(f"{path}-shm", tmp_path / "copy.db-shm")
    for suffix in ("", "-wal", "-shm"):
        shutil.copy(tmp_path / f"copy.db{suffix}", data / f"index.db{suffix}")
    mount(mounts, "--bind", "-o", "ro", str(data), str(read_only))
    with SimhashIndex.open(str(read_only / "index.db"), create=False) as index:
        assert len(index) == 2600

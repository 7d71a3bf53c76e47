"""The value maps every store keeps beside its records (``Storage.put_values``,
``get_values``, ``remove_values``), run unchanged against every store as the conformance suite
is: byte-exact round trips, key types kept apart, replacement, removal, refusal of unknown
maps, survival across a reopen and a drop; and, for SQL stores, stores made before the values
table, the writer's transaction and read-only SQLite files.

Server backends use the real servers that tests/servers.py starts on 127.0.0.1 (skipped
locally when a server is not installed; in CI they must run).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neardup import SimhashIndex
from neardup.errors import InputError, StorageReadOnlyError
from neardup.fingerprint.config import FingerprintConfig
from neardup.index.config import IndexConfig
from neardup.similarity.bands import BandScheme
from neardup.similarity.sketches import SKETCH_WORDS
from neardup.storage import open_storage
from neardup.storage.base import Storage
from neardup.storage.sqlite import _foreign_tables
from tests.test_storage_conformance import PERSISTENT, backend, store_url  # noqa: F401 - fixtures

SQL_BACKENDS = {"sqlite", "postgres", "mysql"}
#: One megabyte of bytes of every value (NUL, quotes, backslashes, invalid UTF-8 included).
MEGABYTE = bytes(np.random.default_rng(3).integers(0, 256, size=1 << 20, dtype=np.uint8))


def band_config() -> IndexConfig:
    """The band index the command line and the service create by default."""
    return IndexConfig(
        scheme=BandScheme(64), fingerprint=FingerprintConfig(), verification={"mode": "sketch"}
    )


@pytest.fixture
def opened(store_url: str) -> Iterator[Callable[[], SimhashIndex]]:  # noqa: F811 - the imported fixtures
    """Open the band index at the store URL (the first open creates its meta; later ones
    read it) and close every one at the end."""
    indexes: list[SimhashIndex] = []

    def open_index() -> SimhashIndex:
        index = SimhashIndex.open(store_url, None if indexes else band_config())
        indexes.append(index)
        return index

    yield open_index
    for index in indexes:
        index.close()


def sketches(count: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.frombuffer(rng.bytes(count * SKETCH_WORDS * 8), dtype=np.uint64).reshape(count, -1).copy()


def test_values_round_trip_byte_exact_with_key_types_apart(opened: Callable[[], SimhashIndex]) -> None:
    storage = opened().storage
    keys: list[int | str] = [5, "5", "doc-文", "", 0, "NUL-free 'quoted' \\ text"]
    values = [b"int five", b"text five", "文".encode(), b"", b"\x00\xff'\"\\", b"x" * 70_000]
    storage.put_values("texts", keys, values)
    assert storage.get_values("texts", keys) == values
    assert storage.get_values("texts", list(reversed(keys))) == list(reversed(values))
    assert storage.get_values("texts", [5, 6, "6", 5, "5"]) == [
        b"int five",
        None,
        None,
        b"int five",
        b"text five",
    ]
    assert storage.get_values("texts", []) == []
    # numpy ints are the ints they hold
    storage.put_values("texts", np.array([0, 9], dtype=np.int64), [b"\x00\xff'\"\\", b"nine"])  # type: ignore[arg-type]
    assert storage.get_values("texts", [9, "9"]) == [b"nine", None]
    assert storage.get_values("texts", np.array([5, 0], dtype=np.int64)) == [b"int five", b"\x00\xff'\"\\"]  # type: ignore[arg-type]


def test_values_are_replaced_and_removed(opened: Callable[[], SimhashIndex]) -> None:
    storage = opened().storage
    storage.put_values("texts", [1, "1", 2], [b"a", b"b", b"c"])
    storage.put_values("texts", [1, 3], [b"new", b""])
    assert storage.get_values("texts", [1, "1", 2, 3]) == [b"new", b"b", b"c", b""]
    storage.put_values("texts", [4, 4], [b"first", b"last"])  # a key twice: the last value wins
    assert storage.get_values("texts", [4]) == [b"last"]
    storage.remove_values("texts", [1, "missing", 99, 1])  # absent keys are ignored
    assert storage.get_values("texts", [1, "1", 2, 3]) == [None, b"b", b"c", b""]
    storage.remove_values("texts", [])
    storage.put_values("texts", [], [])
    storage.put_values("texts", [1], [b"back"])
    assert storage.get_values("texts", [1, "1"]) == [b"back", b"b"]


def test_megabyte_values_round_trip(opened: Callable[[], SimhashIndex]) -> None:
    storage = opened().storage
    large = [MEGABYTE[shift:] + MEGABYTE[:shift] for shift in range(6)]  # several INSERTs' worth
    keys: list[int | str] = ["big", *range(5)]
    storage.put_values("texts", keys, large)
    assert storage.get_values("texts", keys) == large
    storage.put_values("texts", ["big"], [b""])
    assert storage.get_values("texts", ["big", 4]) == [b"", large[5]]


def test_many_values_in_one_batch(opened: Callable[[], SimhashIndex]) -> None:
    storage = opened().storage
    keys: list[int | str] = [*range(1200), *(str(number) for number in range(1200))]
    values = [f"{key!r}".encode() for key in keys]
    storage.put_values("texts", keys, values)
    assert storage.get_values("texts", keys) == values
    storage.remove_values("texts", keys[::2])
    assert storage.get_values("texts", keys) == [
        None if row % 2 == 0 else values[row] for row in range(len(keys))
    ]


def test_a_map_is_listed_whole_with_key_types_apart(opened: Callable[[], SimhashIndex]) -> None:
    """scan_values lists every key of one map once (a records refit reads every stored row)."""
    storage = opened().storage
    keys: list[int | str] = [*range(250), *(str(number) for number in range(250)), "", "文", -7]
    storage.put_values("rows", keys, [f"{key!r}".encode() for key in keys])
    storage.put_values("blocks", [1, "other map"], [b"x", b"y"])
    storage.remove_values("rows", [3, "4"])
    for size in (1, 64):  # a batch may end between int 5 and text "5", stored under one key text
        listed = [pair for batch in storage.scan_values("rows", batch_size=size) for pair in batch]
        assert dict(listed) == {key: f"{key!r}".encode() for key in keys if key not in (3, "4")}
        assert sorted(map(repr, dict(listed))) == sorted(map(repr, (key for key, _ in listed)))  # once
    assert [pair for batch in storage.scan_values("state") for pair in batch] == []


def test_unknown_maps_and_bad_values_are_refused(opened: Callable[[], SimhashIndex]) -> None:
    storage = opened().storage
    with pytest.raises(InputError, match="unknown value map 'notes'"):
        storage.put_values("notes", [1], [b"a"])
    with pytest.raises(InputError, match="unknown value map"):
        storage.get_values("notes", [1])
    with pytest.raises(InputError, match="unknown value map"):
        storage.remove_values("notes", [1])
    with pytest.raises(InputError, match="2 values for 1 keys"):
        storage.put_values("texts", [1], [b"a", b"b"])
    with pytest.raises(InputError, match="bytes"):
        storage.put_values("texts", [1], ["text"])  # type: ignore[list-item]
    with pytest.raises(InputError, match="NUL"):
        storage.put_values("texts", ["a\x00b"], [b"a"])
    assert storage.get_values("texts", [1, "a\x00b", "\ud800"]) == [None, None, None]
    storage.remove_values("texts", ["a\x00b", "\ud800"])


def test_values_survive_a_reopen(opened: Callable[[], SimhashIndex], backend: str) -> None:  # noqa: F811 - the imported fixtures
    if backend not in PERSISTENT:
        pytest.skip("an in-memory index lives as long as its process")
    first = opened()
    first.storage.put_values("texts", [7, "7"], [MEGABYTE, b""])
    first.close()
    assert opened().storage.get_values("texts", [7, "7", 8]) == [MEGABYTE, b"", None]


def test_drop_removes_values(opened: Callable[[], SimhashIndex], store_url: str, backend: str) -> None:  # noqa: F811 - the imported fixtures
    storage = opened().storage
    storage.put_values("texts", [1, "a"], [b"one", b"a"])
    storage.drop()
    assert storage.get_values("texts", [1, "a"]) == [None, None]
    if backend in PERSISTENT:
        with contextlib.closing(open_storage(store_url)) as again:
            assert again.read_meta() is None
            assert again.get_values("texts", [1, "a"]) == [None, None]
    if backend in SQL_BACKENDS:
        assert not sql_storage(storage)._table_exists(sql_storage(storage).values_table)


def test_values_written_under_the_writer_lock(opened: Callable[[], SimhashIndex], backend: str) -> None:  # noqa: F811 - the imported fixtures
    """check-and-add holds ``exclusive()`` while it writes; values join its transaction."""
    index = opened()
    storage = index.storage
    with storage.exclusive():
        index.add_many(["r"], [1], signatures=sketches(1))
        storage.put_values("texts", ["r"], [b"text of r"])
        assert storage.get_values("texts", ["r"]) == [b"text of r"]
        storage.remove_values("texts", ["nothing"])
    assert storage.get_values("texts", ["r"]) == [b"text of r"]
    if backend not in SQL_BACKENDS:
        return
    with pytest.raises(RuntimeError, match="abandoned"), storage.exclusive():
        storage.put_values("texts", ["r", "s"], [b"changed", b"new"])
        storage.remove_values("texts", ["r"])
        raise RuntimeError("abandoned")
    assert storage.get_values("texts", ["r", "s"]) == [b"text of r", None]  # rolled back


# -- SQL stores made before the values table --------------------------------------------------
def sql_storage(storage: Storage) -> Any:
    """The SQL store behind an index (its private helpers are tested here)."""
    return storage


def forget_values_table(storage: Storage) -> None:
    """Make the store what neardup made before value maps: no values table."""
    sql = sql_storage(storage)
    with sql._transaction(write=True) as cursor:
        cursor.execute(f"DROP TABLE {sql.values_table}")
    sql._values_made = False


@pytest.mark.parametrize("backend", sorted(SQL_BACKENDS), indirect=True)
def test_a_store_made_before_values_reads_none_and_writes_once_asked(
    opened: Callable[[], SimhashIndex],
) -> None:
    index = opened()
    forget_values_table(index.storage)
    index.close()
    old = opened()
    storage = old.storage
    assert not sql_storage(storage)._table_exists(sql_storage(storage).values_table)
    assert storage.get_values("texts", [1, "1"]) == [None, None]
    storage.remove_values("texts", [1])
    assert not sql_storage(storage)._table_exists(sql_storage(storage).values_table)  # reads made nothing
    storage.put_values("texts", [1, "1"], [b"int", b"text"])
    assert storage.get_values("texts", [1, "1"]) == [b"int", b"text"]
    assert opened().storage.get_values("texts", ["1"]) == [b"text"]


@pytest.mark.parametrize("backend", sorted(SQL_BACKENDS), indirect=True)
def test_the_values_table_made_inside_check_and_add_keeps_its_transaction_whole(
    opened: Callable[[], SimhashIndex],
) -> None:
    """MariaDB commits the open transaction at DDL: the table must be made beside it, so that
    an abandoned check-and-add still leaves nothing of itself behind."""
    index = opened()
    storage = index.storage
    forget_values_table(storage)
    with pytest.raises(RuntimeError, match="abandoned"), storage.exclusive():
        index.add_many(["r"], [1], signatures=sketches(1))
        storage.put_values("texts", ["r"], [b"text of r"])
        assert storage.get_values("texts", ["r"]) == [b"text of r"]
        raise RuntimeError("abandoned")
    assert index.get("r") is None and storage.get_values("texts", ["r"]) == [None]
    with storage.exclusive():
        index.add_many(["r"], [1], signatures=sketches(1))
        storage.put_values("texts", ["r"], [b"text of r"])
    assert index.get("r") is not None and storage.get_values("texts", ["r"]) == [b"text of r"]


def test_an_sqlite_store_without_the_values_table(tmp_path: Path) -> None:
    """Made before value maps (the table dropped with sqlite3 here): reads answer None without
    writing to the file, and the first write makes the table."""
    url = f"sqlite:///{tmp_path}/old.db"
    with SimhashIndex.open(url, band_config()) as index:
        index.add_many([1], [1], signatures=sketches(1))
        index.storage.put_values("texts", [1], [b"gone"])
    with contextlib.closing(sqlite3.connect(tmp_path / "old.db")) as connection:
        assert _foreign_tables(connection) == []  # the values table is the store's own
        connection.execute("DROP TABLE neardup_values")
        connection.commit()
    with SimhashIndex.open(url) as index:
        storage = sql_storage(index.storage)
        assert storage.dialect.read_only  # an existing file opens read-only until written to
        assert storage.get_values("texts", [1, "1"]) == [None, None]
        storage.remove_values("texts", [1])
        assert storage.dialect.read_only
        storage.put_values("texts", [1], [b"back"])
        assert storage.get_values("texts", [1, "1"]) == [b"back", None]
    with contextlib.closing(sqlite3.connect(tmp_path / "old.db")) as connection:
        assert connection.execute("SELECT name, key_text, key_int, value FROM neardup_values").fetchall() == [
            ("texts", "1", 1, b"back")
        ]


def test_a_read_only_sqlite_store_answers_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path}/ro.db"
    with SimhashIndex.open(url, band_config()) as index:
        index.storage.put_values("texts", [1, "1"], [b"int", MEGABYTE])
    monkeypatch.setattr("neardup.storage.sqlite._writable", lambda path: False)
    with SimhashIndex.open(url) as index:
        storage = index.storage
        assert storage.get_values("texts", [1, "1", 2]) == [b"int", MEGABYTE, None]
        with pytest.raises(StorageReadOnlyError):
            storage.put_values("texts", [2], [b"no"])
        with pytest.raises(StorageReadOnlyError):
            storage.remove_values("texts", [1])
        assert storage.get_values("texts", [1]) == [b"int"]

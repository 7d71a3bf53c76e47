"""The records index's block map (neardup.records.block_map): both layouts against a plain
dict on every store, the runs' merges, readers racing a merge, damage and the layout chosen."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest

from neardup.errors import StorageDamagedError
from neardup.records import block_map as block_map_module
from neardup.records.block_map import (
    BLOCKS_MAP,
    DIRECTORY,
    BlockDocuments,
    BlockMap,
    BlockRuns,
    _Entries,
    _Part,
    new_block_map,
    open_block_map,
    stored_blocks,
)
from neardup.records.incremental import STORE_SHAPE
from neardup.storage import open_storage
from neardup.storage.base import Storage
from tests.test_storage_conformance import backend, store_url  # noqa: F401 - fixtures


@pytest.fixture
def store(store_url: str) -> Iterator[Storage]:  # noqa: F811 - the imported fixture
    opened = open_storage(store_url)
    opened.attach(STORE_SHAPE)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def sqlite(tmp_path: object) -> Iterator[Storage]:
    """A new SQLite store attached as a records index's (runs are the SQL stores' layout)."""
    opened = open_storage(f"sqlite:///{tmp_path}/blocks.db")
    opened.attach(STORE_SHAPE)
    try:
        yield opened
    finally:
        opened.close()


def _value(rng: random.Random) -> bytes:
    return rng.choice([b'"*"', b"[]", f'["k{rng.randrange(10**6)}", {rng.randrange(99)}]'.encode()])


def _check_against(blocks: BlockMap, expected: dict[int, bytes], rng: random.Random) -> None:
    asked = rng.sample(sorted(expected), min(len(expected), 300)) + [rng.getrandbits(64) for _ in range(50)]
    asked += asked[::7]  # a key asked twice gets its value twice
    assert blocks.get(asked) == [expected.get(key) for key in asked]
    assert list(blocks.items()) == sorted(expected.items())


@pytest.mark.parametrize("layout", [BlockRuns, BlockDocuments])
def test_a_block_map_reads_what_a_dict_holds_after_many_writes(
    store: Storage, layout: type[BlockMap], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of new and rewritten keys (the newest value wins), checked against a dict
    after each, with parts small enough that runs merge many times."""
    monkeypatch.setattr(block_map_module, "PART_ENTRIES", 7)
    rng = random.Random(5)
    blocks, expected = layout(store), {}
    reader = layout(store)  # another process's, reading all along
    for size in [40, 3, 3, 9, 1, 60, 2, 2, 30, 5]:
        known = sorted(expected)
        batch = {rng.getrandbits(64): _value(rng) for _ in range(size)}
        batch.update({key: _value(rng) for key in rng.sample(known, min(len(known), size // 2))})
        blocks.put(batch)
        expected.update(batch)
        _check_against(blocks, expected, rng)
        _check_against(layout(store), expected, rng)  # a new reader: nothing cached
        _check_against(reader, expected, rng)
    if layout is BlockRuns:
        runs = BlockRuns(store)._directory().runs
        assert 1 <= len(runs) <= 4  # merged geometrically
        # no part of a merged-away run is left behind
        parts = {key for batch in store.scan_values(BLOCKS_MAP) for key, _ in batch if key != DIRECTORY}
        assert parts == {run.part_name(part) for run in runs for part in range(len(run.fences))}
    store.put_values(BLOCKS_MAP, ["run999.0"], [b"left by a crash"])
    blocks.clear()
    assert list(layout(store).items()) == [] and blocks.get([1, 2]) == [None, None]
    if layout is BlockRuns:  # a clear (a refit) leaves nothing but the empty list of runs
        assert [key for batch in store.scan_values(BLOCKS_MAP) for key, _ in batch] == [DIRECTORY]


def test_a_reader_whose_parts_a_merge_retired_reads_the_runs_again(
    sqlite: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(block_map_module, "PART_ENTRIES", 4)
    writer, reader = BlockRuns(sqlite), BlockRuns(sqlite)
    first = {key: f'["{key}"]'.encode() for key in range(1, 40)}
    writer.put(first)
    assert reader.get([5, 39]) == [first[5], first[39]]  # its parts are cached now
    stale = reader._directory()
    later = {key: b'"*"' for key in range(20, 60)}
    writer.put(later)  # as large as the first: the two merge, the first run is retired
    assert all(
        value is None for value in sqlite.get_values(BLOCKS_MAP, [run.part_name(0) for run in stale.runs])
    )
    reader._parts.clear()
    directories = [stale]  # the list of runs it read before the merge, then the store's
    monkeypatch.setattr(
        reader, "_directory", lambda: directories.pop() if directories else BlockRuns._directory(reader)
    )
    assert reader.get([5, 39, 59, 70]) == [first[5], b'"*"', b'"*"', None]


def _entries(items: dict[int, bytes]) -> _Entries:
    keys = sorted(items)
    ends = np.cumsum([len(items[key]) for key in keys], dtype=np.int64)
    data = np.frombuffer(b"".join(items[key] for key in keys), dtype=np.uint8)
    return _Entries(np.asarray(keys, dtype=np.uint64), ends, data)


def test_entries_overlaid_keep_the_newest_bytes_of_each_key() -> None:
    """A merge's overlay against a dict: keys in both, in one, empty sides, empty values."""
    rng = random.Random(11)
    for _ in range(200):
        older = {rng.randrange(60): rng.randbytes(rng.randrange(4)) for _ in range(rng.randrange(30))}
        newer = {rng.randrange(60): rng.randbytes(rng.randrange(4)) for _ in range(rng.randrange(30))}
        merged = _entries(older).overlaid(_entries(newer))
        expected = _entries({**older, **newer})
        assert merged.keys.tolist() == expected.keys.tolist()
        assert merged.ends.tolist() == expected.ends.tolist()
        assert merged.data.tobytes() == expected.data.tobytes()


def test_a_part_out_of_order_among_many_read_at_once_is_named(
    sqlite: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(block_map_module, "PART_ENTRIES", 2)
    BlockRuns(sqlite).put({key: b"[%d]" % key for key in range(1, 7)})  # parts run0.0-run0.2
    assert BlockRuns(sqlite).get([1, 3, 6]) == [b"[1]", b"[3]", b"[6]"]
    swapped = _Part(np.asarray([4, 3], dtype=np.uint64), np.asarray([3, 6], dtype=np.uint32), b"[4][3]")
    sqlite.put_values(BLOCKS_MAP, ["run0.1"], [swapped.encode()])
    with pytest.raises(StorageDamagedError, match=r"'run0\.1'"):
        BlockRuns(sqlite).get([1, 3, 6])


def test_a_damaged_part_is_a_storage_error_naming_the_way_out(sqlite: Storage) -> None:
    BlockRuns(sqlite).put({7: b"[1]", 9: b"[2]"})
    sqlite.put_values(BLOCKS_MAP, ["run0.0"], [b"\x05\x00"])
    with pytest.raises(StorageDamagedError, match=r"run0\.0.*--refit"):
        BlockRuns(sqlite).get([7])
    # whole, but out of order: the keys, then the ends (checked for all parts read at once)
    for keys, ends in (([9, 7], [3, 6]), ([7, 9], [7, 6])):
        part = _Part(np.asarray(keys, dtype=np.uint64), np.asarray(ends, dtype=np.uint32), b"[1][2]")
        sqlite.put_values(BLOCKS_MAP, ["run0.0"], [part.encode()])
        with pytest.raises(StorageDamagedError, match=r"run0\.0.*--refit"):
            BlockRuns(sqlite).get([7])
    sqlite.put_values(BLOCKS_MAP, [DIRECTORY], [b"not json"])
    with pytest.raises(StorageDamagedError, match="runs"):
        BlockRuns(sqlite).get([7])


def test_the_layout_is_the_one_the_index_was_made_in(sqlite: Storage) -> None:
    """A new index gets runs (MongoDB: seed 002's documents); one made before runs, with
    rows stored and no list of runs, keeps a document per block until a refit."""
    assert isinstance(open_block_map(sqlite, 0), BlockRuns)
    assert isinstance(open_block_map(sqlite, 10), BlockDocuments)
    BlockRuns(sqlite).put({})  # rows with no blocks: the layout is stored all the same
    assert isinstance(open_block_map(sqlite, 10), BlockRuns)
    sqlite.remove_values(BLOCKS_MAP, [DIRECTORY])
    BlockDocuments(sqlite).put({3: b"[1]"})
    assert stored_blocks(sqlite) == {3: b"[1]"}
    BlockRuns(sqlite).put({4: b"[2]"})
    assert isinstance(open_block_map(sqlite, 10), BlockRuns) and stored_blocks(sqlite) == {4: b"[2]"}
    assert isinstance(new_block_map(sqlite), BlockRuns)
    monkeypatched = type("Mongo", (), {"name": "mongodb"})()
    assert isinstance(new_block_map(monkeypatched), BlockDocuments)  # type: ignore[arg-type]


def test_a_reader_keeps_parts_within_its_cache_bound(
    sqlite: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past CACHE_BYTES the least recently used parts are let go, and lookups stay right."""
    monkeypatch.setattr(block_map_module, "PART_ENTRIES", 8)
    monkeypatch.setattr(block_map_module, "CACHE_BYTES", 600)
    rng = random.Random(9)
    expected = {rng.getrandbits(64): _value(rng) for _ in range(400)}
    BlockRuns(sqlite).put(expected)
    reader = BlockRuns(sqlite)
    for _ in range(5):
        _check_against(reader, expected, rng)
        assert reader._cached <= 600
        assert reader._cached == sum(len(part.data) for part in reader._parts.values())


@pytest.mark.servers
def test_postgresql_stores_values_uncompressed(fresh_postgres_url: str) -> None:
    """Block runs barely compress, so PostgreSQL is told not to try (its attempt on every
    value over 2 kB made writing runs several times slower); they read back the same."""
    store = open_storage(fresh_postgres_url)
    store.attach(STORE_SHAPE)
    try:
        blocks = BlockRuns(store)
        entries = {random.Random(7).getrandbits(64) + n: f'["row {n}"]'.encode() for n in range(5000)}
        blocks.put(entries)
        assert dict(BlockRuns(store).items()) == entries
        psycopg = pytest.importorskip("psycopg")
        with psycopg.connect(fresh_postgres_url) as connection:
            table = store.values_table  # type: ignore[attr-defined]
            storage = connection.execute(
                "SELECT attstorage FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'value'",
                [table],
            ).fetchone()
        assert storage == ("e",)  # EXTERNAL: out of line, never compressed
    finally:
        store.close()

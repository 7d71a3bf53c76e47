"""The Redis store's layout 2 (one string per bucket, see :mod:`neardup.storage.redis`): the
documented keys and entries, buckets shared within and across batches, batches larger than
a script's chunk, damage, the all-or-nothing guarantees of the scripts, and an index of the
earlier layout refused with the rebuild command (and still readable by the rebuild)."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from neardup import FingerprintConfig, Fingerprinter, IncrementalDeduper, SimhashIndex
from neardup.dedup.rebuild import rebuild_index
from neardup.errors import IndexConfigMismatchError, KeyExistsError, KeyNotFoundError, StorageError
from neardup.index.config import IndexConfig
from neardup.io.record import Record
from neardup.similarity.bands import BandScheme
from neardup.storage import redis_scripts
from neardup.storage.base import RecordBatch, encode_key

from .conftest import with_option

redis = pytest.importorskip("redis")


def entry(fingerprint: int, key: int | str) -> bytes:
    """One bucket entry: fingerprint (8 bytes LE), typed key length (2 bytes LE), typed key."""
    typed = encode_key(key).encode()
    return struct.pack("<Q", fingerprint) + struct.pack("<H", len(typed)) + typed


@pytest.fixture
def client(fresh_redis_url: str) -> Iterator[Any]:
    connection = redis.Redis.from_url(fresh_redis_url)
    yield connection
    connection.close()


def bucket_keys(client: Any, prefix: str) -> list[bytes]:
    return sorted(client.keys(f"{prefix}:b*"))


def test_layout_2_keys_and_entries(
    fresh_redis_url: str, client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    layout_2 = with_option(with_option(fresh_redis_url, "prefix=dd"), "layout=2")  # new stores: 3
    index = opened(layout_2, IndexConfig(bits=64, max_distance=3))
    value = 0x1234_5678_9ABC_DEF0
    words = np.array([[value], [value ^ 1]], np.uint64)
    postings = index.scheme.keys(words)  # the index hands a store each record's posting keys
    index.storage.add_many(RecordBatch([7, "7"], words, ["c", None], [b"sig", None], postings=postings))
    assert client.get("dd:layout") == b"2" and json.loads(client.get("dd:meta"))["bits"] == 64
    fingerprint = struct.pack("<Q", value)
    assert client.hget("dd:records", "i:7") == fingerprint + b"\x03" + struct.pack("<I", 3) + b"s:c" + b"sig"
    # 4 x 16-bit pigeonhole tables, table t on bits 63-16t ... 48-16t; names zero-padded hex
    shared = [f"dd:b{table}:{(value >> (48 - 16 * table)) & 0xFFFF:04x}" for table in range(3)]
    for name in shared:  # both records, in batch order
        assert client.get(name) == entry(value, 7) + entry(value ^ 1, "7")
    assert client.get("dd:b3:def0") == entry(value, 7) and client.get("dd:b3:def1") == entry(value ^ 1, "7")
    assert len(bucket_keys(client, "dd")) == 5
    assert [match.key for match in index.query(value, max_distance=1)] == [7, "7"]  # by distance
    index.remove_many([7])
    assert client.get(shared[0]) == entry(value ^ 1, "7") and not client.exists("dd:b3:def0")
    index.remove_many(["7"])
    assert sorted(client.keys("dd:*")) == [b"dd:layout", b"dd:meta"]  # empty buckets are deleted


def test_band_buckets_shared_within_and_across_batches(
    fresh_redis_url: str, client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(fresh_redis_url, IndexConfig(scheme=BandScheme(64)))
    rng = np.random.default_rng(3)
    sketches = rng.integers(0, 2**63, size=(6, 8), dtype=np.int64).astype(np.uint64)
    sketches[1] = sketches[0]  # same bands as row 0, in the same batch
    sketches[4] = sketches[0]  # and in a later batch
    sketches[5, :3] = sketches[2, :3]  # bands 0-7 (bytes 0-23) of row 2 only
    values = np.arange(100, 106, dtype=np.uint64)
    index.add_many([0, 1, 2, 3], values[:4], signatures=sketches[:4])
    index.add_many([4, 5], values[4:], signatures=sketches[4:])
    found = index.query_many(values, signatures=sketches)
    assert [sorted(match.key for match in matches) for matches in found] == [
        [0, 1, 4], [0, 1, 4], [2, 5], [3], [0, 1, 4], [2, 5]
    ]  # fmt: skip
    stats = index.stats()  # rows 0, 1 and 4 share every band, rows 2 and 5 bands 0-7
    assert [table.largest for table in stats.tables] == [3] * 16
    assert [table.buckets for table in stats.tables] == [3] * 8 + [4] * 8
    index.remove_many([1, 5])
    found = index.query_many(values, signatures=sketches)
    assert [sorted(match.key for match in matches) for matches in found] == [
        [0, 4],
        [0, 4],
        [2],
        [3],
        [0, 4],
        [2],
    ]
    index.remove_many([0, 2, 3, 4])
    assert bucket_keys(client, "neardup") == []


def test_batches_larger_than_a_script_chunk(
    fresh_redis_url: str, client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(fresh_redis_url, IndexConfig(bits=64, max_distance=3))
    count = 2 * redis_scripts.CHUNK + 500
    rng = np.random.default_rng(11)
    values = rng.integers(0, 2**63, size=count, dtype=np.int64).astype(np.uint64)
    values[1::7] = values[::7][: values[1::7].size] ^ np.uint64(1)  # near-duplicates in the batch
    keys = [f"k{row}" for row in range(count)]
    index.add_many(keys, values)
    assert len(index) == count
    found = index.query_many(values)
    assert all(key in {match.key for match in matches} for key, matches in zip(keys, found, strict=True))
    index.remove_many(keys[::2])
    found = index.query_many(values)
    for row, matches in enumerate(found):
        assert {match.key for match in matches} <= set(keys[1::2]) and (
            row % 2 == 0 or keys[row] in {match.key for match in matches}
        )
    index.remove_many(keys[1::2])
    assert len(index) == 0 and bucket_keys(client, "neardup") == []


def test_a_failed_add_or_remove_writes_nothing(
    fresh_redis_url: str, client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(fresh_redis_url, IndexConfig(bits=64, max_distance=3))
    index.add_many([1, 2], [10, 20])
    before = {name: client.get(name) for name in bucket_keys(client, "neardup")}
    with pytest.raises(KeyExistsError, match="2"):
        index.add_many([3, 2], [30, 40])
    with pytest.raises(KeyExistsError, match="twice"):
        words = np.array([[50], [60]], np.uint64)
        index.storage.add_many(RecordBatch([5, 5], words, postings=index.scheme.keys(words)))
    with pytest.raises(KeyNotFoundError):
        index.remove_many([1, 9])
    with index.storage.exclusive():
        client.delete("neardup:lock")  # expired while this writer stalled
        with pytest.raises(StorageError, match="expired"):
            index.remove_many([1])
    assert {name: client.get(name) for name in bucket_keys(client, "neardup")} == before
    assert sorted(index) == [1, 2]  # type: ignore[type-var]


def test_a_damaged_bucket_is_reported_and_nothing_is_removed(
    fresh_redis_url: str, client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    # Layout 2's buckets (tests/test_redis_layout_3.py damages layout 3's).
    index = opened(with_option(fresh_redis_url, "layout=2"), IndexConfig(bits=64, max_distance=3))
    index.add_many([1, 2], [1 << 40, 2 << 40])
    name = bucket_keys(client, "neardup")[0]
    client.append(name, b"\x01\x02\x03")
    with pytest.raises(StorageError, match="damaged"):
        index.query(1 << 40)
    with pytest.raises(StorageError, match="damaged"):
        index.stats()
    with pytest.raises(StorageError, match="damaged"):
        index.remove_many([1, 2])
    assert len(index) == 2


def make_layout_1(client: Any, prefix: str) -> None:
    """Turn a store into what the earlier neardup left: no ``P:layout``, one hash per bucket
    (``P:t{table}:{hex}``, typed key -> the record's stored words)."""
    records = client.hgetall(f"{prefix}:records")
    for name in client.keys(f"{prefix}:b*"):
        _, table, block = name.decode().split(":")
        value, position = client.get(name), 0
        while position < len(value):
            (length,) = struct.unpack_from("<H", value, position + 8)
            key = value[position + 10 : position + 10 + length]
            client.hset(f"{prefix}:t{table[1:]}:{int(block, 16):x}", key, records[key][:8])
            position += 10 + length
        client.delete(name)
    client.delete(f"{prefix}:layout")


A = "the quick brown fox jumps over the lazy dog near the river bank early this morning before breakfast"
TEXTS = {
    "a": A,
    "a2": A + "!",  # near-identical: check-and-add puts it in cluster "a"
    "b": "a completely different sentence about databases and their many indexes and keys",
}


def test_an_index_of_layout_1_is_refused_with_the_rebuild_command_and_rebuilds(
    fresh_redis_url: str, client: Any
) -> None:
    # make_layout_1 rewrites layout 2's buckets, so the old store is made as layout 2.
    old = with_option(with_option(fresh_redis_url, "prefix=old"), "layout=2")
    new = with_option(fresh_redis_url, "prefix=new")
    fingerprinter = Fingerprinter(config=FingerprintConfig())
    values = fingerprinter.fingerprint_many(list(TEXTS.values()))
    with SimhashIndex.open(old, IndexConfig(fingerprint=FingerprintConfig())) as index:
        assigned = IncrementalDeduper(index).check_and_add_many(list(TEXTS), values)
        assert [result.cluster for result in assigned] == ["a", "a", "b"]
    make_layout_1(client, "old")
    with SimhashIndex.open(old) as index:
        assert len(index) == 3 and index.get("b").fingerprint == values[2]  # records read as before
        refused = "Redis layout 1 .*" + re.escape(f"`neardup index rebuild {old} NEW_URL TEXTS.jsonl`")
        for attempt in (
            lambda: index.query(values[0]),
            lambda: index.add_many(["c"], [5]),
            lambda: index.remove_many(["a"]),
            index.stats,
        ):
            with pytest.raises(IndexConfigMismatchError, match=refused):
                attempt()
        assert len(index) == 3
    records = [Record(key, text, None, f"t:{row}") for row, (key, text) in enumerate(TEXTS.items())]
    report = rebuild_index(old, new, records)
    assert report.carried == 3
    with SimhashIndex.open(new, create=False) as index:
        assert [record and record.cluster for record in index.get_many(list(TEXTS))] == ["a", "a", "b"]
        assert client.get("new:layout") == b"3"  # a rebuilt store takes today's layout

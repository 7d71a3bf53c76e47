"""The Redis store's layout 3 (one hash per table, see :mod:`neardup.storage.redis`), the layout
of new stores: the documented keys, fields and entries, buckets shared within and across
batches and chunks, all-or-nothing writes, damage; and a store of layout 2 (made with
``?layout=2``, what the code before made) opened again without the option and served as made,
answering exactly what a layout-3 store answers."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from neardup import IncrementalDeduper, SimhashIndex
from neardup.errors import ConfigError, KeyExistsError, KeyNotFoundError, StorageError
from neardup.index.config import IndexConfig
from neardup.similarity.bands import BandScheme
from neardup.similarity.verify import Verifier
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


def hashes(client: Any, prefix: str) -> dict[bytes, dict[bytes, bytes]]:
    """Every table hash of a store: name -> field -> value."""
    return {name: client.hgetall(name) for name in sorted(client.keys(f"{prefix}:h*"))}


def test_layout_3_keys_fields_and_entries(
    fresh_redis_url: str, client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(with_option(fresh_redis_url, "prefix=dd"), IndexConfig(bits=64, max_distance=3))
    value = 0x1234_5678_9ABC_DEF0
    words = np.array([[value], [value ^ 1]], np.uint64)
    postings = index.scheme.keys(words)
    index.storage.add_many(RecordBatch([7, "7"], words, ["c", None], [b"sig", None], postings=postings))
    assert client.get("dd:layout") == b"3"
    assert client.keys("dd:b*") == []  # no string per bucket
    # 4 x 16-bit pigeonhole tables: hash dd:h{t}, field = the 16-bit key, 2 bytes little-endian
    both = entry(value, 7) + entry(value ^ 1, "7")
    expected = {
        f"dd:h{table}".encode(): {struct.pack("<H", (value >> (48 - 16 * table)) & 0xFFFF): both}
        for table in range(3)
    }
    expected[b"dd:h3"] = {
        struct.pack("<H", 0xDEF0): entry(value, 7),
        struct.pack("<H", 0xDEF1): entry(value ^ 1, "7"),
    }
    assert hashes(client, "dd") == expected
    assert [match.key for match in index.query(value, max_distance=1)] == [7, "7"]
    index.remove_many([7])
    assert client.hget("dd:h0", struct.pack("<H", 0x1234)) == entry(value ^ 1, "7")
    assert client.hkeys("dd:h3") == [struct.pack("<H", 0xDEF1)]
    index.remove_many(["7"])
    assert sorted(client.keys("dd:*")) == [b"dd:layout", b"dd:meta"]  # empty hashes go


def test_band_fields_are_three_bytes_and_shared_within_and_across_batches(
    fresh_redis_url: str, client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(fresh_redis_url, IndexConfig(scheme=BandScheme(64)))
    rng = np.random.default_rng(3)
    sketches = rng.integers(0, 2**63, size=(6, 8), dtype=np.int64).astype(np.uint64)
    sketches[1] = sketches[0]
    sketches[4] = sketches[0]
    sketches[5, :3] = sketches[2, :3]  # bands 0-7 of row 2 only
    values = np.arange(100, 106, dtype=np.uint64)
    index.add_many([0, 1, 2, 3], values[:4], signatures=sketches[:4])
    index.add_many([4, 5], values[4:], signatures=sketches[4:])
    bins = sketches.view(np.uint8)
    assert client.hget("neardup:h0", bins[0, :3].tobytes()) == b"".join(
        entry(int(values[row]), row) for row in (0, 1, 4)
    )
    assert {len(field) for name in client.keys("neardup:h*") for field in client.hkeys(name)} == {3}
    found = index.query_many(values, signatures=sketches)
    assert [sorted(match.key for match in matches) for matches in found] == [
        [0, 1, 4], [0, 1, 4], [2, 5], [3], [0, 1, 4], [2, 5]
    ]  # fmt: skip
    stats = index.stats()
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
    assert client.keys("neardup:h*") == []


def test_batches_larger_than_a_script_chunk(
    fresh_redis_url: str, client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(fresh_redis_url, IndexConfig(bits=64, max_distance=3))
    count = 2 * redis_scripts.CHUNK + 500
    rng = np.random.default_rng(11)
    values = rng.integers(0, 2**63, size=count, dtype=np.int64).astype(np.uint64)
    values[1::7] = values[::7][: values[1::7].size] ^ np.uint64(1)
    keys = [f"k{row}" for row in range(count)]
    index.add_many(keys[:1000], values[:1000])
    index.add_many(keys[1000:], values[1000:])
    found = index.query_many(values)
    assert all(key in {match.key for match in matches} for key, matches in zip(keys, found, strict=True))
    index.remove_many(keys[::2])
    found = index.query_many(values)
    assert all(
        (key in {match.key for match in matches}) == (row % 2 == 1)
        for row, (key, matches) in enumerate(zip(keys, found, strict=True))
    )
    index.remove_many(keys[1::2])
    assert len(index) == 0 and client.keys("neardup:h*") == []


def test_a_failed_add_or_remove_writes_nothing(
    fresh_redis_url: str, client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(fresh_redis_url, IndexConfig(bits=64, max_distance=3))
    index.add_many([1, 2], [10, 20])
    before = hashes(client, "neardup")
    assert before
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
    assert hashes(client, "neardup") == before
    assert sorted(index) == [1, 2]  # type: ignore[type-var]


def test_a_damaged_bucket_is_reported_and_nothing_is_removed(
    fresh_redis_url: str, client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(fresh_redis_url, IndexConfig(bits=64, max_distance=3))
    index.add_many([1, 2], [1 << 40, 2 << 40])
    field = client.hkeys("neardup:h0")[0]
    client.hset("neardup:h0", field, client.hget("neardup:h0", field) + b"\x01\x02\x03")
    with pytest.raises(StorageError, match="damaged"):
        index.query(1 << 40)
    with pytest.raises(StorageError, match="damaged"):
        index.stats()
    with pytest.raises(StorageError, match="damaged"):
        index.remove_many([1, 2])
    assert len(index) == 2


def test_a_bad_layout_option_is_refused(fresh_redis_url: str) -> None:
    with pytest.raises(ConfigError, match=r"layout='9'.*must be one of 2, 3"):
        SimhashIndex.open(with_option(fresh_redis_url, "layout=9"))


def sketched(count: int, seed: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Fingerprints and 512-byte sketches, a third of them an earlier one's with some bins
    redrawn (near-duplicates found through a few bands)."""
    rng = np.random.default_rng(seed)
    bins = rng.integers(0, 256, size=(count, 512), dtype=np.uint8)
    copies = np.arange(1, count, 3)
    bins[copies] = bins[copies - 1]
    redrawn = rng.random((copies.size, 512)) < 0.2
    bins[copies] = np.where(redrawn, rng.integers(0, 256, size=redrawn.shape, dtype=np.uint8), bins[copies])
    values = rng.integers(0, 2**63, size=count, dtype=np.int64).astype(np.uint64)
    return values, np.ascontiguousarray(bins).view(np.uint64)


def answers(url: str, values: Any, sketches: Any, config: IndexConfig | None) -> list[Any]:
    """What a band index at ``url`` answers: check-and-add clusters in batches, queries after
    a removal, bucket statistics."""
    with SimhashIndex.open(url, config) as index:
        deduper = IncrementalDeduper(index, Verifier("sketch"))
        clusters = []
        for low in range(0, len(values), 250):
            keys = list(range(low, min(low + 250, len(values))))
            results = deduper.check_and_add_many(
                keys, values[low : low + 250], signatures=sketches[low : low + 250]
            )
            clusters += [(result.cluster, result.duplicate) for result in results]
        index.remove_many(list(range(0, len(values), 5)))
        found = index.query_many(values, signatures=sketches)
        stats = [(table.buckets, table.largest) for table in index.stats().tables]
        return [clusters, [sorted(match.key for match in matches) for matches in found], stats, len(index)]


def test_a_layout_2_store_is_served_as_made_and_answers_as_layout_3(
    fresh_redis_url: str, client: Any
) -> None:
    """A store made in layout 2 (as the code before this layout made every store) keeps its
    layout when opened without the option, gets more strings per bucket and no hash, and
    gives the same clusters, matches and statistics as a store of layout 3."""
    values, sketches = sketched(1200, seed=4)
    config = IndexConfig(scheme=BandScheme(64, bands=40), verification={"mode": "sketch"})
    old, new = with_option(fresh_redis_url, "prefix=old"), with_option(fresh_redis_url, "prefix=new")
    with SimhashIndex.open(with_option(old, "layout=2"), config) as index:
        index.add_many([-1], values[:1], signatures=sketches[:1])  # made by the earlier layout
        index.remove_many([-1])
    assert client.get("old:layout") == b"2"
    made_old = answers(old, values, sketches, None)  # reopened without the option
    assert client.get("old:layout") == b"2" and client.keys("old:h*") == [] and client.keys("old:b*")
    made_new = answers(new, values, sketches, config)
    assert client.get("new:layout") == b"3" and client.keys("new:b*") == []
    assert made_old == made_new
    assert sum(duplicate for _, duplicate in made_new[0]) > 300  # the near-duplicates were found

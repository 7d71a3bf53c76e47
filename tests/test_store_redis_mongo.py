"""Redis and MongoDB backends beyond the conformance suite: the documented layouts, the
cross-process writer lock, the all-or-nothing guarantees, and clear errors when the server is
down. Real servers from tests/servers.py (skipped locally when not installed)."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from neardup import IncrementalDeduper, SimhashIndex
from neardup.errors import ConfigError, KeyExistsError, StorageError, StorageUnavailableError
from neardup.storage import open_storage
from neardup.storage.base import RecordBatch, RecordShape

from .conftest import with_option

redis = pytest.importorskip("redis")
pymongo = pytest.importorskip("pymongo")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def hold_lock(index: SimhashIndex, seconds: float, started: threading.Event) -> threading.Thread:
    def run() -> None:
        with index.storage.exclusive():
            started.set()
            time.sleep(seconds)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


# -- Redis -------------------------------------------------------------------------------------
@pytest.fixture
def redis_client(fresh_redis_url: str) -> Iterator[Any]:
    client = redis.Redis.from_url(fresh_redis_url)
    yield client
    client.close()


def test_redis_prefixes_separate_stores_and_drop_removes_only_its_own(
    fresh_redis_url: str, redis_client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    first = opened(with_option(fresh_redis_url, "prefix=a"))
    second = opened(with_option(fresh_redis_url, "prefix=b"))
    first.add_many([1, 2], [10, 20])
    second.add_many([1], [30])
    assert len(first) == 2 and len(second) == 1 and second.get(1).fingerprint == 30
    first.storage.drop()
    assert redis_client.keys("a:*") == [] and redis_client.exists("b:meta", "b:records") == 2


def test_redis_options_and_prefixes_are_checked(fresh_redis_url: str) -> None:
    with pytest.raises(ConfigError, match="unknown option"):
        open_storage(with_option(fresh_redis_url, "prefx=a"))
    with pytest.raises(ConfigError, match="prefix"):
        open_storage(with_option(fresh_redis_url, "prefix=a:b"))


def test_redis_lock_serialises_writers_across_connections(
    fresh_redis_url: str, redis_client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    one = opened(fresh_redis_url)
    two = opened(fresh_redis_url)  # another connection, as another process would have
    started = threading.Event()
    holder = hold_lock(one, 0.4, started)
    started.wait(5)
    assert redis_client.exists("neardup:lock")
    begun = time.monotonic()
    result = IncrementalDeduper(two).check_and_add("k", 5)
    waited = time.monotonic() - begun
    holder.join()
    assert result.added and waited > 0.25
    assert not redis_client.exists("neardup:lock")


def test_redis_lock_wait_times_out_with_a_clear_message(
    fresh_redis_url: str,
    redis_client: Any,
    opened: Callable[..., SimhashIndex],
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    index = opened(fresh_redis_url)
    redis_client.set("neardup:lock", "someone-else", px=60_000)
    monkeypatch.setattr(index.storage.lease, "wait_s", 0.2)
    with pytest.raises(StorageError, match=r"could not take the writer lock of .*key neardup:lock"):
        IncrementalDeduper(index).check_and_add("k", 5)
    assert redis_client.get("neardup:lock") == b"someone-else"  # not ours to release
    assert len(index) == 0


def test_redis_writes_under_a_lost_lock_are_refused(
    fresh_redis_url: str, redis_client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(fresh_redis_url)
    with index.storage.exclusive():
        redis_client.delete("neardup:lock")  # as if it had expired while this writer stalled
        with pytest.raises(StorageError, match="expired"):
            index.add_many([1], [1])
    assert len(index) == 0


def test_redis_add_is_atomic_against_a_key_stored_meanwhile(
    fresh_redis_url: str, redis_client: Any, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(fresh_redis_url)
    redis_client.hset("neardup:records", "i:3", struct.pack("<Q", 3) + b"\x00")  # another writer's
    with pytest.raises(KeyExistsError, match="3"):
        index.add_many([1, 2, 3, 4], [1, 2, 3, 4])
    assert redis_client.hkeys("neardup:records") == [b"i:3"]
    assert redis_client.keys("neardup:t*") == []


def test_redis_down_is_unavailable_with_a_safe_message() -> None:
    port = free_port()
    begun = time.monotonic()
    with pytest.raises(StorageUnavailableError) as caught:
        open_storage(f"redis://:hunter2@127.0.0.1:{port}/0")
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "hunter2" not in message and "running" in message
    assert time.monotonic() - begun < 10


def test_redis_lost_mid_session_and_acknowledged_batches_survive_a_server_kill(
    throwaway_server: Callable[..., Any],
) -> None:
    server = throwaway_server("redis")
    url = server.url
    index = SimhashIndex.open(url)
    rng = np.random.default_rng(5)
    values = rng.integers(0, 2**63, size=2000, dtype=np.int64).astype(np.uint64)
    for start in range(0, 2000, 500):
        index.add_many(np.arange(start, start + 500), values[start : start + 500])
    os.kill(server.pid, signal.SIGKILL)  # appendfsync always: every acknowledged batch is on disk
    server.stop()
    with pytest.raises(StorageUnavailableError, match="Redis"):
        index.query(int(values[0]))
    index.close()
    throwaway_server("redis", directory=server.dir, port=server.port)
    again = SimhashIndex.open(url)
    try:
        assert dict(again.items()) == {key: int(value) for key, value in enumerate(values.tolist())}
        assert all(matches[0].distance == 0 for matches in again.query_many(values[:100]))
    finally:
        again.close()


# -- MongoDB -----------------------------------------------------------------------------------
@pytest.fixture
def mongo_database(fresh_mongodb_url: str) -> Iterator[Any]:
    client = pymongo.MongoClient(fresh_mongodb_url.split("?")[0], serverSelectionTimeoutMS=5000)
    yield client.get_default_database()
    client.close()


def test_mongo_records_layout(
    fresh_mongodb_url: str, mongo_database: Any, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(with_option(fresh_mongodb_url, "collection=docs"))
    value = 0xFEDC_BA98_7654_3210
    words = np.array([[value]], np.uint64)
    index.storage.add_many(RecordBatch([7], words, ["c"], [b"sig"], postings=index.scheme.keys(words)))
    document = mongo_database["docs"].find_one({"_id": "i:7"})
    assert document["fingerprint"] == struct.pack("<Q", value)
    assert (document["cluster"], document["signature"]) == ("s:c", b"sig")
    blocks = [(value >> shift) & 0xFFFF for shift in (48, 32, 16, 0)]
    assert [document[f"b{table}"] for table in range(4)] == blocks
    assert mongo_database["docs_meta"].find_one({"_id": "config"})["layout"] == "records"
    assert json.loads(mongo_database["docs_meta"].find_one({"_id": "config"})["value"])["bits"] == 64


def test_mongo_buckets_layout_is_seed_002s_documents(
    fresh_mongodb_url: str, mongo_database: Any, opened: Callable[..., SimhashIndex]
) -> None:
    url = with_option(fresh_mongodb_url, "layout=buckets")
    index = opened(url)
    value = 0x0001_0002_0003_0004
    index.add_many([1, "1"], [value, value ^ 1])
    buckets = {document["_id"]: document for document in mongo_database["neardup_buckets"].find()}
    assert buckets["t0:1"]["blockName"] == 1 and buckets["t0:1"]["table"] == 0
    assert buckets["t0:1"]["info"] == [
        {"hashcode": struct.pack("<Q", value), "textname": "i:1"},
        {"hashcode": struct.pack("<Q", value ^ 1), "textname": "s:1"},
    ]
    assert sorted(buckets) == ["t0:1", "t1:2", "t2:3", "t3:4", "t3:5"]
    index.remove_many(["1"])
    buckets = {document["_id"]: document for document in mongo_database["neardup_buckets"].find()}
    assert sorted(buckets) == ["t0:1", "t1:2", "t2:3", "t3:4"]  # the emptied bucket is gone
    assert [entry["textname"] for entry in buckets["t0:1"]["info"]] == ["i:1"]
    # The layout is stored: reopening without the option keeps it, the other one is refused.
    assert opened(fresh_mongodb_url).storage.layout == "buckets"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="layout=buckets"):
        opened(with_option(fresh_mongodb_url, "layout=records"))


def test_mongo_lock_serialises_writers_and_breaks_expired_leases(
    fresh_mongodb_url: str, mongo_database: Any, opened: Callable[..., SimhashIndex]
) -> None:
    one = opened(fresh_mongodb_url)
    two = opened(fresh_mongodb_url)
    started = threading.Event()
    holder = hold_lock(one, 0.4, started)
    started.wait(5)
    assert mongo_database["neardup_lock"].find_one({"_id": "writer"}) is not None
    begun = time.monotonic()
    assert IncrementalDeduper(two).check_and_add("k", 5).added
    assert time.monotonic() - begun > 0.25
    holder.join()
    assert mongo_database["neardup_lock"].find_one({"_id": "writer"}) is None
    # A lease left by a crashed writer is taken over once it has expired.
    expired = int(time.time() * 1000) - 1
    mongo_database["neardup_lock"].insert_one({"_id": "writer", "token": "dead", "expires": expired})
    assert IncrementalDeduper(two).check_and_add("m", 1 << 40).added


def test_mongo_lock_wait_times_out_with_a_clear_message(
    fresh_mongodb_url: str,
    mongo_database: Any,
    opened: Callable[..., SimhashIndex],
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    index = opened(fresh_mongodb_url)
    later = int(time.time() * 1000) + 60_000
    mongo_database["neardup_lock"].insert_one({"_id": "writer", "token": "other", "expires": later})
    monkeypatch.setattr(index.storage.lease, "wait_s", 0.2)
    with pytest.raises(StorageError, match="could not take the writer lock"):
        IncrementalDeduper(index).check_and_add("k", 5)
    assert len(index) == 0


class FailingInsert:
    """A collection whose insert_many stores the first half of the documents, then fails,
    as a connection lost in the middle of a batch would."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    def insert_many(self, documents: list[dict[str, Any]], **options: Any) -> None:
        options.pop("session", None)
        self._collection.insert_many(documents[: len(documents) // 2], **options)
        raise pymongo.errors.AutoReconnect("connection lost (test)")


@pytest.mark.parametrize("layout", ["records", "buckets"])
def test_mongo_failed_adds_are_compensated_without_transactions(
    fresh_mongodb_url: str, mongo_database: Any, opened: Callable[..., SimhashIndex], layout: str
) -> None:
    index = opened(with_option(fresh_mongodb_url, f"layout={layout}"))
    index.add_many([100], [1 << 50])
    storage: Any = index.storage
    storage._transactions = False  # as on a standalone mongod
    storage.records = FailingInsert(storage.records)
    with pytest.raises(StorageUnavailableError, match="lost the connection"):
        index.add_many(list(range(10)), list(range(10)))
    storage.records = storage.records._collection
    assert sorted(index) == [100]  # type: ignore[type-var]
    assert [document["_id"] for document in mongo_database["neardup"].find()] == ["i:100"]
    if layout == "buckets":
        entries = [e["textname"] for d in mongo_database["neardup_buckets"].find() for e in d["info"]]
        assert entries == ["i:100"] * 4


def test_mongo_add_in_a_transaction_keeps_nothing_of_a_refused_batch(
    fresh_mongodb_url: str, opened: Callable[..., SimhashIndex]
) -> None:
    index = opened(fresh_mongodb_url)
    index.add_many([1], [1])
    storage: Any = index.storage
    storage._stored_ids = lambda ids: []  # skip the check, as a concurrent writer would slip past it
    with pytest.raises(KeyExistsError, match="another writer"):
        index.add_many([2, 1, 3], [2, 1, 3])
    assert sorted(index) == [1]  # type: ignore[type-var]


def test_mongo_options_are_checked(fresh_mongodb_url: str) -> None:
    with pytest.raises(ConfigError, match="unknown option"):
        open_storage(with_option(fresh_mongodb_url, "colection=x"))
    with pytest.raises(ConfigError, match="layout"):
        open_storage(with_option(fresh_mongodb_url, "layout=rows"))
    with pytest.raises(ConfigError, match="collection name"):
        open_storage(with_option(fresh_mongodb_url, "collection=a.b"))
    storage = open_storage(with_option(fresh_mongodb_url, "appName=neardup-test&collection=x"))
    storage.close()


def test_mongo_down_is_unavailable_with_a_safe_message() -> None:
    port = free_port()
    begun = time.monotonic()
    with pytest.raises(StorageUnavailableError) as caught:
        open_storage(f"mongodb://user:hunter2@127.0.0.1:{port}/db")
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "hunter2" not in message and "running" in message
    assert time.monotonic() - begun < 15


def test_mongo_refuses_a_value_past_its_document_limit_in_one_line(fresh_mongodb_url: str) -> None:
    """A value over MongoDB's 16 MB a document (a records model of a few million rows) is a
    one-line storage error naming the limit and the way out, not a bson traceback; the store
    is left without the meta it could not write."""
    store = open_storage(with_option(fresh_mongodb_url, "collection=big"))
    try:
        store.attach(RecordShape(1, 1, 1, 64, lambda words: words))
        with pytest.raises(StorageError, match=r"16 MB.*use another store") as caught:
            store.write_meta({"records_model": {"terms": "t" * (17 << 20)}})
        assert "\n" not in str(caught.value)
        assert store.read_meta() is None
    finally:
        store.close()

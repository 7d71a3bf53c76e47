"""One conformance suite, run unchanged against every store: the index over a store must
answer exactly like a brute-force scan of what it stores, keep batches all-or-nothing, keep
key types apart, survive a reopen, refuse a mismatched configuration, and assign stable,
idempotent cluster ids.

Server backends use the real servers that tests/servers.py starts on 127.0.0.1 (skipped
locally when a server is not installed; in CI they must run).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from neardup import IncrementalDeduper, SimhashIndex, Verifier, signature_to_bytes
from neardup.config import FingerprintConfig, IndexConfig
from neardup.errors import ConfigError, IndexConfigMismatchError, InputError, KeyExistsError, KeyNotFoundError
from neardup.storage import open_storage

BACKENDS = ["memory", "sqlite", "postgres", "mysql", "redis", "mongo", "mongo-buckets"]
#: Server backends hold their data outside this process: reopening must find it again.
PERSISTENT = {"sqlite", "postgres", "mysql", "redis", "mongo", "mongo-buckets"}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(backend: str, request: pytest.FixtureRequest, tmp_path: object) -> str:
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/store.db"
    if backend == "postgres":
        return str(request.getfixturevalue("fresh_postgres_url"))
    if backend == "mysql":
        return str(request.getfixturevalue("fresh_mysql_url"))
    if backend == "redis":
        return str(request.getfixturevalue("fresh_redis_url"))
    url = str(request.getfixturevalue("fresh_mongodb_url"))
    if backend == "mongo-buckets":
        url += ("&" if "?" in url else "?") + "layout=buckets"
    return url


@pytest.fixture
def opened(store_url: str) -> Iterator[Callable[..., SimhashIndex]]:
    """Open indexes at the store URL and close them all at the end."""
    indexes: list[SimhashIndex] = []

    def open_index(config: IndexConfig | None = None, **options: object) -> SimhashIndex:
        index = SimhashIndex.open(store_url, config, **options)  # type: ignore[arg-type]
        indexes.append(index)
        return index

    yield open_index
    for index in indexes:
        index.close()


def corpus(count: int, bits: int = 64, seed: int = 7) -> tuple[list[int | str], list[int]]:
    """Random fingerprints with planted near-duplicates (1-5 bits flipped), mixed key types."""
    rng = random.Random(seed)
    keys: list[int | str] = []
    values: list[int] = []
    for position in range(count):
        if values and rng.random() < 0.4:
            value = rng.choice(values)
            for bit in rng.sample(range(bits), rng.randint(1, 5)):
                value ^= 1 << bit
        else:
            value = rng.getrandbits(bits)
        keys.append(position if position % 3 else f"doc-{position}-文")
        values.append(value)
    return keys, values


def brute(stored: dict[int | str, int], query: int, k: int) -> list[tuple[int, bool, int | str]]:
    found = [(bin(query ^ value).count("1"), key) for key, value in stored.items()]
    return sorted((d, isinstance(key, str), key) for d, key in found if d <= k)


def as_triples(matches: list) -> list[tuple[int, bool, int | str]]:  # type: ignore[type-arg]
    return [(m.distance, isinstance(m.key, str), m.key) for m in matches]


@pytest.mark.parametrize("bits", [64, 128])
def test_queries_equal_brute_force(opened: Callable[..., SimhashIndex], bits: int) -> None:
    index = opened(IndexConfig(bits=bits, max_distance=3))
    keys, values = corpus(600, bits)
    index.add_many(keys[:400], values[:400])
    for start in range(400, 600, 50):  # several small batches too
        index.add_many(keys[start : start + 50], values[start : start + 50])
    stored = dict(zip(keys, values, strict=True))
    queries = values[::7] + [random.Random(1).getrandbits(bits) for _ in range(20)]
    batch = index.query_many(queries)
    for query, matches in zip(queries, batch, strict=True):
        assert as_triples(matches) == brute(stored, query, 3)
        assert {m.key: m.fingerprint for m in matches} == {m.key: stored[m.key] for m in matches}
    for query in queries[:10]:
        assert as_triples(index.query(query)) == brute(stored, query, 3)
        assert as_triples(index.query(query, max_distance=1)) == brute(stored, query, 1)
        assert index.check(query) == bool(brute(stored, query, 3))
    assert len(index) == 600


def test_reading_by_key(opened: Callable[..., SimhashIndex]) -> None:
    index = opened()
    index.add_many([1, "1", "键"], [10, 11, 12])
    assert index.get(1) == 10 and index.get("1") == 11 and index.get("键") == 12
    assert 1 in index and "1" in index and 2 not in index and "2" not in index
    assert sorted(index, key=repr) == sorted([1, "1", "键"], key=repr)  # 1 and "1" tie under str
    assert dict(index.items()) == {1: 10, "1": 11, "键": 12}
    with pytest.raises(KeyNotFoundError):
        index.get(2)
    records = index.get_many([1, 99])
    assert records[0] is not None and records[0].fingerprint == 10 and records[1] is None


def test_batches_are_all_or_nothing(opened: Callable[..., SimhashIndex]) -> None:
    index = opened()
    index.add_many([1, 2], [1, 2**40 - 1])
    with pytest.raises(KeyExistsError, match="2"):
        index.add_many([3, 2, 4], [3, 4, 5])
    with pytest.raises(KeyExistsError, match="twice"):
        index.add_many([5, 5], [3, 4])
    assert sorted(index) == [1, 2]  # type: ignore[type-var]
    with pytest.raises(KeyNotFoundError):
        index.remove_many([1, 7])
    assert sorted(index) == [1, 2]  # type: ignore[type-var]
    index.remove_many([1])
    assert sorted(index) == [2] and index.query(1) == []  # type: ignore[type-var]
    index.add(1, 3)  # a removed key may come back, with another fingerprint
    assert [(m.key, m.fingerprint) for m in index.query(1)] == [(1, 3)]


def test_reopen_finds_everything_and_checks_the_config(
    opened: Callable[..., SimhashIndex], backend: str
) -> None:
    fingerprints = FingerprintConfig(hash="murmur3_64")
    index = opened(IndexConfig(max_distance=4, fingerprint=fingerprints))
    keys, values = corpus(200)
    index.add_many(keys, values)
    if backend not in PERSISTENT:
        return
    again = opened()
    assert again.max_distance == 4 and again.fingerprint_config == fingerprints
    assert dict(again.items()) == dict(zip(keys, values, strict=True))
    assert again.query_many(values[:20]) == index.query_many(values[:20])
    with pytest.raises(IndexConfigMismatchError) as caught:
        opened(IndexConfig(max_distance=4, fingerprint=FingerprintConfig(hash="city64")))
    assert (
        "stored" in str(caught.value) and "murmur3_64" in str(caught.value) and "city64" in str(caught.value)
    )
    with pytest.raises(IndexConfigMismatchError, match="max_distance"):
        opened(IndexConfig(max_distance=3, fingerprint=fingerprints))


def test_check_and_add_assigns_stable_idempotent_clusters(opened: Callable[..., SimhashIndex]) -> None:
    index = opened()
    deduper = IncrementalDeduper(index)
    base = 0xF0F0_F0F0_1234_5678
    first = deduper.check_and_add("a", base)
    assert (first.cluster, first.duplicate, first.added, first.matches) == ("a", False, True, [])
    second = deduper.check_and_add("b", base ^ 0b11)
    assert (second.cluster, second.duplicate, second.added) == ("a", True, True)
    assert [(m.key, m.distance) for m in second.matches] == [("a", 2)]
    # A batch: a new cluster, a member of it within the batch, a repeat, an old member.
    results = deduper.check_and_add_many(
        ["c", "d", "b", "c"], [~base & (2**64 - 1), ~base & (2**64 - 1) ^ 1, base ^ 0b11, ~base & (2**64 - 1)]
    )
    assert [(r.key, r.cluster, r.added) for r in results] == [
        ("c", "c", True),
        ("d", "c", True),
        ("b", "a", False),
        ("c", "c", False),
    ]
    assert [m.key for m in results[1].matches] == ["c"]
    assert index.get_many(["d"])[0].cluster == "c"  # type: ignore[union-attr]
    # Submitting again changes nothing; another fingerprint under a stored key is refused.
    again = deduper.check_and_add("b", base ^ 0b11)
    assert (again.cluster, again.added) == ("a", False) and len(index) == 4
    with pytest.raises(KeyExistsError, match="another fingerprint"):
        deduper.check_and_add_many(["e", "b"], [5, base])
    assert "e" not in index


def test_plain_adds_count_as_their_own_cluster(opened: Callable[..., SimhashIndex]) -> None:
    index = opened()
    index.add_many([1, 2], [0b1111, 0b1 << 40])
    result = IncrementalDeduper(index).check_and_add(3, 0b0111)
    assert (result.cluster, result.duplicate) == (1, True)


def test_stats_describe_the_tables(opened: Callable[..., SimhashIndex]) -> None:
    index = opened()
    keys, values = corpus(300)
    index.add_many(keys, values)
    stats = index.stats()
    assert "4 tables" in stats.scheme  # the pigeonhole scheme of 64 bits, k = 3
    assert len(stats.tables) in (0, 4)  # a backend may not afford bucket statistics
    for table in stats.tables:  # 300 records over 16-bit keys: mostly singleton buckets
        assert 1 <= table.largest <= 300 and 150 <= table.buckets <= 300, table


def test_bad_inputs_are_refused_before_anything_is_stored(opened: Callable[..., SimhashIndex]) -> None:
    index = opened()
    with pytest.raises(ConfigError):
        index.query(1, max_distance=9)
    with pytest.raises(InputError, match="int or str"):
        index.add_many([1.5], [1])  # type: ignore[list-item]
    with pytest.raises(InputError, match=r"fit|integer"):
        index.add_many([1], [2**64])
    assert len(index) == 0


def test_unknown_url_options_and_schemes_are_refused(tmp_path: object) -> None:
    with pytest.raises(ConfigError, match="unknown option"):
        open_storage(f"sqlite:///{tmp_path}/x.db?tabel=x")
    with pytest.raises(ConfigError, match="unknown store URL scheme"):
        open_storage("oracle://host/db")
    with pytest.raises(ConfigError, match="plain SQL name"):
        open_storage(f"sqlite:///{tmp_path}/x.db?table=x;drop table y")


def test_large_batches_round_trip(opened: Callable[..., SimhashIndex], backend: str) -> None:
    index = opened()
    rng = np.random.default_rng(3)
    values = rng.integers(0, 2**63, size=3000, dtype=np.int64).astype(np.uint64)
    index.add_many(np.arange(3000), values)
    found = index.query_many(values[:500])
    assert all(matches and matches[0].distance == 0 for matches in found)
    assert len(index) == 3000


def test_signatures_are_stored_and_verify_queries(opened: Callable[..., SimhashIndex]) -> None:
    """MinHash signatures kept beside the fingerprints confirm or reject Simhash matches, in
    queries and in check-and-add (issue 6's index path)."""
    verifier = Verifier("minhash")
    texts = [
        "the quick brown fox jumps over the lazy dog by the river",
        "the quick brown fox jumps over the lazy dog by the river!",
        "an entirely unrelated sentence that happens to share a fingerprint",
    ]
    signatures = verifier.signatures(texts)
    base = 0x0123_4567_89AB_CDEF
    index = opened()
    index.add_many(["same", "other"], [base ^ 0b1, base ^ 0b110], signatures[[1, 2]])
    stored = index.get_many(["same"])[0]
    assert stored is not None and stored.signature == signature_to_bytes(signatures[1])
    plain = index.query(base)
    assert [m.key for m in plain] == ["same", "other"]
    deduper = IncrementalDeduper(index, verifier)
    verified = deduper.query(base, signature=signatures[0])
    assert [m.key for m in verified] == ["same"]
    batch = deduper.query_many([base], signatures=signatures[[0]])
    assert [[m.key for m in found] for found in batch] == [["same"]]
    result = deduper.check_and_add_many(["new"], [base], signatures=signatures[[0]])[0]
    assert (result.cluster, [m.key for m in result.matches]) == ("same", ["same"])
    assert index.get_many(["new"])[0].signature == signature_to_bytes(signatures[0])  # type: ignore[union-attr]

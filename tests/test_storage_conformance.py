"""One conformance suite, run unchanged against every store: the index over a store must
answer exactly like a brute-force scan of what it stores, keep batches all-or-nothing, keep
key types apart, survive a reopen, refuse a mismatched configuration, and assign stable,
idempotent cluster ids.

Server backends use the real servers that tests/servers.py starts on 127.0.0.1 (skipped
locally when a server is not installed; in CI they must run).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from neardup import Fingerprinter, IncrementalDeduper, SimhashIndex, Verifier
from neardup.dedup.documents import Assignment
from neardup.errors import ConfigError, IndexConfigMismatchError, InputError, KeyExistsError, KeyNotFoundError
from neardup.eval.metrics import NEAR_LEVELS, Gold, Prediction, evaluate
from neardup.fingerprint.config import FingerprintConfig
from neardup.index.config import IndexConfig
from neardup.index.digests import text_digest
from neardup.similarity.bands import BandScheme
from neardup.similarity.minhash import signature_to_bytes
from neardup.similarity.sketches import SKETCH_WORDS
from neardup.storage import open_storage
from tests.conftest import read_jsonl, shared_file

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
    assert (
        index.get(1).fingerprint == 10
        and index.get("1").fingerprint == 11
        and index.get("键").fingerprint == 12
    )
    assert 1 in index and "1" in index and 2 not in index and "2" not in index
    assert sorted(index, key=repr) == sorted([1, "1", "键"], key=repr)  # 1 and "1" tie under str
    assert dict(index.items()) == {1: 10, "1": 11, "键": 12}
    assert index.get(2) is None
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
    with pytest.raises(KeyExistsError, match="another text"):
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
    index.add_many(["same", "other"], [base ^ 0b1, base ^ 0b110], signatures=signatures[[1, 2]])
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


# -- band indexes (the default of index add, dedup --index and serve) --------------------------


def band_config() -> IndexConfig:
    """The band index the command line and the service create by default."""
    return IndexConfig(
        scheme=BandScheme(64), fingerprint=FingerprintConfig(), verification={"mode": "sketch"}
    )


def band_corpus(count: int, seed: int = 11) -> tuple[list[int | str], np.ndarray, np.ndarray]:
    """Keys (mixed types), random fingerprints and random 512-byte sketches, 45 % of them
    planted near-copies of an earlier sketch: 1-3 bytes changed anywhere (most bands still
    shared), one byte changed in each of 8-16 bands (16: no band shared at all), or a fresh
    sketch carrying one band of the source (exactly that key shared)."""
    rng = np.random.default_rng(seed)
    values = np.frombuffer(rng.bytes(count * 8), dtype=np.uint64).copy()
    sketches = np.frombuffer(rng.bytes(count * SKETCH_WORDS * 8), dtype=np.uint64).reshape(count, -1).copy()
    bins = sketches.view(np.uint8)
    scheme = BandScheme(64)
    for row in range(1, count):
        if rng.random() >= 0.45:
            continue
        source = int(rng.integers(row))
        kind = int(rng.integers(3))
        if kind == 2:
            band = int(rng.integers(scheme.bands))
            span = slice(band * scheme.rows, (band + 1) * scheme.rows)
            bins[row, span] = bins[source, span]
            continue
        bins[row] = bins[source]
        if kind == 0:
            spots = rng.choice(SKETCH_WORDS * 8, size=int(rng.integers(1, 4)), replace=False)
        else:
            bands = rng.choice(scheme.bands, size=int(rng.integers(8, scheme.bands + 1)), replace=False)
            spots = bands * scheme.rows + rng.integers(scheme.rows, size=bands.size)
        bins[row, spots] += rng.integers(1, 256, size=spots.size).astype(np.uint8)  # never the same byte
    keys: list[int | str] = [position if position % 3 else f"band-{position}-文" for position in range(count)]
    return keys, values, sketches


def band_brute(
    index: SimhashIndex,
    stored: dict[int | str, tuple[int, np.ndarray]],
    values: np.ndarray,
    sketches: np.ndarray,
) -> list[list[tuple[int, bool, int | str]]]:
    """Per query, every stored record sharing at least one band key with it, once, as
    (Hamming distance, key is str, key) in the index's order."""
    assert index.bands is not None
    keys = list(stored)
    stored_values = np.array([stored[key][0] for key in keys], dtype=np.uint64)
    stored_sketches = np.stack([stored[key][1] for key in keys])
    stored_bands = index.bands.keys(index.bands.compose(index.words(stored_values), stored_sketches))
    query_bands = index.bands.keys(index.bands.compose(index.words(values), sketches))
    out = []
    for value, bands in zip(values.tolist(), query_bands, strict=True):
        sharing = np.flatnonzero(np.any(stored_bands == bands, axis=1)).tolist()
        found = [(bin(value ^ int(stored_values[at])).count("1"), keys[at]) for at in sharing]
        out.append(sorted((distance, isinstance(key, str), key) for distance, key in found))
    return out


def assert_band_queries(
    index: SimhashIndex,
    stored: dict[int | str, tuple[int, np.ndarray]],
    values: np.ndarray,
    sketches: np.ndarray,
) -> int:
    """The index answers each query exactly as band_brute does (batch and single calls);
    how many matches there were."""
    expected = band_brute(index, stored, values, sketches)
    found = index.query_many(values, signatures=sketches)
    assert len(found) == len(expected)
    for row, (matches, wanted) in enumerate(zip(found, expected, strict=True)):
        assert as_triples(matches) == wanted, f"query {row}"
        assert all(match.fingerprint == stored[match.key][0] for match in matches)
    for row in range(0, len(values), max(1, len(values) // 8)):
        single = index.query(int(values[row]), signature=sketches[row])
        assert as_triples(single) == expected[row], f"single query {row}"
    return sum(len(wanted) for wanted in expected)


def band_queries(values: np.ndarray, sketches: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Every stored record, 20 fresh random sketches and 20 stored ones with 1-16 bytes of
    their bands changed (not stored themselves)."""
    rng = np.random.default_rng(seed)
    fresh = np.frombuffer(rng.bytes(20 * SKETCH_WORDS * 8), dtype=np.uint64).reshape(20, -1)
    picked = rng.choice(len(values), size=20, replace=False)
    edited = sketches[picked].copy()
    for row in range(20):
        spots = rng.choice(48, size=int(rng.integers(1, 17)), replace=False)
        edited.view(np.uint8)[row, spots] += np.uint8(1)
    extra = rng.integers(0, 2**63, size=40, dtype=np.int64).astype(np.uint64)
    return np.concatenate([values, extra]), np.concatenate([sketches, fresh, edited])


def test_band_queries_equal_brute_force(opened: Callable[..., SimhashIndex]) -> None:
    """A band index returns exactly the stored records that share a band key with the query,
    each once, by (distance, key): on every store."""
    index = opened(band_config())
    assert index.bands is not None
    keys, values, sketches = band_corpus(300)
    index.add_many(keys[:200], values[:200], signatures=sketches[:200])
    for start in range(200, 300, 50):  # several small batches too
        index.add_many(
            keys[start : start + 50], values[start : start + 50], signatures=sketches[start : start + 50]
        )
    stored = {key: (int(values[row]), sketches[row]) for row, key in enumerate(keys)}
    queries, query_sketches = band_queries(values, sketches, seed=5)
    matches = assert_band_queries(index, stored, queries, query_sketches)
    assert matches > 300 + 50  # every record finds itself, and the planted copies were found
    assert len(index) == 300


def test_queries_with_records_equal_queries_and_reads(opened: Callable[..., SimhashIndex]) -> None:
    """``query_many_with_records`` (what check-and-add reads: SQL stores take the records with
    the postings) gives query_many's matches and, for every match, what get_many gives."""
    index = opened(band_config())
    keys, values, sketches = band_corpus(300, seed=21)
    clusters = [key if row % 3 else keys[max(row - 1, 0)] for row, key in enumerate(keys)]
    index.add_many(keys[:250], values[:250], signatures=sketches[:250], clusters=clusters[:250])
    index.add_many(keys[250:], values[250:], signatures=sketches[250:])  # no cluster ids
    index.remove_many(keys[:10])
    queries, query_sketches = band_queries(values, sketches, seed=22)
    found, records = index.query_many_with_records(queries, signatures=query_sketches)
    assert found == index.query_many(queries, signatures=query_sketches)
    matched = list(dict.fromkeys(match.key for matches in found for match in matches))
    assert len(matched) > 250 and not set(matched) & set(keys[:10])
    assert [records[key] for key in matched] == index.get_many(matched)
    assert sum(records[key].cluster is not None for key in matched) > 200


def test_band_remove_then_query_finds_no_removed_record(opened: Callable[..., SimhashIndex]) -> None:
    """Removing records removes their band postings: queries then equal brute force over
    what is left, and a removed key added back with another sketch is found by that one only."""
    index = opened(band_config())
    keys, values, sketches = band_corpus(300, seed=12)
    index.add_many(keys, values, signatures=sketches)
    rng = np.random.default_rng(4)
    removed = [keys[row] for row in sorted(rng.choice(300, size=100, replace=False).tolist())]
    index.remove_many(removed)
    stored = {key: (int(values[row]), sketches[row]) for row, key in enumerate(keys) if key not in removed}
    queries, query_sketches = band_queries(values, sketches, seed=6)
    assert_band_queries(index, stored, queries, query_sketches)
    found = {
        match.key for matches in index.query_many(queries, signatures=query_sketches) for match in matches
    }
    assert not found & set(removed) and len(index) == 200
    back = removed[0]
    old_sketch = sketches[keys.index(back)]
    new_sketch = np.frombuffer(rng.bytes(SKETCH_WORDS * 8), dtype=np.uint64).reshape(1, -1)
    index.add_many([back], [12345], signatures=new_sketch)
    stored[back] = (12345, new_sketch[0])
    both = np.stack([old_sketch, new_sketch[0]])
    assert_band_queries(index, stored, np.array([7, 12345], dtype=np.uint64), both)
    assert [m.key for m in index.query(12345, signature=new_sketch[0])] == [back]
    assert back not in {m.key for m in index.query(7, signature=old_sketch)}


EN_SAMPLE_CLUSTERS = 60
EN_SAMPLE_SIZE = 400


@pytest.fixture(scope="module")
def en_news_sample() -> tuple[list[str], np.ndarray, np.ndarray, Gold]:
    """~400 real en_news records, in file order: every record of the file's first 60 gold
    duplicate clusters (with their heavy copies), filled up with the records that come first.
    The file's first 400 records alone hold only 7 gold pairs; this sample holds 273."""
    rows = read_jsonl(shared_file("dev/en_news.jsonl"))
    sizes = Counter(row["cluster"] for row in rows if row["level"] in NEAR_LEVELS)
    chosen: set[str] = set()
    for row in rows:
        if len(chosen) < EN_SAMPLE_CLUSTERS and sizes[row["cluster"]] >= 2:
            chosen.add(row["cluster"])
    members = {
        at for at, row in enumerate(rows) if row["cluster"] in chosen or row.get("derived_from") in chosen
    }
    others = [at for at in range(len(rows)) if at not in members][: EN_SAMPLE_SIZE - len(members)]
    sample = [rows[at] for at in sorted(members | set(others))]
    texts = [row["text"] for row in sample]
    values = Fingerprinter(config=FingerprintConfig()).fingerprint_many(texts)
    position = {row["id"]: at for at, row in enumerate(sample)}
    gold = Gold.from_labels(
        [row["cluster"] for row in sample],
        [row["level"] for row in sample],
        derived_from=[position.get(row.get("derived_from"), -1) for row in sample],
    )
    return [row["id"] for row in sample], values, Verifier("sketch").signatures(texts), gold


def band_check_and_add(
    index: SimhashIndex, keys: list[str], values: np.ndarray, sketches: np.ndarray
) -> list[Assignment]:
    """Check-and-add in batches of 100: stored records and earlier records of a batch count."""
    deduper = IncrementalDeduper(index, Verifier("sketch"))
    assignments: list[Assignment] = []
    for start in range(0, len(keys), 100):
        part = slice(start, start + 100)
        assignments += deduper.check_and_add_many(keys[part], values[part], signatures=sketches[part])
    return assignments


def test_band_check_and_add_reaches_the_dev_f1(
    opened: Callable[..., SimhashIndex], en_news_sample: tuple[list[str], np.ndarray, np.ndarray, Gold]
) -> None:
    """Check-and-add through a band index on real en_news texts: pairwise F1 >= 0.95 against
    the gold on every store, the same clusters as in memory, and stored as answered."""
    keys, values, sketches, gold = en_news_sample
    index = opened(band_config())
    assignments = band_check_and_add(index, keys, values, sketches)
    clusters = [assignment.cluster for assignment in assignments]
    assert [assignment.key for assignment in assignments] == keys and all(a.added for a in assignments)
    codes: dict[int | str, int] = {}
    scores = evaluate(gold, Prediction.from_labels([codes.setdefault(c, len(codes)) for c in clusters]))
    print(
        f"\nband check-and-add on {len(keys)} en_news records: F1 {scores.f1:.4f} "
        f"(precision {scores.precision:.4f}, recall {scores.recall:.4f}, {scores.gold_pairs} gold pairs)"
    )
    assert scores.gold_pairs > 200 and scores.f1 >= 0.95, scores.as_dict()
    with SimhashIndex.open("memory://", band_config()) as memory:
        assert clusters == [a.cluster for a in band_check_and_add(memory, keys, values, sketches)]
    assert [record.cluster for record in index.get_many(keys)] == clusters  # type: ignore[union-attr]


# -- text digests (issue 28, item 4) ------------------------------------------------------------------
SQL_BACKENDS = {"sqlite", "postgres", "mysql"}


def digest_of(text: str) -> bytes:
    return text_digest(text)


def test_digests_round_trip_and_replace(opened: Callable[..., SimhashIndex], backend: str) -> None:
    """Every store keeps a record's text digest (read by key, by scan, with the postings and
    after a reopen) and replaces a record whole: fingerprint, postings, signature, digest."""
    config = band_config()
    index = opened(config)
    keys, values, sketches = band_corpus(40)
    digests: list[bytes | None] = [digest_of(f"text {key}") for key in keys]
    digests[1] = None  # a record added from a fingerprint alone keeps none
    index.add_many(keys, values, signatures=sketches, digests=digests)
    assert [record.digest for record in index.get_many(keys)] == digests  # type: ignore[union-attr]
    scanned = {record.key: record.digest for batch in index.storage.scan(7) for record in batch}
    assert scanned == dict(zip(keys, digests, strict=True))
    _, read = index.query_many_with_records(values[:5], signatures=sketches[:5])
    assert {key: record.digest for key, record in read.items()} == {
        key: digest for key, digest in zip(keys, digests, strict=True) if key in read
    }
    # Replace the first record with a new text: a fresh fingerprint and sketch.
    rng = np.random.default_rng(5)
    value = np.array([0x1234_5678_9ABC_DEF0], dtype=np.uint64)
    sketch = np.frombuffer(rng.bytes(SKETCH_WORDS * 8), dtype=np.uint64).reshape(1, -1)
    index.add_many([keys[0]], value, signatures=sketch, digests=[digest_of("new")], existing="replace")
    stored = index.get(keys[0])
    assert stored is not None and stored.digest == digest_of("new") and len(index) == len(keys)
    assert stored.fingerprint == int(value[0]) and stored.signature == signature_to_bytes(sketch[0])
    assert stored.cluster is None  # a plain add's record stays its own cluster
    found = index.query_many(values[:1], signatures=sketches[:1])[0]
    assert keys[0] not in [match.key for match in found]  # the old postings are gone
    assert [match.key for match in index.query_many(value, signatures=sketch)[0]] == [keys[0]]
    if backend in PERSISTENT:
        again = opened()
        assert again.get(keys[0]).digest == digest_of("new")  # type: ignore[union-attr]
        assert again.get(keys[2]).digest == digests[2]  # type: ignore[union-attr]


def test_skip_refuses_another_text_and_keeps_retries(opened: Callable[..., SimhashIndex]) -> None:
    index = opened()
    digests = [digest_of("a"), digest_of("1")]
    index.add_many(["a", 1], [0xF0F0, 0x0F0F], digests=digests)
    assert index.add_many(["a", 1], [0xF0F0, 0x0F0F], digests=digests, existing="skip") == [False, False]
    with pytest.raises(KeyExistsError, match="another text"):
        index.add_many(["b", "a"], [1, 0xF0F0], digests=[digest_of("b"), digest_of("a2")], existing="skip")
    assert "b" not in index
    deduper = IncrementalDeduper(index)
    with pytest.raises(KeyExistsError, match="another text"):
        deduper.check_and_add_many(["a"], [0xF0F0], digests=[digest_of("a2")])
    results = deduper.check_and_add_many(["a"], [0xF0F0 ^ 1], digests=[digest_of("a2")], existing="replace")
    replaced = results[0]
    assert (replaced.cluster, replaced.added, replaced.replaced) == ("a", True, True)
    assert index.get("a").digest == digest_of("a2")  # type: ignore[union-attr]
    assert index.get("a").cluster == "a"  # type: ignore[union-attr]


def forget_digests(index: SimhashIndex, backend: str) -> None:
    """Make the store what neardup made before digests: SQL tables without the ``digest``
    column and without the meta row that announces it (Redis and MongoDB records without a
    digest are exactly the old records, made here by adding without digests)."""
    if backend not in SQL_BACKENDS:
        return
    storage: Any = index.storage
    with storage._transaction(write=True) as cursor:
        for name in storage.tables:
            cursor.execute(f"ALTER TABLE {name} DROP COLUMN digest")
        cursor.execute(f"DELETE FROM {storage.meta_table} WHERE name = 'digests'")


def test_a_store_made_before_digests_opens_and_compares_fingerprints(
    opened: Callable[..., SimhashIndex], backend: str
) -> None:
    if backend not in PERSISTENT:
        pytest.skip("an in-memory index is never older than this process")
    index = opened(band_config())
    keys, values, sketches = band_corpus(12)
    index.add_many(keys[:6], values[:6], signatures=sketches[:6])
    forget_digests(index, backend)
    index.close()
    old = opened()
    assert len(old) == 6 and old.get(keys[0]).digest is None  # type: ignore[union-attr]
    deduper = IncrementalDeduper(old, Verifier("sketch"))
    # New records go in (a SQL store without the column keeps no digest for them).
    added = deduper.check_and_add_many(keys[6:], values[6:], signatures=sketches[6:], digests=[b"x" * 16] * 6)
    assert all(result.added for result in added) and len(old) == 12
    # Old records compare by fingerprint: the same fingerprint is a retry, another a conflict.
    retry = deduper.check_and_add_many(keys[:1], values[:1], signatures=sketches[:1], digests=[b"y" * 16])
    assert not retry[0].added
    with pytest.raises(KeyExistsError, match="another text"):
        deduper.check_and_add_many(keys[:1], values[1:2], signatures=sketches[1:2], digests=[b"y" * 16])
    found = old.query_many(values[:3], signatures=sketches[:3])
    assert [keys[row] in [m.key for m in matches] for row, matches in enumerate(found)] == [True] * 3

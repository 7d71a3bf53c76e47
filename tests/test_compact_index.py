"""The compact index (``IndexConfig.compact()``, ``--index-kind compact``): 64 bytes a stored
record, queries equal to a brute-force scan of what it stores on every store, its estimate near
the exact Jaccard, the pairs batch dedup finds on a small dev sample, the kind kept in the meta
(a reopen needs no option, another kind is refused), removal."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from neardup import DedupSettings, Index, SimhashIndex, dedup_documents
from neardup.cli.main import main as cli
from neardup.errors import ConfigError, IndexConfigMismatchError, StorageUnsupportedError
from neardup.eval.metrics import NEAR_LEVELS
from neardup.fingerprint.config import FingerprintConfig
from neardup.index.compact_index import CompactIndex, open_stored
from neardup.index.config import IndexConfig
from neardup.io.record import Record
from neardup.similarity.compact import RECORD_BYTES, CompactScheme, compact_similarity
from neardup.similarity.shingles import Shingles
from neardup.similarity.sketches import SKETCH_WORDS, text_sketches
from neardup.storage import runs as runs_module
from tests.conftest import read_jsonl, shared_file
from tests.test_storage_conformance import band_corpus, band_queries, store_url  # noqa: F401 - fixture

#: Every store but Redis, whose postings return fingerprints only (refused: the last test).
BACKENDS = ["memory", "sqlite", "postgres", "mysql", "mongo", "mongo-buckets"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def compact(store_url: str) -> Callable[[], SimhashIndex]:  # noqa: F811 - the fixture above
    opened: list[SimhashIndex] = []

    def make() -> SimhashIndex:
        index = open_stored(store_url, IndexConfig.compact())
        opened.append(index)
        return index

    yield make  # type: ignore[misc]
    for index in opened:
        index.close()


def brute(
    scheme: CompactScheme,
    stored: dict[object, tuple[int, np.ndarray]],
    values: np.ndarray,
    sketches: np.ndarray,
) -> list[list[tuple[int, bool, object]]]:
    """Per query: every stored record that shares a band key with it and whose estimate
    reaches 0.5, as (Hamming distance, key is str, key), in the index's order."""
    keys = list(stored)
    stored_values = np.array([stored[key][0] for key in keys], dtype=np.uint64)
    records = scheme.compose(stored_values.reshape(-1, 1), np.stack([stored[key][1] for key in keys]))
    queries = scheme.compose(values.reshape(-1, 1), sketches)
    stored_bands, query_bands = scheme.keys(records), scheme.keys(queries)
    out = []
    for row, value in enumerate(values.tolist()):
        sharing = np.any(stored_bands == query_bands[row], axis=1)
        similar = compact_similarity(scheme, queries[row : row + 1], records) >= 0.5
        found = [
            (bin(value ^ int(stored_values[at])).count("1"), keys[at])
            for at in np.flatnonzero(sharing & similar)
        ]
        out.append(sorted((distance, isinstance(key, str), key) for distance, key in found))
    return out


def triples(matches: list) -> list[tuple[int, bool, object]]:  # type: ignore[type-arg]
    return [(match.distance, isinstance(match.key, str), match.key) for match in matches]


def test_queries_equal_brute_force_and_removal(compact: Callable[[], SimhashIndex]) -> None:
    """On every store: the index returns exactly the stored records that share a band with
    the query and whose 64-byte records estimate J >= 0.5; after removals, exactly those left."""
    index = compact()
    assert isinstance(index, CompactIndex)
    keys, values, sketches = band_corpus(300, seed=31)
    index.add_many(keys[:200], values[:200], signatures=sketches[:200])
    index.add_many(keys[200:], values[200:], signatures=sketches[200:])
    stored = {key: (int(values[row]), sketches[row]) for row, key in enumerate(keys)}
    queries, query_sketches = band_queries(values, sketches, seed=7)
    expected = brute(index.scheme, stored, queries, query_sketches)
    found = index.query_many(queries, signatures=query_sketches)
    assert [triples(matches) for matches in found] == expected
    assert sum(map(len, expected)) > 300 + 50  # every record finds itself, and the close copies
    removed = keys[::3]
    index.remove_many(removed)
    for key in removed:
        del stored[key]
    expected = brute(index.scheme, stored, queries, query_sketches)
    assert [triples(matches) for matches in index.query_many(queries, signatures=query_sketches)] == expected
    assert len(index) == 200


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.servers)])
def test_what_a_process_keeps_of_runs_and_records_answers_like_brute_force(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The long posting lists and the screened records' words a process keeps
    (``KnownLists``, ``KnownWords``) answer as a read of the store would: queries asked again
    from the copies, after removals of records they hold, after merges retire the runs they
    came from, and after another handle drops the store and makes it again (ids from 1);
    the records past what the copy holds are read each time."""
    monkeypatch.setattr(runs_module, "RUN_RECORDS", 30)
    monkeypatch.setattr(runs_module, "KNOWN_LIST_POSTINGS", 2)
    monkeypatch.setattr(runs_module, "KNOWN_WORDS_BYTES", 65 * 150)  # ids past 150: read each time
    url = (
        f"sqlite:///{tmp_path}/c.db"
        if engine == "sqlite"
        else str(request.getfixturevalue("fresh_postgres_url"))
    )
    keys, values, sketches = band_corpus(400, seed=43)
    queries, query_sketches = band_queries(values, sketches, seed=9)

    def answers(index: SimhashIndex) -> list[list[tuple[int, bool, object]]]:
        found = index.query_many(queries, signatures=query_sketches)
        return [triples(matches) for matches in found]

    with open_stored(url, IndexConfig.compact()) as index:
        for low in range(0, 300, 30):
            index.add_many(keys[low : low + 30], values[low : low + 30], signatures=sketches[low : low + 30])
        stored = {key: (int(values[row]), sketches[row]) for row, key in enumerate(keys[:300])}
        expected = brute(index.scheme, stored, queries, query_sketches)
        assert answers(index) == expected
        layout = index.storage.layout  # type: ignore[attr-defined]
        assert layout.known is not None and layout.known._known.sum() == 149  # ids 1-149
        assert layout.runs.known.postings > 0  # lists of two postings and more, kept
        assert answers(index) == expected  # now from the copies
        removed = keys[:300:4]
        index.remove_many(removed)
        for key in removed:
            del stored[key]
        assert answers(index) == brute(index.scheme, stored, queries, query_sketches)
        held = set(layout.runs.known._lists)
        for low in range(300, 400, 10):  # cuts and merges retire the runs the lists came from
            index.add_many(keys[low : low + 10], values[low : low + 10], signatures=sketches[low : low + 10])
        stored.update({key: (int(values[row]), sketches[row]) for row, key in enumerate(keys) if row >= 300})
        assert answers(index) == brute(index.scheme, stored, queries, query_sketches)
        assert not held <= set(layout.runs.known._lists)
        with open_stored(url, IndexConfig.compact()) as other:
            other.storage.drop()
        again_keys, again_values, again_sketches = band_corpus(200, seed=44)
        with open_stored(url, IndexConfig.compact()) as other:
            other.add_many(again_keys, again_values, signatures=again_sketches)
        stored = {key: (int(again_values[row]), again_sketches[row]) for row, key in enumerate(again_keys)}
        queries, query_sketches = band_queries(again_values, again_sketches, seed=10)
        expected = brute(index.scheme, stored, queries, query_sketches)
        assert answers(index) == expected and sum(map(len, expected)) > 200


def test_the_estimate_rejects_what_only_a_band_brings() -> None:
    """A record carrying one band of another and nothing else is found by the band and
    rejected by the estimate; a copy with a few bytes changed is kept."""
    scheme = CompactScheme(64)
    rng = np.random.default_rng(3)
    sketches = np.frombuffer(rng.bytes(3 * SKETCH_WORDS * 8), dtype=np.uint64).reshape(3, -1).copy()
    bins = sketches.view(np.uint8)
    bins[1, 6:9] = bins[0, 6:9]  # band 2 only
    bins[2] = bins[0]
    bins[2, [5, 100, 300]] += np.uint8(1)
    records = scheme.compose(np.arange(3, dtype=np.uint64).reshape(-1, 1), sketches)
    assert (scheme.keys(records)[1] == scheme.keys(records)[0]).sum() == 1
    similar = compact_similarity(scheme, records[:1], records)
    assert similar[0] == 1.0 and similar[1] < 0.2 and similar[2] > 0.9


def test_the_estimate_follows_the_exact_jaccard() -> None:
    """On texts edited to Jaccard 0.2-1, the estimate of their 64-byte records stays within
    0.2 of the exact shingle Jaccard, and within 0.07 on average."""
    rng = np.random.default_rng(5)
    words = [f"w{k}" for k in range(5000)]
    left, right = [], []
    for share in np.linspace(0.2, 1.0, 60).tolist():
        base = rng.choice(words, size=150).tolist()
        edited = [word if rng.random() < share else str(rng.choice(words)) for word in base]
        left.append(" ".join(base))
        right.append(" ".join(edited))
    exact = Shingles.of(left + right).jaccard(np.arange(60), np.arange(60, 120))
    scheme = CompactScheme(64)
    values = np.zeros((60, 1), dtype=np.uint64)
    estimate = compact_similarity(
        scheme, scheme.compose(values, text_sketches(left)), scheme.compose(values, text_sketches(right))
    )
    error = np.abs(estimate - exact)
    assert error.max() < 0.2 and error.mean() < 0.07


def test_a_stored_record_is_64_bytes_in_a_real_sqlite_file(tmp_path: Path) -> None:
    """The record's value columns in the SQLite file: 64 bytes of words, no signature, and no
    texts kept (the band index keeps 512 bytes of sketch and its texts)."""
    path = tmp_path / "compact.db"
    texts = [
        (f"d{k}", f"document number {k} about {'stores ' * (k % 7)} and compact records") for k in range(50)
    ]
    with Index.open(str(path), IndexConfig.compact()) as index:
        index.check_and_add_texts(texts)
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT length(fingerprint), signature FROM neardup_records").fetchall()
        values = connection.execute("SELECT count(*) FROM neardup_values WHERE name = 'texts'").fetchone()
    assert len(rows) == 50 and {row for row in rows} == {(RECORD_BYTES, None)}
    assert RECORD_BYTES <= 64 and values == (0,)


def test_the_kind_is_stored_and_another_kind_refused(tmp_path: Path) -> None:
    url = str(tmp_path / "kind.db")
    with Index.open(url, IndexConfig.compact()) as index:
        index.add_texts(
            [("a", "the first text of the compact index"), ("b", "and another one, quite different")]
        )
    with Index.open(url) as index:  # no option: the stored kind
        assert isinstance(index.index, CompactIndex) and len(index) == 2
        assert index.query_texts(["the first text of the compact index"])[0][0].key == "a"
        index.remove_many(["a"])
        assert index.query_texts(["the first text of the compact index"]) == [[]]
    with pytest.raises(IndexConfigMismatchError):
        Index.open(url, IndexConfig.band_index())
    # The low-level opener cannot serve it, and says which one can.
    with pytest.raises(ConfigError, match=r"compact index .*neardup\.Index\.open"):
        SimhashIndex.open(url)
    band = str(tmp_path / "band.db")
    Index.open(band).close()
    with pytest.raises(IndexConfigMismatchError):
        Index.open(band, IndexConfig.compact())
    with pytest.raises(ConfigError, match="layout version"):
        CompactScheme.from_dict({"kind": "compact", "version": 2, "bits": 64, "bands": 16, "rows": 3})
    with pytest.raises(ConfigError, match="64-bit"):
        IndexConfig.compact(FingerprintConfig(bits=128))


@pytest.fixture(scope="module")
def zh_sample() -> list[dict[str, object]]:
    """~300 zh_news records: every record of the file's first 40 gold clusters, then the
    records that come first."""
    rows = read_jsonl(shared_file("dev/zh_news.jsonl"))
    sizes = Counter(row["cluster"] for row in rows if row["level"] in NEAR_LEVELS)
    chosen = list(dict.fromkeys(row["cluster"] for row in rows if sizes[row["cluster"]] >= 2))[:40]
    members = {at for at, row in enumerate(rows) if row["cluster"] in chosen}
    others = [at for at in range(len(rows)) if at not in members][: 300 - len(members)]
    return [rows[at] for at in sorted(members | set(others))]


def test_online_pairs_are_the_batch_pairs_on_a_dev_sample(
    zh_sample: list[dict[str, object]], tmp_path: Path
) -> None:
    """Checked and added one record at a time (every decision on the stored 64-byte records),
    the compact index finds the pairs batch dedup finds, but for a few near the threshold."""
    records = [Record(row["id"], str(row["text"]), None, f"line {at}") for at, row in enumerate(zh_sample)]
    batch = dedup_documents(records, settings=DedupSettings())
    expected = {frozenset((row["a"], row["b"])) for row in batch.pair_rows()}
    found: set[frozenset[object]] = set()
    with Index.open(str(tmp_path / "c.db"), IndexConfig.compact()) as index:
        for record in records:
            for assignment in index.check_and_add_texts([record]):
                found.update(frozenset((assignment.key, match.key)) for match in assignment.matches)
    assert len(expected) > 80
    assert len(found & expected) >= 0.95 * len(expected)
    assert len(found - expected) <= 0.05 * len(expected)


def test_cli_index_kind(tmp_path: Path) -> None:
    """``--index-kind compact`` creates a compact index; a later run needs no option; the
    option on a store of another kind, with -k, or without --index is refused in one line."""
    data = tmp_path / "docs.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"d{k}", "text": f"text {k} of the compact index, number {k}"}) + "\n"
            for k in range(20)
        ),
        encoding="utf-8",
    )
    runner = CliRunner()
    store = str(tmp_path / "c.db")
    result = runner.invoke(cli, ["index", "add", store, str(data), "--index-kind", "compact"])
    assert result.exit_code == 0, result.output
    with Index.open(store) as index:
        assert isinstance(index.index, CompactIndex)
    result = runner.invoke(cli, ["dedup", str(data), "--index", store, "--pairs", str(tmp_path / "p.jsonl")])
    assert result.exit_code == 0, result.output
    again = runner.invoke(cli, ["index", "add", store, str(data), "--index-kind", "compact"])
    assert again.exit_code == 0 and "the index holds 20" in again.output
    refused = runner.invoke(cli, ["index", "add", store, str(data), "--index-kind", "band"])
    assert refused.exit_code != 0 and "is a compact index" in refused.output
    assert len([line for line in refused.output.splitlines() if line.strip()]) == 1
    bad = runner.invoke(
        cli, ["index", "add", str(tmp_path / "x.db"), str(data), "--index-kind", "compact", "-k", "3"]
    )
    assert bad.exit_code == 2 and "-k makes a Simhash block index" in bad.output
    bad = runner.invoke(
        cli, ["dedup", str(data), "--index-kind", "compact", "--pairs", str(tmp_path / "q.jsonl")]
    )
    assert bad.exit_code == 2 and "--index-kind applies with --index only" in bad.output


def test_redis_is_refused_before_anything_is_written(fresh_redis_url: str) -> None:
    """Redis postings keep fingerprints only, so a compact index cannot decide there: refused
    in one line, and the store stays empty (a band index can be made in it after)."""
    with pytest.raises(StorageUnsupportedError, match="fingerprints only"):
        Index.open(fresh_redis_url, IndexConfig.compact())
    with Index.open(fresh_redis_url) as index:
        assert index.index.scheme.to_dict()["kind"] == "bands"

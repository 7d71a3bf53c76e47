"""The runs layout of PostgreSQL and SQLite (:mod:`neardup.storage.runs`): with runs cut every few
records, postings move through cuts and merges and the index still answers like a brute-force
scan; removed records vanish from reads and from merged runs; runs stay few; a reader in
another connection never misses a record acknowledged before it asked, while a writer cuts and
merges; stores of the earlier column layout are still served."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neardup import IncrementalDeduper, SimhashIndex, Verifier
from neardup.errors import ConfigError, KeyExistsError
from neardup.index.compact_index import open_stored
from neardup.index.config import IndexConfig
from neardup.similarity.bands import BandScheme
from neardup.storage import runs as runs_module
from neardup.storage.base import Key
from neardup.storage.postgres import PostgresDialect
from neardup.storage.runs import (
    LAYOUT,
    KnownLists,
    KnownWords,
    PostingRuns,
    RunsLayout,
    build_filter,
    may_contain,
    posting_keys,
)
from neardup.storage.sql import SqlStorage
from neardup.storage.sql_dialects import SqlDialect
from neardup.storage.sqlite import SqliteDialect, _foreign_tables

from .test_sql_recent import sketches

RUN = 30
BANDS = IndexConfig(scheme=BandScheme(64), verification={"mode": "sketch"})


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.servers)])
def url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.db?layout=runs"
    return str(request.getfixturevalue("fresh_postgres_url"))


@pytest.fixture
def small_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(runs_module, "RUN_RECORDS", RUN)
    yield


@pytest.fixture(params=["packed", "per posting"])
def postings(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """New stores keep their recent postings packed, one row per record; stores made before
    (layout runs-1 without ``packed`` in its state) keep one row per posting, made here as
    that version made them, and must be served as before."""
    if request.param == "per posting":
        packed_create = PostingRuns.create

        def create(self: PostingRuns, cursor: object, record_columns: str) -> None:
            packed_create(self, cursor, record_columns)
            execute = cursor.execute  # type: ignore[attr-defined]
            execute(f"DROP TABLE {self.postings_table}")
            execute(f"CREATE TABLE {self.postings_table} (k BIGINT NOT NULL, id BIGINT NOT NULL)")
            execute(f"CREATE INDEX {self.postings_table}_id ON {self.postings_table} (id)")
            state = self.state(cursor)
            del state["packed"]
            self._save(cursor, state)

        monkeypatch.setattr(PostingRuns, "create", create)
    return str(request.param)


def storage_of(index: SimhashIndex) -> SqlStorage:
    storage = index.storage
    assert isinstance(storage, SqlStorage)
    return storage


def runs_of(storage: SqlStorage) -> PostingRuns:
    """The runs of a store of the runs layout."""
    assert isinstance(storage.layout, RunsLayout)
    return storage.layout.runs


def runs_state(index: SimhashIndex) -> dict[str, object]:
    storage = storage_of(index)
    with storage._transaction() as cursor:
        return runs_of(storage).state(cursor)


def expected_matches(
    index: SimhashIndex, keys: Sequence[Key], values: np.ndarray, sketch: np.ndarray
) -> list[set]:  # type: ignore[type-arg]
    bands = index.bands
    assert bands is not None
    every = bands.keys(bands.compose(values.reshape(-1, 1), sketch))
    return [
        {keys[other] for other in np.flatnonzero(np.any(every == every[row], axis=1)).tolist()}
        for row in range(len(keys))
    ]


def test_posting_keys_keep_the_table_in_the_top_bits_and_tell_keys_apart() -> None:
    blocks = np.array([[0, 0, 1], [1, 0, 2**64 - 1]], dtype=np.uint64)
    keys = posting_keys(blocks).view(np.uint64)
    assert (keys >> np.uint64(58)).tolist() == [[0, 1, 2], [0, 1, 2]]
    assert keys[0, 0] != keys[1, 0] and keys[0, 1] == keys[1, 1] and keys[0, 2] != keys[1, 2]


def test_run_filters_let_every_stored_key_through_and_few_others() -> None:
    rng = np.random.default_rng(11)
    stored = posting_keys(rng.integers(0, 2**63, size=(20_000, 16), dtype=np.uint64)).ravel()
    others = posting_keys(rng.integers(0, 2**63, size=(20_000, 16), dtype=np.uint64)).ravel()
    words = build_filter(stored)
    assert may_contain(words, stored).all()
    assert may_contain(words, others).mean() < 0.01
    assert not may_contain(build_filter(stored[:0]), others).any()


def test_records_cross_runs_and_stay_searchable(url: str, small_runs: None, postings: str) -> None:
    count = 400
    keys: list[Key] = [f"k{row}" if row % 2 else row for row in range(count)]
    values = np.random.default_rng(3).integers(0, 2**63, size=count, dtype=np.uint64)
    sketch = sketches(count, seed=4)
    with SimhashIndex.open(url, BANDS) as index:
        deduper = IncrementalDeduper(index, Verifier("sketch"))
        for low in range(0, count, 25):
            deduper.check_and_add_many(
                keys[low : low + 25], values[low : low + 25], signatures=sketch[low : low + 25]
            )
        state = runs_state(index)
        runs = state["runs"]
        assert isinstance(runs, list) and 1 <= len(runs) <= 6  # 13 cuts: 3 runs of tier 1, 1 of tier 0
        sizes = [run["postings"] for run in runs]
        assert sizes == sorted(sizes, reverse=True)
        assert len(index) == count
        assert {record.key for batch in index.storage.scan() for record in batch} == set(keys)
        expected = expected_matches(index, keys, values, sketch)
        found = index.query_many(values, signatures=sketch)
        for row, matches in enumerate(found):
            assert {match.key for match in matches} == expected[row] and len(matches) == len(expected[row])
        with pytest.raises(KeyExistsError):  # a key in a run is refused, not stored twice
            index.add_many([keys[0]], values[:1], signatures=sketch[:1])
        removed = [keys[0], keys[count - 1]]  # one in a run, one among the recent postings
        index.remove_many(removed)
        assert len(index) == count - 2 and index.get_many(removed) == [None, None]
        found = index.query_many(values, signatures=sketch)
        for row, matches in enumerate(found):
            assert {match.key for match in matches} == expected[row] - set(removed)
        index.add_many([keys[0]], values[1:2], signatures=sketch[1:2])  # the key again, another text
        assert keys[0] in {match.key for match in index.query_many(values[1:2], signatures=sketch[1:2])[0]}
        assert keys[0] not in {match.key for match in index.query_many(values[:1], signatures=sketch[:1])[0]}


def test_merges_drop_the_postings_of_removed_records(url: str, small_runs: None, postings: str) -> None:
    count = 16 * RUN  # 16 cuts: four merges into tier 1, then one into tier 2
    values = np.random.default_rng(5).integers(0, 2**63, size=count, dtype=np.uint64)
    sketch = sketches(count, seed=6)
    tables = BANDS.scheme.table_count  # type: ignore[union-attr]
    with SimhashIndex.open(url, BANDS) as index:
        index.add_many(list(range(RUN)), values[:RUN], signatures=sketch[:RUN])
        index.remove_many(list(range(RUN // 2)))
        for low in range(RUN, count, RUN):
            index.add_many(
                list(range(low, low + RUN)), values[low : low + RUN], signatures=sketch[low : low + RUN]
            )
        storage = storage_of(index)
        with storage._transaction() as cursor:
            state = runs_of(storage).state(cursor)
            total = 0
            for table in runs_of(storage).tables(state):
                cursor.execute(f"SELECT COUNT(*) FROM {table}")
                total += int(cursor.fetchone()[0])
        # Every run was merged into one by now: only the live records' postings are left.
        assert [run["postings"] for run in state["runs"]] == [(count - RUN // 2) * tables]
        assert total == (count - RUN // 2) * tables
        stats = index.stats()
        assert sum(table.buckets for table in stats.tables) > 0
        assert all(round(table.mean * table.buckets) == count - RUN // 2 for table in stats.tables)


def test_a_reader_never_misses_an_acknowledged_record_while_runs_change(
    url: str, small_runs: None, postings: str
) -> None:
    count = 600
    values = np.random.default_rng(7).integers(0, 2**63, size=count, dtype=np.uint64)
    sketch = sketches(count, seed=8)
    SimhashIndex.open(url, BANDS).close()
    acknowledged = 0
    failures: list[str] = []
    done = threading.Event()

    def read() -> None:
        with SimhashIndex.open(url, create=False) as reader:
            while not done.is_set():
                known = acknowledged
                if not known:
                    continue
                matches = reader.query_many(values[:known], signatures=sketch[:known])
                missing = [row for row in range(known) if row not in {match.key for match in matches[row]}]
                if missing:
                    failures.append(f"rows {missing[:5]} of {known} acknowledged were not found")
                    return

    thread = threading.Thread(target=read)
    thread.start()
    try:
        with SimhashIndex.open(url, create=False) as writer:
            for low in range(0, count, 10):
                writer.add_many(
                    list(range(low, low + 10)), values[low : low + 10], signatures=sketch[low : low + 10]
                )
                acknowledged = low + 10
            assert len(runs_state(writer)["runs"]) >= 1  # type: ignore[arg-type]
    finally:
        done.set()
        thread.join()
    assert not failures, failures[0]


@pytest.mark.parametrize("stamps", ["random", "all alike"])
def test_each_process_finds_what_another_added(
    url: str, small_runs: None, stamps: str, monkeypatch: pytest.MonkeyPatch, postings: str
) -> None:
    """Two stores on one index (as two processes) take turns adding, across cuts; after every
    turn each finds every record, its own and the other's. A process's filter of the recent
    postings must not be used once the other has written; with every stamp alike (a writer
    that keeps the stamp it read) the next id still tells the states apart."""
    if stamps == "all alike":
        monkeypatch.setattr(runs_module, "_stamp", lambda: "same")
    values = np.random.default_rng(31).integers(0, 2**63, size=90, dtype=np.uint64)
    sketch = sketches(90, seed=32)
    with SimhashIndex.open(url, BANDS) as first, SimhashIndex.open(url, create=False) as second:
        for turn, start in enumerate(range(0, 90, 9)):
            writer = (first, second)[turn % 2 if turn < 6 else 0]
            rows = slice(start, start + 9)
            writer.add_many(list(range(start, start + 9)), values[rows], signatures=sketch[rows])
            for reader in (first, second):
                found = reader.query_many(values[: start + 9], signatures=sketch[: start + 9])
                assert all(row in {match.key for match in matches} for row, matches in enumerate(found))


def recent_postings(storage: SqlStorage) -> tuple[str, list[tuple[int, int]], list[tuple[int, int]]]:
    """How the process's copy of the recent postings relates to the store, what it holds and
    what the postings table holds, as sorted (key, id) pairs."""
    runs = runs_of(storage)
    with storage._transaction() as cursor:
        state = runs.state(cursor)
        usable = runs.recent.usable_for(state)
        stored = runs._postings_between(cursor, 0, int(state["next_id"]))
    everything = np.iinfo(np.int64)
    held = runs.recent.find(np.unique(np.concatenate([stored[0], [everything.min, everything.max]])))
    pairs = [sorted(zip(*(part.tolist() for part in found), strict=True)) for found in (held, stored)]
    return usable, pairs[0], pairs[1]


def test_a_writer_keeps_its_copy_of_the_recent_postings_exact(
    url: str, small_runs: None, monkeypatch: pytest.MonkeyPatch, postings: str
) -> None:
    """One writer alone keeps its in-memory copy of the recent postings current through adds
    and cuts (never reading them back), equal to the table; a batch that rolls back (here its
    cut fails) leaves the copy as it was, and the next add and queries are right."""
    values = np.random.default_rng(33).integers(0, 2**63, size=77, dtype=np.uint64)
    sketch = sketches(77, seed=34)
    with SimhashIndex.open(url, BANDS) as index:
        storage = storage_of(index)
        reads: list[object] = []
        counted = _counting(runs_of(storage)._postings_between, reads)
        monkeypatch.setattr(runs_of(storage), "_postings_between", counted)
        sizes = []
        for start in range(0, 70, 7):
            rows = slice(start, start + 7)
            index.add_many(list(range(start, start + 7)), values[rows], signatures=sketch[rows])
            index.query_many(values[rows], signatures=sketch[rows])
            usable, held, stored = recent_postings(storage)
            assert usable == "current" and held == stored
            sizes.append(len(held))
        assert len(reads) == 10  # recent_postings() read them; the queries never did
        assert 0 in sizes and max(sizes) >= 7 * 16  # across cuts
        with monkeypatch.context() as patch:
            patch.setattr(runs_of(storage), "cut_if_full", _failing)
            with pytest.raises(RuntimeError, match="cut failed"):
                index.add_many([70], values[70:71], signatures=sketch[70:71])
        usable, held, stored = recent_postings(storage)
        assert usable == "current" and held == stored
        index.add_many(list(range(70, 77)), values[70:], signatures=sketch[70:])
        found = index.query_many(values, signatures=sketch)
        assert all(row in {match.key for match in matches} for row, matches in enumerate(found))
        usable, held, stored = recent_postings(storage)
        assert usable == "current" and held == stored and held


def _counting(function: Callable[..., object], calls: list[object]) -> Callable[..., object]:
    def counted(*args: object) -> object:
        calls.append(args)
        return function(*args)

    return counted


def _failing(*args: object) -> None:
    raise RuntimeError("cut failed")


def test_a_store_of_the_column_layout_is_still_served(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.random.default_rng(9).integers(0, 2**63, size=60, dtype=np.uint64)
    sketch = sketches(60, seed=10)
    with monkeypatch.context() as patch:
        patch.setattr(PostgresDialect, "layouts", ("columns",))  # PostgreSQL's default before
        with SimhashIndex.open(url.replace("?layout=runs", "?layout=columns"), BANDS) as index:
            index.add_many(list(range(30)), values[:30], signatures=sketch[:30])
    with SimhashIndex.open(url, create=False) as index:  # asking for runs does not convert it
        storage = storage_of(index)
        assert not isinstance(storage.layout, RunsLayout) and storage._table_exists(storage.recent_table)
        index.add_many(list(range(30, 60)), values[30:], signatures=sketch[30:])
        found = index.query_many(values, signatures=sketch)
        assert all(row in {match.key for match in matches} for row, matches in enumerate(found))


def test_new_stores_record_the_runs_layout(url: str) -> None:
    """... with their recent postings packed: one row per record, every posting key in it."""
    values = np.random.default_rng(13).integers(0, 2**63, size=5, dtype=np.uint64)
    sketch = sketches(5, seed=14)
    with SimhashIndex.open(url, BANDS) as index:
        index.add_many(list(range(5)), values, signatures=sketch)
        bands = index.bands
        assert bands is not None
        expected = posting_keys(bands.keys(bands.compose(values.reshape(-1, 1), sketch)))
        storage = storage_of(index)
        postings = runs_of(storage).postings_table
        with storage._transaction() as cursor:
            cursor.execute(f"SELECT value FROM {storage.meta_table} WHERE name = 'layout'")
            assert cursor.fetchone()[0] == LAYOUT
            assert runs_of(storage).state(cursor)["packed"] is True
            cursor.execute(f"SELECT COUNT(*) FROM {postings}")
            assert cursor.fetchone()[0] == 5
            keys, ids = runs_of(storage)._postings_between(cursor, 0, 6)
        pairs = sorted(zip(keys.tolist(), ids.tolist(), strict=True))
        assert pairs == sorted((key, row + 1) for row, part in enumerate(expected.tolist()) for key in part)
        storage.drop()
        assert not storage._table_exists(storage.records_table)
        assert not storage._table_exists(postings)


def test_sqlite_gets_runs_unless_the_url_asks_for_columns(tmp_path: object) -> None:
    with SimhashIndex.open(f"sqlite:///{tmp_path}/default.db", BANDS) as index:
        assert isinstance(storage_of(index).layout, RunsLayout)
    with SimhashIndex.open(f"sqlite:///{tmp_path}/seed.db?layout=columns", BANDS) as index:
        storage = storage_of(index)
        assert not isinstance(storage.layout, RunsLayout) and storage._table_exists(storage.recent_table)
    with pytest.raises(ConfigError, match=r"layout='heap' .* must be one of columns, runs"):
        SimhashIndex.open(f"sqlite:///{tmp_path}/other.db?layout=heap", BANDS)
    assert not (Path(str(tmp_path)) / "other.db").exists()


def test_an_sqlite_store_in_runs_has_no_tables_foreign_to_it(tmp_path: object, small_runs: None) -> None:
    url = f"sqlite:///{tmp_path}/runs.db?layout=runs"
    values = np.random.default_rng(12).integers(0, 2**63, size=2 * RUN, dtype=np.uint64)
    with SimhashIndex.open(url, BANDS) as index:
        index.add_many(list(range(2 * RUN)), values, signatures=sketches(2 * RUN, seed=13))
        assert runs_state(index)["runs"]
    with contextlib.closing(sqlite3.connect(f"{tmp_path}/runs.db")) as connection:
        assert _foreign_tables(connection) == []


def test_filters_stored_in_parts_are_read_whole(
    url: str, small_runs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter is stored in rows of at most FILTER_PART_BYTES (here 64: every run's filter in
    several rows), so no value passes an engine's length limit (a run of 537 M postings has a
    1 GiB filter); readers join the rows, and runs merged away take all theirs with them."""
    monkeypatch.setattr(runs_module, "FILTER_PART_BYTES", 64, raising=False)
    count = 12 * RUN  # 12 cuts: three merges into tier 1
    values = np.random.default_rng(35).integers(0, 2**63, size=count, dtype=np.uint64)
    sketch = sketches(count, seed=36)
    keys: list[Key] = list(range(count))
    with SimhashIndex.open(url, BANDS) as index:
        for low in range(0, count, RUN):
            index.add_many(keys[low : low + RUN], values[low : low + RUN], signatures=sketch[low : low + RUN])
        storage = storage_of(index)
        assert isinstance(storage.layout, RunsLayout)
        storage.layout.merge_pending()
        state = runs_state(index)
        with storage._transaction() as cursor:
            cursor.execute(f"SELECT name, bits FROM {runs_of(storage).filters_table}")
            rows = {str(name): bytes(bits) for name, bits in cursor.fetchall()}
        runs = [run["table"] for run in state["runs"]]  # type: ignore[attr-defined]
        assert {name.partition("#")[0] for name in rows} == set(runs)
        assert all(len(bits) <= 64 for bits in rows.values())
        assert all(sum(name.partition("#")[0] == run for name in rows) > 1 for run in runs)
    with SimhashIndex.open(url, create=False) as index:  # a process that reads the filters
        expected = expected_matches(index, keys, values, sketch)
        found = index.query_many(values, signatures=sketch)
        assert [{match.key for match in matches} for matches in found] == expected


def test_a_cut_writes_each_posting_once_in_key_order_whoever_holds_the_postings(
    url: str, small_runs: None, postings: str
) -> None:
    """A cut sorts the recent postings in numpy and writes them in (k, id) order: from the
    cutting process's copy when it holds them all, else read from the postings table (the
    other process added some). Either way each run holds exactly the postings of its records,
    each once, and SQLite's table (clustered on (k, id)) returns them in that order."""
    count = 3 * RUN  # three runs of tier 0: no merge
    values = np.random.default_rng(41).integers(0, 2**63, size=count, dtype=np.uint64)
    sketch = sketches(count, seed=42)
    with SimhashIndex.open(url, BANDS) as first, SimhashIndex.open(url, create=False) as second:
        for turn, start in enumerate(range(0, count, 10)):
            writer = first if turn < 3 or turn % 2 else second  # the first cut from memory, then mixed
            rows = slice(start, start + 10)
            writer.add_many(list(range(start, start + 10)), values[rows], signatures=sketch[rows])
        bands = first.bands
        assert bands is not None
        every = posting_keys(bands.keys(bands.compose(values.reshape(-1, 1), sketch)))
        storage = storage_of(first)
        with storage._transaction() as cursor:
            state = runs_of(storage).state(cursor)
            assert len(state["runs"]) == 3 and all(run["tier"] == 0 for run in state["runs"])
            seen = 0
            for run in state["runs"]:
                cursor.execute(f"SELECT k, id FROM {run['table']}")
                found = [(int(k), int(i)) for k, i in cursor.fetchall()]
                if "sqlite" in url:
                    assert found == sorted(found)
                ids = sorted({i for _, i in found})
                assert ids == list(range(ids[0], ids[-1] + 1)) and run["postings"] == len(found)
                # ids count from 1 in the order added: record id i is row i - 1
                expected = sorted((int(k), i) for i in ids for k in every[i - 1].tolist())
                assert sorted(found) == expected
                seen += len(ids)
            assert seen == int(state["cut"])


def test_known_words_are_let_go_for_another_store_or_a_rollback_and_stay_within_their_bytes() -> None:
    """A process's copy of stored words answers only for the store it was read from (its
    ``made``), is dropped when ids went back (a rollback hands them out again), copies
    nothing of a store made before ``made``, and holds the ids that fit its bytes."""
    known = KnownWords(2, limit=17 * 10)  # 10 ids of 2 words and a flag
    words = np.arange(24, dtype=np.uint64).reshape(12, 2)
    ids = np.arange(12, dtype=np.int64)
    known.follow({"made": None, "next_id": 12})
    known.learn(ids, words)
    assert not known.holds(ids).any()  # a store without made: nothing copied
    known.follow({"made": "a", "next_id": 12})
    known.learn(ids, words)
    assert known.holds(ids).tolist() == [True] * 10 + [False] * 2  # ids 10 and 11 do not fit
    assert (known.words_of(ids[:10]) == words[:10]).all()
    known.follow({"made": "a", "next_id": 20})
    assert known.holds(ids).sum() == 10  # more records: the copy holds
    known.follow({"made": "a", "next_id": 15})
    assert not known.holds(ids).any()  # ids went back
    known.learn(ids[:3], words[:3])
    known.follow({"made": "b", "next_id": 15})
    assert not known.holds(ids).any()  # another store


def test_known_lists_keep_the_long_lists_of_live_runs_within_their_postings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process keeps a run's lists of at least KNOWN_LIST_POSTINGS postings, answers them
    (and only them) from the copy, lets a merged-away run's go, and starts again past its
    limit."""
    monkeypatch.setattr(runs_module, "KNOWN_LIST_POSTINGS", 3)
    known = KnownLists(limit=8)
    keys = np.array([5, 7, 5, 9, 5, 7, 7], dtype=np.int64)
    ids = np.array([1, 2, 3, 4, 5, 6, 7], dtype=np.int64)
    known.learn("run_a", keys, ids)
    asked = np.array([5, 7, 9, 11], dtype=np.int64)
    rest, found_keys, found_ids = known.split("run_a", asked)
    assert rest.tolist() == [9, 11]  # 9 lists one posting: asked of the run again
    pairs = sorted(zip(found_keys.tolist(), found_ids.tolist(), strict=True))
    assert pairs == [(5, 1), (5, 3), (5, 5), (7, 2), (7, 6), (7, 7)]
    assert known.split("run_b", asked)[0].tolist() == asked.tolist()  # another run: nothing known
    known.keep_runs(["run_b"])
    assert known.split("run_a", asked)[0].tolist() == asked.tolist() and known.postings == 0
    known.learn("run_a", keys, ids)
    known.learn("run_b", np.repeat(np.int64(3), 4), np.arange(4, dtype=np.int64))  # past 8: all let go
    assert known.postings == 4 and known.split("run_a", asked)[0].tolist() == asked.tolist()


def test_postings_past_sqlites_length_limit_are_read_row_by_row(
    tmp_path: Path, small_runs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite reads a batch's postings and its candidates' words as one text a column; a batch
    whose text would pass the connection's length limit is read row by row, with the same
    answers."""
    count = 400
    values = np.random.default_rng(7).integers(0, 2**63, size=count, dtype=np.uint64)
    sketch = sketches(count, seed=8)[np.arange(count) // 40 * 40]  # ten groups of 40 copies
    monkeypatch.setattr(runs_module, "KNOWN_LIST_POSTINGS", count + 1)  # every batch asks the runs
    monkeypatch.setattr(runs_module, "KNOWN_WORDS_BYTES", 0)  # and reads its candidates' words
    read_by_rows: list[str] = []
    by_rows, words_by_rows = SqlDialect.int_rows, SqlDialect.words_by_id
    monkeypatch.setattr(
        SqlDialect, "int_rows", lambda self, *args: read_by_rows.append("postings") or by_rows(self, *args)
    )
    monkeypatch.setattr(
        SqlDialect,
        "words_by_id",
        lambda self, *args: read_by_rows.append("words") or words_by_rows(self, *args),
    )
    with open_stored(f"sqlite:///{tmp_path}/r.db?layout=runs", IndexConfig.compact()) as index:
        index.add_many(list(range(count)), values, signatures=sketch)
        asked = values[::40], sketch[::40]
        expected = [
            sorted(match.key for match in matches)
            for matches in index.query_many(asked[0], signatures=asked[1])
        ]
        assert [len(keys) for keys in expected] == [40] * 10 and not read_by_rows
        storage_of(index).dialect.connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 8000)
        found = [
            sorted(match.key for match in matches)
            for matches in index.query_many(asked[0], signatures=asked[1])
        ]
        assert found == expected and set(read_by_rows) == {"postings", "words"}


def test_a_screen_missing_many_words_reads_every_records_words_in_one_pass(
    url: str, small_runs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A screen that misses the words of many of a store's records reads every record's words
    in id order (where the process's copy holds them all) and answers as reads by id do;
    past SQLite's length limit that pass goes row by row."""
    count = 400
    values = np.random.default_rng(9).integers(0, 2**63, size=count, dtype=np.uint64)
    sketch = sketches(count, seed=10)[np.arange(count) // 40 * 40]  # ten groups of 40 copies
    removed = list(range(0, count, 7))
    with open_stored(url, IndexConfig.compact()) as index:
        index.add_many(list(range(count)), values, signatures=sketch)
        index.remove_many(removed)
    calls: list[str] = []
    for cls in (SqliteDialect, PostgresDialect, SqlDialect):
        for name in ("words_below", "words_by_id"):
            if name not in vars(cls):
                continue
            read = getattr(cls, name)

            def spied(
                self: SqlDialect, *args: object, read: Any = read, label: str = f"{cls.__name__}.{name}"
            ) -> Any:
                calls.append(label)
                return read(self, *args)

            monkeypatch.setattr(cls, name, spied)

    def answers(limit: int | None = None) -> list[list[Key]]:
        calls.clear()
        with open_stored(url) as index:
            if limit is not None:
                storage_of(index).dialect.connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)
            found = index.query_many(values[::40], signatures=sketch[::40])
        return [sorted(match.key for match in matches) for matches in found]

    sqlite = url.startswith("sqlite")
    expected = [sorted(set(range(low, low + 40)) - set(removed)) for low in range(0, count, 40)]
    assert answers() == expected
    assert calls == ["SqliteDialect.words_below" if sqlite else "SqlDialect.words_below"]
    if sqlite:
        assert answers(limit=20_000) == expected  # the filters fit, the words do not
        assert calls == ["SqliteDialect.words_below", "SqlDialect.words_below"]
    monkeypatch.setattr(runs_module, "WHOLE_COPY_SHARE", 0)  # never one pass: by id
    assert answers() == expected
    assert calls == ["SqliteDialect.words_by_id" if sqlite else "SqlDialect.words_by_id"]


def test_a_screening_process_knows_the_words_of_what_it_adds_once_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records a screening process adds join its copy of words when their add commits
    (a later screen reads none of them), and not when the add rolls back."""
    count = 80
    values = np.random.default_rng(11).integers(0, 2**63, size=count, dtype=np.uint64)
    sketch = sketches(count, seed=12)[np.arange(count) // 20 * 20]  # four groups of 20 copies
    with open_stored(f"sqlite:///{tmp_path}/a.db?layout=runs", IndexConfig.compact()) as index:
        index.add_many(list(range(40)), values[:40], signatures=sketch[:40])
        assert [len(found) for found in index.query_many(values[:40:20], signatures=sketch[:40:20])] == [
            20,
            20,
        ]
        layout = storage_of(index).layout
        assert isinstance(layout, RunsLayout) and layout.known is not None
        index.add_many(list(range(40, 60)), values[40:60], signatures=sketch[40:60])
        storage = storage_of(index)
        with pytest.raises(RuntimeError), storage._transaction(write=True):
            index.add_many(list(range(60, 80)), values[60:80], signatures=sketch[60:80])
            raise RuntimeError("rolled back")
        assert layout.known.holds(np.arange(1, 61)).all() and not layout.known.holds(np.arange(61, 81)).any()
        read: list[int] = []
        by_id = SqliteDialect.words_by_id
        monkeypatch.setattr(
            SqliteDialect, "words_by_id", lambda self, *args: read.append(1) or by_id(self, *args)
        )
        assert [len(found) for found in index.query_many(values[:60:20], signatures=sketch[:60:20])] == [
            20,
            20,
            20,
        ]
        assert not read

"""Issue 28 item 7: SQLite merges of the runs layout (:mod:`neardup.storage.runs`) stream keys
in parts and run outside the adding transaction, in bounded steps.

A store past 10^8 postings once stopped taking adds: its first tier-4 merge read a run's keys
back as one ``group_concat`` string (134 M keys, about 2.7 GB) past SQLite's 1 GB length limit,
and the tier-3 merge held other writers for its whole length inside an add. Here SQLite's
length limit is set low (``Connection.setlimit``) and runs are cut every few records, so the
same sizes are crossed in seconds: answers must equal a memory index, the batch that fills a
tier must be committed before its merge starts, a merge must be copied in several bounded
transactions, SIGKILLs aimed at merge steps and 2-4 concurrent writers must lose nothing."""

from __future__ import annotations

import json
import multiprocessing
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neardup import IncrementalDeduper, SimhashIndex, Verifier
from neardup.index.config import IndexConfig
from neardup.similarity.bands import BandScheme
from neardup.storage import runs as runs_module
from neardup.storage.runs import RunsLayout
from neardup.storage.sql import SqlStorage
from neardup.storage.sqlite import SqliteDialect, storage_error

from .test_sql_recent import sketches
from .test_store_crash import check_consistent, corpus

RUN = 30
#: SQLite's length limit in these tests: a run of tier 2 (7,680 postings) as one
#: comma-separated text is about 150,000 characters, its filter 16 KiB.
LENGTH = 50_000
BANDS = IndexConfig(scheme=BandScheme(64), verification={"mode": "sketch"})
RUN_NAME = re.compile(r"\b\w+_run_[0-9a-f]{16}\b")


@pytest.fixture
def small_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(runs_module, "RUN_RECORDS", RUN)
    monkeypatch.setattr(runs_module, "MERGE_STEP", 500, raising=False)
    yield


@pytest.fixture
def low_length_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every SQLite connection of a store gets a length limit of :data:`LENGTH` bytes."""
    connect = SqliteDialect._connect

    def limited(self: SqliteDialect, target: str, uri: bool = False) -> sqlite3.Connection:
        connection = connect(self, target, uri)
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, LENGTH)
        return connection

    monkeypatch.setattr(SqliteDialect, "_connect", limited)


def storage_of(index: SimhashIndex) -> SqlStorage:
    assert isinstance(index.storage, SqlStorage)
    return index.storage


def layout_of(index: SimhashIndex) -> RunsLayout:
    layout = storage_of(index).layout
    assert isinstance(layout, RunsLayout)
    return layout


def answers(index: SimhashIndex, values: np.ndarray, sketch: np.ndarray) -> list[set[tuple[str, int]]]:
    """Every query's matches as (key, distance), asked in batches small enough for the limit."""
    found: list[set[tuple[str, int]]] = []
    for low in range(0, len(values), 25):
        batch = index.query_many(values[low : low + 25], signatures=sketch[low : low + 25])
        found.extend({(str(match.key), match.distance) for match in matches} for matches in batch)
    return found


def test_the_length_limit_is_settable_here() -> None:
    with sqlite3.connect(":memory:") as connection:
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1000)
        with pytest.raises(sqlite3.DataError, match="too big"):
            connection.execute("SELECT zeroblob(2000)").fetchone()


def test_a_store_past_the_length_limit_answers_like_a_memory_index(
    tmp_path: Path, small_runs: None, low_length_limit: None
) -> None:
    """2,100 records in runs of 30: 70 cuts, merges into tiers 1, 2 and 3 (30,720 postings,
    about 600,000 characters as one text, twelve times the limit)."""
    count = 2100
    rng = np.random.default_rng(41)
    values = rng.integers(0, 2**63, size=count, dtype=np.uint64)
    sketch = sketches(count, seed=42)
    families = rng.integers(0, count // 3, size=count)  # a third of the records copy another's sketch
    copies = np.flatnonzero(families < np.arange(count))
    sketch[copies] = sketch[families[copies]]
    with (
        SimhashIndex.open(f"sqlite:///{tmp_path}/big.db", BANDS) as index,
        SimhashIndex.open("memory://", BANDS) as memory,
    ):
        for low in range(0, count, RUN):
            rows = slice(low, low + RUN)
            keys = list(range(low, low + RUN))
            index.add_many(keys, values[rows], signatures=sketch[rows])
            memory.add_many(keys, values[rows], signatures=sketch[rows])
            if low % (8 * RUN) == 0:
                assert answers(index, values[rows], sketch[rows]) == answers(
                    memory, values[rows], sketch[rows]
                )
        with storage_of(index)._transaction() as cursor:
            state = layout_of(index).runs.state(cursor)
        assert max(run["tier"] for run in state["runs"]) == 3
        assert len(index) == count
        assert answers(index, values, sketch) == answers(memory, values, sketch)
        removed = list(range(0, count, 7))
        index.remove_many(removed)
        memory.remove_many(removed)
        for low in range(count, count + 4 * 4 * RUN, RUN):  # more merges, now without the removed
            rows = slice(low - count, low - count + RUN)
            keys = list(range(low, low + RUN))
            index.add_many(keys, values[rows], signatures=sketch[rows])
            memory.add_many(keys, values[rows], signatures=sketch[rows])
        assert answers(index, values, sketch) == answers(memory, values, sketch)
    with SimhashIndex.open(f"sqlite:///{tmp_path}/big.db", create=False) as index:  # another process
        assert answers(index, values, sketch) == answers(memory_like(values, sketch, removed), values, sketch)


def memory_like(values: np.ndarray, sketch: np.ndarray, removed: list[int]) -> SimhashIndex:
    count = len(values)
    memory = SimhashIndex.open("memory://", BANDS)
    memory.add_many(list(range(count)), values, signatures=sketch)
    memory.remove_many(removed)
    extra = 4 * 4 * RUN
    memory.add_many(list(range(count, count + extra)), values[:extra], signatures=sketch[:extra])
    return memory


def traced_merges(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[tuple[int, int]]:
    """(records visible to another connection, run tables named) at every statement of the
    store's connections that names two or more runs besides the one it writes: the statements
    that copy postings from runs into a merged run."""
    seen: list[tuple[int, int]] = []
    connect = SqliteDialect._connect

    def trace(statement: str) -> None:
        runs = set(RUN_NAME.findall(statement))
        if len(runs) >= 3 and statement.lstrip().upper().startswith(("INSERT", "CREATE TABLE")):
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as other:
                seen.append(
                    (int(other.execute("SELECT COUNT(*) FROM neardup_records").fetchone()[0]), len(runs))
                )

    def traced(self: SqliteDialect, target: str, uri: bool = False) -> sqlite3.Connection:
        connection = connect(self, target, uri)
        connection.set_trace_callback(trace)
        return connection

    monkeypatch.setattr(SqliteDialect, "_connect", traced)
    return seen


@pytest.mark.parametrize("call", ["add_many", "check_and_add_many"])
def test_a_merge_starts_after_the_batch_that_filled_its_tier_is_committed(
    tmp_path: Path, small_runs: None, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """Other connections see the batch that triggered a merge before the merge copies a
    posting: the merge holds no adding transaction open (nor the writer lock it holds), also
    when the add runs inside check-and-add's transaction (``exclusive()``)."""
    path = tmp_path / "merge.db"
    seen = traced_merges(monkeypatch, path)
    values = np.random.default_rng(43).integers(0, 2**63, size=16 * RUN, dtype=np.uint64)
    sketch = sketches(16 * RUN, seed=44)
    with SimhashIndex.open(str(path), BANDS) as index:
        deduper = IncrementalDeduper(index, Verifier("sketch"))
        add = index.add_many if call == "add_many" else deduper.check_and_add_many
        for low in range(0, 16 * RUN, RUN):
            before = len(seen)
            add(list(range(low, low + RUN)), values[low : low + RUN], signatures=sketch[low : low + RUN])
            assert all(visible == low + RUN for visible, _ in seen[before:]), seen[before:]
    assert seen  # five merges: four into tier 1, one into tier 2


def test_a_merge_is_copied_in_bounded_steps(
    tmp_path: Path, small_runs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With steps of 500 postings, the tier-2 merge (7,680 postings) takes at least 16
    transactions, each holding the writer lock briefly; in the old code one statement did it."""
    path = tmp_path / "steps.db"
    seen = traced_merges(monkeypatch, path)
    values = np.random.default_rng(45).integers(0, 2**63, size=16 * RUN, dtype=np.uint64)
    sketch = sketches(16 * RUN, seed=46)
    with SimhashIndex.open(str(path), BANDS) as index:
        for low in range(0, 16 * RUN, RUN):
            index.add_many(
                list(range(low, low + RUN)), values[low : low + RUN], signatures=sketch[low : low + RUN]
            )
        layout_of(index).merge_pending()
        with storage_of(index)._transaction() as cursor:
            state = layout_of(index).runs.state(cursor)
        assert [run["tier"] for run in state["runs"]] == [2]
        assert len(seen) >= 16 + 4 * 4  # the tier-2 merge and four tier-1 merges (1,920 postings each)
        assert answers(index, values, sketch) == answers(full(values, sketch), values, sketch)


def full(values: np.ndarray, sketch: np.ndarray) -> SimhashIndex:
    memory = SimhashIndex.open("memory://", BANDS)
    memory.add_many(list(range(len(values))), values, signatures=sketch)
    return memory


def test_an_error_past_the_length_limit_says_what_happened() -> None:
    with sqlite3.connect(":memory:") as connection:
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1000)
        with pytest.raises(sqlite3.Error) as caught:
            connection.execute("SELECT zeroblob(2000)").fetchone()
    message = str(storage_error(caught.value, "sqlite:///big.db", 60))
    assert "check that the file" not in message
    assert "sqlite:///big.db" in message and "length limit" in message and "\n" not in message


def run_tables(path: Path) -> tuple[set[str], dict[str, Any]]:
    """The run tables in the file and the meta row ``runs``."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        names = {
            str(row[0]) for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        state = json.loads(
            connection.execute("SELECT value FROM neardup_meta WHERE name = 'runs'").fetchone()[0]
        )
    return {name for name in names if RUN_NAME.fullmatch(name)}, state


def assert_no_orphans(path: Path) -> None:
    """Every run table is read, being merged into or retired (to drop): none is forgotten."""
    tables, state = run_tables(path)
    known = [run["table"] for run in state["runs"] + state.get("merges", []) + state.get("retired", [])]
    assert tables == set(known) and len(known) == len(tables)


#: 30 cuts: seven merges into tier 1 and one into tier 2, copied in steps of 300 postings.
CRASH_DOCUMENTS, CRASH_RUN, CRASH_STEP = 3000, 100, 300


def killing_add(url: str, path: Path, method: str, call: int) -> list[str]:
    """`neardup index add` with runs cut every :data:`CRASH_RUN` records and merges copied
    :data:`CRASH_STEP` postings a step, which SIGKILLs itself at the ``call``-th call of
    ``method`` (a function of the runs module, a method of PostingRuns or of SQLite's
    dialect); None: never."""
    code = f"""
import os, signal
from neardup.storage import runs, sqlite
runs.RUN_RECORDS, runs.MERGE_STEP = {CRASH_RUN}, {CRASH_STEP}
owner = next(o for o in (runs, runs.PostingRuns, sqlite.SqliteDialect) if {method!r} in vars(o))
original, calls = getattr(owner, {method!r}), [0]
def killing(*args, **kwargs):
    calls[0] += 1
    if calls[0] == {call}:
        os.kill(os.getpid(), signal.SIGKILL)
    return original(*args, **kwargs)
setattr(owner, {method!r}, killing)
from neardup.cli.main import main
main()
"""
    return [sys.executable, "-c", code, "index", "add", url, str(path), "--batch-size", "100",
            "--report-batches", "--lang", "en"]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "call"),
    [  # 10-25 s each: one in the fast lane, the rest in the full run
        ("_copy_step", 3),  # in a copy step's transaction, the target made or not
        pytest.param("_copy_step", 40, marks=pytest.mark.slow),
        pytest.param("_nth_after", 100, marks=pytest.mark.slow),  # between a step's statements
        pytest.param("add_to_filter", 30, marks=pytest.mark.slow),  # once a step committed (or in a cut)
        pytest.param("_publish", 2, marks=pytest.mark.slow),  # publishing a merged run
        pytest.param("delete_filter", 3, marks=pytest.mark.slow),  # dropping a retired run
        pytest.param("create_run", 20, marks=pytest.mark.slow),  # a cut, in the adding transaction
    ],
)
def test_a_kill_at_any_step_of_a_merge_loses_nothing(tmp_path: Path, method: str, call: int) -> None:
    """A real `neardup index add` killed at a step of a cut or merge: every acknowledged batch
    is stored, only whole batches are, the index answers like a brute-force scan, no run table
    is forgotten, and running the command again adds the rest and finishes the merges."""
    path, docs = tmp_path / "crash.db", tmp_path / "docs.jsonl"
    ids = corpus(docs)[:CRASH_DOCUMENTS]
    docs.write_text("".join(docs.read_text().splitlines(keepends=True)[:CRASH_DOCUMENTS]))
    url = f"sqlite:///{path}"
    killed = subprocess.run(killing_add(url, docs, method, call), capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, f"the add ended before the kill: {killed.stderr}"
    acknowledged = sum(int(json.loads(line)["added"]) for line in killed.stdout.splitlines())
    with SimhashIndex.open(url, create=False) as index:
        stored = check_consistent(index)
    assert len(stored) >= acknowledged and len(stored) % 100 == 0
    assert set(stored) == set(ids[: len(stored)])
    assert_no_orphans(path)
    finished = subprocess.run(killing_add(url, docs, method, 0), capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    with SimhashIndex.open(url, create=False) as index:
        assert set(check_consistent(index)) == set(ids)
        layout_of(index).merge_pending()
        assert len(index) == len(ids)
    assert_no_orphans(path)
    tables, state = run_tables(path)
    assert not state["merges"] and not state["retired"] and tables == {run["table"] for run in state["runs"]}


def concurrent_writer(url: str, worker: int, start: Any) -> list[tuple[str, str]]:
    """Check-and-add 300 records in batches of 15 under small runs: family f of every worker
    has the same sketch (one cluster), records of different families share nothing."""
    runs_module.RUN_RECORDS, runs_module.MERGE_STEP = 40, 200
    families = sketches(300, seed=50)
    values = np.random.default_rng(60 + worker).integers(0, 2**63, size=300, dtype=np.uint64)
    answered = []
    with SimhashIndex.open(url, create=False) as index:
        deduper = IncrementalDeduper(index, Verifier("sketch"))
        start.wait()
        for low in range(0, 300, 15):
            keys = [f"f{family}-w{worker}" for family in range(low, low + 15)]
            results = deduper.check_and_add_many(
                keys, values[low : low + 15], signatures=families[low : low + 15]
            )
            answered += [(str(result.key), str(result.cluster)) for result in results]
    return answered


@pytest.mark.parametrize("workers", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_concurrent_writers_through_cuts_and_merges_lose_nothing(tmp_path: Path, workers: int) -> None:
    path = tmp_path / "concurrent.db"
    url = f"sqlite:///{path}"
    SimhashIndex.open(url, BANDS).close()
    context = multiprocessing.get_context("spawn")
    barrier = context.Manager().Barrier(workers)
    with context.Pool(workers) as pool:
        results = pool.starmap(concurrent_writer, [(url, worker, barrier) for worker in range(workers)])
    answered = dict(pair for answers in results for pair in answers)
    with SimhashIndex.open(url, create=False) as index:
        stored = {str(record.key): str(record.cluster) for batch in index.storage.scan() for record in batch}
        assert len(index) == 300 * workers and stored == answered
        check_consistent(index)
        layout_of(index).merge_pending()
    for family in range(300):
        assert len({stored[f"f{family}-w{worker}"] for worker in range(workers)}) == 1
    assert_no_orphans(path)
    _, state = run_tables(path)
    assert max(run["tier"] for run in state["runs"]) >= 1 and not state["merges"]

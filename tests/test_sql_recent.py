"""The SQL stores' two record tables (``<prefix>_records`` and ``<prefix>_recent``, see
:mod:`neardup.storage.sql`): with the move lowered to a few rows, records cross from one
table to the other inside adding transactions, and the index still answers like a brute-force
scan, reads, removes, counts, scans and refuses repeated keys across both tables."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from neardup import IncrementalDeduper, SimhashIndex, Verifier
from neardup.errors import KeyExistsError
from neardup.index.config import IndexConfig
from neardup.similarity.bands import SKETCH_BYTES, BandScheme
from neardup.similarity.minhash import signature_from_bytes
from neardup.storage.postgres import PostgresDialect
from neardup.storage.sql import SqlStorage
from neardup.storage.sql_dialects import SqlDialect

RECENT = 40


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store.db?layout=columns"
    return str(request.getfixturevalue(f"fresh_{request.param}_url"))


@pytest.fixture
def small_moves(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for dialect in (SqlDialect, PostgresDialect):  # PostgreSQL sets its own
        monkeypatch.setattr(dialect, "recent_rows", RECENT)
    # New PostgreSQL and SQLite stores keep postings in runs (tests/test_sql_runs.py); stores
    # of the column layout are still served, by this code (SQLite's URL asks for it).
    monkeypatch.setattr(PostgresDialect, "layouts", ("columns",))
    yield


def sketches(count: int, seed: int) -> np.ndarray:  # type: ignore[type-arg]
    """Random sketches, every third one a copy of an earlier one with a fifth of it redrawn."""
    rng = np.random.default_rng(seed)
    bins = rng.integers(0, 256, size=(count, SKETCH_BYTES), dtype=np.uint8)
    for row in range(3, count, 3):
        source = int(rng.integers(0, row))
        redrawn = rng.random(SKETCH_BYTES) < 0.2
        bins[row] = np.where(redrawn, bins[row], bins[source])
    return np.ascontiguousarray(bins).view(np.uint64)


def rows_in(index: SimhashIndex, table: str) -> int:
    storage = index.storage
    assert isinstance(storage, SqlStorage)
    with storage._transaction() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {getattr(storage, table)}")
        return int(cursor.fetchone()[0])


def test_records_move_between_tables_and_stay_searchable(url: str, small_moves: None) -> None:
    count = 150
    keys = [f"k{row}" if row % 2 else row for row in range(count)]
    values = np.random.default_rng(3).integers(0, 2**63, size=count, dtype=np.uint64)
    sketch = sketches(count, seed=4)
    config = IndexConfig(scheme=BandScheme(64), verification={"mode": "sketch"})
    with SimhashIndex.open(url, config) as index:
        deduper = IncrementalDeduper(index, Verifier("sketch"))
        for low in range(0, count, 25):  # six batches: three moves of >= 40 rows
            deduper.check_and_add_many(
                keys[low : low + 25], values[low : low + 25], signatures=sketch[low : low + 25]
            )
        assert rows_in(index, "records_table") > 0 and rows_in(index, "recent_table") < RECENT
        assert len(index) == count and {
            record.key for batch in index.storage.scan() for record in batch
        } == set(keys)
        bands = index.bands
        assert bands is not None
        every = bands.keys(bands.compose(values.reshape(-1, 1), sketch))
        found = index.query_many(values, signatures=sketch)
        for row, matches in enumerate(found):
            expected = {keys[other] for other in np.flatnonzero(np.any(every == every[row], axis=1))}
            assert {match.key for match in matches} == expected and len(matches) == len(expected)
        stored = index.get_many(keys)
        assert all(record is not None for record in stored)
        assert all(
            np.array_equal(signature_from_bytes(record.signature), sketch[row])  # type: ignore[union-attr,arg-type]
            for row, record in enumerate(stored)
        )
        with pytest.raises(KeyExistsError):  # a settled key is refused, not stored twice
            index.add_many([keys[0]], values[:1], signatures=sketch[:1])
        index.remove_many([keys[0], keys[-1]])  # one settled, one recent
        assert len(index) == count - 2 and index.get_many([keys[0], keys[-1]]) == [None, None]
        assert sum(table.buckets for table in index.stats().tables) > 0

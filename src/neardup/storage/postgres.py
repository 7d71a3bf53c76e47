"""PostgreSQL store (psycopg 3): ``postgresql://user[:password]@host[:port]/database[?table=P]``.

New stores keep their postings in sorted runs (:mod:`neardup.storage.postgres_runs`, meta row
``layout``); stores made before it keep seed 002's column layout of :mod:`neardup.storage.sql`
and are served by it unchanged. Writers serialise across processes with a
transaction-scoped advisory lock on the table prefix.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any
from urllib.parse import SplitResult, urlunsplit

import numpy as np

from ..bands import Scheme
from ..buckets import BucketStats
from ..errors import MissingDependencyError, StorageUnavailableError
from . import check_options
from .base import (
    Candidates,
    Key,
    RecordBatch,
    UInt64Array,
    bytes_to_words,
    key_columns,
    key_exists_error,
    key_from_columns,
    match_blocks,
    raced_key_error,
    words_to_bytes,
)
from .postgres_runs import LAYOUT, PostingRuns, posting_keys
from .sql import DEFAULT_PREFIX, SqlStorage
from .urls import redacted

#: Re-analyze the records table once this share of its rows (and at least ANALYZE_MINIMUM)
#: was added since the planner last counted: a planner that still believes the table empty
#: scans it sequentially, which at 100 k rows cuts check-and-add from ~14,000 to ~1,600 docs/s.
ANALYZE_SHARE = 0.2
ANALYZE_MINIMUM = 5_000


class PostgresStorage(SqlStorage):
    name = "postgresql"
    placeholder = "%s"
    blob_type = "BYTEA"
    id_column = "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    #: A move touches nearly every leaf page of the 16 block indexes of the records table (and
    #: writes them to the WAL after each checkpoint) whatever its size, so fewer, larger moves
    #: cost less per record: band check-and-add sustained over 140,000 documents into 10^6
    #: stored ran at 2,507 docs/s with 131,072 against 1,289 with 32,768.
    recent_rows = 131_072

    #: The layout new stores get (tests set "columns" to make a store of the earlier layout).
    create_layout = LAYOUT

    def __init__(self, connection: Any, prefix: str = DEFAULT_PREFIX, where: str = "") -> None:
        super().__init__(connection, prefix, where)
        self.runs = PostingRuns(self.prefix, self.records_table, self.meta_table)
        self._runs_layout = False  # known at attach
        self._counted = 0.0  # rows the planner knew of at the last ANALYZE
        self._added = 0  # rows added since

    # -- layout ---------------------------------------------------------------------------
    def _create_tables(self, cursor: Any, tables: int) -> None:
        if self.create_layout == LAYOUT:
            self.runs.create(cursor, self.record_columns("id BIGINT PRIMARY KEY"))
        else:
            super()._create_tables(cursor, tables)

    def attach(self, scheme: Scheme, mu: float) -> None:
        super().attach(scheme, mu)
        with self._transaction() as cursor:
            cursor.execute(f"SELECT value FROM {self.meta_table} WHERE name = 'layout'")
            row = cursor.fetchone()
            self._runs_layout = row is not None and row[0] == LAYOUT
            cursor.execute(
                "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (self.records_table,)
            )
            row = cursor.fetchone()
        self._counted = float(row[0]) if row and row[0] is not None else 0.0
        if self._counted < 0:  # never analyzed (PostgreSQL 14+ says -1)
            self._analyze()

    # -- records in the runs layout (the column layout is SqlStorage's) --------------------
    def add_many(self, batch: RecordBatch) -> None:
        if not self._runs_layout:
            super().add_many(batch)
        elif len(batch):
            self._add_to_runs(batch)
        self._added += len(batch)
        if self._added > max(ANALYZE_MINIMUM, ANALYZE_SHARE * self._counted):
            self._analyze()

    def _add_to_runs(self, batch: RecordBatch) -> None:
        keys = posting_keys(self.scheme.keys(batch.words))
        fingerprints = words_to_bytes(batch.words)
        with self._transaction(write=True) as cursor:
            self._lock(cursor)  # one writer at a time: a cut rewrites the postings
            stored = self._stored_keys(cursor, batch.keys)
            if stored:
                raise key_exists_error(stored[0], len(stored), self.where)
            ids = self.runs.reserve_ids(cursor, len(batch))
            rows = []
            for row, key in enumerate(batch.keys):
                cluster = batch.cluster(row)
                cluster_text, cluster_int = (None, None) if cluster is None else key_columns(cluster)
                signature = batch.signature(row)
                rows.append(
                    (ids[row], *key_columns(key), fingerprints[row], cluster_text, cluster_int, signature)
                )
            rows.sort(key=lambda row: (row[1], row[2]))  # see SqlStorage.add_many
            try:
                with cursor.copy(
                    f"COPY {self.records_table} (id, key_text, key_int, fingerprint, cluster_text, "
                    "cluster_int, signature) FROM STDIN"
                ) as copy:
                    for values in rows:
                        copy.write_row(values)
            except self._integrity_errors() as exc:
                raise raced_key_error(self.where, exc) from exc
            self.runs.add(cursor, keys, ids)
            self.runs.cut_if_full(cursor, max(ids))

    def remove_many(self, keys: Sequence[Key]) -> None:
        # The record rows go; their postings are skipped by reads and dropped by merges.
        with self._transaction(write=True) as cursor:
            if self._runs_layout:
                self._lock(cursor)
            super().remove_many(keys)
            if self._runs_layout:
                self.runs.note_removed(cursor, len(set(keys)))

    def candidates(self, words: UInt64Array) -> Candidates:
        if not self._runs_layout:
            return super().candidates(words)
        keys = posting_keys(self.scheme.keys(words))
        with self._transaction() as cursor:
            self._prefer_indexes(cursor)
            rows = self.runs.find(cursor, keys)
        if not rows:
            return Candidates(np.empty(0, np.int64), [], np.empty((0, words.shape[1]), np.uint64))
        found = np.array([row[0] for row in rows], dtype=np.int64).view(np.uint64)
        positions, found_rows = match_blocks(keys.reshape(-1, 1).view(np.uint64), found.reshape(-1, 1))
        found_words = bytes_to_words([bytes(row[3]) for row in rows], words.shape[1])
        record_keys = [key_from_columns(row[1], row[2]) for row in rows]
        return Candidates(
            positions // keys.shape[1], [record_keys[i] for i in found_rows.tolist()], found_words[found_rows]
        )

    def stats(self) -> BucketStats:
        if not self._runs_layout:
            return super().stats()
        stats = BucketStats(scheme=self.scheme.describe())
        with self._transaction() as cursor:
            stats.tables.extend(self.runs.stats(cursor, [table.bit_count for table in self.scheme.tables]))
        return stats

    def drop(self) -> None:
        if not self._runs_layout:
            return super().drop()
        with self._transaction(write=True) as cursor:
            self.runs.drop(cursor)
            cursor.execute(f"DROP TABLE IF EXISTS {self.meta_table}")

    def _analyze(self) -> None:
        """Refresh the planner's statistics so block lookups use the indexes."""
        with self._transaction(write=True) as cursor:
            for name in self.tables:
                cursor.execute(f"ANALYZE {name}")
            cursor.execute(
                "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (self.records_table,)
            )
            self._counted = max(float(cursor.fetchone()[0]), 0.0)
        self._added = 0

    def _empty_recent(self, cursor: Any) -> None:
        # DELETE left the table's pages and index entries dead until a vacuum, so every query
        # read a recent table of ever more pages; TRUNCATE is transactional here.
        cursor.execute(f"TRUNCATE {self.recent_table}")

    def _prefer_indexes(self, cursor: Any) -> None:
        # At 10^6 records the recent table's sequential scan took 34 ms a statement, its
        # indexes well under one.
        # The runs layout joins the few postings found to their records by primary key. Just
        # after a cut, before autovacuum counted the new run, the planner expected thousands
        # of rows and merge-joined a full scan of the records' key index: 0.8-1.4 s a batch
        # instead of 0.1. Parallel workers cost more to start than such a statement takes.
        cursor.execute(
            "SET LOCAL enable_seqscan = off; SET LOCAL enable_mergejoin = off; "
            "SET LOCAL enable_hashjoin = off; SET LOCAL max_parallel_workers_per_gather = 0"
        )

    def _lock(self, cursor: Any) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(self.records_table.encode()),))

    def _one_of(self, column: str, values: list[Any]) -> tuple[str, list[Any]]:
        # One array parameter: psycopg need not parse a statement with thousands of
        # placeholders (a third of the client time of a check-and-add batch). Integer keys go
        # as one array literal: psycopg dumps a list element by element in Python, which was
        # a fifth of a band index's check-and-add.
        if values and all(type(value) is int for value in values):
            return f"{column} = ANY(%s::bigint[])", ["{" + ",".join(map(str, values)) + "}"]
        return f"{column} = ANY(%s)", [values]

    def _table_exists(self, table: str) -> bool:
        with self._transaction() as cursor:
            cursor.execute("SELECT to_regclass(%s)", (table,))
            return cursor.fetchone()[0] is not None

    def _integrity_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.errors.UniqueViolation,)

    def _insert_rows(self, cursor: Any, columns: str, rows: list[tuple[Any, ...]]) -> None:
        # COPY is the bulk path: one round trip for the whole batch, ~10x executemany.
        with cursor.copy(f"COPY {self.recent_table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def from_url(url: str, parts: SplitResult, options: dict[str, str]) -> PostgresStorage:
    check_options(options, {"table"}, url)
    try:
        import psycopg
    except ImportError as exc:
        raise MissingDependencyError("psycopg", "stores", "a PostgreSQL store") from exc
    dsn = urlunsplit(("postgresql", parts.netloc, parts.path, "", ""))
    try:
        # No JIT: a candidate statement's estimated cost passes its threshold, and compiling
        # took 16 ms of statements that run in a few.
        connection = psycopg.connect(dsn, autocommit=True, connect_timeout=10, options="-c jit=off")
    except psycopg.Error as exc:
        raise StorageUnavailableError(
            f"cannot connect to PostgreSQL at {redacted(parts)} ({str(exc).strip()}); is the server "
            "running and the database created?"
        ) from exc
    return PostgresStorage(connection, options.get("table", DEFAULT_PREFIX), where=redacted(parts))

"""Seed 002's layout of the SQL stores: one row per record with an indexed column per posting
column (MariaDB/MySQL's, and SQLite's and PostgreSQL's stores made before runs or with
``?layout=columns``).

Tables, beside those of every SQL store (:mod:`neardup.storage.sql`):

- ``<prefix>_records(id, key_text, key_int, fingerprint, cluster_text, cluster_int,
  signature, digest, b0 … b{T-1})``: ``b<t>`` is the record's posting key of column (table)
  t as a signed BIGINT (the same 64 bits), each with its own index.
- ``<prefix>_recent``: the same columns and indexes, for the records added since the last
  move. New records go here, and once it holds the dialect's ``recent_rows`` they move to
  ``<prefix>_records`` in one statement inside the adding transaction. Every insert touches
  one page of each posting index; into a large table a batch touches thousands of random
  pages, all written again at commit. The small table's pages stay few and hot, and a move
  writes each page of the large one once per ``recent_rows`` records. Stores of format 1
  (read by ``neardup index rebuild``) have no recent table.

A query batch is one statement per table, ``WHERE b0 IN (…) OR b1 IN (…) …``, which every
engine runs as a union of index lookups; the rows are matched back to the queries by their
posting columns in numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .base import (
    QUERY_BATCH,
    Candidates,
    PostingCounts,
    RecordBatch,
    Screen,
    UInt64Array,
    bytes_to_words,
    key_columns,
    key_from_columns,
    match_postings,
    no_candidates,
    raced_key_error,
    to_signed,
    words_to_bytes,
)

if TYPE_CHECKING:
    from .sql import SqlStorage


class ColumnsLayout:
    """Records with their posting keys in indexed columns, in a records and a recent table."""

    locks_writes = False
    query_batch = QUERY_BATCH
    screens_first = False

    def __init__(self, store: SqlStorage) -> None:
        self.store = store
        self.columns = [f"b{column}" for column in range(store.shape.columns)]
        self._recent: bool | None = None  # whether the recent table exists, once asked

    @property
    def tables(self) -> tuple[str, ...]:
        """The settled records and the recent ones."""
        store = self.store
        if self._recent is None:
            self._recent = store._table_exists(store.recent_table)
        return (store.records_table, store.recent_table) if self._recent else (store.records_table,)

    def create(self, cursor: Any) -> None:
        store, dialect = self.store, self.store.dialect
        blocks = ", ".join(f"{column} BIGINT NOT NULL" for column in self.columns)
        for name in (store.records_table, store.recent_table):
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {name} ({store.record_columns(dialect.id_column)}, {blocks}, "
                f"UNIQUE (key_text, key_int)){dialect.table_options()}"
            )
            for column in self.columns:
                cursor.execute(f"CREATE INDEX {name}_{column} ON {name} ({column})")

    def add_many(self, batch: RecordBatch) -> None:
        store = self.store
        blocks = to_signed(batch.posting_keys()).tolist()
        fingerprints = words_to_bytes(batch.words)
        columns = ", ".join(["key_text", "key_int", "fingerprint", *store.record_fields, *self.columns])
        rows = [
            (*key_columns(key), fingerprints[row], *store.record_values(batch, row), *blocks[row])
            for row, key in enumerate(batch.keys)
        ]
        # Every writer inserts in key order, so two that insert the same keys wait for each
        # other in turn (one then fails cleanly) instead of deadlocking on the unique index.
        rows.sort(key=lambda row: (row[0], row[1]))
        with store._transaction(write=True) as cursor:
            store.check_new_keys(cursor, batch.keys)
            try:
                store.dialect.insert_rows(cursor, store.recent_table, columns, rows)
            except store.dialect.integrity_errors() as exc:
                raise raced_key_error(store.where, exc) from exc
            self._settle_if_full(cursor, columns)

    def _settle_if_full(self, cursor: Any, columns: str) -> None:
        """Move the recent records to the records table once there are enough of them, in
        the adding transaction (so a batch is stored whole, wherever its rows lie)."""
        store = self.store
        # The id span bounds the row count from above (removals leave gaps) and is read from
        # the primary key; COUNT(*) scanned the table every batch.
        cursor.execute(f"SELECT MAX(id) - MIN(id) + 1 FROM {store.recent_table}")
        if int(cursor.fetchone()[0] or 0) < store.dialect.recent_rows:
            return
        cursor.execute(
            f"INSERT INTO {store.records_table} ({columns}) "
            f"SELECT {columns} FROM {store.recent_table} ORDER BY id"
        )
        store.dialect.empty_table(cursor, store.recent_table)

    def removed(self, cursor: Any, count: int) -> None:
        """The rows held the postings: nothing is left to do."""

    def candidates(self, postings: UInt64Array, records: bool, screen: Screen | None) -> Candidates:
        store, dialect = self.store, self.store.dialect
        blocks = to_signed(postings)
        conditions, values = [], []
        for column, name in enumerate(self.columns):
            condition, parameters = dialect.one_of(name, np.unique(blocks[:, column]).tolist())
            conditions.append(condition)
            values.extend(parameters)
        extra = store.record_fields if records else ()
        selected = ", ".join(["key_text", "key_int", "fingerprint", *extra, *self.columns])
        rows = []
        tables = self.tables
        with store._transaction() as cursor:
            dialect.prefer_indexes(cursor)
            for name in tables:
                cursor.execute(f"SELECT {selected} FROM {name} WHERE {' OR '.join(conditions)}", values)
                rows += cursor.fetchall()
        if not rows:
            return no_candidates(store.shape.words)
        found_blocks = np.array([row[3 + len(extra) :] for row in rows], dtype=np.int64).view(np.uint64)
        query_rows, found_rows = match_postings(blocks.view(np.uint64), found_blocks)
        found_words = bytes_to_words([bytes(row[2]) for row in rows], store.shape.words)
        keys = [key_from_columns(row[0], row[1]) for row in rows]
        read = {}
        if records:
            read = {
                record.key: record for record in store.records_of([row[: 3 + len(extra)] for row in rows])
            }
        found = Candidates(query_rows, [keys[i] for i in found_rows.tolist()], found_words[found_rows], read)
        return found.screened(screen)

    def posting_counts(self) -> list[PostingCounts]:
        counts = []
        tables = self.tables
        with self.store._transaction() as cursor:
            for column in self.columns:
                both = " UNION ALL ".join(f"SELECT {column} AS b FROM {name}" for name in tables)
                cursor.execute(
                    f"SELECT COUNT(*), MAX(n), AVG(n) FROM (SELECT COUNT(*) AS n FROM ({both}) AS every "
                    "GROUP BY b) AS buckets"
                )
                buckets, largest, mean = cursor.fetchone()
                counts.append(PostingCounts(int(buckets or 0), int(largest or 0), float(mean or 0.0)))
        return counts

    def drop(self, cursor: Any) -> None:
        for name in self.tables:
            cursor.execute(f"DROP TABLE IF EXISTS {name}")

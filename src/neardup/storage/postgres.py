"""PostgreSQL store (psycopg 3): ``postgresql://user[:password]@host[:port]/database[?table=P]``.

New stores keep their postings in sorted runs (:mod:`neardup.storage.postgres_runs`, meta row
``layout``); a store without that row has seed 002's column layout of :mod:`neardup.storage.sql`
and is served by it. Writers serialise across processes with a
transaction-scoped advisory lock on the table prefix.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import SplitResult, urlunsplit

from ..errors import MissingDependencyError, StorageUnavailableError
from . import check_options
from .base import (
    RecordBatch,
)
from .postgres_runs import PostgresRuns
from .runs import RunsStorage
from .sql import DEFAULT_PREFIX
from .urls import redacted

#: Re-analyze the records table once this share of its rows (and at least ANALYZE_MINIMUM)
#: was added since the planner last counted: a planner that still believes the table empty
#: scans it sequentially, which slows check-and-add several times over (docs/storage.md).
ANALYZE_SHARE = 0.2
ANALYZE_MINIMUM = 5_000


class PostgresStorage(RunsStorage):
    name = "postgresql"
    placeholder = "%s"
    blob_type = "BYTEA"
    id_column = "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    #: A move touches nearly every leaf page of the 16 block indexes of the records table (and
    #: writes them to the WAL after each checkpoint) whatever its size, so fewer, larger moves
    #: cost less per record (docs/storage.md, "Measured speed").
    recent_rows = 131_072

    def __init__(
        self,
        connection: Any,
        prefix: str = DEFAULT_PREFIX,
        where: str = "",
        reconnector: Callable[[float, bool], Any] | None = None,
    ) -> None:
        super().__init__(connection, prefix, where, reconnector)
        self.runs = PostgresRuns(self.prefix, self.records_table, self.meta_table)
        self._counted = 0.0  # rows the planner knew of at the last ANALYZE
        self._added = 0  # rows added since

    def _ready(self) -> None:
        """The layout, and the planner's row count (analyzed first if it never was)."""
        if self._opened:
            return
        super()._ready()
        with self._transaction() as cursor:
            cursor.execute(
                "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (self.records_table,)
            )
            row = cursor.fetchone()
        self._counted = float(row[0]) if row and row[0] is not None else 0.0
        if self._counted < 0:  # never analyzed (PostgreSQL 14+ says -1)
            self._analyze()

    def add_many(self, batch: RecordBatch) -> None:
        super().add_many(batch)
        self._added += len(batch)
        if self._added > max(ANALYZE_MINIMUM, ANALYZE_SHARE * self._counted):
            self._analyze()

    def _insert_records(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        # COPY is the bulk path: one round trip for the whole batch, far faster than executemany.
        with cursor.copy(f"COPY {self.records_table} ({self.records_insert_columns()}) FROM STDIN") as copy:
            for values in rows:
                copy.write_row(values)

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
        # A sequential scan of the recent table costs far more than its indexes.
        # The runs layout joins the few postings found to their records by primary key. Just
        # after a cut, before autovacuum has counted the new run, the planner expects thousands
        # of rows and would merge-join a full scan of the records' key index, which costs far
        # more than the nested loop. Parallel workers cost more to start than such a statement takes.
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

    def _connection_broken(self) -> bool:
        # psycopg marks the connection closed once it saw the server go (a restart's "terminating
        # connection due to administrator command", a reset socket).
        return bool(self.connection.closed)

    def _integrity_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.errors.UniqueViolation,)

    def _insert_rows(self, cursor: Any, columns: str, rows: list[tuple[Any, ...]]) -> None:
        # COPY is the bulk path: one round trip for the whole batch, far faster than executemany.
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

    def connect(timeout_s: float, probe: bool = False) -> Any:
        """A connection with this store's session settings, also after a server restart (a
        probe's statements are cut by the server after ``timeout_s``)."""
        # No JIT: a candidate statement's estimated cost passes its threshold, and compiling
        # takes longer than the statement runs.
        settings = "-c jit=off" + (f" -c statement_timeout={int(timeout_s * 1000)}" if probe else "")
        return psycopg.connect(
            dsn, autocommit=True, connect_timeout=max(1, round(timeout_s)), options=settings
        )

    try:
        connection = connect(10)
    except psycopg.Error as exc:
        raise StorageUnavailableError(
            f"cannot connect to PostgreSQL at {redacted(parts)} ({str(exc).strip()}); is the server "
            "running and the database created?"
        ) from exc
    return PostgresStorage(
        connection, options.get("table", DEFAULT_PREFIX), where=redacted(parts), reconnector=connect
    )

"""PostgreSQL store (psycopg 3): ``postgresql://user[:password]@host[:port]/database[?table=P]``.

PostgreSQL's dialect of the one SQL store (:mod:`neardup.storage.sql`). New stores keep their
postings in sorted runs (:mod:`neardup.storage.runs`, meta row ``layout``); a store without
that row has seed 002's column layout (:mod:`neardup.storage.sql_columns`) and is served by
it. Writers serialise across processes with a transaction-scoped advisory lock on the table
prefix.

What the runs layout does differently here than in SQLite: postings and run keys travel in
binary (one COPY built by numpy; one bytea of 8-byte keys per statement, since COPY's message
per row and hex bytea both decode slowly), key lists are one array parameter, B-tree leaves
carry the id (INCLUDE), and readers take a table lock that keeps the run list still (see
:mod:`neardup.storage.runs`). Merges run inside the add, not in steps after it: a run is
sorted and indexed in bulk (``CREATE TABLE … AS``, ``CREATE INDEX``) before the readers' lock
is taken, and its keys come back in parts of 512 MB (a bytea holds at most 1 GB).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import SplitResult, urlunsplit

import numpy as np

from ..errors import MissingDependencyError, StorageUnavailableError
from . import check_options
from .base import IntArray
from .runs import bigint_array
from .sql import DEFAULT_PREFIX, SqlStorage
from .sql_dialects import SqlDialect
from .urls import redacted

#: Re-analyze the records table once this share of its rows (and at least ANALYZE_MINIMUM)
#: was added since the planner last counted: a planner that still believes the table empty
#: scans it sequentially, which slows check-and-add several times over (docs/storage.md).
ANALYZE_SHARE = 0.2
ANALYZE_MINIMUM = 5_000
#: Postings per statement that reads a run's keys back (a bytea holds at most 1 GB).
KEYS_PER_READ = 64_000_000
#: PostgreSQL's binary COPY: a signature, flags and header extension, rows of (field count,
#: then length and value per field, big-endian), and a trailer of -1.
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"
_COPY_ROW = np.dtype(
    [("fields", ">i2"), ("k_length", ">i4"), ("k", ">i8"), ("id_length", ">i4"), ("id", ">i8")]
)

#: The type oid of int8, which a binary array names for its elements.
_INT8_OID = 20


def _text_array(texts: Sequence[str]) -> str:
    """A text[] literal of ``texts`` (each quoted, backslashes and quotes escaped)."""
    joined = "".join(texts)
    if "\\" in joined or '"' in joined:
        texts = [text.replace("\\", "\\\\").replace('"', '\\"') for text in texts]
    return '{"' + '","'.join(texts) + '"}' if texts else "{}"


def _packed_row(tables: int) -> np.dtype[Any]:
    """A binary COPY row of a packed postings table: the id, then the keys as an int8 array
    (dimensions, flags, element type, size and lower bound, then length and value per key)."""
    return np.dtype(
        [
            ("fields", ">i2"), ("id_length", ">i4"), ("id", ">i8"), ("array_length", ">i4"),
            ("dimensions", ">i4"), ("flags", ">i4"), ("element_type", ">i4"), ("size", ">i4"),
            ("lower_bound", ">i4"), ("keys", [("length", ">i4"), ("k", ">i8")], (tables,)),
        ]
    )  # fmt: skip


class PostgresDialect(SqlDialect):
    """PostgreSQL over psycopg: bulk rows by COPY, key lists as one array, the advisory writer
    lock, the planner kept informed (ANALYZE) and steered to the key indexes."""

    name = "postgresql"
    placeholder = "%s"
    blob_type = "BYTEA"
    id_column = "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    layouts = ("runs", "columns")
    #: A move touches nearly every leaf page of the 16 posting indexes of the records table (and
    #: writes them to the WAL after each checkpoint) whatever its size, so fewer, larger moves
    #: cost less per record (docs/storage.md, "Measured speed").
    recent_rows = 131_072
    reconnects = True

    def __init__(self, dsn: str, where: str) -> None:
        self.dsn = dsn
        super().__init__(self.connect(10), where)
        self._counted = 0.0  # rows the planner knew of at the last ANALYZE
        self._added = 0  # rows added since

    def connect(self, timeout_s: float, probe: bool = False) -> Any:
        """A connection with this store's session settings, also after a server restart (a
        probe's statements are cut by the server after ``timeout_s``)."""
        import psycopg

        # No JIT: a candidate statement's estimated cost passes its threshold, and compiling
        # takes longer than the statement runs.
        settings = "-c jit=off" + (f" -c statement_timeout={int(timeout_s * 1000)}" if probe else "")
        return psycopg.connect(
            self.dsn, autocommit=True, connect_timeout=max(1, round(timeout_s)), options=settings
        )

    def connection_broken(self) -> bool:
        # psycopg marks the connection closed once it saw the server go (a restart's "terminating
        # connection due to administrator command", a reset socket).
        return bool(self.connection.closed)

    def lock(self, cursor: Any, name: str) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(name.encode()),))

    def table_exists(self, cursor: Any, table: str) -> bool:
        cursor.execute("SELECT to_regclass(%s)", (table,))
        return cursor.fetchone()[0] is not None

    def integrity_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.errors.UniqueViolation,)

    # -- statements ----------------------------------------------------------------------
    def one_of(self, column: str, values: list[Any]) -> tuple[str, list[Any]]:
        # One array parameter: psycopg need not parse a statement with thousands of
        # placeholders (a third of the client time of a check-and-add batch). Integer keys go
        # as one array literal: psycopg dumps a list element by element in Python, which was
        # a fifth of a band index's check-and-add.
        if values and all(type(value) is int for value in values):
            return f"{column} = ANY(%s::bigint[])", ["{" + ",".join(map(str, values)) + "}"]
        return f"{column} = ANY(%s)", [values]

    #: Value maps are read and written a whole batch a statement (arrays of any length).
    values_per_read = 1 << 16
    value_rows = 1 << 30

    def values_table_made(self, table: str) -> list[str]:
        # Values stored as they are: past 2 kB PostgreSQL tries to compress each one (pglz),
        # and a records index's block runs (sorted 64-bit keys and key lists) and the kept
        # texts (compressed already) barely compress, so the attempt only slows every write
        # (docs/storage.md).
        return [f"ALTER TABLE {table} ALTER COLUMN value SET STORAGE EXTERNAL"]

    def one_of_texts(self, column: str, texts: list[str]) -> tuple[str, list[Any]]:
        # one array literal: psycopg would dump a list of texts element by element in Python
        return f"{column} = ANY(%s::text[])", [_text_array(texts)]

    def upsert_values(
        self, cursor: Any, table: str, name: str, rows: Sequence[tuple[str, int, bytes]]
    ) -> None:
        """One statement of three arrays (keys and key types as literals, values as one binary
        array): psycopg binds four parameters a row in Python, which cost ten times what the
        server takes, and values written as hex text cost far more than binary (docs/storage.md)."""
        cursor.execute(
            f"INSERT INTO {table} (name, key_text, key_int, value) SELECT %s, k, i, v "
            f"FROM unnest(%s::text[], %s::smallint[], %b::bytea[]) AS u(k, i, v){self.upsert_clause()}",
            [
                name,
                _text_array([text for text, _, _ in rows]),
                "{" + ",".join(str(kind) for _, kind, _ in rows) + "}",
                [value for _, _, value in rows],
            ],
        )

    def insert_rows(self, cursor: Any, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        # COPY is the bulk path: one round trip for the whole batch, far faster than executemany.
        with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    def empty_table(self, cursor: Any, table: str) -> None:
        # DELETE left the table's pages and index entries dead until a vacuum, so every query
        # read a recent table of ever more pages; TRUNCATE is transactional here.
        cursor.execute(f"TRUNCATE {table}")

    def prefer_indexes(self, cursor: Any) -> None:
        # A sequential scan of the recent table costs far more than its indexes.
        # The runs layout joins the few postings found to their records by primary key. Just
        # after a cut, before autovacuum has counted the new run, the planner expects thousands
        # of rows and would merge-join a full scan of the records' key index, which costs far
        # more than the nested loop. Parallel workers cost more to start than such a statement takes.
        cursor.execute(
            "SET LOCAL enable_seqscan = off; SET LOCAL enable_mergejoin = off; "
            "SET LOCAL enable_hashjoin = off; SET LOCAL max_parallel_workers_per_gather = 0"
        )

    def fetch(self, cursor: Any, statement: str, parameters: Any) -> list[tuple[Any, ...]]:
        cursor.execute(statement, parameters, binary=True)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows

    # -- the planner's statistics --------------------------------------------------------
    def opened(self, store: SqlStorage) -> None:
        """Read the planner's row count of the records table; analyze one never analyzed."""
        with store._transaction() as cursor:
            cursor.execute(
                "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (store.records_table,)
            )
            row = cursor.fetchone()
        self._counted = float(row[0]) if row and row[0] is not None else 0.0
        if self._counted < 0:  # never analyzed (PostgreSQL 14+ says -1)
            self._analyze(store)

    def added(self, store: SqlStorage, count: int) -> None:
        self._added += count
        if self._added > max(ANALYZE_MINIMUM, ANALYZE_SHARE * self._counted):
            self._analyze(store)

    def _analyze(self, store: SqlStorage) -> None:
        """Refresh the planner's statistics so key lookups use the indexes."""
        with store._transaction(write=True) as cursor:
            for name in store.tables:
                cursor.execute(f"ANALYZE {name}")
            cursor.execute(
                "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (store.records_table,)
            )
            self._counted = max(float(cursor.fetchone()[0]), 0.0)
        self._added = 0

    # -- the runs layout -----------------------------------------------------------------
    def insert_postings(self, cursor: Any, table: str, keys: IntArray, ids: IntArray) -> None:
        rows = np.empty(keys.size, dtype=_COPY_ROW)
        rows["fields"], rows["k_length"], rows["id_length"] = 2, 8, 8
        rows["k"], rows["id"] = keys, ids
        with cursor.copy(f"COPY {table} (k, id) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(_COPY_HEADER + rows.tobytes() + _COPY_TRAILER)

    def create_run(self, cursor: Any, table: str, select: str | tuple[IntArray, IntArray]) -> int:
        # No ORDER BY: reads use the index only, and the index build sorts anyway. B-tree
        # leaves carry the id (INCLUDE), so a read needs no heap. Rows given sorted go in by
        # one binary COPY, and the build's sort finds them in order (PostgreSQL's quicksort
        # checks for presorted input first).
        if isinstance(select, tuple):
            cursor.execute(f"CREATE TABLE {table} (k BIGINT NOT NULL, id BIGINT NOT NULL)")
            self.insert_postings(cursor, table, *select)
            created = int(select[0].size)
        else:
            cursor.execute(f"CREATE TABLE {table} AS {select}")
            created = int(cursor.rowcount)
        cursor.execute(f"CREATE INDEX {table}_k ON {table} (k) INCLUDE (id)")
        cursor.execute(f"ANALYZE {table}")  # the planner's row counts, before any autovacuum's
        return created

    def run_keys(self, cursor: Any, table: str, rows: int) -> Iterator[IntArray]:
        """The keys as bytea, 8 bytes each, in parts of :data:`KEYS_PER_READ`."""
        reads = max(1, -(-rows // KEYS_PER_READ))
        for part in range(reads):
            where = f" WHERE id % {reads} = {part}" if reads > 1 else ""
            cursor.execute(f"SELECT string_agg(int8send(k), ''::bytea) FROM {table}{where}", binary=True)
            data = cursor.fetchone()[0]
            yield np.frombuffer(bytes(data or b""), dtype=">i8").astype(np.int64)

    def max_length(self, cursor: Any) -> int:
        return 1 << 30  # a field's limit

    def delete_filter(self, cursor: Any, filters_table: str, table: str) -> None:
        cursor.execute(f"DELETE FROM {filters_table} WHERE split_part(name, '#', 1) = %s", (table,))

    def read_filters(self, cursor: Any, filters_table: str, names: list[str]) -> list[tuple[str, bytes]]:
        cursor.execute(
            f"SELECT name, bits FROM {filters_table} WHERE split_part(name, '#', 1) = ANY(%s)",
            (names,),
            binary=True,
        )
        return [(row[0], bytes(row[1])) for row in cursor.fetchall()]

    def one_of_keys(self, values: IntArray, column: str = "k") -> tuple[str, Any]:
        return f"{column} = ANY(%s::bigint[])", bigint_array(values.tolist())

    def lock_for_reading(self, cursor: Any, postings_table: str) -> None:
        cursor.execute(f"LOCK TABLE {postings_table} IN ACCESS SHARE MODE")

    def prepare_builds(self, cursor: Any) -> None:
        # A check-and-add transaction set the candidate statement's planner settings, which
        # would make a merge's join probe the records' index once per posting.
        cursor.execute(
            "SET LOCAL enable_seqscan = on; SET LOCAL enable_mergejoin = on; SET LOCAL enable_hashjoin = on; "
            "SET LOCAL maintenance_work_mem = '256MB'; SET LOCAL work_mem = '64MB'"
        )

    def empty_postings(self, cursor: Any, postings_table: str) -> None:
        # Readers wait here, not during the builds; TRUNCATE is transactional in PostgreSQL.
        cursor.execute(f"LOCK TABLE {postings_table} IN ACCESS EXCLUSIVE MODE")
        cursor.execute(f"TRUNCATE {postings_table}")

    def postings_between(
        self, cursor: Any, postings_table: str, first: int, stop: int
    ) -> tuple[IntArray, IntArray]:
        select = f"SELECT k, id FROM {postings_table} WHERE id >= %s AND id < %s"
        return self._keys_and_ids(cursor, select, (first, stop))

    def _keys_and_ids(
        self, cursor: Any, select: str, parameters: tuple[int, int]
    ) -> tuple[IntArray, IntArray]:
        """(k, id) of the rows ``select`` gives, as two arrays read in one round trip."""
        # Both aggregates walk the rows in one order, so the keys and ids stay paired.
        cursor.execute(
            "SELECT string_agg(int8send(k), ''::bytea), string_agg(int8send(id), ''::bytea) "
            f"FROM ({select}) AS u",
            parameters,
            binary=True,
        )
        keys, ids = cursor.fetchone()
        return (
            np.frombuffer(bytes(keys or b""), dtype=">i8").astype(np.int64),
            np.frombuffer(bytes(ids or b""), dtype=">i8").astype(np.int64),
        )

    def create_packed_postings(self, cursor: Any, table: str) -> None:
        cursor.execute(f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, keys BIGINT[] NOT NULL)")

    def insert_packed(self, cursor: Any, table: str, keys: IntArray, ids: IntArray) -> None:
        """One binary COPY, each row's keys a one-dimensional int8 array."""
        rows = np.empty(ids.size, dtype=_packed_row(keys.shape[1]))
        rows["fields"], rows["id_length"], rows["id"] = 2, 8, ids
        rows["array_length"] = 20 + 12 * keys.shape[1]
        rows["dimensions"], rows["flags"], rows["element_type"] = 1, 0, _INT8_OID
        rows["size"], rows["lower_bound"] = keys.shape[1], 1
        rows["keys"]["length"], rows["keys"]["k"] = 8, keys
        with cursor.copy(f"COPY {table} (id, keys) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(_COPY_HEADER + rows.tobytes() + _COPY_TRAILER)

    def unpacked(self, table: str) -> str:
        return f"SELECT unnest(p.keys) AS k, p.id AS id FROM {table} AS p"

    def packed_between(self, cursor: Any, table: str, first: int, stop: int) -> tuple[IntArray, IntArray]:
        return self._keys_and_ids(
            cursor, f"{self.unpacked(table)} WHERE p.id >= %s AND p.id < %s", (first, stop)
        )


def from_url(url: str, parts: SplitResult, options: dict[str, str]) -> SqlStorage:
    check_options(options, {"table"}, url)
    try:
        import psycopg
    except ImportError as exc:
        raise MissingDependencyError("psycopg", "stores", "a PostgreSQL store") from exc
    dsn = urlunsplit(("postgresql", parts.netloc, parts.path, "", ""))
    try:
        dialect = PostgresDialect(dsn, redacted(parts))
    except psycopg.Error as exc:
        raise StorageUnavailableError(
            f"cannot connect to PostgreSQL at {redacted(parts)} ({str(exc).strip()}); is the server "
            "running and the database created?"
        ) from exc
    return SqlStorage(dialect, options.get("table", DEFAULT_PREFIX))

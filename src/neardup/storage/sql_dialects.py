"""What differs between the SQL engines a :class:`~neardup.storage.sql.SqlStorage` speaks to:
the :class:`SqlDialect` every engine's dialect fills in (SQLite in :mod:`.sqlite`, PostgreSQL
in :mod:`.postgres`, MariaDB/MySQL in :mod:`.mysql`, each beside the URL that opens it).

A dialect owns the connection (opening it again after a server restart, a second one for
:meth:`SqlDialect.reachable`) and says how its engine is spoken: placeholders and type names,
how a transaction begins and how writers lock each other out, how rows go in in bulk, which
driver errors mean what, and the statements of the runs layout (:mod:`.runs`) where the
engine has them. It knows nothing of tables beyond the names it is handed: the layouts
(:mod:`.sql_columns`, :mod:`.runs`) decide what is stored where.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import NeardupError, StorageUnsupportedError
from .base import IntArray, Key, UInt64Array, bytes_to_words
from .urls import redacted

if TYPE_CHECKING:
    from .sql import SqlStorage

#: Connect timeout of the attempts to replace a connection the server closed (seconds); the
#: first connection keeps the URL's 10 s.
RECONNECT_TIMEOUT_S = 5.0
#: Records the recent table of the column layout holds before they move to the records table.
RECENT_ROWS = 32_768


#: Record ids a statement when a query batch's candidates are read by id.
IDS_PER_READ = 50_000


class SqlDialect:
    """One engine's way of being spoken to, over one DB-API connection in autocommit mode
    (transactions are explicit statements, the one way all three drivers agree on). The
    defaults are plain SQL; each engine overrides what it does otherwise."""

    #: The engine, for messages.
    name = "sql"
    placeholder = "?"
    blob_type = "BLOB"
    key_type = "TEXT"
    #: The id column of the column layout's tables, and of the runs layout's records table
    #: (whose ids come from the meta row).
    id_column = "id INTEGER PRIMARY KEY"
    runs_id_column = "id BIGINT PRIMARY KEY"
    #: Whether a DDL statement commits the open transaction (MariaDB/MySQL).
    ddl_commits = False
    #: The layouts a new store may be given, the first the default (see :mod:`.sql`).
    layouts: tuple[str, ...] = ("columns",)
    #: Records the column layout's recent table holds before they move (tests lower it).
    recent_rows = RECENT_ROWS
    #: Whether merges of the runs layout run after the add, in steps (SQLite), or inside it.
    merge_in_steps = False
    #: The database file of an embedded engine ('' for a server's), and whether opening the
    #: store created it.
    path = ""
    created_file = False

    def __init__(self, connection: Any, where: str) -> None:
        self.connection = connection
        self.where = where
        self._probe: Any = None  # a second connection, for reachable() only
        self._probe_lock = threading.Lock()

    # -- the connection ------------------------------------------------------------------
    #: Whether a connection the server closed can be replaced (engines with a server).
    reconnects = False

    def connect(self, timeout_s: float, probe: bool = False) -> Any:
        """A new connection with this store's session settings, given a connect timeout and
        whether it is for :meth:`reachable` (whose reads time out too)."""
        raise StorageUnsupportedError(f"{self.where}: this engine does not reconnect")

    def reconnect(self) -> None:
        """Replace the connection (the server closed it: a restart, an idle timeout)."""
        with contextlib.suppress(Exception):
            self.connection.close()
        self.connection = self.connect(RECONNECT_TIMEOUT_S)

    def connection_broken(self) -> bool:
        """Whether the driver found the connection closed (engines with a server say)."""
        return False

    def reachable(self, timeout_s: float) -> str | None:
        """None if the server answers ``SELECT 1`` on a second connection (never the one the
        store's calls use, which a long call may hold), else why not, in one line. One check
        at a time: a check still waiting for the server makes the next one answer at once."""
        if not self.reconnects:
            return None
        if not self._probe_lock.acquire(blocking=False):
            return f"{self.where} has not answered the previous check yet"
        try:
            if self._probe is None:
                self._probe = self.connect(timeout_s, True)
            cursor = self._probe.cursor()
            cursor.execute("SELECT 1")
            cursor.fetchone()
            cursor.close()
            return None
        except Exception as exc:
            with contextlib.suppress(Exception):
                self._probe.close()
            self._probe = None
            return f"{self.where}: {first_line(exc)}"
        finally:
            self._probe_lock.release()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.connection.close()
        with contextlib.suppress(Exception):
            if self._probe is not None:
                self._probe.close()

    def discard(self) -> None:
        """Close, undoing what opening created (SQLite: a new, empty file)."""
        self.close()

    def make_writable(self) -> None:
        """Be ready to write before a write transaction begins (SQLite opens read-only)."""

    # -- transactions and locks ----------------------------------------------------------
    def begin(self, cursor: Any, write: bool) -> None:
        cursor.execute("BEGIN")

    def lock(self, cursor: Any, name: str) -> None:
        """Take the cross-process writer lock ``name`` inside the open transaction."""

    def unlock(self, cursor: Any, name: str) -> None:
        """Release a lock that does not end with the transaction."""

    def check_creatable(self, cursor: Any) -> None:
        """Refuse to create an index where this engine must not (SQLite: another
        application's database)."""

    def table_exists(self, cursor: Any, table: str) -> bool:
        raise NotImplementedError

    def integrity_errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def driver_error(self, exc: BaseException) -> NeardupError | None:
        """The neardup error for a driver exception, or None to let it pass unchanged."""
        return None

    def check_sizes(self, cursor: Any, values: Sequence[bytes | str]) -> None:
        """Refuse, before anything is sent, a value larger than the server takes in one
        statement (MariaDB's ``max_allowed_packet``): the server would close the connection
        over it, which reads as a lost server that a retry would only repeat."""

    # -- statements ----------------------------------------------------------------------
    def table_options(self) -> str:
        return ""

    def signature_type(self) -> str:
        return self.blob_type

    def value_type(self) -> str:
        """The column type of stored values, which may be far larger than a record's blobs."""
        return self.blob_type

    def meta_type(self) -> str:
        """The column type of the meta rows' JSON (a records index keeps its model there)."""
        return "TEXT"

    def marks(self, count: int) -> str:
        return ", ".join([self.placeholder] * count)

    def one_of(self, column: str, values: list[Any]) -> tuple[str, list[Any]]:
        """``column IN (…)`` with its parameters (PostgreSQL binds one array instead)."""
        return f"{column} IN ({self.marks(len(values))})", values

    def insert_rows(self, cursor: Any, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        """Insert ``rows`` (in ``columns`` order) in bulk (PostgreSQL: one COPY)."""
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({self.marks(len(rows[0]))})", rows)

    #: Rows per statement of :meth:`upsert_values` (4 parameters each stay under the 999
    #: variables of older SQLite builds).
    value_rows = 200

    def upsert_values(
        self, cursor: Any, table: str, name: str, rows: Sequence[tuple[str, int, bytes]]
    ) -> None:
        """Store ``rows`` (key_text, key_int, value) of the value map ``name`` in the values
        ``table``, replacing the value of a key stored already: one statement, no delete
        (the keys are distinct)."""
        p = self.placeholder
        marks = ", ".join([f"({p}, {p}, {p}, {p})"] * len(rows))
        parameters = [part for row in rows for part in (name, *row)]
        cursor.execute(
            f"INSERT INTO {table} (name, key_text, key_int, value) VALUES {marks}{self.upsert_clause()}",
            parameters,
        )

    #: Keys per statement of a value map's read (:meth:`one_of_texts`; older SQLite builds
    #: take at most 999 parameters).
    values_per_read = 500

    def one_of_texts(self, column: str, texts: list[str]) -> tuple[str, list[Any]]:
        """``column IN (…)`` for a value map's key texts (PostgreSQL: one array literal)."""
        return self.one_of(column, texts)

    def upsert_clause(self) -> str:
        """What makes an INSERT into the values table replace the value of a stored key."""
        return " ON CONFLICT (name, key_text, key_int) DO UPDATE SET value = excluded.value"

    def values_table_options(self) -> str:
        """Options of the values table of a new store, after :meth:`table_options`."""
        return ""

    def values_table_made(self, table: str) -> list[str]:
        """Statements that finish the values table just created, in its transaction."""
        return []

    def empty_table(self, cursor: Any, table: str) -> None:
        """Delete every row, inside the transaction (MySQL's TRUNCATE would commit)."""
        cursor.execute(f"DELETE FROM {table}")

    def prefer_indexes(self, cursor: Any) -> None:
        """Make a candidate statement use the key indexes (PostgreSQL's planner may not)."""

    def check_keys(self, keys: Sequence[Key]) -> None:
        """Engines with bounded key columns refuse longer keys here."""

    def fetch(self, cursor: Any, statement: str, parameters: Any) -> list[tuple[Any, ...]]:
        """Every row of a read (PostgreSQL: in binary, which spares hex-coding the blobs)."""
        cursor.execute(statement, parameters)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows

    # -- the store's life ----------------------------------------------------------------
    def opened(self, store: SqlStorage) -> None:
        """The store's layout has just been read (PostgreSQL: the planner's statistics)."""

    def added(self, store: SqlStorage, count: int) -> None:
        """``count`` records were just added and committed."""

    # -- the runs layout's statements (:mod:`.runs`; engines that have it) ---------------
    def insert_postings(self, cursor: Any, table: str, keys: IntArray, ids: IntArray) -> None:
        raise self._no_runs()

    def create_run(self, cursor: Any, table: str, select: str | tuple[IntArray, IntArray]) -> int:
        """A new run ``table`` holding the rows of ``select``, a SELECT or (keys, ids) given in
        (k, id) order; returns how many (-1: not counted)."""
        raise self._no_runs()

    def create_run_table(self, cursor: Any, table: str) -> None:
        """An empty run table in (k, id) order, which merges in steps fill range after range."""
        raise self._no_runs()

    def run_keys(self, cursor: Any, table: str, rows: int) -> Iterator[IntArray] | None:
        """The keys of a run of ``rows`` postings in parts, where the engine reads them in
        bulk; None: the layout reads them in (key, id) ranges."""
        return None

    def max_length(self, cursor: Any) -> int:
        """The longest text or blob the connection takes."""
        return 1_000_000_000

    def delete_filter(self, cursor: Any, filters_table: str, table: str) -> None:
        """Delete the filter rows of run ``table`` (``table``, ``table#1``, …)."""
        raise self._no_runs()

    def read_filters(self, cursor: Any, filters_table: str, names: list[str]) -> list[tuple[str, bytes]]:
        """(row name, bits) of every filter row of the runs ``names``."""
        raise self._no_runs()

    def one_of_keys(self, values: IntArray, column: str = "k") -> tuple[str, Any]:
        """``column`` (a posting key by default) in ``values`` as a condition with one
        parameter."""
        raise self._no_runs()

    def lock_for_reading(self, cursor: Any, postings_table: str) -> None:
        """Keep the run list and the runs still for the transaction (SQLite: its snapshot)."""

    def prepare_builds(self, cursor: Any) -> None:
        """Session settings for sorting and index builds."""

    def empty_postings(self, cursor: Any, postings_table: str) -> None:
        self.empty_table(cursor, postings_table)

    def postings_between(
        self, cursor: Any, postings_table: str, first: int, stop: int
    ) -> tuple[IntArray, IntArray]:
        """(keys, ids) of the recent postings of records ``first`` ≤ id < ``stop``."""
        raise self._no_runs()

    def int_rows(self, cursor: Any, statement: str, parameters: list[Any], columns: int) -> IntArray:
        """The rows of ``statement``, a SELECT of ``columns`` integers, as an (n, columns)
        array."""
        found = self.fetch(cursor, statement, parameters)
        flat = np.fromiter(itertools.chain.from_iterable(found), dtype=np.int64, count=columns * len(found))
        return flat.reshape(len(found), columns)

    def records_by_id(
        self, cursor: Any, ids: IntArray, records_table: str, fields: str
    ) -> list[tuple[Any, ...]]:
        """The rows ``(r.id, fields)`` (columns of the records table ``r``) of the sorted,
        distinct record ``ids`` still stored, in id order: a read by id in the table's own
        order, where joining the postings to the records and grouping them by record sorted
        every posting for the GROUP BY (docs/index.md, "Reading the candidates")."""
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(ids), IDS_PER_READ):
            condition, parameter = self.one_of_keys(ids[start : start + IDS_PER_READ], "r.id")
            statement = f"SELECT r.id, {fields} FROM {records_table} AS r WHERE {condition} ORDER BY r.id"
            rows += self.fetch(cursor, statement, [parameter])
        return rows

    def words_by_id(
        self, cursor: Any, ids: IntArray, records_table: str, width: int
    ) -> tuple[IntArray, UInt64Array]:
        """(ids, stored words) of the sorted, distinct record ``ids`` still stored, in id
        order."""
        rows = self.records_by_id(cursor, ids, records_table, "r.fingerprint")
        found = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        return found, bytes_to_words([bytes(row[1]) for row in rows], width)

    def words_below(
        self, cursor: Any, stop: int, records_table: str, width: int
    ) -> tuple[IntArray, UInt64Array]:
        """(ids, stored words) of every record stored with an id below ``stop``, in id order
        (:data:`IDS_PER_READ` ids a statement)."""
        found, words = [np.empty(0, np.int64)], [np.empty((0, width), np.uint64)]
        for start in range(0, stop, IDS_PER_READ):
            p = self.placeholder
            rows = self.fetch(
                cursor,
                f"SELECT id, fingerprint FROM {records_table} WHERE id >= {p} AND id < {p} ORDER BY id",
                [start, min(start + IDS_PER_READ, stop)],
            )
            found.append(np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)))
            words.append(bytes_to_words([bytes(row[1]) for row in rows], width))
        return np.concatenate(found), np.concatenate(words)

    # -- packed recent postings (one row per record: its id and all its posting keys) ----
    def create_packed_postings(self, cursor: Any, table: str) -> None:
        """The recent postings table of a packed store: ``id`` (the primary key, appended
        in order) and ``keys``, the record's posting keys in one value."""
        raise self._no_runs()

    def insert_packed(self, cursor: Any, table: str, keys: IntArray, ids: IntArray) -> None:
        """One row per record: ``keys`` is (records, tables), ``ids`` the records' ids."""
        raise self._no_runs()

    def unpacked(self, table: str) -> str:
        """A SELECT of (k, id), one row per posting, of a packed postings table (unpacked by
        the engine, so a cut into a run stays one statement)."""
        raise self._no_runs()

    def packed_between(self, cursor: Any, table: str, first: int, stop: int) -> tuple[IntArray, IntArray]:
        """(keys, ids) of the packed postings of records ``first`` ≤ id < ``stop``."""
        raise self._no_runs()

    def _no_runs(self) -> StorageUnsupportedError:
        return StorageUnsupportedError(f"{self.where}: {self.name} stores have no runs layout")


def first_line(exc: BaseException | None) -> str:
    """A driver error's first line, with any URL's password masked."""
    return redacted((str(exc).strip().splitlines() or [type(exc).__name__])[0][:300])

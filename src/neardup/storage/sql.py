"""Relational stores (SQLite, PostgreSQL, MariaDB/MySQL) in seed 002's layout: one row per
record with an indexed column per block table.

Tables (``<prefix>`` defaults to ``neardup``, set with ``?table=``):

- ``<prefix>_meta(name, value)``: the index configuration as JSON (row ``config``).
- ``<prefix>_records(id, key_text, key_int, fingerprint, cluster_text, cluster_int,
  signature, b0 … b{T-1})``: keys keep their type (``key_int`` is 1 for int keys), the
  fingerprint words are little-endian bytes (a band index stores its band keys after the
  fingerprint), ``b<t>`` is table t's key as a signed BIGINT (the same 64 bits), each with
  its own index.
- ``<prefix>_recent``: the same columns and indexes, for the records added since the last
  move. New records go here, and once it holds :data:`RECENT_ROWS` they move to
  ``<prefix>_records`` in one statement inside the adding transaction. Every insert touches
  one page of each block index; into a large table a batch touches thousands of random pages,
  all written again at commit. The small table's pages stay few and hot, and a move writes
  each page of the large one once per :data:`RECENT_ROWS` records.
- ``<prefix>_values(name, key_text, key_int, value)``: the value maps
  (:meth:`~neardup.storage.base.Storage.put_values`), keyed as the records are. Stores made
  before it lack the table: reads find nothing there, and the first write creates it.

A query batch is one statement per table, ``WHERE b0 IN (…) OR b1 IN (…) …``, which every
engine runs as a union of index lookups; the rows are matched back to the queries by their
posting columns in numpy. An add is one transaction (existence check in both tables, then a
multi-row insert); the unique index on the key is the last line of defence against a
concurrent writer. Dialects differ only in the small hooks at the end of :class:`SqlStorage`.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError, NeardupError, StorageDamagedError, StorageUnavailableError
from .base import (
    Candidates,
    Key,
    PostingCounts,
    RecordBatch,
    RecordShape,
    Storage,
    StoredRecord,
    UInt64Array,
    bytes_to_words,
    check_keys,
    check_value_map,
    dump_meta,
    key_columns,
    key_exists_error,
    key_from_columns,
    key_not_found_error,
    load_meta,
    lookable,
    match_postings,
    no_candidates,
    plain_key,
    raced_key_error,
    to_signed,
    words_to_bytes,
    words_to_int,
)
from .urls import redacted

DEFAULT_PREFIX = "neardup"
_PREFIX_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
#: More posting columns than this would need more indexes than MySQL allows per table
#: (64) and make every insert slow; such schemes belong to the in-memory index.
MAX_SQL_TABLES = 48
#: Keys per existence check or delete statement.
KEY_CHUNK = 500
#: Rows per multi-row INSERT of values: 4 parameters each stay under the 999 variables of
#: older SQLite builds.
VALUE_ROWS = 200
#: Value bytes per multi-row INSERT (at least one row): escaped, a statement stays well under
#: MariaDB's default max_allowed_packet (16 MiB).
VALUE_BYTES = 1 << 22
#: Records the recent table holds before they move to the records table (see above).
RECENT_ROWS = 32_768
#: Pauses before the attempts to replace a connection the server closed (a restart): bounded,
#: so that a call while the server is down fails within about a second instead of hanging,
#: and the first call after it is back succeeds.
RECONNECT_PAUSES_S = (0.0, 0.0, 0.2, 0.5)
#: Connect timeout of those attempts (seconds); the first connection keeps the URL's 10 s.
RECONNECT_TIMEOUT_S = 5.0


def check_prefix(prefix: str) -> str:
    """Table prefixes become SQL identifiers, so only plain names are accepted (no quoting
    games, no injection through a URL)."""
    if not _PREFIX_PATTERN.fullmatch(prefix):
        raise ConfigError(
            f"table prefix {prefix!r} must be a plain SQL name (letters, digits, underscore; "
            "not starting with a digit; at most 48 characters)"
        )
    return prefix


class SqlStorage(Storage):
    """The shared SQL implementation over a DB-API connection."""

    name = "sql"
    placeholder = "?"
    #: See :data:`RECENT_ROWS` (tests lower it to exercise the move).
    recent_rows = RECENT_ROWS
    blob_type = "BLOB"
    key_type = "TEXT"
    id_column = "id INTEGER PRIMARY KEY"
    #: Whether a DDL statement commits the open transaction (MariaDB/MySQL).
    ddl_commits = False

    def __init__(
        self,
        connection: Any,
        prefix: str = DEFAULT_PREFIX,
        where: str = "",
        reconnector: Callable[[float, bool], Any] | None = None,
    ) -> None:
        super().__init__()
        self.connection = connection
        #: Opens a connection like ``connection`` given a connect timeout in seconds and whether
        #: it is for :meth:`reachable` (whose reads time out too), for servers that restart
        #: (PostgreSQL, MariaDB); None where there is no server (SQLite).
        self._reconnector = reconnector
        self._probe: Any = None  # a second connection, for reachable() only
        self._probe_lock = threading.Lock()
        self.prefix = check_prefix(prefix)
        self.where = where or self.name
        self.meta_table = f"{self.prefix}_meta"
        self.records_table = f"{self.prefix}_records"
        self.recent_table = f"{self.prefix}_recent"
        self.values_table = f"{self.prefix}_values"
        self._recent = True
        #: Whether the values table is known to exist (stores made before it lack it).
        self._values_made = False
        #: Whether the records tables have the ``digest`` column (stores made before it do not).
        self._digests = False
        self._depth = 0
        self._block_columns: list[str] = []
        #: Whether what the tables say of the layout has been read (see :meth:`_ready`).
        self._opened = False
        self._committed: list[Callable[[], None]] = []

    # -- transactions --------------------------------------------------------------------
    # Connections run in autocommit mode and transactions are explicit statements, the one
    # way all three drivers agree on.
    def _begin(self, cursor: Any, write: bool) -> None:
        cursor.execute("BEGIN")

    def _lock(self, cursor: Any) -> None:
        """Take the cross-process writer lock inside the open transaction."""

    def _unlock(self, cursor: Any) -> None:
        """Release a lock that does not end with the transaction."""

    @contextlib.contextmanager
    def _transaction(self, write: bool = False, exclusive: bool = False) -> Iterator[Any]:
        """One transaction for the outermost call; nested calls join it. The connection is
        shared by this process's threads one transaction at a time."""
        with self._local_lock, self._driver_errors(), self._open_transaction(write, exclusive) as cursor:
            yield cursor

    @contextlib.contextmanager
    def _driver_errors(self) -> Iterator[None]:
        """Driver failures a user can act on (disk full, lock timeout, damage, a lost server)
        become the dialect's one-line storage errors; the transaction has been rolled back by
        then (or, for a lost server, was never committed unless its COMMIT had arrived)."""
        try:
            yield
        except NeardupError:
            raise
        except Exception as exc:
            if self._reconnector is not None and self._connection_broken():
                raise StorageUnavailableError(
                    f"lost the connection to {self.where} ({_first_line(exc)}): the call is all or "
                    "nothing, so retry it; the next call reconnects"
                ) from exc
            translated = self._driver_error(exc)
            if translated is None:
                raise
            raise translated from exc

    @contextlib.contextmanager
    def _open_transaction(self, write: bool, exclusive: bool) -> Iterator[Any]:
        if self._depth:
            cursor = self.connection.cursor()
            self._depth += 1
            try:
                yield cursor
            finally:
                self._depth -= 1
                cursor.close()
            return
        cursor = self._begun(write or exclusive)
        self._depth = 1
        locked = False
        try:
            if exclusive:
                self._lock(cursor)
                locked = True
            yield cursor
            cursor.execute("COMMIT")
        except BaseException:
            self._committed.clear()
            with contextlib.suppress(Exception):
                cursor.execute("ROLLBACK")
            raise
        finally:
            self._depth = 0
            if locked:
                with contextlib.suppress(Exception):
                    self._unlock(cursor)
            cursor.close()
        committed, self._committed = self._committed, []
        for function in committed:
            function()

    def _begun(self, write: bool) -> Any:
        """A cursor in a new transaction. A connection the server closed (a restart, an idle
        timeout) shows when BEGIN fails, before anything of the call was sent, so it is
        replaced and BEGIN tried again, with the pauses of :data:`RECONNECT_PAUSES_S`. Only a
        new connection is needed: locks (advisory, GET_LOCK) end with the old session, session
        settings are the reconnector's, and what this process keeps in memory about the store
        follows commits it saw (:meth:`_on_commit`), never a call that failed."""
        if self._reconnector is None:
            cursor = self.connection.cursor()
            self._begin(cursor, write)
            return cursor
        last: BaseException | None = None
        for attempt, pause in enumerate(RECONNECT_PAUSES_S):
            time.sleep(pause)
            try:
                if attempt or self._connection_broken():
                    with contextlib.suppress(Exception):
                        self.connection.close()
                    self.connection = self._reconnector(RECONNECT_TIMEOUT_S, False)
                cursor = self.connection.cursor()
                self._begin(cursor, write)
                return cursor
            except Exception as exc:
                if not self._connection_broken():
                    raise
                last = exc
        raise StorageUnavailableError(
            f"cannot reach {self.where} ({_first_line(last)}) after {len(RECONNECT_PAUSES_S)} attempts "
            f"over {sum(RECONNECT_PAUSES_S):.1f} s; is the server running? The next call tries again"
        ) from last

    def _connection_broken(self) -> bool:
        """Whether the driver found the connection closed (dialects with a server say)."""
        return False

    def reachable(self, timeout_s: float) -> str | None:
        """None if the server answers ``SELECT 1`` on a second connection (never the one the
        store's calls use, which a long call may hold), else why not, in one line. One check
        at a time: a check still waiting for the server makes the next one answer at once."""
        if self._reconnector is None:
            return None
        if not self._probe_lock.acquire(blocking=False):
            return f"{self.where} has not answered the previous check yet"
        try:
            if self._probe is None:
                self._probe = self._reconnector(timeout_s, True)
            cursor = self._probe.cursor()
            cursor.execute("SELECT 1")
            cursor.fetchone()
            cursor.close()
            return None
        except Exception as exc:
            with contextlib.suppress(Exception):
                self._probe.close()
            self._probe = None
            return f"{self.where}: {_first_line(exc)}"
        finally:
            self._probe_lock.release()

    def _on_commit(self, function: Callable[[], None]) -> None:
        """Run ``function`` once the open transaction commits (never if it rolls back): what
        a process keeps in memory about the store follows only what the store holds."""
        self._committed.append(function)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        if self.ddl_commits and not self._depth:
            # Values written under the lock need their table, and where DDL commits the open
            # transaction (and a transaction cannot use a table made after its first read) it
            # cannot be made inside: a store made before the table gets it here.
            self._make_values_table()
        self._ready()  # outside the lock's transaction
        with self._transaction(exclusive=True):
            yield

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.connection.close()
        with contextlib.suppress(Exception):
            if self._probe is not None:
                self._probe.close()

    # -- meta ----------------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any] | None:
        if not self._table_exists(self.meta_table):
            return None
        with self._transaction() as cursor:
            cursor.execute(
                f"SELECT value FROM {self.meta_table} WHERE name = {self.placeholder}", ("config",)
            )
            row = cursor.fetchone()
        if row is None:  # the tables and the row are written in one transaction
            raise StorageDamagedError(
                f"{self.where} has the table {self.meta_table} but no index settings in it: the store "
                "is damaged; restore it from a backup or rebuild the index with `neardup index add`"
            )
        return load_meta(row[0], self.where)

    def write_meta(self, meta: dict[str, Any]) -> None:
        tables = self.shape.columns
        if tables > MAX_SQL_TABLES:
            raise ConfigError(
                f"the block scheme needs {tables} tables; SQL stores hold at most {MAX_SQL_TABLES} "
                "indexed block columns: choose a scheme with fewer tables (e.g. BlockScheme(64, 3, 4, 1)) "
                "or a smaller max_distance"
            )
        p = self.placeholder
        with self._transaction(write=True) as cursor:
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.meta_table} "
                f"(name VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL){self._table_options()}"
            )
            self._create_tables(cursor, tables)
            cursor.execute(self._values_table_statement())
            cursor.execute(
                f"INSERT INTO {self.meta_table} (name, value) VALUES ({p}, {p}), ({p}, {p})",
                ("config", dump_meta(meta), DIGESTS_ROW, DIGEST_KIND),
            )
            self._note_values_table(True)
        self._opened = False

    def _create_tables(self, cursor: Any, tables: int) -> None:
        """The record tables with one indexed column per block table (PostgreSQL lays out
        its postings apart, see :mod:`neardup.storage.postgres_runs`)."""
        blocks = ", ".join(f"b{table} BIGINT NOT NULL" for table in range(tables))
        for name in (self.records_table, self.recent_table):
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {name} ({self.record_columns(self.id_column)}, {blocks}, "
                f"UNIQUE (key_text, key_int)){self._table_options()}"
            )
            for table in range(tables):
                cursor.execute(f"CREATE INDEX {name}_b{table} ON {name} (b{table})")

    def record_columns(self, id_column: str) -> str:
        """The columns every layout's record table has, as SQL column definitions."""
        return (
            f"{id_column}, key_text {self.key_type} NOT NULL, key_int SMALLINT NOT NULL, "
            f"fingerprint {self.blob_type} NOT NULL, cluster_text {self.key_type}, "
            f"cluster_int SMALLINT, signature {self.signature_type()}, digest {self.blob_type}"
        )

    def attach(self, shape: RecordShape) -> None:
        super().attach(shape)
        self._block_columns = [f"b{column}" for column in range(shape.columns)]
        self._opened = False

    def _ready(self) -> None:
        """Read what the tables say of the store's layout, once, when it is first needed:
        :meth:`attach` may come before the tables exist."""
        if not self._opened:
            self._read_layout()
            self._opened = True

    def _read_layout(self) -> None:
        # A store of format 1 (read by `neardup index rebuild`) has no recent table.
        recent = self._table_exists(self.recent_table)
        with self._transaction() as cursor:
            cursor.execute(
                f"SELECT value FROM {self.meta_table} WHERE name = {self.placeholder}", (DIGESTS_ROW,)
            )
            self._digests = cursor.fetchone() is not None
        self._recent = recent

    @property
    def record_fields(self) -> tuple[str, ...]:
        """The columns of a record beyond its key and fingerprint, as :func:`stored_record`
        takes them: :data:`RECORD_COLUMNS`, and ``digest`` where the store has it."""
        self._ready()
        return (*RECORD_COLUMNS, "digest") if self._digests else RECORD_COLUMNS

    def record_values(self, batch: RecordBatch, row: int) -> tuple[Any, ...]:
        """The :attr:`record_fields` values of one record of a batch."""
        cluster = batch.cluster(row)
        cluster_text, cluster_int = (None, None) if cluster is None else key_columns(cluster)
        values = (cluster_text, cluster_int, batch.signature(row))
        self._ready()
        return (*values, batch.digest(row)) if self._digests else values

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables that hold records: the settled ones and the recent ones."""
        self._ready()
        return (self.records_table, self.recent_table) if self._recent else (self.records_table,)

    # -- records -------------------------------------------------------------------------
    def add_many(self, batch: RecordBatch) -> None:
        if not len(batch):
            return
        self._check_keys(batch.keys)
        blocks = to_signed(batch.posting_keys()).tolist()
        fingerprints = words_to_bytes(batch.words)
        rows = [
            (*key_columns(key), fingerprints[row], *self.record_values(batch, row), *blocks[row])
            for row, key in enumerate(batch.keys)
        ]
        columns = ", ".join(["key_text", "key_int", "fingerprint", *self.record_fields, *self._block_columns])
        # Every writer inserts in key order, so two that insert the same keys wait for each
        # other in turn (one then fails cleanly) instead of deadlocking on the unique index.
        rows.sort(key=lambda row: (row[0], row[1]))
        with self._transaction(write=True) as cursor:
            stored = self._stored_keys(cursor, batch.keys)
            if stored:
                raise key_exists_error(stored[0], len(stored), self.where)
            try:
                self._insert_rows(cursor, columns, rows)
            except self._integrity_errors() as exc:
                raise raced_key_error(self.where, exc) from exc
            self._settle_if_full(cursor, columns)

    def _settle_if_full(self, cursor: Any, columns: str) -> None:
        """Move the recent records to the records table once there are enough of them, in
        the adding transaction (so a batch is stored whole, wherever its rows lie)."""
        # The id span bounds the row count from above (removals leave gaps) and is read from
        # the primary key; COUNT(*) scanned the table every batch.
        cursor.execute(f"SELECT MAX(id) - MIN(id) + 1 FROM {self.recent_table}")
        if int(cursor.fetchone()[0] or 0) < self.recent_rows:
            return
        cursor.execute(
            f"INSERT INTO {self.records_table} ({columns}) "
            f"SELECT {columns} FROM {self.recent_table} ORDER BY id"
        )
        self._empty_recent(cursor)

    def _empty_recent(self, cursor: Any) -> None:
        """Delete every recent row, inside the transaction (MySQL's TRUNCATE would commit)."""
        cursor.execute(f"DELETE FROM {self.recent_table}")

    def remove_many(self, keys: Sequence[Key]) -> None:
        if not keys:
            return
        self._ready()
        with self._transaction(write=True) as cursor:
            stored = set(self._stored_keys(cursor, keys))
            missing = [key for key in keys if key not in stored]
            if missing:
                raise key_not_found_error(missing[0], len(missing), self.where)
            p = self.placeholder
            for name in self.tables:
                cursor.executemany(
                    f"DELETE FROM {name} WHERE key_text = {p} AND key_int = {p}",
                    [key_columns(key) for key in dict.fromkeys(keys)],
                )

    def get_many(self, keys: Sequence[Key]) -> list[StoredRecord | None]:
        found: dict[Key, StoredRecord] = {}
        width = self.shape.words
        self._ready()
        with self._transaction() as cursor:
            for chunk in _chunks(list(keys), KEY_CHUNK):
                condition, values = self._one_of("key_text", list({key_columns(key)[0] for key in chunk}))
                for name in self.tables:
                    cursor.execute(
                        f"SELECT key_text, key_int, fingerprint, {', '.join(self.record_fields)} "
                        f"FROM {name} WHERE {condition}",
                        values,
                    )
                    for record in self._records(cursor.fetchall(), width):
                        found[record.key] = record
        return [found.get(key) for key in keys]

    reads_records = True

    def candidates(self, postings: UInt64Array, *, records: bool = False) -> Candidates:
        blocks = to_signed(postings)
        conditions, values = [], []
        for table, column in enumerate(self._block_columns):
            condition, parameters = self._one_of(column, np.unique(blocks[:, table]).tolist())
            conditions.append(condition)
            values.extend(parameters)
        extra = self.record_fields if records else ()
        columns = ", ".join(["key_text", "key_int", "fingerprint", *extra, *self._block_columns])
        rows = []
        with self._transaction() as cursor:
            self._prefer_indexes(cursor)
            for name in self.tables:
                cursor.execute(f"SELECT {columns} FROM {name} WHERE {' OR '.join(conditions)}", values)
                rows += cursor.fetchall()
        width = self.shape.words
        if not rows:
            return no_candidates(width)
        found_blocks = np.array([row[3 + len(extra) :] for row in rows], dtype=np.int64).view(np.uint64)
        query_rows, found_rows = match_postings(blocks.view(np.uint64), found_blocks)
        found_words = bytes_to_words([bytes(row[2]) for row in rows], width)
        keys = [key_from_columns(row[0], row[1]) for row in rows]
        if records:
            read = {
                record.key: record for record in self._records([row[: 3 + len(extra)] for row in rows], width)
            }
        else:
            read = {}
        return Candidates(query_rows, [keys[i] for i in found_rows.tolist()], found_words[found_rows], read)

    def size(self) -> int:
        total = 0
        self._ready()
        with self._transaction() as cursor:
            for name in self.tables:
                cursor.execute(f"SELECT COUNT(*) FROM {name}")
                total += int(cursor.fetchone()[0])
        return total

    def scan(self, batch_size: int = 10_000) -> Iterator[list[StoredRecord]]:
        """The settled records, then the recent ones (a move made by a writer meanwhile may
        show a record twice or not at all: scan a store no one writes to)."""
        width = self.shape.words
        self._ready()
        for name in self.tables:
            last = -1
            while True:
                with self._transaction() as cursor:
                    cursor.execute(
                        f"SELECT key_text, key_int, fingerprint, {', '.join(self.record_fields)}, id "
                        f"FROM {name} WHERE id > {self.placeholder} "
                        f"ORDER BY id LIMIT {int(batch_size)}",
                        (last,),
                    )
                    rows = cursor.fetchall()
                if not rows:
                    break
                last = int(rows[-1][-1])
                yield self._records([row[:-1] for row in rows], width)

    # -- values --------------------------------------------------------------------------
    def put_values(self, name: str, keys: Sequence[Key], values: Sequence[bytes]) -> None:
        check_value_map(name, keys, values)
        check_keys(keys)
        latest = {key_columns(plain_key(key)): value for key, value in zip(keys, values, strict=True)}
        if not latest:
            return
        self._make_values_table()
        p = self.placeholder
        # Under the writer lock, as check-and-add writes: two writers of the same new keys would
        # otherwise collide on the primary key (PostgreSQL) or deadlock on gap locks (MariaDB).
        with self._transaction(write=True, exclusive=True) as cursor:
            for chunk in _chunks(sorted(latest), KEY_CHUNK):
                self._delete_values(cursor, name, chunk)
                for rows in _value_statements(chunk, latest):
                    marks = ", ".join([f"({p}, {p}, {p}, {p})"] * len(rows))
                    parameters = [
                        part for text, is_int in rows for part in (name, text, is_int, latest[text, is_int])
                    ]
                    cursor.execute(
                        f"INSERT INTO {self.values_table} (name, key_text, key_int, value) VALUES {marks}",
                        parameters,
                    )

    def get_values(self, name: str, keys: Sequence[Key]) -> list[bytes | None]:
        check_value_map(name, keys)
        wanted = [key_columns(key) if lookable(key) else None for key in map(plain_key, keys)]
        found: dict[tuple[str, int], bytes] = {}
        texts = sorted({columns[0] for columns in wanted if columns is not None})
        if texts and self._values_table_ready():
            p = self.placeholder
            with self._transaction() as cursor:
                for chunk in _chunks(texts, KEY_CHUNK):
                    condition, parameters = self._one_of("key_text", chunk)
                    cursor.execute(
                        f"SELECT key_text, key_int, value FROM {self.values_table} "
                        f"WHERE name = {p} AND {condition}",
                        [name, *parameters],
                    )
                    for text, is_int, value in cursor.fetchall():
                        found[text, int(is_int)] = bytes(value)
        return [None if columns is None else found.get(columns) for columns in wanted]

    def remove_values(self, name: str, keys: Sequence[Key]) -> None:
        check_value_map(name, keys)
        gone = sorted({key_columns(key) for key in map(plain_key, keys) if lookable(key)})
        if not gone or not self._values_table_ready():
            return
        with self._transaction(write=True, exclusive=True) as cursor:
            for chunk in _chunks(gone, KEY_CHUNK):
                self._delete_values(cursor, name, chunk)

    def _delete_values(self, cursor: Any, name: str, keys: list[tuple[str, int]]) -> None:
        """Delete the values of ``keys`` ((text, is_int) pairs): one statement per key type,
        so that int 5 and text "5" stay apart while the primary key answers by range."""
        for is_int in (0, 1):
            texts = [text for text, kind in keys if kind == is_int]
            if texts:
                condition, parameters = self._one_of("key_text", texts)
                p = self.placeholder
                cursor.execute(
                    f"DELETE FROM {self.values_table} WHERE name = {p} AND key_int = {p} AND {condition}",
                    [name, is_int, *parameters],
                )

    def _values_table_statement(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.values_table} (name VARCHAR(32) NOT NULL, "
            f"key_text {self.key_type} NOT NULL, key_int SMALLINT NOT NULL, value {self.value_type()} "
            f"NOT NULL, PRIMARY KEY (name, key_text, key_int)){self._table_options()}"
        )

    def _values_table_ready(self) -> bool:
        """Whether the values table exists (asked until it is found)."""
        if not self._values_made and self._table_exists(self.values_table):
            self._note_values_table(True)
            return True
        return self._values_made

    def _note_values_table(self, made: bool) -> None:
        """Remember whether the values table exists once the open transaction (if any)
        commits: a creation or drop rolled back leaves the store as it was."""

        def note() -> None:
            self._values_made = made

        if self._depth:
            self._on_commit(note)
        else:
            note()

    def _make_values_table(self) -> None:
        """Create the values table in a store made before it. Where DDL commits the open
        transaction (MariaDB), a transaction in progress must not be cut in two: the table is
        made on a connection of its own (:meth:`exclusive` makes it before check-and-add's
        transaction begins, since MariaDB refuses a table made after a transaction's first read)."""
        if self._values_table_ready():
            return
        if self._depth and self.ddl_commits and self._reconnector is not None:
            with self._local_lock, self._driver_errors():
                connection = self._reconnector(RECONNECT_TIMEOUT_S, False)
                try:
                    cursor = connection.cursor()
                    cursor.execute(self._values_table_statement())
                    cursor.close()
                finally:
                    connection.close()
            self._values_made = True
            return
        try:
            with self._transaction(write=True) as cursor:
                cursor.execute(self._values_table_statement())
                self._note_values_table(True)
        except Exception:
            # Another process may have made it meanwhile (PostgreSQL refuses one of two
            # concurrent CREATE TABLE IF NOT EXISTS); only a table still missing is an error.
            if self._depth or not self._table_exists(self.values_table):
                raise
            self._values_made = True

    def posting_counts(self) -> list[PostingCounts]:
        counts = []
        with self._transaction() as cursor:
            for column in self._block_columns:
                both = " UNION ALL ".join(f"SELECT {column} AS b FROM {name}" for name in self.tables)
                cursor.execute(
                    f"SELECT COUNT(*), MAX(n), AVG(n) FROM (SELECT COUNT(*) AS n FROM ({both}) AS every "
                    "GROUP BY b) AS buckets"
                )
                buckets, largest, mean = cursor.fetchone()
                counts.append(PostingCounts(int(buckets or 0), int(largest or 0), float(mean or 0.0)))
        return counts

    def drop(self) -> None:
        with self._transaction(write=True) as cursor:
            for name in self.tables:
                cursor.execute(f"DROP TABLE IF EXISTS {name}")
            self._drop_values(cursor)
            cursor.execute(f"DROP TABLE IF EXISTS {self.meta_table}")
        self._opened = False

    def _drop_values(self, cursor: Any) -> None:
        cursor.execute(f"DROP TABLE IF EXISTS {self.values_table}")
        self._note_values_table(False)

    # -- helpers -------------------------------------------------------------------------
    def _marks(self, count: int) -> str:
        return ", ".join([self.placeholder] * count)

    def _one_of(self, column: str, values: list[Any]) -> tuple[str, list[Any]]:
        """``column IN (…)`` with its parameters; PostgreSQL binds one array instead."""
        return f"{column} IN ({self._marks(len(values))})", values

    def _stored_keys(self, cursor: Any, keys: Sequence[Key]) -> list[Key]:
        wanted = {key_columns(key) for key in keys}
        stored: list[Key] = []
        for chunk in _chunks(sorted({text for text, _ in wanted}), KEY_CHUNK):
            condition, values = self._one_of("key_text", chunk)
            for name in self.tables:
                cursor.execute(f"SELECT key_text, key_int FROM {name} WHERE {condition}", values)
                for text, is_int in cursor.fetchall():
                    if (text, int(is_int)) in wanted:
                        stored.append(key_from_columns(text, is_int))
        return stored

    def _records(self, rows: Sequence[Sequence[Any]], width: int) -> list[StoredRecord]:
        if not rows:
            return []
        words = bytes_to_words([bytes(row[2]) for row in rows], width)
        return [
            stored_record(
                key_from_columns(row[0], row[1]),
                words_to_int(words[position], self.shape.fingerprint_words),
                row[3:],
            )
            for position, row in enumerate(rows)
        ]

    def _insert_rows(self, cursor: Any, columns: str, rows: list[tuple[Any, ...]]) -> None:
        marks = self._marks(len(rows[0]))
        cursor.executemany(f"INSERT INTO {self.recent_table} ({columns}) VALUES ({marks})", rows)

    def _prefer_indexes(self, cursor: Any) -> None:
        """Make the candidate statement use the block indexes (PostgreSQL's planner scans a
        small recent table instead, testing every row against every key list)."""

    def _check_keys(self, keys: Sequence[Key]) -> None:
        """Backends with bounded key columns refuse longer keys here."""

    # -- dialect hooks -------------------------------------------------------------------
    def _table_exists(self, table: str) -> bool:
        raise NotImplementedError

    def _integrity_errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def _driver_error(self, exc: BaseException) -> NeardupError | None:
        """The neardup error for a driver exception, or None to let it pass unchanged."""
        return None

    def _table_options(self) -> str:
        return ""

    def signature_type(self) -> str:
        return self.blob_type

    def value_type(self) -> str:
        """The column type of stored values, which may be far larger than a record's blobs."""
        return self.blob_type


#: The columns of a record beyond its key and fingerprint in every store, as
#: :func:`stored_record` takes them (stores made since digests add ``digest``).
RECORD_COLUMNS = ("cluster_text", "cluster_int", "signature")
#: The meta row that says the records tables have the ``digest`` column, and its value (the
#: hash, :func:`neardup.index.digests.text_digest`). Stores made before it lack both.
DIGESTS_ROW = "digests"
DIGEST_KIND = "blake2b-128"


def stored_record(key: Key, fingerprint: int, columns: Sequence[Any]) -> StoredRecord:
    """A record from its key, fingerprint and :attr:`SqlStorage.record_fields` values."""
    cluster_text, cluster_int, signature = columns[:3]
    digest = columns[3] if len(columns) > 3 else None
    return StoredRecord(
        key,
        fingerprint,
        None if cluster_text is None else key_from_columns(cluster_text, cluster_int),
        None if signature is None else bytes(signature),
        None if digest is None else bytes(digest),
    )


def _first_line(exc: BaseException | None) -> str:
    """A driver error's first line, with any URL's password masked."""
    return redacted((str(exc).strip().splitlines() or [type(exc).__name__])[0][:300])


def _value_statements(
    keys: list[tuple[str, int]], values: dict[tuple[str, int], bytes]
) -> Iterator[list[tuple[str, int]]]:
    """``keys`` in runs of at most :data:`VALUE_ROWS` whose values total at most
    :data:`VALUE_BYTES` (a longer value goes alone), one multi-row INSERT each."""
    run: list[tuple[str, int]] = []
    size = 0
    for key in keys:
        length = len(values[key])
        if run and (len(run) == VALUE_ROWS or size + length > VALUE_BYTES):
            yield run
            run, size = [], 0
        run.append(key)
        size += length
    if run:
        yield run


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]

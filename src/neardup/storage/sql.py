"""Relational stores (SQLite, PostgreSQL, MariaDB/MySQL): one :class:`SqlStorage`, composed of
a dialect (the engine: :mod:`.sql_dialects`) and a layout (where records and postings go:
seed 002's table of :mod:`.sql_columns`, or the runs of :mod:`.runs`).

Tables of every layout (``<prefix>`` defaults to ``neardup``, set with ``?table=``):

- ``<prefix>_meta(name, value)``: the index configuration as JSON (row ``config``), and the
  rows the store keeps about itself: ``digests`` (the records tables have the ``digest``
  column), ``layout`` (the runs layout; absent: the column layout) and the layout's own.
- ``<prefix>_records``: one row per record, ``key_text, key_int, fingerprint, cluster_text,
  cluster_int, signature, digest``: keys keep their type (``key_int`` is 1 for int keys), the
  stored words are little-endian bytes (a band index stores its band keys after the
  fingerprint), with a unique index on the key; the layout adds its posting columns or tables.
- ``<prefix>_values(name, key_text, key_int, value)``: the value maps
  (:meth:`~neardup.storage.base.Storage.put_values`), keyed as the records are, written by
  one upsert per run of keys (``ON CONFLICT … DO UPDATE``; MariaDB's ``ON DUPLICATE KEY
  UPDATE``; SQLite 3.24 or later). SQLite stores made from this version on keep the table ``WITHOUT
  ROWID`` (in key order: one B-tree, not a table and its key index); older ones keep theirs,
  which the same statements serve. Stores made before the table lack it: reads find nothing
  there, and the first write creates it.

A store's layout is read from its meta rows when it is first needed (a new store gets the
layout its URL asks for, or its dialect's default), so the same URLs open the same layouts as
before. The store does what every layout shares: transactions (nested calls join the
outermost), reconnecting after a server restart, the writer lock, the meta, records by key
and the value maps; the layout adds, finds, counts and drops. An add is one transaction
(existence check, then a multi-row insert); the unique index on the key is the last line of
defence against a concurrent writer.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, cast

from ..errors import ConfigError, NeardupError, StorageDamagedError, StorageUnavailableError
from .base import (
    Candidates,
    Key,
    PostingCounts,
    RecordBatch,
    RecordShape,
    Screen,
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
    key_kind,
    key_not_found_error,
    load_meta,
    lookable,
    plain_keys,
    words_to_int,
)
from .runs import LAYOUT, RunsLayout
from .sql_columns import ColumnsLayout
from .sql_dialects import RECONNECT_TIMEOUT_S, SqlDialect, first_line

DEFAULT_PREFIX = "neardup"
_PREFIX_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
#: More posting columns than this would need more indexes than MySQL allows per table
#: (64) and make every insert slow; such schemes belong to the in-memory index.
MAX_SQL_TABLES = 48
#: Keys per existence check or delete statement.
KEY_CHUNK = 500
#: Value bytes per multi-row INSERT (at least one row): escaped, a statement stays well under
#: MariaDB's default max_allowed_packet (16 MiB).
VALUE_BYTES = 1 << 22
#: Pauses before the attempts to replace a connection the server closed (a restart): bounded,
#: so that a call while the server is down fails within about a second instead of hanging,
#: and the first call after it is back succeeds.
RECONNECT_PAUSES_S = (0.0, 0.0, 0.2, 0.5)
#: The columns of a record beyond its key and fingerprint in every store, as
#: :func:`stored_record` takes them (stores made since digests add ``digest``).
RECORD_COLUMNS = ("cluster_text", "cluster_int", "signature")
#: The meta row that says the records tables have the ``digest`` column, and its value (the
#: hash, :func:`neardup.index.digests.text_digest`). Stores made before it lack both.
DIGESTS_ROW = "digests"
DIGEST_KIND = "blake2b-128"


def check_prefix(prefix: str) -> str:
    """Table prefixes become SQL identifiers, so only plain names are accepted (no quoting
    games, no injection through a URL)."""
    if not _PREFIX_PATTERN.fullmatch(prefix):
        raise ConfigError(
            f"table prefix {prefix!r} must be a plain SQL name (letters, digits, underscore; "
            "not starting with a digit; at most 48 characters)"
        )
    return prefix


class SqlLayout(Protocol):
    """Where a store's records and postings are: made for a :class:`SqlStorage` (and working
    through its transactions and dialect) once the store holds an index."""

    #: Whether adds and removals take the writer lock (a cut rewrites shared tables).
    locks_writes: bool
    #: Queries per :meth:`candidates` call (see :attr:`Storage.query_batch`).
    query_batch: int
    #: See :attr:`Storage.screens_first`.
    screens_first: bool

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables that hold record rows."""
        ...

    def create(self, cursor: Any) -> None:
        """The layout's tables and meta rows in a new store (the meta table exists)."""

    def add_many(self, batch: RecordBatch) -> None:
        """Store new records and their postings in one transaction."""

    def removed(self, cursor: Any, count: int) -> None:
        """``count`` records' rows were deleted in the open transaction."""

    def candidates(self, postings: UInt64Array, records: bool, screen: Screen | None) -> Candidates:
        """The records under each query's posting keys (see :meth:`Storage.candidates`)."""
        ...

    def posting_counts(self) -> list[PostingCounts]:
        """Statistics of each posting column."""
        ...

    def drop(self, cursor: Any) -> None:
        """Drop the layout's tables."""


class SqlStorage(Storage):
    """An index's records, postings and meta in a SQL database: a :class:`SqlDialect` (the
    engine, its connection) and, once the store holds an index, an :class:`SqlLayout`."""

    reads_records = True

    def __init__(
        self, dialect: SqlDialect, prefix: str = DEFAULT_PREFIX, new_layout: str | None = None
    ) -> None:
        """``new_layout``: the layout (a name of ``dialect.layouts``) of a store created here;
        an existing store keeps its own."""
        super().__init__()
        self.dialect = dialect
        self.name = dialect.name
        self.where = dialect.where
        self.prefix = check_prefix(prefix)
        self.meta_table = f"{self.prefix}_meta"
        self.records_table = f"{self.prefix}_records"
        self.recent_table = f"{self.prefix}_recent"
        self.values_table = f"{self.prefix}_values"
        self.new_layout = new_layout or dialect.layouts[0]
        self._layout: SqlLayout | None = None
        #: Whether the values table is known to exist (stores made before it lack it).
        self._values_made = False
        #: Whether the records tables have the ``digest`` column (stores made before it do not).
        self._digests = False
        self._depth = 0
        self._committed: list[Callable[[], None]] = []

    @property
    def path(self) -> str:
        """The database file of an embedded engine (SQLite; '' for a server's)."""
        return self.dialect.path

    @property
    def created_file(self) -> bool:
        """Whether opening this store created its file (SQLite)."""
        return self.dialect.created_file

    # -- transactions --------------------------------------------------------------------
    @contextlib.contextmanager
    def _transaction(self, write: bool = False, exclusive: bool = False) -> Iterator[Any]:
        """One transaction for the outermost call; nested calls join it. The connection is
        shared by this process's threads one transaction at a time."""
        with self._local_lock:
            if (write or exclusive) and not self._depth:
                self.dialect.make_writable()
            with self._driver_errors(), self._open_transaction(write, exclusive) as cursor:
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
            if self.dialect.reconnects and self.dialect.connection_broken():
                raise StorageUnavailableError(
                    f"lost the connection to {self.where} ({first_line(exc)}): the call is all or "
                    "nothing, so retry it; the next call reconnects"
                ) from exc
            translated = self.dialect.driver_error(exc)
            if translated is None:
                raise
            raise translated from exc

    @contextlib.contextmanager
    def _open_transaction(self, write: bool, exclusive: bool) -> Iterator[Any]:
        if self._depth:
            cursor = self.dialect.connection.cursor()
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
                    self.dialect.unlock(cursor, self.records_table)
            cursor.close()
        committed, self._committed = self._committed, []
        for function in committed:
            function()

    def _begun(self, write: bool) -> Any:
        """A cursor in a new transaction. A connection the server closed (a restart, an idle
        timeout) shows when BEGIN fails, before anything of the call was sent, so it is
        replaced and BEGIN tried again, with the pauses of :data:`RECONNECT_PAUSES_S`. Only a
        new connection is needed: locks (advisory, GET_LOCK) end with the old session, session
        settings are the dialect's, and what this process keeps in memory about the store
        follows commits it saw (:meth:`_on_commit`), never a call that failed."""
        dialect = self.dialect
        if not dialect.reconnects:
            cursor = dialect.connection.cursor()
            dialect.begin(cursor, write)
            return cursor
        last: BaseException | None = None
        for attempt, pause in enumerate(RECONNECT_PAUSES_S):
            time.sleep(pause)
            try:
                if attempt or dialect.connection_broken():
                    dialect.reconnect()
                cursor = dialect.connection.cursor()
                dialect.begin(cursor, write)
                return cursor
            except Exception as exc:
                if not dialect.connection_broken():
                    raise
                last = exc
        raise StorageUnavailableError(
            f"cannot reach {self.where} ({first_line(last)}) after {len(RECONNECT_PAUSES_S)} attempts "
            f"over {sum(RECONNECT_PAUSES_S):.1f} s; is the server running? The next call tries again"
        ) from last

    def _lock(self, cursor: Any) -> None:
        """Take the cross-process writer lock inside the open transaction."""
        self.dialect.lock(cursor, self.records_table)

    def _on_commit(self, function: Callable[[], None]) -> None:
        """Run ``function`` once the open transaction commits (never if it rolls back): what
        a process keeps in memory about the store follows only what the store holds."""
        self._committed.append(function)

    def _table_exists(self, table: str) -> bool:
        with self._transaction() as cursor:
            return self.dialect.table_exists(cursor, table)

    def reachable(self, timeout_s: float) -> str | None:
        return self.dialect.reachable(timeout_s)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        if self.dialect.ddl_commits and not self._depth:
            # Values written under the lock need their table, and where DDL commits the open
            # transaction (and a transaction cannot use a table made after its first read) it
            # cannot be made inside: a store made before the table gets it here.
            self._make_values_table()
        self.layout  # noqa: B018 - read outside the lock's transaction
        with self._transaction(exclusive=True):
            yield

    def close(self) -> None:
        self.dialect.close()

    def discard(self) -> None:
        self.dialect.discard()

    # -- meta and layout -----------------------------------------------------------------
    def read_meta(self) -> dict[str, Any] | None:
        if not self._table_exists(self.meta_table):
            return None
        row = self._meta_row("config")
        if row is None:  # the tables and the row are written in one transaction
            raise StorageDamagedError(
                f"{self.where} has the table {self.meta_table} but no index settings in it: the store "
                "is damaged; restore it from a backup or rebuild the index with `neardup index add`"
            )
        return load_meta(row, self.where)

    def _meta_row(self, name: str) -> str | None:
        with self._transaction() as cursor:
            cursor.execute(
                f"SELECT value FROM {self.meta_table} WHERE name = {self.dialect.placeholder}", (name,)
            )
            row = cursor.fetchone()
        return None if row is None else str(row[0])

    def write_meta(self, meta: dict[str, Any]) -> None:
        tables = self.shape.columns
        if tables > MAX_SQL_TABLES:
            raise ConfigError(
                f"the block scheme needs {tables} tables; SQL stores hold at most {MAX_SQL_TABLES} "
                "indexed block columns: choose a scheme with fewer tables (e.g. BlockScheme(64, 3, 4, 1)) "
                "or a smaller max_distance"
            )
        p = self.dialect.placeholder
        config = dump_meta(meta)
        with self._transaction(write=True) as cursor:
            self.dialect.check_sizes(cursor, [config])
            self.dialect.check_creatable(cursor)
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.meta_table} "
                f"(name VARCHAR(64) PRIMARY KEY, value {self.dialect.meta_type()} NOT NULL)"
                f"{self.dialect.table_options()}"
            )
            NEW_LAYOUTS[self.new_layout](self).create(cursor)
            self._make_values_table_in(cursor)
            cursor.execute(
                f"INSERT INTO {self.meta_table} (name, value) VALUES ({p}, {p}), ({p}, {p})",
                ("config", config, DIGESTS_ROW, DIGEST_KIND),
            )
            self._note_values_table(True)
        self._layout = None

    def attach(self, shape: RecordShape) -> None:
        super().attach(shape)
        self._layout = None

    @property
    def screens_first(self) -> bool:  # type: ignore[override]
        return self.layout.screens_first

    @property
    def query_batch(self) -> int:  # type: ignore[override]
        """The layout's: a runs store takes a batch's keys as one parameter, the column
        layout as IN lists, which stay within every server's limits at fewer queries."""
        return self.layout.query_batch

    @property
    def layout(self) -> SqlLayout:
        """The store's layout, read from its meta rows when first needed (:meth:`attach`
        may come before the tables exist)."""
        if self._layout is None:
            self._digests = self._meta_row(DIGESTS_ROW) is not None
            # Stores without the row were made before runs, in seed 002's column layout.
            layout = (RunsLayout if self._meta_row("layout") == LAYOUT else ColumnsLayout)(self)
            self._layout = layout
            self.dialect.opened(self)
        return self._layout

    def record_columns(self, id_column: str) -> str:
        """The columns every layout's record table has, as SQL column definitions."""
        key_type, blob_type = self.dialect.key_type, self.dialect.blob_type
        return (
            f"{id_column}, key_text {key_type} NOT NULL, key_int SMALLINT NOT NULL, "
            f"fingerprint {blob_type} NOT NULL, cluster_text {key_type}, "
            f"cluster_int SMALLINT, signature {self.dialect.signature_type()}, digest {blob_type}"
        )

    @property
    def record_fields(self) -> tuple[str, ...]:
        """The columns of a record beyond its key and fingerprint, as :func:`stored_record`
        takes them: :data:`RECORD_COLUMNS`, and ``digest`` where the store has it."""
        self.layout  # noqa: B018 - read with the layout
        return (*RECORD_COLUMNS, "digest") if self._digests else RECORD_COLUMNS

    def record_values(self, batch: RecordBatch, row: int) -> tuple[Any, ...]:
        """The :attr:`record_fields` values of one record of a batch."""
        cluster = batch.cluster(row)
        cluster_text, cluster_int = (None, None) if cluster is None else key_columns(cluster)
        values = (cluster_text, cluster_int, batch.signature(row))
        return (*values, batch.digest(row)) if self._digests else values

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables that hold records."""
        return self.layout.tables

    # -- records -------------------------------------------------------------------------
    def add_many(self, batch: RecordBatch) -> None:
        if not len(batch):
            return
        self.dialect.check_keys(batch.keys)
        self.layout.add_many(batch)
        self.dialect.added(self, len(batch))

    def remove_many(self, keys: Sequence[Key]) -> None:
        """Delete the record rows (a layout that keeps postings apart skips and later drops
        the postings of records without a row)."""
        if not keys:
            return
        layout = self.layout
        with self._transaction(write=True) as cursor:
            if layout.locks_writes:
                self._lock(cursor)
            stored = set(self.stored_keys(cursor, keys))
            missing = [key for key in keys if key not in stored]
            if missing:
                raise key_not_found_error(missing[0], len(missing), self.where)
            p = self.dialect.placeholder
            unique = list(dict.fromkeys(keys))
            for name in layout.tables:
                cursor.executemany(
                    f"DELETE FROM {name} WHERE key_text = {p} AND key_int = {p}",
                    [key_columns(key) for key in unique],
                )
            layout.removed(cursor, len(unique))

    def get_many(self, keys: Sequence[Key]) -> list[StoredRecord | None]:
        found: dict[Key, StoredRecord] = {}
        fields = ", ".join(self.record_fields)
        with self._transaction() as cursor:
            for chunk in _chunks(list(keys), KEY_CHUNK):
                condition, values = self.dialect.one_of(
                    "key_text", list({key_columns(key)[0] for key in chunk})
                )
                for name in self.tables:
                    rows = self.dialect.fetch(
                        cursor,
                        f"SELECT key_text, key_int, fingerprint, {fields} FROM {name} WHERE {condition}",
                        values,
                    )
                    for record in self.records_of(rows):
                        found[record.key] = record
        return [found.get(key) for key in keys]

    def candidates(
        self, postings: UInt64Array, *, records: bool = False, screen: Screen | None = None
    ) -> Candidates:
        return self.layout.candidates(postings, records, screen)

    def size(self) -> int:
        total = 0
        tables = self.tables
        with self._transaction() as cursor:
            for name in tables:
                cursor.execute(f"SELECT COUNT(*) FROM {name}")
                total += int(cursor.fetchone()[0])
        return total

    def scan(self, batch_size: int = 10_000) -> Iterator[list[StoredRecord]]:
        """The records of each record table in id order (the column layout's recent ones
        last: a move made by a writer meanwhile may show a record twice or not at all, so scan
        a store no one writes to)."""
        fields = ", ".join(self.record_fields)
        for name in self.tables:
            last = -1
            while True:
                with self._transaction() as cursor:
                    rows = self.dialect.fetch(
                        cursor,
                        f"SELECT key_text, key_int, fingerprint, {fields}, id FROM {name} "
                        f"WHERE id > {self.dialect.placeholder} ORDER BY id LIMIT {int(batch_size)}",
                        (last,),
                    )
                if not rows:
                    break
                last = int(rows[-1][-1])
                yield self.records_of([row[:-1] for row in rows])

    def posting_counts(self) -> list[PostingCounts]:
        return self.layout.posting_counts()

    def drop(self) -> None:
        layout = self.layout
        with self._transaction(write=True) as cursor:
            layout.drop(cursor)
            self._drop_values(cursor)
            cursor.execute(f"DROP TABLE IF EXISTS {self.meta_table}")
        self._layout = None

    def stored_keys(self, cursor: Any, keys: Sequence[Key]) -> list[Key]:
        """The keys of ``keys`` that have a record row."""
        wanted = {key_columns(key) for key in keys}
        stored: list[Key] = []
        for chunk in _chunks(sorted({text for text, _ in wanted}), KEY_CHUNK):
            condition, values = self.dialect.one_of("key_text", chunk)
            for name in self.tables:
                cursor.execute(f"SELECT key_text, key_int FROM {name} WHERE {condition}", values)
                for text, is_int in cursor.fetchall():
                    if (text, int(is_int)) in wanted:
                        stored.append(key_from_columns(text, is_int))
        return stored

    def check_new_keys(self, cursor: Any, keys: Sequence[Key]) -> None:
        """Refuse a batch that names a stored key, before anything is written."""
        stored = self.stored_keys(cursor, keys)
        if stored:
            raise key_exists_error(stored[0], len(stored), self.where)

    def records_of(self, rows: Sequence[Sequence[Any]]) -> list[StoredRecord]:
        """Records from rows of (key_text, key_int, fingerprint, :attr:`record_fields`)."""
        if not rows:
            return []
        words = bytes_to_words([bytes(row[2]) for row in rows], self.shape.words)
        width = self.shape.fingerprint_words
        return [
            stored_record(key_from_columns(row[0], row[1]), words_to_int(words[position], width), row[3:])
            for position, row in enumerate(rows)
        ]

    # -- values --------------------------------------------------------------------------
    def put_values(self, name: str, keys: Sequence[Key], values: Sequence[bytes]) -> None:
        """One upsert statement per run of keys (:meth:`SqlDialect.upsert_values`), never a
        delete and an insert; the keys in order, as the primary key is."""
        check_value_map(name, keys, values)
        plain = plain_keys(keys)
        check_keys(plain)
        rows = _value_rows(plain, values)
        if not rows:
            return
        self._make_values_table()
        # Under the writer lock, as check-and-add writes: two writers of the same new keys would
        # otherwise collide on the primary key (PostgreSQL) or deadlock on gap locks (MariaDB).
        with self._transaction(write=True, exclusive=True) as cursor:
            self.dialect.check_sizes(cursor, values)
            for run in _value_statements(rows, self.dialect.value_rows):
                self.dialect.upsert_values(cursor, self.values_table, name, run)

    def get_values(self, name: str, keys: Sequence[Key]) -> list[bytes | None]:
        """One statement per :attr:`~.sql_dialects.SqlDialect.values_per_read` keys; a batch
        whose keys are all ints (or all texts) names its key type once, so each key is one
        primary-key lookup."""
        check_value_map(name, keys)
        plain = plain_keys(keys)
        if not plain or not self._values_table_ready():
            return [None] * len(plain)
        kind = key_kind(plain)
        p = self.dialect.placeholder
        if kind is not None:
            texts = list(map(str, plain)) if kind else plain
            found: dict[Any, Any] = {}
            with self._transaction() as cursor:
                # in key order: each statement's keys then lie close together in the primary key,
                # and a batch's statements walk it once, reading its pages in order
                for chunk in _chunks(sorted(set(texts)), self.dialect.values_per_read):
                    condition, parameters = self.dialect.one_of_texts("key_text", chunk)
                    statement = (
                        f"SELECT key_text, value FROM {self.values_table} "
                        f"WHERE name = {p} AND key_int = {p} AND {condition}"
                    )
                    found.update(self.dialect.fetch(cursor, statement, [name, kind, *parameters]))
            if set(map(type, found.values())) - {bytes}:
                found = {text: bytes(value) for text, value in found.items()}
            return [found.get(text) for text in texts]
        wanted = [key_columns(key) if lookable(key) else None for key in plain]
        both: dict[tuple[str, int], bytes] = {}
        with self._transaction() as cursor:
            for chunk in _chunks(
                sorted({columns[0] for columns in wanted if columns is not None}),
                self.dialect.values_per_read,
            ):
                condition, parameters = self.dialect.one_of_texts("key_text", chunk)
                statement = (
                    f"SELECT key_text, key_int, value FROM {self.values_table} "
                    f"WHERE name = {p} AND {condition}"
                )
                for text, is_int, value in self.dialect.fetch(cursor, statement, [name, *parameters]):
                    both[text, int(is_int)] = value
        return [None if columns is None else _as_bytes(both.get(columns)) for columns in wanted]

    def scan_values(self, name: str, batch_size: int = 10_000) -> Iterator[list[tuple[Key, bytes]]]:
        """In key order, resuming after the last key read (one statement a batch). The resume
        condition opens with ``key_text >= last`` so that every engine seeks the primary key
        to it: ``key_text > last OR (…)`` alone is read from the map's first key each time."""
        check_value_map(name, [])
        if not self._values_table_ready():
            return
        p = self.dialect.placeholder
        last: tuple[str, int] | None = None
        while True:
            after = "" if last is None else f" AND key_text >= {p} AND (key_text > {p} OR key_int > {p})"
            parameters: list[Any] = [name] if last is None else [name, last[0], last[0], last[1]]
            with self._transaction() as cursor:
                rows = self.dialect.fetch(
                    cursor,
                    f"SELECT key_text, key_int, value FROM {self.values_table} WHERE name = {p}{after} "
                    f"ORDER BY key_text, key_int LIMIT {int(batch_size)}",
                    parameters,
                )
            if not rows:
                return
            last = (rows[-1][0], int(rows[-1][1]))
            yield [(key_from_columns(text, is_int), bytes(value)) for text, is_int, value in rows]

    def remove_values(self, name: str, keys: Sequence[Key]) -> None:
        check_value_map(name, keys)
        gone = sorted({key_columns(key) for key in plain_keys(keys) if lookable(key)})
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
                condition, parameters = self.dialect.one_of("key_text", texts)
                p = self.dialect.placeholder
                cursor.execute(
                    f"DELETE FROM {self.values_table} WHERE name = {p} AND key_int = {p} AND {condition}",
                    [name, is_int, *parameters],
                )

    def _make_values_table_in(self, cursor: Any) -> None:
        dialect = self.dialect
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {self.values_table} (name VARCHAR(32) NOT NULL, "
            f"key_text {dialect.key_type} NOT NULL, key_int SMALLINT NOT NULL, value {dialect.value_type()} "
            f"NOT NULL, PRIMARY KEY (name, key_text, key_int)){dialect.table_options()}"
            f"{dialect.values_table_options()}"
        )
        for statement in dialect.values_table_made(self.values_table):
            cursor.execute(statement)

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
        if self._depth and self.dialect.ddl_commits and self.dialect.reconnects:
            with self._local_lock, self._driver_errors():
                connection = self.dialect.connect(RECONNECT_TIMEOUT_S)
                try:
                    cursor = connection.cursor()
                    self._make_values_table_in(cursor)
                    cursor.close()
                finally:
                    connection.close()
            self._values_made = True
            return
        try:
            with self._transaction(write=True) as cursor:
                self._make_values_table_in(cursor)
                self._note_values_table(True)
        except Exception:
            # Another process may have made it meanwhile (PostgreSQL refuses one of two
            # concurrent CREATE TABLE IF NOT EXISTS); only a table still missing is an error.
            if self._depth or not self._table_exists(self.values_table):
                raise
            self._values_made = True

    def _drop_values(self, cursor: Any) -> None:
        cursor.execute(f"DROP TABLE IF EXISTS {self.values_table}")
        self._note_values_table(False)


#: The layouts a new store may be given (``?layout=`` of SQLite, a dialect's default).
NEW_LAYOUTS: dict[str, Callable[[SqlStorage], SqlLayout]] = {"runs": RunsLayout, "columns": ColumnsLayout}


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


def _value_rows(keys: list[Key], values: Sequence[bytes]) -> list[tuple[str, int, bytes]]:
    """(key_text, key_int, value) of each key, in key order; a key given twice keeps its
    later value."""
    kind = key_kind(keys)
    if kind is None:
        latest = {key_columns(key): value for key, value in zip(keys, values, strict=True)}
        return [(text, is_int, latest[text, is_int]) for text, is_int in sorted(latest)]
    texts: dict[str, bytes] = dict(
        zip(map(str, keys) if kind else cast("list[str]", keys), values, strict=True)
    )
    return [(text, kind, texts[text]) for text in sorted(texts)]


def _as_bytes(value: Any) -> bytes | None:
    """A value as a driver returned it (bytes; memoryview from PostgreSQL's bytea)."""
    return value if value is None or type(value) is bytes else bytes(value)


def _value_statements(
    rows: list[tuple[str, int, bytes]], most: int
) -> Iterator[list[tuple[str, int, bytes]]]:
    """``rows`` (key_text, key_int, value) in runs of at most ``most`` (the dialect's
    :attr:`~.sql_dialects.SqlDialect.value_rows`) whose values total at most
    :data:`VALUE_BYTES` (a longer value goes alone), one statement each."""
    if sum(len(row[2]) for row in rows) <= VALUE_BYTES:
        for start in range(0, len(rows), most):
            yield rows[start : start + most]
        return
    run: list[tuple[str, int, bytes]] = []
    size = 0
    for row in rows:
        length = len(row[2])
        if run and (len(run) == most or size + length > VALUE_BYTES):
            yield run
            run, size = [], 0
        run.append(row)
        size += length
    if run:
        yield run


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]

"""SQLite, the embedded default store: ``sqlite:///relative/path.db``, ``sqlite:////abs/path.db``.
SQLite's dialect of the one SQL store (:mod:`neardup.storage.sql`).

WAL journal and ``synchronous=FULL``: an acknowledged batch survives a killed process (and a
power cut), readers never block the writer, and one writer at a time holds ``BEGIN
IMMEDIATE``, which is also the cross-process lock of check-and-add.

An existing file is first opened read-only and stays so until something is written: queries
and stats work on a read-only file or file system (``immutable=1`` where not even the WAL
index can be made), and a database that is not a neardup index is never switched to WAL or
given tables unless asked (``?create_in_existing=1``, ``--create-in-existing``).
URL options: ``?table=PREFIX``, ``?timeout=SECONDS`` (how long to wait for another writer's
lock, default 60), ``?create_in_existing=1``, ``?layout=runs|columns`` (for a new store, default runs;
an existing one keeps its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, quote, unquote

import numpy as np

from ..errors import (
    ConfigError,
    ForeignStoreError,
    NeardupError,
    StorageBackendError,
    StorageBusyError,
    StorageDamagedError,
    StorageFullError,
    StorageReadOnlyError,
    StorageUnavailableError,
)
from . import check_options
from .base import IntArray, UInt64Array, joined_words
from .runs import KEYS_PER_READ, TABLE_BITS
from .sql import DEFAULT_PREFIX, SqlStorage
from .sql_dialects import IDS_PER_READ, SqlDialect
from .urls import redacted

#: Seconds to wait for another process's write lock before giving up.
BUSY_TIMEOUT = 60.0


#: Page cache per connection, KiB. SQLite's default (2 MiB) holds a sliver of a large index,
#: so each posting insert would read its B-tree pages back from the OS. Pages are allocated
#: as they are read, so a small index costs no more.
CACHE_KIB = 1 << 20
#: Bytes of the file read through a memory map (SQLite caps it at its build's limit): a read
#: then copies the OS's cached page once, into the value asked for, where the page cache would
#: copy it into a page of its own first (a records check reads hundreds of MB of block parts).
MMAP_BYTES = 1 << 40


class SqliteDialect(SqlDialect):
    """SQLite over one file: its connection (read-only until the first write), ``BEGIN
    IMMEDIATE`` for writers, and the runs layout's statements (runs clustered on (k, id),
    key lists as JSON, merges in steps after the add)."""

    name = "sqlite"
    #: New SQLite stores get runs, as PostgreSQL's do (``?layout=columns`` gives seed 002's
    #: table): in the column layout, moving the recent rows into the 16 posting indexes costs
    #: a share of every batch that a larger recent table does not shrink, and runs sustain more
    #: check-and-add at 10^6 stored (docs/storage.md, "Measured speed").
    layouts = ("runs", "columns")
    runs_id_column = "id INTEGER PRIMARY KEY"  # the rowid itself
    merge_in_steps = True

    def __init__(self, path: str, *, timeout: float = BUSY_TIMEOUT, create_in_existing: bool = False) -> None:
        self.path = path
        self.timeout = timeout
        #: Add neardup's tables to a database that has other tables (see ForeignStoreError).
        self.create_in_existing = create_in_existing
        self.created_file = path != ":memory:" and not Path(path).exists()
        if self.created_file:
            folder = Path(path).expanduser().resolve().parent
            if not folder.is_dir():
                raise StorageUnavailableError(
                    f"cannot create the SQLite store {path!r}: folder {str(folder)!r} does not exist; "
                    "create it first"
                )
        where = f"sqlite:///{path}"
        #: True while the connection is read-only (an existing file before its first write).
        self.read_only = path != ":memory:" and not self.created_file
        with sqlite_errors(where, timeout, opening=True):
            connection = self._connect_read_only(where) if self.read_only else self._connect_writable()
        super().__init__(connection, where)

    # -- connections ---------------------------------------------------------------------
    def _connect(self, target: str, uri: bool = False) -> sqlite3.Connection:
        connection = sqlite3.connect(
            target, uri=uri, isolation_level=None, check_same_thread=False, timeout=self.timeout
        )
        connection.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        connection.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        return connection

    def _connect_read_only(self, where: str) -> sqlite3.Connection:
        """A read-only connection; where the WAL index cannot be created (a read-only folder
        or file system, where no one can write either) the file is read as immutable."""
        target = f"file:{quote(os.path.abspath(self.path))}?mode=ro"
        connection = self._connect(target, uri=True)
        try:
            connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as exc:
            connection.close()
            if _writable(self.path) or not _error_name(exc).startswith("SQLITE_CANTOPEN"):
                raise
            _refuse_unreadable_wal(self.path, where)
            connection = self._connect(target + "&immutable=1", uri=True)
            connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        connection.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        return connection

    def _connect_writable(self) -> sqlite3.Connection:
        """A read-write connection, in WAL mode unless the file is another application's."""
        connection = self._connect(self.path)
        try:
            if self.path == ":memory:" or not _foreign_tables(connection):
                connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = FULL")
            connection.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        except BaseException:
            connection.close()
            raise
        return connection

    def make_writable(self) -> None:
        if not self.read_only:
            return
        if not _writable(self.path):
            raise StorageReadOnlyError(
                f"{self.where} is on a read-only file or folder; queries and stats work, but adding "
                "and removing need write access to the file and its folder"
            )
        with sqlite_errors(self.where, self.timeout):
            connection = self._connect_writable()
        self.connection.close()
        self.connection = connection
        self.read_only = False

    def discard(self) -> None:
        self.close()
        if self.created_file:
            for suffix in ("", "-wal", "-shm"):
                Path(self.path + suffix).unlink(missing_ok=True)

    # -- transactions --------------------------------------------------------------------
    def begin(self, cursor: Any, write: bool) -> None:
        # IMMEDIATE takes the write lock up front, so a writer that reads first (the key check,
        # check-and-add) is never refused the upgrade later; reads need no lock in WAL mode.
        cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def values_table_options(self) -> str:
        # The rows kept in primary-key order: a value map is read and written by key only, and
        # a rowid table would keep each key twice (in the table and in its key index), so a
        # write touches two random pages where this touches one.
        return " WITHOUT ROWID"

    #: One statement for all the rows (:meth:`upsert_values` binds them one by one in C).
    value_rows = 1 << 30

    def upsert_values(
        self, cursor: Any, table: str, name: str, rows: Sequence[tuple[str, int, bytes]]
    ) -> None:
        cursor.executemany(
            f"INSERT INTO {table} (name, key_text, key_int, value) VALUES (?, ?, ?, ?){self.upsert_clause()}",
            [(name, *row) for row in rows],
        )

    def check_creatable(self, cursor: Any) -> None:
        """Refuse to create an index's tables in a database of another application."""
        foreign = _foreign_tables(self.connection)
        if foreign and not self.create_in_existing:
            listed = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise ForeignStoreError(
                f"{self.where} is a database of another application (tables {listed}) with no "
                "neardup index; neardup adds no tables to it unless asked: use a new file, or "
                "pass --create-in-existing (create_in_existing=1 in the URL)"
            )

    def table_exists(self, cursor: Any, table: str) -> bool:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
        return cursor.fetchone() is not None

    def integrity_errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.IntegrityError,)

    def driver_error(self, exc: BaseException) -> NeardupError | None:
        if isinstance(exc, sqlite3.Error) and not isinstance(exc, sqlite3.IntegrityError):
            return storage_error(exc, self.where, self.timeout)
        return None

    # -- the runs layout -----------------------------------------------------------------
    def insert_postings(self, cursor: Any, table: str, keys: IntArray, ids: IntArray) -> None:
        cursor.executemany(
            f"INSERT INTO {table} (k, id) VALUES (?, ?)", zip(keys.tolist(), ids.tolist(), strict=True)
        )

    def create_run(self, cursor: Any, table: str, select: str | tuple[IntArray, IntArray]) -> int:
        """A table clustered on (k, id), filled in order (appends, no index to build): rows
        given sorted are appended as they come, no sorter."""
        self.create_run_table(cursor, table)
        if isinstance(select, tuple):
            self.insert_postings(cursor, table, *select)
            return int(select[0].size)
        cursor.execute(f"INSERT INTO {table} (k, id) {select} ORDER BY k, id")
        return int(cursor.rowcount)

    def create_run_table(self, cursor: Any, table: str) -> None:
        cursor.execute(
            f"CREATE TABLE {table} (k INTEGER NOT NULL, id INTEGER NOT NULL, "
            "PRIMARY KEY (k, id)) WITHOUT ROWID"
        )

    def max_length(self, cursor: Any) -> int:
        """SQLite's length limit."""
        getlimit = getattr(cursor.connection, "getlimit", None)  # Python 3.11+
        return int(getlimit(sqlite3.SQLITE_LIMIT_LENGTH)) if getlimit else 1_000_000_000

    def delete_filter(self, cursor: Any, filters_table: str, table: str) -> None:
        cursor.execute(
            f"DELETE FROM {filters_table} WHERE name = ? OR substr(name, 1, ?) = ?",
            (table, len(table) + 1, f"{table}#"),
        )

    def read_filters(self, cursor: Any, filters_table: str, names: list[str]) -> list[tuple[str, bytes]]:
        cursor.execute(
            f"SELECT name, bits FROM {filters_table} WHERE (CASE WHEN instr(name, '#') "
            "THEN substr(name, 1, instr(name, '#') - 1) ELSE name END) IN (SELECT value FROM json_each(?))",
            (json.dumps(names),),
        )
        return [(row[0], bytes(row[1])) for row in cursor.fetchall()]

    def one_of_keys(self, values: IntArray, column: str = "k") -> tuple[str, Any]:
        return f"{column} IN (SELECT value FROM json_each(?))", json.dumps(values.tolist())

    def int_rows(self, cursor: Any, statement: str, parameters: list[Any], columns: int) -> IntArray:
        """Each column as one comma-separated text (``group_concat``, in one pass, so in one
        row order), parsed by numpy: a Python tuple a row cost more than the engine's reads.
        A result past SQLite's length limit is read row by row."""
        names = ", ".join(f"c{column}" for column in range(columns))
        texts = ", ".join(f"group_concat(c{column})" for column in range(columns))
        try:
            cursor.execute(f"WITH found({names}) AS ({statement}) SELECT {texts} FROM found", parameters)
        except sqlite3.DataError:
            return super().int_rows(cursor, statement, parameters, columns)
        read = cursor.fetchone()
        if read[0] is None:
            return np.empty((0, columns), dtype=np.int64)
        return np.stack([np.fromstring(text, dtype=np.int64, sep=",") for text in read], axis=1)

    def words_by_id(
        self, cursor: Any, ids: IntArray, records_table: str, width: int
    ) -> tuple[IntArray, UInt64Array]:
        """As :meth:`_words_where`; past SQLite's length limit, row by row."""
        parts = []
        for start in range(0, len(ids), IDS_PER_READ):
            condition, parameter = self.one_of_keys(ids[start : start + IDS_PER_READ], "id")
            part = self._words_where(cursor, condition, [parameter], records_table, width)
            if part is None:
                return super().words_by_id(cursor, ids, records_table, width)
            parts.append(part)
        return _joined(parts, width)

    def words_below(
        self, cursor: Any, stop: int, records_table: str, width: int
    ) -> tuple[IntArray, UInt64Array]:
        """As :meth:`_words_where`, :data:`IDS_PER_READ` ids a statement; past SQLite's
        length limit, row by row."""
        parts = []
        for start in range(0, stop, IDS_PER_READ):
            condition = "id >= ? AND id < ?"
            part = self._words_where(
                cursor, condition, [start, min(start + IDS_PER_READ, stop)], records_table, width
            )
            if part is None:
                return super().words_below(cursor, stop, records_table, width)
            parts.append(part)
        return _joined(parts, width)

    def _words_where(
        self, cursor: Any, condition: str, parameters: list[Any], records_table: str, width: int
    ) -> tuple[IntArray, UInt64Array] | None:
        """(ids, words) of the records where ``condition`` holds, the ids as one comma-separated
        text and the words as one hex text (as :meth:`int_rows`), sorted by id after; None
        past SQLite's length limit."""
        texts = "group_concat(id), group_concat(hex(fingerprint), '')"
        statement = f"SELECT {texts} FROM {records_table} WHERE {condition}"
        try:
            cursor.execute(statement, parameters)
        except sqlite3.DataError:
            return None
        listed, words = cursor.fetchone()
        if listed is None:
            return np.empty(0, np.int64), np.empty((0, width), np.uint64)
        read = np.fromstring(listed, dtype=np.int64, sep=",")
        found = joined_words(bytes.fromhex(words), read.size, width)
        order = np.argsort(read, kind="stable")
        return read[order], found[order]

    def postings_between(
        self, cursor: Any, postings_table: str, first: int, stop: int
    ) -> tuple[IntArray, IntArray]:
        """Read in spans of ids whose texts stay under the length limit (at most
        2^TABLE_BITS postings a record)."""
        cursor.execute(f"SELECT MIN(id) FROM {postings_table} WHERE id >= ?", (first,))
        low = cursor.fetchone()[0]
        per_read = max(1, min(KEYS_PER_READ, (self.max_length(cursor) - 64) // 21))
        span = max(1, per_read >> TABLE_BITS)
        found_keys, found_ids = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
        for start in range(int(low), stop, span) if low is not None else ():
            cursor.execute(
                f"SELECT group_concat(k), group_concat(id) FROM {postings_table} WHERE id >= ? AND id < ?",
                (start, min(start + span, stop)),
            )
            keys, ids = cursor.fetchone()
            if keys:
                found_keys.append(np.fromstring(keys, dtype=np.int64, sep=","))
                found_ids.append(np.fromstring(ids, dtype=np.int64, sep=","))
        return np.concatenate(found_keys), np.concatenate(found_ids)

    def create_packed_postings(self, cursor: Any, table: str) -> None:
        cursor.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, keys TEXT NOT NULL)")

    def insert_packed(self, cursor: Any, table: str, keys: IntArray, ids: IntArray) -> None:
        """Each record's keys as a JSON array, the batch in one statement (json.dumps and
        ``json_each`` run in C; a row of Python parameters per record cost more)."""
        first = int(ids[0]) if ids.size else 0
        if not np.array_equal(ids, np.arange(first, first + ids.size)):  # reserve_ids's are
            rows = zip(ids.tolist(), map(json.dumps, keys.tolist()), strict=True)
            cursor.executemany(f"INSERT INTO {table} (id, keys) VALUES (?, ?)", rows)
            return
        cursor.execute(
            f"INSERT INTO {table} (id, keys) SELECT ? + key, value FROM json_each(?)",
            (first, json.dumps(keys.tolist())),
        )

    def unpacked(self, table: str) -> str:
        return f"SELECT j.value AS k, p.id AS id FROM {table} AS p, json_each(p.keys) AS j"

    def packed_between(self, cursor: Any, table: str, first: int, stop: int) -> tuple[IntArray, IntArray]:
        """Read in spans of ids whose texts stay under the length limit (at most
        2^TABLE_BITS keys a record, 21 characters each), brackets cut off in SQL."""
        per_read = max(1, min(KEYS_PER_READ, (self.max_length(cursor) - 64) // 21))
        span = max(1, per_read >> TABLE_BITS)
        cursor.execute(f"SELECT MIN(id), MAX(id) FROM {table} WHERE id >= ? AND id < ?", (first, stop))
        low, high = cursor.fetchone()
        found_keys, found_ids = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
        for start in range(int(low), int(high) + 1, span) if low is not None else ():
            cursor.execute(
                "SELECT group_concat(substr(keys, 2, length(keys) - 2)), group_concat(id), "
                "group_concat(length(keys) - length(replace(keys, ',', '')) + 1) "
                f"FROM {table} WHERE id >= ? AND id < ?",
                (start, min(start + span, stop)),
            )
            keys, ids, counts = cursor.fetchone()
            if keys:
                found_keys.append(np.fromstring(keys, dtype=np.int64, sep=","))
                sizes = np.fromstring(counts, dtype=np.int64, sep=",")
                found_ids.append(np.repeat(np.fromstring(ids, dtype=np.int64, sep=","), sizes))
        return np.concatenate(found_keys), np.concatenate(found_ids)


class _OfSqlite(type):
    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, SqlStorage) and isinstance(instance.dialect, SqliteDialect)


class SqliteStorage(metaclass=_OfSqlite):
    """The SQL stores in an SQLite file: ``isinstance(store, SqliteStorage)`` asks whether a
    :class:`~.sql.SqlStorage` speaks SQLite (there is one SQL store class, composed of its
    dialect and layout; this names the stores of one dialect and what they have)."""

    dialect: SqliteDialect
    prefix: str
    path: str
    created_file: bool


def storage_error(exc: sqlite3.Error, where: str, timeout: float, opening: bool = False) -> NeardupError:
    """One error per SQLite failure a user can act on, naming the file and the fix."""
    name = _error_name(exc)
    if name.startswith("SQLITE_FULL"):
        return StorageFullError(
            f"{where}: the disk is full ({exc}); nothing of the failed batch was written: "
            "free some space (or move the index to a larger disk) and run the command again"
        )
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StorageBusyError(
            f"{where} is locked by another process for more than {timeout:g} s; retry when it is "
            "done, or wait longer with ?timeout=SECONDS in the URL"
        )
    if name.startswith("SQLITE_NOTADB") and opening:
        return StorageUnavailableError(
            f"cannot open {where} as an SQLite database ({exc}); give the path of a new file "
            "or of a neardup SQLite store"
        )
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return StorageDamagedError(
            f"{where} is damaged ({exc}); restore it from a backup, or rebuild the index "
            "into a new file with `neardup index add`"
        )
    if name.startswith("SQLITE_TOOBIG"):
        return StorageBackendError(
            f"{where}: SQLite refused a text or blob longer than its length limit ({exc}); nothing "
            "of the failed operation was written and the store is unchanged; this is a neardup bug: "
            "please report it with the output of `neardup index stats`"
        )
    if name.startswith("SQLITE_READONLY"):
        return StorageReadOnlyError(
            f"{where} is read-only ({exc}); queries and stats work, but adding and removing "
            "need write access to the file and its folder"
        )
    return StorageUnavailableError(
        f"cannot use {where} ({exc}); check that the file and its folder exist and are readable "
        "(and writable to add or remove)"
    )


@contextlib.contextmanager
def sqlite_errors(where: str, timeout: float, opening: bool = False) -> Iterator[None]:
    """Turn SQLite's exceptions into neardup's one-line storage errors."""
    try:
        yield
    except sqlite3.Error as exc:
        if isinstance(exc, sqlite3.IntegrityError):
            raise
        raise storage_error(exc, where, timeout, opening) from exc


def _error_name(exc: BaseException) -> str:
    return str(getattr(exc, "sqlite_errorname", ""))


def _writable(path: str) -> bool:
    """Can this process write the file and its folder (where SQLite puts the WAL)?"""
    folder = os.path.dirname(os.path.abspath(path))
    return path == ":memory:" or (os.access(path, os.W_OK) and os.access(folder, os.W_OK))


#: Bytes of a WAL file's header; a longer file holds frames (changes) the main file may lack.
WAL_HEADER_BYTES = 32


def _refuse_unreadable_wal(path: str, where: str) -> None:
    """Refuse a store whose WAL holds changes that cannot be read: without its ``-shm`` on a
    read-only folder SQLite cannot read the WAL, and reading the file as immutable would
    silently answer from the main file alone (committed batches missing)."""
    wal = f"{path}-wal"
    with contextlib.suppress(OSError):
        if os.path.getsize(wal) > WAL_HEADER_BYTES:
            raise StorageUnavailableError(
                f"cannot read {where}: its write-ahead log {os.path.abspath(wal)} holds committed "
                "changes that SQLite can read only by creating the -shm file beside it, and the folder "
                "is read-only; open the store once where its folder is writable (any neardup command, "
                "e.g. `neardup index stats`, folds the log into the file), or copy the .db and -wal "
                "files to a writable folder"
            )


def _foreign_tables(connection: sqlite3.Connection) -> list[str]:
    """Tables that belong to no neardup index (neardup's come in <prefix>_meta and
    <prefix>_records pairs, with <prefix>_recent); SQLite's own ``sqlite_*`` tables do not count."""
    rows = connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
    ).fetchall()
    names = [str(row[0]) for row in rows]
    ours: set[str] = set()
    for name in names:
        prefix = name.removesuffix("_meta")
        if prefix != name and f"{prefix}_records" in names:
            ours.update(
                f"{prefix}_{table}"
                for table in ("meta", "records", "recent", "postings", "filters", "values")
            )
            ours.update(other for other in names if other.startswith(f"{prefix}_run_"))  # ?layout=runs
    return sorted(name for name in names if name not in ours)


def from_url(url: str, parts: SplitResult, options: dict[str, str]) -> SqlStorage:
    check_options(options, {"table", "timeout", "create_in_existing", "layout"}, url)
    rest = url.split("://", 1)[1].split("?", 1)[0]
    if not rest.startswith("/"):
        raise ConfigError(
            f"SQLite URL {redacted(url)!r} names a host; write sqlite:///relative/path.db or "
            "sqlite:////absolute/path.db"
        )
    path = unquote(rest[1:]) or ":memory:"
    layouts = SqliteDialect.layouts
    layout = options.get("layout", layouts[0])
    if layout not in layouts:
        raise ConfigError(
            f"layout={layout!r} in {redacted(url)!r} must be one of {', '.join(sorted(layouts))}"
        )
    dialect = SqliteDialect(
        path,
        timeout=_timeout(options.get("timeout"), url),
        create_in_existing=_flag(options.get("create_in_existing"), "create_in_existing", url),
    )
    return SqlStorage(dialect, options.get("table", DEFAULT_PREFIX), new_layout=layout)


def _timeout(value: str | None, url: str) -> float:
    if value is None:
        return BUSY_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 1e6:
        raise ConfigError(
            f"timeout={value!r} in {redacted(url)!r} must be a number of seconds above 0 (e.g. 60)"
        )
    return seconds


def _flag(value: str | None, name: str, url: str) -> bool:
    if value is None:
        return False
    if value.lower() not in ("1", "0", "true", "false", "yes", "no", ""):
        raise ConfigError(f"{name}={value!r} in {redacted(url)!r} must be 1 or 0")
    return value.lower() in ("1", "true", "yes", "")


def _joined(parts: list[tuple[IntArray, UInt64Array]], width: int) -> tuple[IntArray, UInt64Array]:
    """Parts of (ids, words), each in id order and after the one before, as one."""
    if not parts:
        return np.empty(0, np.int64), np.empty((0, width), np.uint64)
    return np.concatenate([part[0] for part in parts]), np.concatenate([part[1] for part in parts])

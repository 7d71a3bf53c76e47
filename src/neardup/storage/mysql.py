"""MariaDB / MySQL store (PyMySQL): ``mysql://user[:password]@host[:port]/database[?table=P]``.

MariaDB/MySQL's dialect of the one SQL store (:mod:`neardup.storage.sql`), always in seed
002's table: one row per record with an indexed BIGINT column per posting column
(:mod:`neardup.storage.sql_columns`). InnoDB, utf8mb4; keys are VARCHAR(255) so the unique
key index fits InnoDB's limit. Check-and-add takes a named lock (``GET_LOCK``) across
processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import SplitResult, unquote

from ..errors import (
    MissingDependencyError,
    StorageBackendError,
    StorageBusyError,
    StorageUnavailableError,
)
from . import check_options
from .base import MAX_KEY_BYTES, Key, check_keys
from .sql import DEFAULT_PREFIX, SqlStorage
from .sql_dialects import SqlDialect
from .urls import redacted

KEY_LENGTH = MAX_KEY_BYTES  # characters; ids are at most this many UTF-8 bytes
LOCK_TIMEOUT_S = 60
#: Values shorter than this are not measured: servers run with a max_allowed_packet of
#: megabytes (MariaDB's default is 16 MiB, MySQL's 64 MiB).
MIN_CHECKED_BYTES = 1 << 19
#: Room for the rest of a statement that carries one large value.
STATEMENT_BYTES = 4096


class MysqlDialect(SqlDialect):
    """MariaDB/MySQL over PyMySQL: ``START TRANSACTION``, the ``GET_LOCK`` writer lock, bounded
    key columns, DDL that commits the open transaction."""

    name = "mysql"
    placeholder = "%s"
    blob_type = "VARBINARY(528)"  # a 128-bit fingerprint and the band keys of a 512-byte sketch
    key_type = f"VARCHAR({KEY_LENGTH})"
    id_column = "id BIGINT AUTO_INCREMENT PRIMARY KEY"
    ddl_commits = True
    reconnects = True

    def __init__(self, settings: dict[str, Any], where: str) -> None:
        self.settings = settings
        super().__init__(self.connect(10), where)

    def connect(self, timeout_s: float, probe: bool = False) -> Any:
        """A connection with this store's session settings, also after a server restart (a
        probe's reads and writes time out after ``timeout_s`` too)."""
        import pymysql

        return pymysql.connect(
            **self.settings,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=timeout_s,
            read_timeout=timeout_s if probe else None,
            write_timeout=timeout_s if probe else None,
        )

    def connection_broken(self) -> bool:
        # PyMySQL drops its socket when the server went away (errors 2006, 2013).
        return not self.connection.open

    def begin(self, cursor: Any, write: bool) -> None:
        cursor.execute("START TRANSACTION")

    def check_sizes(self, cursor: Any, values: Sequence[bytes | str]) -> None:
        large = [value for value in values if len(value) > MIN_CHECKED_BYTES]
        if not large:
            return
        cursor.execute("SELECT @@max_allowed_packet")
        limit = int(cursor.fetchone()[0])
        for value in large:
            size = len(self.connection.escape(value)) + STATEMENT_BYTES
            if size > limit:
                raise StorageBackendError(
                    f"{self.where} takes at most {limit:,} bytes a statement (max_allowed_packet) and a "
                    f"value of the index needs {size:,}; nothing of the call was stored: raise it on the "
                    "server (SET GLOBAL max_allowed_packet = 1073741824, and max_allowed_packet=1G in its "
                    "configuration) and run again"
                )

    def lock(self, cursor: Any, name: str) -> None:
        cursor.execute("SELECT GET_LOCK(%s, %s)", (f"neardup.{name}", LOCK_TIMEOUT_S))
        if cursor.fetchone()[0] != 1:
            raise StorageBusyError(f"{self.where}: could not take the writer lock within {LOCK_TIMEOUT_S} s")

    def unlock(self, cursor: Any, name: str) -> None:
        cursor.execute("SELECT RELEASE_LOCK(%s)", (f"neardup.{name}",))
        cursor.fetchone()

    def table_exists(self, cursor: Any, table: str) -> bool:
        cursor.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = %s",
            (table,),
        )
        return cursor.fetchone() is not None

    def integrity_errors(self) -> tuple[type[BaseException], ...]:
        import pymysql

        return (pymysql.err.IntegrityError,)

    def table_options(self) -> str:
        return " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"

    def signature_type(self) -> str:
        return "BLOB"

    def value_type(self) -> str:
        return "LONGBLOB"  # a BLOB holds at most 64 KiB

    def meta_type(self) -> str:
        return "LONGTEXT"  # a TEXT holds at most 64 KiB

    def upsert_clause(self) -> str:
        # VALUES(value) is the row the INSERT proposed (MariaDB has no alias syntax for it)
        return " ON DUPLICATE KEY UPDATE value = VALUES(value)"

    def check_keys(self, keys: Sequence[Key]) -> None:
        check_keys(keys)  # the id rule of every store; it keeps ids within the column


def from_url(url: str, parts: SplitResult, options: dict[str, str]) -> SqlStorage:
    check_options(options, {"table"}, url)
    try:
        import pymysql
    except ImportError as exc:
        raise MissingDependencyError("pymysql", "stores", "a MariaDB/MySQL store") from exc
    database = parts.path.lstrip("/")
    if not database:
        raise StorageUnavailableError(f"the MySQL URL {redacted(parts)} names no database; add /DATABASE")
    settings = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "database": database,
    }
    try:
        dialect = MysqlDialect(settings, redacted(parts))
    except pymysql.Error as exc:
        raise StorageUnavailableError(
            f"cannot connect to MariaDB/MySQL at {redacted(parts)} ({exc}); is the server running "
            "and the database created?"
        ) from exc
    return SqlStorage(dialect, options.get("table", DEFAULT_PREFIX))

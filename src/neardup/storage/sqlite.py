"""SQLite, the embedded default store: ``sqlite:///relative/path.db``, ``sqlite:////abs/path.db``.

WAL journal and ``synchronous=FULL``: an acknowledged batch survives a killed process (and a
power cut), readers never block the writer, and one writer at a time holds ``BEGIN
IMMEDIATE``, which is also the cross-process lock of check-and-add.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, unquote

from ..errors import ConfigError, StorageUnavailableError
from . import check_options
from .sql import DEFAULT_PREFIX, SqlStorage

BUSY_TIMEOUT_MS = 60_000


class SqliteStorage(SqlStorage):
    name = "sqlite"

    def __init__(self, path: str, prefix: str = DEFAULT_PREFIX) -> None:
        self.path = path
        self.created_file = path != ":memory:" and not Path(path).exists()
        if path != ":memory:":
            folder = Path(path).expanduser().resolve().parent
            if not folder.is_dir():
                raise StorageUnavailableError(
                    f"cannot create the SQLite store {path!r}: folder {str(folder)!r} does not exist; "
                    "create it first"
                )
        try:
            connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = FULL")
        except sqlite3.DatabaseError as exc:
            raise StorageUnavailableError(
                f"cannot open {path!r} as an SQLite database ({exc}); give the path of a new file "
                "or of a neardup SQLite store"
            ) from exc
        super().__init__(connection, prefix, where=f"sqlite:///{path}")

    def discard(self) -> None:
        self.close()
        if self.created_file:
            for suffix in ("", "-wal", "-shm"):
                Path(self.path + suffix).unlink(missing_ok=True)

    def _begin(self, cursor: Any, write: bool) -> None:
        # IMMEDIATE takes the write lock up front, so a writer that reads first (the key check,
        # check-and-add) is never refused the upgrade later; reads need no lock in WAL mode.
        cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def _table_exists(self, table: str) -> bool:
        row = self.connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        return row is not None

    def _integrity_errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.IntegrityError,)


def from_url(url: str, parts: SplitResult, options: dict[str, str]) -> SqliteStorage:
    check_options(options, {"table"}, url)
    rest = url.split("://", 1)[1].split("?", 1)[0]
    if not rest.startswith("/"):
        raise ConfigError(
            f"SQLite URL {url!r} names a host; write sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    path = unquote(rest[1:]) or ":memory:"
    return SqliteStorage(path, options.get("table", DEFAULT_PREFIX))

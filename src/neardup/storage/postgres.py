"""PostgreSQL store (psycopg 3): ``postgresql://user[:password]@host[:port]/database[?table=P]``.

Seed 002's relational layout (see :mod:`neardup.storage.sql`); check-and-add serialises
writers across processes with a transaction-scoped advisory lock on the table prefix.
"""

from __future__ import annotations

import zlib
from typing import Any
from urllib.parse import SplitResult, urlunsplit

from ..errors import MissingDependencyError, StorageUnavailableError
from . import check_options
from .sql import DEFAULT_PREFIX, SqlStorage


class PostgresStorage(SqlStorage):
    name = "postgresql"
    placeholder = "%s"
    blob_type = "BYTEA"
    id_column = "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"

    def _lock(self, cursor: Any) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(self.records_table.encode()),))

    def _one_of(self, column: str, values: list[Any]) -> tuple[str, list[Any]]:
        # One array parameter: psycopg need not parse a statement with thousands of
        # placeholders (a third of the client time of a check-and-add batch).
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
        with cursor.copy(f"COPY {self.records_table} ({columns}) FROM STDIN") as copy:
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
        connection = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise StorageUnavailableError(
            f"cannot connect to PostgreSQL at {_safe(parts)} ({str(exc).strip()}); is the server "
            "running and the database created?"
        ) from exc
    return PostgresStorage(connection, options.get("table", DEFAULT_PREFIX), where=_safe(parts))


def _safe(parts: SplitResult) -> str:
    """The URL without its password, for messages."""
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    user = f"{parts.username}@" if parts.username else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"

"""Rows from SQL databases (any SQLAlchemy URL), CSV and Parquet files, streamed in chunks;
and the groups written back to a database table.

A source is opened, tells its column names, then yields :class:`~neardup.records.schema.RowChunk`
objects of at most ``chunk_size`` rows: SQL results are read through a server-side cursor
(SQLAlchemy ``stream_results`` + ``yield_per``: a named cursor on PostgreSQL, an unbuffered
``SSCursor`` on MySQL/MariaDB, SQLite's lazy cursor), so a table is never held in memory.

Names are never pasted into SQL: ``--table`` must name an existing table or view (checked
against the database's schema, case-sensitively) and is then quoted by SQLAlchemy's
identifier preparer, as are the columns. A ``--query`` is the user's own SQL: it must pass
:func:`~neardup.records.sql_guard.read_only_query` (one SELECT/WITH/VALUES/TABLE statement, nothing
that writes) and then runs in a read-only transaction where the database has one (SQLite
``PRAGMA query_only``, PostgreSQL ``SET TRANSACTION READ ONLY``, MySQL/MariaDB ``START
TRANSACTION READ ONLY``), so a write the check missed still fails and changes nothing.

SQLAlchemy and the drivers are optional (``pip install 'neardup[stores]'``) and imported
only when an SQL source is used. URLs without a driver get the one neardup installs:
``postgresql://`` → ``postgresql+psycopg://``, ``mysql://`` → ``mysql+pymysql://``,
``mariadb://`` → ``mariadb+pymysql://``.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError, MissingDependencyError, NeardupError, StorageUnavailableError
from ..io.csv_strict import CsvRow, StrictCsvReader
from ..io.record import DEFAULT_MAX_BYTES, ErrorReport
from ..storage.urls import parse_store_url, redacted, scrubbed, url_text
from .schema import RecordSchema, RowChunk
from .sql_guard import check_write_target, read_only_query
from .values import RecordKey

DEFAULT_CHUNK_SIZE = 10_000
INSERT_BATCH = 10_000
#: String keys up to this length make ``row_key`` a VARCHAR primary key (MySQL indexes at
#: most 3072 bytes, 768 four-byte characters); longer keys are TEXT without a key.
MAX_INDEXED_KEY = 190
DRIVERS = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
#: The statement that makes a connection's transaction read-only, by dialect name.
READ_ONLY = {
    "sqlite": "PRAGMA query_only = ON",
    "postgresql": "SET TRANSACTION READ ONLY",
    "mysql": "START TRANSACTION READ ONLY",
    "mariadb": "START TRANSACTION READ ONLY",
}


def is_database_url(source: str) -> bool:
    return bool(_URL.match(source))


def driver_url(url: str) -> str:
    """The URL with neardup's default driver when it names none."""
    scheme, _, rest = url.partition("://")
    return f"{DRIVERS.get(scheme.lower(), scheme)}://{rest}"


def _sqlalchemy() -> Any:
    try:
        import sqlalchemy
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError("sqlalchemy", "stores", "Reading rows from a database") from exc
    return sqlalchemy


def _database_error(exc: Exception, what: str) -> NeardupError:
    """A one-line error from an SQLAlchemy/driver exception."""
    original = getattr(exc, "orig", None) or exc
    message = " ".join(str(original).split())
    sa = _sqlalchemy()
    if isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError) and "connect" in message.lower():
        return StorageUnavailableError(f"{what}: cannot reach the database: {message}")
    return NeardupError(f"{what}: {message}")


# -- sources ------------------------------------------------------------------------------------


@dataclass
class RowSource:
    """Base of the sources: ``name`` for messages, ``columns`` once open, ``chunks()`` once.
    ``fetches`` counts the chunks read and ``cursor`` names the cursor class used (both for
    diagnostics and tests)."""

    name: str
    chunk_size: int = DEFAULT_CHUNK_SIZE
    columns: list[str] = field(default_factory=list)
    fetches: int = 0
    cursor: str = ""

    def __enter__(self) -> RowSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection or file."""

    def select(self, columns: Sequence[str]) -> None:
        """Read only these of the source's columns (before the first chunk)."""

    def chunks(self) -> Iterator[RowChunk]:
        raise NotImplementedError


def read_only_needed(source: RowSource, schema: RecordSchema) -> RecordSchema:
    """Have ``source`` read only the key and the columns ``schema`` does not ignore (a query
    runs first, to name its columns), and return the schema without its ignore list: the
    ignored columns are gone from the rows."""
    if not source.columns and isinstance(source, SqlSource):
        source.open()
    wanted = schema.columns_to_read(source.columns)
    if len(wanted) < len(source.columns):
        source.select(wanted)
    return dataclasses.replace(schema, ignore=())


def open_source(
    source: str,
    *,
    table: str | None = None,
    query: str | None = None,
    schema: str | None = None,
    columns: Sequence[str] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    on_error: str = "fail",
    report: ErrorReport | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> RowSource:
    """A database (URL, with ``table`` or ``query``), a CSV or a Parquet file. ``columns``
    limits what is read (a table's or file's columns, checked by the caller); a CSV row
    with bad quoting, or over ``max_bytes``, stops the run or, with ``on_error="skip"``, is
    counted in ``report``."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ConfigError(f"chunk_size must be a positive integer; got {chunk_size!r}")
    if is_database_url(source):
        return SqlSource(source, table=table, query=query, schema=schema, chunk_size=chunk_size)
    if table is not None or query is not None:
        raise ConfigError(f"table and query read from a database, but {source} is a file; give a URL")
    suffix = Path(source).suffix.lower()
    if suffix == ".csv":
        return CsvSource(source, chunk_size=chunk_size, on_error=on_error, report=report, max_bytes=max_bytes)
    if suffix in (".parquet", ".pq"):
        return ParquetSource(source, chunk_size=chunk_size)
    raise ConfigError(
        f"cannot read rows from {source}: give a database URL (sqlite:///file.db, postgresql://..., "
        f"mysql://...) or a .csv or .parquet file"
    )


class SqlSource(RowSource):
    """A table (or view) or a SELECT query of a database."""

    def __init__(
        self,
        url: Any,
        *,
        table: str | None = None,
        query: str | None = None,
        schema: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        if (table is None) == (query is None):
            raise ConfigError("a database source needs exactly one of table=TABLE or query=SQL")
        if isinstance(url, str):
            self.engine = _engine(url)
            self._own_engine = True
        else:
            self.engine, self._own_engine = url, False
        shown = self.engine.url.render_as_string(hide_password=True)
        super().__init__(name=f"table {table}" if table is not None else "query", chunk_size=chunk_size)
        self.url = shown
        self.table, self.schema, self.query = table, schema, query
        self.statement = self._table_statement(table, schema) if table is not None else _query(query or "")
        self._connection: Any = None
        self._result: Any = None
        #: The positions a query's rows are cut to (:meth:`select`); None: every column.
        self._wanted: list[int] | None = None

    def _table_statement(self, table: str, schema: str | None) -> Any:
        sa = _sqlalchemy()
        self.columns = table_columns(self.engine, table, schema)
        return sa.select(*(sa.column(name) for name in self.columns)).select_from(
            sa.table(table, schema=schema)
        )

    def select(self, columns: Sequence[str]) -> None:
        """Read only these columns: a table's statement names them; a query's rows (the
        query runs as written) are cut to them."""
        if self.table is None:
            self.open()
            wanted = set(columns)
            self._wanted = [index for index, name in enumerate(self.columns) if name in wanted]
            self.columns = [self.columns[index] for index in self._wanted]
            return
        sa = _sqlalchemy()
        chosen = [name for name in self.columns if name in set(columns)]
        self.columns = chosen
        self.statement = sa.select(*(sa.column(name) for name in chosen)).select_from(
            sa.table(self.table, schema=self.schema)
        )

    def open(self) -> None:
        """Run the statement; the column names are known afterwards."""
        if self._result is not None:
            return
        try:
            self._connection = read_only_connection(self.engine)
            options = self._connection.execution_options(stream_results=True, yield_per=self.chunk_size)
            self._result = options.execute(self.statement)
        except _sqlalchemy().exc.SQLAlchemyError as exc:
            self.close()
            raise _database_error(exc, f"reading {self.name} of {self.url} (read-only)") from exc
        if not self._result.returns_rows:
            self.close()
            raise ConfigError(f"the {self.name} of {self.url} returns no rows; give a SELECT")
        self.cursor = type(self._result.cursor).__name__ if self._result.cursor is not None else ""
        self.columns = [str(name) for name in self._result.keys()]  # noqa: SIM118 - a Result, not a dict

    def chunks(self) -> Iterator[RowChunk]:
        self.open()
        width, first = len(self.columns), 1
        try:
            for rows in self._result.partitions(self.chunk_size):
                self.fetches += 1
                if self._wanted is not None:
                    rows = [[row[index] for index in self._wanted] for row in rows]
                yield RowChunk.from_rows(rows, width, first)
                first += len(rows)
        except _sqlalchemy().exc.SQLAlchemyError as exc:
            raise _database_error(exc, f"reading {self.name} of {self.url}") from exc
        finally:
            self.close()

    def close(self) -> None:
        if self._result is not None:
            self._result.close()
            self._result = None
        if self._connection is not None:
            try:
                if self._connection.dialect.name == "sqlite" and not self._connection.invalidated:
                    # the pragma outlives the connection in the pool: a later write needs it off
                    self._connection.rollback()
                    self._connection.exec_driver_sql("PRAGMA query_only = OFF")
            finally:
                self._connection.close()
                self._connection = None

    def check_target(self, table: str, *, replace: bool = True) -> None:
        """Refuse a ``--write-table`` this source reads, and (without ``replace``) one that
        exists, before reading anything: not after all the work. The write checks again."""
        sa = _sqlalchemy()
        try:
            check_write_target(self.engine, table, schema=self.schema, table=self.table, query=self.query)
            if not replace and sa.inspect(self.engine).has_table(table, schema=self.schema):
                raise _exists_error(table)
        except sa.exc.SQLAlchemyError as exc:
            raise _database_error(exc, f"checking the write table {table!r} in {self.url}") from exc

    def dispose(self) -> None:
        self.close()
        if self._own_engine:
            self.engine.dispose()


def _engine(url: str) -> Any:
    """An engine for a database URL, checked by the store URL parser first (an unclosed
    ``[``, a bad port or an unescaped password must be one line naming the fix, not a
    traceback, and never show a piece of the password as a host)."""
    sa = _sqlalchemy()
    checked = url_text(parse_store_url(url, "database URL"))  # the password percent-encoded
    try:
        _check_sqlite_file(sa.engine.make_url(checked))
        return sa.create_engine(driver_url(checked))
    except NeardupError:
        raise
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ValueError) as exc:
        message = scrubbed(" ".join(str(exc).split()), url)
        raise ConfigError(
            f"cannot read rows from {redacted(url)}: {message}; give a URL such as sqlite:///file.db, "
            "postgresql://USER:PASSWORD@HOST/DB or mysql://USER:PASSWORD@HOST/DB"
        ) from None


def _check_sqlite_file(url: Any) -> None:
    """Refuse a missing SQLite file up front: connecting would create an empty one."""
    path = url.database if url.get_backend_name() == "sqlite" and not url.query.get("uri") else None
    if path and path != ":memory:" and not Path(path).exists():
        hint = "sqlite:///relative/path.db, or sqlite:////absolute/path.db with four slashes"
        raise InputError(f"no SQLite database file {path}; check the path in the URL ({hint})")


def table_columns(engine: Any, table: str, schema: str | None = None) -> list[str]:
    """The columns of an existing table or view; a clear error for a name the database
    does not have (names are compared exactly, never interpreted as SQL)."""
    sa = _sqlalchemy()
    try:
        inspector = sa.inspect(engine)
        names = list(inspector.get_table_names(schema=schema)) + list(inspector.get_view_names(schema=schema))
        if table not in names:
            shown = ", ".join(sorted(names)[:20]) or "none"
            where = f" in schema {schema!r}" if schema else ""
            raise ConfigError(
                f"no table or view {table!r}{where} in the database (it has: {shown}); check table "
                f"(the name is matched exactly, case included, and never read as SQL)"
            )
        # The names as the database reports them for a query: reflection can mangle names
        # (SQLAlchemy's MySQL reflection leaves doubled backticks in them).
        probe = sa.select(sa.text("*")).select_from(sa.table(table, schema=schema)).limit(0)
        with engine.connect() as connection:
            return [str(name) for name in connection.execute(probe).keys()]  # noqa: SIM118 - a Result
    except sa.exc.SQLAlchemyError as exc:
        raise _database_error(
            exc, f"reading the schema of {engine.url.render_as_string(hide_password=True)}"
        ) from exc


def _query(query: str) -> Any:
    """One read-only statement; trailing semicolons are dropped."""
    return _sqlalchemy().text(read_only_query(query))


def read_only_connection(engine: Any) -> Any:
    """A connection whose transaction cannot write, where the database has such a mode (the
    second layer under the query check). SQLite's pragma stays on the pooled connection, so
    :meth:`SqlSource.close` turns it off again."""
    connection = engine.connect()
    statement = READ_ONLY.get(connection.dialect.name)
    if statement is not None:
        try:
            connection.exec_driver_sql(statement)
        except BaseException:
            connection.close()
            raise
    return connection


class CsvSource(RowSource):
    """A UTF-8 CSV file with a header line; empty fields are nulls. Quoting is strict (see
    :mod:`neardup.io.csv_strict`): a bad row is an error naming its line, or (``on_error="skip"``)
    is counted in ``report`` and reading goes on, with the lines a stray quote swallowed."""

    def __init__(
        self,
        path: str,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        *,
        on_error: str = "fail",
        report: ErrorReport | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ConfigError(f"max_bytes must be a positive integer; got {max_bytes!r}")
        super().__init__(name=str(path), chunk_size=chunk_size)
        self.path = path
        self.max_bytes = max_bytes
        self.on_error = on_error
        self.report = report if report is not None else ErrorReport()
        self._handle: Any = None
        self._reader: StrictCsvReader | None = None
        self._wanted: list[int] | None = None
        self._width = 0
        self.open()

    def open(self) -> None:
        if self._reader is not None:
            return
        try:
            self._handle = open(self.path, "rb")  # noqa: SIM115 - closed in close()
        except OSError as exc:
            raise InputError(f"cannot open input file {self.path}: {exc.strerror}") from exc
        self._reader = StrictCsvReader(self._handle, self.path, self.max_bytes)
        try:
            header = self._reader.header()
        except InputError:
            self.close()
            raise
        if header is None:
            raise InputError(f"{self.path} is empty; a CSV source needs a header line naming the columns")
        self.columns = header
        self._width = len(header)

    def select(self, columns: Sequence[str]) -> None:
        self.open()
        wanted = set(columns)
        self._wanted = [index for index, name in enumerate(self.columns) if name in wanted]
        self.columns = [self.columns[index] for index in self._wanted]

    def _rows(self) -> Iterator[list[str]]:
        """The good rows; a bad one stops the run or is counted and skipped."""
        assert self._reader is not None
        number = 1
        for row in self._reader:
            if isinstance(row, CsvRow) and len(row.values) == self._width:
                number += 1
                yield row.values if self._wanted is None else [row.values[index] for index in self._wanted]
                continue
            if isinstance(row, CsvRow):
                if not any(row.values):
                    continue  # a blank line
                row = InputError(
                    f"data row {number} has {len(row.values)} fields but the header has {self._width}; "
                    f"fix the quoting of that row",
                    f"{self.path}:{row.line}",
                )
            if self.on_error != "skip":
                raise row
            self.report.add(row)

    def chunks(self) -> Iterator[RowChunk]:
        self.open()
        rows: list[list[str]] = []
        first = 1
        try:
            for row in self._rows():
                rows.append(row)
                if len(rows) == self.chunk_size:
                    self.fetches += 1
                    yield RowChunk.from_rows(rows, len(self.columns), first)
                    first, rows = first + len(rows), []
            if rows:
                self.fetches += 1
                yield RowChunk.from_rows(rows, len(self.columns), first)
        finally:
            self.close()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class ParquetSource(RowSource):
    """A Parquet file, read a record batch at a time."""

    def __init__(self, path: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        super().__init__(name=str(path), chunk_size=chunk_size)
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise MissingDependencyError("pyarrow", "parquet", "Reading Parquet files") from exc
        try:
            self._file = pq.ParquetFile(path)
        except OSError as exc:
            raise InputError(f"cannot read {path} as Parquet: {exc}") from exc
        except Exception as exc:  # pyarrow raises ArrowInvalid (a ValueError) for non-Parquet data
            raise InputError(f"{path} is not a Parquet file: {exc}") from exc
        self.columns = list(self._file.schema_arrow.names)

    def open(self) -> None:
        """Nothing to do: the footer was read on construction."""

    def select(self, columns: Sequence[str]) -> None:
        wanted = set(columns)
        self.columns = [name for name in self.columns if name in wanted]

    def chunks(self) -> Iterator[RowChunk]:
        first = 1
        for batch in self._file.iter_batches(batch_size=self.chunk_size, columns=self.columns):
            self.fetches += 1
            columns = tuple(batch.column(index).to_pylist() for index in range(batch.num_columns))
            yield RowChunk(columns, batch.num_rows, first)
            first += batch.num_rows

    def close(self) -> None:
        self._file.close()


# -- writing the groups back ----------------------------------------------------------------------


@dataclass(frozen=True)
class GroupRows:
    """One row per source row: its key, its group (numbered 1, 2, ... in order of first
    row), the group's representative key and the Hamming distance to it."""

    keys: Sequence[RecordKey]
    groups: Sequence[int]
    representatives: Sequence[RecordKey]
    distances: Sequence[int]


#: The names of a ``write_groups`` in progress on MySQL/MariaDB (the new table, and the
#: previous one just before it is dropped): a fixed prefix and 16 random hex digits, never a
#: name a user gives; a killed run's are dropped by the next write (:func:`_drop_leftovers`).
TEMPORARY_TABLE = re.compile(r"neardup_tmp_(?:new|old)_([0-9a-f]{16})")
#: The server-wide named lock (``GET_LOCK``) a writer holds while its temporary tables exist.
_LOCK_PREFIX = "neardup_tmp_"


def write_groups(
    engine_or_url: Any,
    table: str,
    rows: GroupRows,
    *,
    schema: str | None = None,
    replace: bool = False,
    source_table: str | None = None,
    source_query: str | None = None,
) -> int:
    """Create ``table`` (row_key, group_id, representative, distance) and fill it; returns
    the row count. An existing table is refused unless ``replace``, and a table the source
    reads (``source_table`` or one ``source_query`` names) is refused always.

    The table appears whole or not at all, and a replaced one stays whole until then: a
    write that fails (a full disk, a bad row) or a killed process leaves the previous table
    as it was. Where DDL is transactional (SQLite, PostgreSQL) the drop, create and fill are
    one transaction; MySQL/MariaDB commit each DDL statement, so there the rows go to a new
    table under a temporary name that one atomic ``RENAME TABLE`` swaps in (see
    :func:`_write_by_rename`)."""
    sa = _sqlalchemy()
    engine = sa.create_engine(driver_url(engine_or_url)) if isinstance(engine_or_url, str) else engine_or_url
    if not table or not isinstance(table, str):
        raise ConfigError("the write table needs a name")
    try:
        check_write_target(engine, table, schema=schema, table=source_table, query=source_query)
        if engine.dialect.name in ("mysql", "mariadb"):
            _write_by_rename(sa, engine, table, schema, rows, replace)
        else:
            _write_in_one_transaction(sa, engine, table, schema, rows, replace)
    except sa.exc.SQLAlchemyError as exc:
        raise _database_error(exc, f"writing table {table!r}") from exc
    finally:
        if isinstance(engine_or_url, str):
            engine.dispose()
    return len(rows.keys)


def _group_table(sa: Any, name: str, schema: str | None, rows: GroupRows) -> Any:
    key_type = _key_type(sa, rows.keys)
    primary = not isinstance(key_type, sa.Text)
    return sa.Table(
        name,
        sa.MetaData(schema=schema),
        # never AUTO_INCREMENT: MySQL would store a key of 0 as the next free number
        sa.Column("row_key", key_type, primary_key=primary, nullable=False, autoincrement=False),
        sa.Column("group_id", sa.BigInteger, nullable=False),
        sa.Column("representative", key_type, nullable=False),
        sa.Column("distance", sa.SmallInteger, nullable=False),
    )


def _fill(connection: Any, target: Any, rows: GroupRows) -> None:
    names = ("row_key", "group_id", "representative", "distance")
    values = zip(rows.keys, rows.groups, rows.representatives, rows.distances, strict=True)
    while batch := [dict(zip(names, row, strict=True)) for row in islice(values, INSERT_BATCH)]:
        connection.execute(target.insert(), batch)


def _exists_error(table: str) -> ConfigError:
    return ConfigError(
        f"table {table!r} already exists; choose another table name or pass replace=True to overwrite it"
    )


def _write_in_one_transaction(
    sa: Any, engine: Any, table: str, schema: str | None, rows: GroupRows, replace: bool
) -> None:
    """Drop, create and fill in one transaction. pysqlite opens a transaction only before
    INSERT/UPDATE/DELETE, so DDL would commit on its own: SQLite gets an explicit ``BEGIN
    IMMEDIATE`` (which also takes the write lock before anything is read)."""
    target = _group_table(sa, table, schema, rows)
    with engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        if sa.inspect(connection).has_table(table, schema=schema):
            if not replace:
                raise _exists_error(table)
            target.drop(connection)
        target.create(connection)
        _fill(connection, target, rows)
        connection.commit()


def _write_by_rename(
    sa: Any, engine: Any, table: str, schema: str | None, rows: GroupRows, replace: bool
) -> None:
    """MySQL/MariaDB: fill ``neardup_tmp_new_<token>``, then ``RENAME TABLE table TO
    neardup_tmp_old_<token>, neardup_tmp_new_<token> TO table`` (atomic: readers see the
    old table or the new one, never none) and drop the old one.

    Leftovers of a killed run (a half-filled new table, or an old one not yet dropped) are
    found by name (:data:`TEMPORARY_TABLE`, in the target's database only) and dropped by the
    next write, but only when their writer is gone: every writer holds the server's named
    lock ``neardup_tmp_<token>`` (``GET_LOCK``) for as long as its tables exist, and the
    server releases it when the writer's connection ends, however it ends."""
    token = secrets.token_hex(8)
    new, old, lock = f"neardup_tmp_new_{token}", f"neardup_tmp_old_{token}", f"{_LOCK_PREFIX}{token}"
    quote = engine.dialect.identifier_preparer
    prefix = f"{quote.quote_schema(schema)}." if schema else ""

    def name(bare: str) -> str:
        return prefix + str(quote.quote(bare))

    with engine.connect() as connection:
        connection.commit()  # autobegun: DDL below commits implicitly anyway
        _drop_leftovers(sa, connection, schema, name)
        exists = sa.inspect(connection).has_table(table, schema=schema)
        if exists and not replace:
            raise _exists_error(table)
        if connection.exec_driver_sql("SELECT GET_LOCK(%s, 0)", (lock,)).scalar() != 1:
            raise StorageUnavailableError(f"cannot take the lock {lock!r} for writing table {table!r}")
        try:
            target = _group_table(sa, new, schema, rows)
            target.create(connection)
            connection.commit()
            _fill(connection, target, rows)
            connection.commit()
            if exists:
                connection.exec_driver_sql(
                    f"RENAME TABLE {name(table)} TO {name(old)}, {name(new)} TO {name(table)}"
                )
                connection.exec_driver_sql(f"DROP TABLE {name(old)}")
            else:
                connection.exec_driver_sql(f"RENAME TABLE {name(new)} TO {name(table)}")
        except BaseException:
            if not connection.invalidated:
                with suppress(sa.exc.SQLAlchemyError):
                    connection.rollback()
                    connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name(new)}")
            raise
        finally:
            if not connection.invalidated:
                with suppress(sa.exc.SQLAlchemyError):
                    connection.exec_driver_sql("SELECT RELEASE_LOCK(%s)", (lock,))
                    connection.commit()


def _drop_leftovers(sa: Any, connection: Any, schema: str | None, name: Callable[[str], str]) -> None:
    """Drop the temporary tables of killed writes (:func:`_write_by_rename`): tables named
    exactly like them whose writer's lock is free. A user's table is never one of them."""
    for found in sa.inspect(connection).get_table_names(schema=schema):
        match = TEMPORARY_TABLE.fullmatch(found)
        if match is None:
            continue
        lock = f"{_LOCK_PREFIX}{match.group(1)}"
        if connection.exec_driver_sql("SELECT IS_FREE_LOCK(%s)", (lock,)).scalar() == 1:
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name(found)}")
    connection.commit()


def _key_type(sa: Any, keys: Sequence[RecordKey]) -> Any:
    if all(isinstance(key, int) for key in keys):
        return sa.BigInteger()
    longest = max((len(str(key)) for key in keys), default=1)
    return sa.String(max(longest, 1)) if longest <= MAX_INDEXED_KEY else sa.Text()

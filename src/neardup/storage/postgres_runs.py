"""PostgreSQL's dialect of the runs layout (:mod:`neardup.storage.runs`).

What differs from SQLite: postings and run keys travel in binary (one COPY built by numpy; one
bytea of 8-byte keys per statement, since COPY's message per row and hex bytea both decode
slowly), key lists are one array parameter, B-tree leaves carry the id (INCLUDE), and readers
take a table lock that keeps the run list still (see the module docstring of
:mod:`neardup.storage.runs`). Merges run inside the add, not in steps after it: a run is
sorted and indexed in bulk (``CREATE TABLE … AS``, ``CREATE INDEX``) before the readers' lock
is taken, and its keys come back in parts of 512 MB (a bytea holds at most 1 GB), each added
to the filter as it comes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import IntArray, UInt64Array
from .run_filters import add_to_filter, bigint_array, empty_filter
from .runs import PostingRuns

#: Postings per statement that reads a run's keys back (a bytea holds at most 1 GB).
KEYS_PER_READ = 64_000_000
#: PostgreSQL's binary COPY: a signature, flags and header extension, rows of (field count,
#: then length and value per field, big-endian), and a trailer of -1.
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"
_COPY_ROW = np.dtype(
    [("fields", ">i2"), ("k_length", ">i4"), ("k", ">i8"), ("id_length", ">i4"), ("id", ">i8")]
)


class PostgresRuns(PostingRuns):
    placeholder = "%s"
    posting_index = "(k) INCLUDE (id)"
    blob = "BYTEA"
    merge_in_steps = False

    def _insert_postings(self, cursor: Any, keys: IntArray, ids: IntArray) -> None:
        rows = np.empty(keys.size, dtype=_COPY_ROW)
        rows["fields"], rows["k_length"], rows["id_length"] = 2, 8, 8
        rows["k"], rows["id"] = keys, ids
        with cursor.copy(f"COPY {self.postings_table} (k, id) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(_COPY_HEADER + rows.tobytes() + _COPY_TRAILER)

    def _create_run(self, cursor: Any, table: str, select: str) -> int:
        # No ORDER BY: reads use the index only, and the index build sorts anyway.
        cursor.execute(f"CREATE TABLE {table} AS {select}")
        created = int(cursor.rowcount)
        cursor.execute(f"CREATE INDEX {table}_k ON {table} {self.posting_index}")
        cursor.execute(f"ANALYZE {table}")  # the planner's row counts, before any autovacuum's
        return created

    def _run_filter(self, cursor: Any, table: str, rows: int) -> tuple[UInt64Array, int]:
        if rows < 0:
            cursor.execute(f"SELECT COUNT(*) FROM {table}")
            rows = int(cursor.fetchone()[0])
        bits, count = empty_filter(rows), 0
        reads = max(1, -(-rows // KEYS_PER_READ))
        for part in range(reads):
            where = f" WHERE id % {reads} = {part}" if reads > 1 else ""
            cursor.execute(f"SELECT string_agg(int8send(k), ''::bytea) FROM {table}{where}", binary=True)
            data = cursor.fetchone()[0]
            keys = np.frombuffer(bytes(data or b""), dtype=">i8").astype(np.int64)
            add_to_filter(bits, keys)
            count += keys.size
        return bits, count

    def _max_length(self, cursor: Any) -> int:
        return 1 << 30  # a field's limit

    def _delete_filter(self, cursor: Any, table: str) -> None:
        cursor.execute(f"DELETE FROM {self.filters_table} WHERE split_part(name, '#', 1) = %s", (table,))

    def _postings_between(self, cursor: Any, first: int, stop: int) -> tuple[IntArray, IntArray]:
        # Both aggregates walk the rows in one order, so the keys and ids stay paired.
        cursor.execute(
            f"SELECT string_agg(int8send(k), ''::bytea), string_agg(int8send(id), ''::bytea) "
            f"FROM {self.postings_table} WHERE id >= %s AND id < %s",
            (first, stop),
            binary=True,
        )
        keys, ids = cursor.fetchone()
        return (
            np.frombuffer(bytes(keys or b""), dtype=">i8").astype(np.int64),
            np.frombuffer(bytes(ids or b""), dtype=">i8").astype(np.int64),
        )

    def _given_postings(self, keys: IntArray, ids: IntArray) -> tuple[str, list[Any]]:
        return "SELECT * FROM unnest(%s::bigint[], %s::bigint[]) AS g(k, id)", [
            bigint_array(keys.tolist()),
            bigint_array(ids.tolist()),
        ]

    def _read_filters(self, cursor: Any, names: list[str]) -> list[tuple[str, bytes]]:
        cursor.execute(
            f"SELECT name, bits FROM {self.filters_table} WHERE split_part(name, '#', 1) = ANY(%s)",
            (names,),
            binary=True,
        )
        return [(row[0], bytes(row[1])) for row in cursor.fetchall()]

    def _one_of_keys(self, values: IntArray) -> tuple[str, Any]:
        return "k = ANY(%s::bigint[])", bigint_array(values.tolist())

    def _lock_for_reading(self, cursor: Any) -> None:
        cursor.execute(f"LOCK TABLE {self.postings_table} IN ACCESS SHARE MODE")

    def _prepare_builds(self, cursor: Any) -> None:
        # A check-and-add transaction set the candidate statement's planner settings, which
        # would make a merge's join probe the records' index once per posting.
        cursor.execute(
            "SET LOCAL enable_seqscan = on; SET LOCAL enable_mergejoin = on; SET LOCAL enable_hashjoin = on; "
            "SET LOCAL maintenance_work_mem = '256MB'; SET LOCAL work_mem = '64MB'"
        )

    def _fetch(self, cursor: Any, statement: str, parameters: Any) -> list[tuple[Any, ...]]:
        cursor.execute(statement, parameters, binary=True)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows

    def _empty_postings(self, cursor: Any) -> None:
        # Readers wait here, not during the builds; TRUNCATE is transactional in PostgreSQL.
        cursor.execute(f"LOCK TABLE {self.postings_table} IN ACCESS EXCLUSIVE MODE")
        cursor.execute(f"TRUNCATE {self.postings_table}")

"""PostgreSQL's postings for large indexes: immutable runs built in bulk, each with a filter.

Tables (``<prefix>`` as in :mod:`neardup.storage.sql`):

- ``<prefix>_records(id, key_text, key_int, fingerprint, cluster_text, cluster_int,
  signature)``: one row per record, ids from the sequence ``<prefix>_ids``; no block columns.
- ``<prefix>_postings(k, id)``: the postings of records added since the last cut, indexed on
  ``k``. ``k`` is one (table, block key) pair: the table number in the top 6 bits and a
  mixed block key below (:func:`posting_keys`), so a query batch is one lookup of one array.
- ``<prefix>_run<n>(k, id)``: runs, each written once by ``CREATE TABLE … AS SELECT`` and
  indexed by ``CREATE INDEX`` (a sorted bulk build), never updated. Their names, sizes and
  tiers are the meta row ``runs``.
- ``<prefix>_filters(name, bits)``: a blocked Bloom filter of each run's posting keys (16–32
  bits per posting, 3 bits in one 64-bit word per key: under 1 % false positives), read once
  per process and kept, since runs never change.

Why: the column layout inserts every record into 16 B-trees at random places. At 10^6
records, moving 131,072 recent records into them took 19–58 s (most leaf pages of every index
read, dirtied and written again), which held band check-and-add to ~1,400 docs/s. Building a
run of the same records costs one sort and one bulk index build, about 5 s.

Once ``<prefix>_postings`` holds the postings of :data:`RUN_RECORDS` records they become a run
of tier 0, and :data:`MERGE_RUNS` runs of one tier are merged into one of the next tier
(size-tiered, as in LSM trees), so a posting is rewritten log_4(records / RUN_RECORDS) times
and at most 3 runs per tier are read. Once a record was removed, merges leave out the
postings of removed records (a remove deletes the record row only; postings whose id has no
row are ignored by every read).

Reads: one statement per batch, the recent postings asked for every key and each run only for
the keys that pass its filter (a few hundred of a batch's 16,000: each probe of a B-tree is a
descent from its root, so asking every run for every key cost ~300 ms a run per batch).

Consistency between processes: writers hold the advisory writer lock for the whole
transaction, so runs change one writer at a time. A reader locks ``<prefix>_postings`` in
ACCESS SHARE mode before it reads the run list, and a writer that retires runs takes ACCESS
EXCLUSIVE on it before it empties it, drops the old runs and publishes the new list: a reader
sees the old list and tables or the new ones, never half of each, and waits at most for the
publishing statements (the sort and index builds run before the lock).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import numpy.typing as npt

from ..buckets import TableStats
from .base import IntArray, UInt64Array, to_signed

#: The layout a store of this module records in its meta row ``layout``.
LAYOUT = "runs-1"
#: Records whose postings make one run (the postings table holds at most about this many).
RUN_RECORDS = 32_768
#: Runs of one tier merged into one run of the next tier once there are this many: with a
#: cut every RUN_RECORDS records, a posting is rewritten log_4(records / RUN_RECORDS) times
#: and at most 3 runs of each tier are read.
MERGE_RUNS = 4
#: Filter bits per posting, at least (rounded up to a power of two) and probes per key.
FILTER_BITS = 16
FILTER_PROBES = 3
#: Postings per statement that reads a run's keys back (a bytea holds at most 1 GB).
KEYS_PER_READ = 64_000_000
#: Bits of a posting key that name its table (schemes with more tables are refused earlier).
TABLE_BITS = 6

#: PostgreSQL's binary COPY: a signature, flags and header extension, rows of (field count,
#: then length and value per field, big-endian), and a trailer of -1.
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"
_COPY_ROW = np.dtype(
    [("fields", ">i2"), ("k_length", ">i4"), ("k", ">i8"), ("id_length", ">i4"), ("id", ">i8")]
)

_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def posting_keys(blocks: UInt64Array) -> IntArray:
    """One signed 64-bit posting key per (row, table) of ``blocks``: the table number in the
    top bits and the block key mixed (splitmix64's finaliser, a bijection) into the rest.
    Two different block keys share a posting key with probability 2^-58; such a candidate is
    verified like any other by the caller."""
    mixed = _mixed(np.ascontiguousarray(blocks, dtype=np.uint64).view(np.int64))
    shift = np.uint64(64 - TABLE_BITS)
    tables = np.arange(blocks.shape[1], dtype=np.uint64)[None, :] << shift
    return to_signed(tables | (mixed >> np.uint64(TABLE_BITS)))


def _mixed(values: IntArray) -> UInt64Array:
    """splitmix64's finaliser over int64 values, as uint64."""
    mixed = np.ascontiguousarray(values).view(np.uint64).copy()
    with np.errstate(over="ignore"):
        mixed ^= mixed >> np.uint64(30)
        mixed *= _MIX_1
        mixed ^= mixed >> np.uint64(27)
        mixed *= _MIX_2
        mixed ^= mixed >> np.uint64(31)
    return mixed


def _filter_slots(keys: IntArray, words: int) -> tuple[UInt64Array, UInt64Array]:
    """Where ``keys`` go in a blocked Bloom filter of ``words`` 64-bit words (a power of two):
    each key's word and the mask of its :data:`FILTER_PROBES` bits in it, taken from
    different bits of the key mixed again (so the table bits count too). One word per key
    makes building one scatter and testing one gather."""
    mixed = _mixed(keys.ravel())
    slots = mixed & np.uint64(words - 1)
    masks = np.zeros(mixed.shape, dtype=np.uint64)
    for probe in range(FILTER_PROBES):
        masks |= np.uint64(1) << ((mixed >> np.uint64(40 + 6 * probe)) & np.uint64(63))
    return slots, masks


def build_filter(keys: IntArray) -> UInt64Array:
    """A filter of ``keys``: :data:`FILTER_BITS` bits or more per key, rounded to a power of
    two words."""
    words = 1 << max(0, int(np.ceil(np.log2(max(len(keys), 1) * FILTER_BITS / 64))))
    filter_words = np.zeros(words, dtype=np.uint64)
    slots, masks = _filter_slots(keys, words)
    np.bitwise_or.at(filter_words, slots, masks)
    return filter_words


def may_contain(filter_words: UInt64Array, keys: IntArray) -> npt.NDArray[np.bool_]:
    """Which of ``keys`` the filter may hold (no false negatives)."""
    slots, masks = _filter_slots(keys, filter_words.size)
    passed: npt.NDArray[np.bool_] = (filter_words[slots] & masks) == masks
    return passed


def bigint_array(values: Any) -> str:
    """An integer sequence as one PostgreSQL array literal (one parameter, parsed by the
    server; psycopg dumps a list element by element in Python)."""
    return "{" + ",".join(map(str, values)) + "}"


class PostingRuns:
    """The SQL of the runs layout for one table prefix; the caller owns the transaction."""

    def __init__(self, prefix: str, records_table: str, meta_table: str) -> None:
        self.records_table = records_table
        self.meta_table = meta_table
        self.postings_table = f"{prefix}_postings"
        self.filters_table = f"{prefix}_filters"
        #: Filters read so far, by run table (runs never change, so neither do they).
        self.filters: dict[str, UInt64Array] = {}
        self.sequence = f"{prefix}_ids"
        self.prefix = prefix
        self.run_records = RUN_RECORDS

    # -- creation and state ---------------------------------------------------------------
    def create(self, cursor: Any, record_columns: str) -> None:
        cursor.execute(f"CREATE SEQUENCE {self.sequence}")
        cursor.execute(f"CREATE TABLE {self.records_table} ({record_columns}, UNIQUE (key_text, key_int))")
        cursor.execute(f"CREATE TABLE {self.postings_table} (k BIGINT NOT NULL, id BIGINT NOT NULL)")
        cursor.execute(f"CREATE INDEX {self.postings_table}_k ON {self.postings_table} (k) INCLUDE (id)")
        cursor.execute(f"CREATE TABLE {self.filters_table} (name TEXT PRIMARY KEY, bits BYTEA NOT NULL)")
        cursor.execute(
            f"INSERT INTO {self.meta_table} (name, value) VALUES ('layout', %s), ('runs', %s)",
            (LAYOUT, json.dumps({"runs": [], "cut": 0, "removed": 0})),
        )

    def state(self, cursor: Any) -> dict[str, Any]:
        """The meta row ``runs``: ``runs`` ([{"table", "postings"}], oldest first) and ``cut``
        (the last record id whose postings are in a run)."""
        cursor.execute(f"SELECT value FROM {self.meta_table} WHERE name = 'runs'")
        state: dict[str, Any] = json.loads(cursor.fetchone()[0])
        return state

    def tables(self, state: dict[str, Any]) -> list[str]:
        """Every table that holds postings, the recent one first."""
        return [self.postings_table, *(run["table"] for run in state["runs"])]

    # -- writes ---------------------------------------------------------------------------
    def reserve_ids(self, cursor: Any, count: int) -> list[int]:
        cursor.execute(f"SELECT nextval('{self.sequence}') FROM generate_series(1, %s)", (count,))
        return [int(row[0]) for row in cursor.fetchall()]

    def add(self, cursor: Any, keys: IntArray, ids: list[int]) -> None:
        """The postings of new records: ``keys`` is (records, tables), ``ids`` their ids. They
        go in key order, so consecutive inserts land on neighbouring leaf pages, as one
        binary COPY built by numpy."""
        flat = keys.ravel()
        order = np.argsort(flat, kind="stable")
        rows = np.empty(flat.size, dtype=_COPY_ROW)
        rows["fields"], rows["k_length"], rows["id_length"] = 2, 8, 8
        rows["k"] = flat[order]
        rows["id"] = np.repeat(np.asarray(ids, dtype=np.int64), keys.shape[1])[order]
        with cursor.copy(f"COPY {self.postings_table} (k, id) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(_COPY_HEADER + rows.tobytes() + _COPY_TRAILER)

    def cut_if_full(self, cursor: Any, last_id: int) -> None:
        """Turn the recent postings into a run once :attr:`run_records` records were added
        since the last cut, then merge (see the module docstring)."""
        state = self.state(cursor)
        if last_id - int(state["cut"]) < self.run_records:
            return
        # A check-and-add transaction set the candidate statement's planner settings, which
        # would make a merge's join probe the records' index once per posting.
        cursor.execute(
            "SET LOCAL enable_seqscan = on; SET LOCAL enable_mergejoin = on; SET LOCAL enable_hashjoin = on; "
            "SET LOCAL maintenance_work_mem = '256MB'; SET LOCAL work_mem = '64MB'"
        )
        runs: list[dict[str, Any]] = list(state["runs"])
        retired: list[str] = []
        runs.append(self._build(cursor, [self.postings_table], tier=0, live_only=False))
        while len(runs) >= MERGE_RUNS and len({run["tier"] for run in runs[-MERGE_RUNS:]}) == 1:
            merged, runs = runs[-MERGE_RUNS:], runs[:-MERGE_RUNS]
            tables = [run["table"] for run in merged]
            runs.append(
                self._build(cursor, tables, tier=merged[0]["tier"] + 1, live_only=bool(state["removed"]))
            )
            retired += tables
        cursor.execute(f"LOCK TABLE {self.postings_table} IN ACCESS EXCLUSIVE MODE")
        cursor.execute(f"TRUNCATE {self.postings_table}")
        for table in retired:
            cursor.execute(f"DROP TABLE {table}")
        cursor.execute(f"DELETE FROM {self.filters_table} WHERE name = ANY(%s)", (retired,))
        state.update(runs=runs, cut=last_id)
        self._save(cursor, state)

    def note_removed(self, cursor: Any, count: int) -> None:
        """Count removed records, whose postings later merges must leave out."""
        state = self.state(cursor)
        state["removed"] += count
        self._save(cursor, state)

    def _save(self, cursor: Any, state: dict[str, Any]) -> None:
        cursor.execute(f"UPDATE {self.meta_table} SET value = %s WHERE name = 'runs'", (json.dumps(state),))

    def _build(self, cursor: Any, sources: list[str], tier: int, live_only: bool) -> dict[str, Any]:
        """One new run of ``tier`` from the postings of ``sources`` (``live_only``: without
        the postings of removed records), with its filter."""
        # Numbered from the id sequence, which never hands out a number twice (not even after
        # a rollback), so a filter cached under a run's name always belongs to that run.
        cursor.execute(f"SELECT nextval('{self.sequence}')")
        table = f"{self.prefix}_run{int(cursor.fetchone()[0])}"
        union = " UNION ALL ".join(f"SELECT k, id FROM {source}" for source in sources)
        live = f" WHERE EXISTS (SELECT 1 FROM {self.records_table} r WHERE r.id = p.id)" if live_only else ""
        # No ORDER BY: reads are index-only, and the index build sorts anyway.
        cursor.execute(f"CREATE TABLE {table} AS SELECT k, id FROM ({union}) AS p{live}")
        postings = int(cursor.rowcount)
        cursor.execute(f"CREATE INDEX {table}_k ON {table} (k) INCLUDE (id)")
        cursor.execute(f"ANALYZE {table}")  # the planner's row counts, before autovacuum's
        bits = build_filter(self._keys_of(cursor, table, postings))
        cursor.execute(
            f"INSERT INTO {self.filters_table} (name, bits) VALUES (%s, %s)", (table, bits.tobytes())
        )
        self.filters[table] = bits
        return {"table": table, "postings": postings, "tier": tier}

    @staticmethod
    def _keys_of(cursor: Any, table: str, postings: int) -> IntArray:
        """Every posting key of a table, as one bytea of 8-byte keys per statement (COPY
        sends a message per row, which took 16 s for 13 million keys; this, about 2)."""
        parts = []
        reads = max(1, -(-postings // KEYS_PER_READ))
        for part in range(reads):
            where = f" WHERE id % {reads} = {part}" if reads > 1 else ""
            # binary=True: bytea in the text protocol is hex, twice the bytes and a slow decode.
            cursor.execute(f"SELECT string_agg(int8send(k), ''::bytea) FROM {table}{where}", binary=True)
            data = cursor.fetchone()[0]
            parts.append(np.frombuffer(bytes(data or b""), dtype=">i8").astype(np.int64))
        return np.concatenate(parts)

    # -- reads ----------------------------------------------------------------------------
    def open_for_reading(self, cursor: Any) -> list[str]:
        """Lock out run changes for the rest of the transaction; the posting tables (with
        the filters of their runs read)."""
        cursor.execute(f"LOCK TABLE {self.postings_table} IN ACCESS SHARE MODE")
        tables = self.tables(self.state(cursor))
        missing = [table for table in tables[1:] if table not in self.filters]
        if missing:
            cursor.execute(
                f"SELECT name, bits FROM {self.filters_table} WHERE name = ANY(%s)", (missing,), binary=True
            )
            for name, bits in cursor.fetchall():
                self.filters[name] = np.frombuffer(bytes(bits), dtype=np.uint64)
        for table in set(self.filters) - set(tables):
            del self.filters[table]  # merged away
        return tables

    def find(self, cursor: Any, keys: IntArray) -> list[tuple[Any, ...]]:
        """(posting key, key_text, key_int, fingerprint) of every live record that has one of
        ``keys``, once per posting."""
        tables = self.open_for_reading(cursor)
        unique = np.unique(keys)
        asked = {tables[0]: unique}  # the recent postings have no filter
        for table in tables[1:]:
            passed = unique[may_contain(self.filters[table], unique)]
            if passed.size:
                asked[table] = passed
        union = " UNION ALL ".join(
            f"SELECT k, id FROM {table} WHERE k = ANY(%s::bigint[])" for table in asked
        )
        cursor.execute(
            f"SELECT p.k, r.key_text, r.key_int, r.fingerprint FROM ({union}) AS p "
            f"JOIN {self.records_table} AS r ON r.id = p.id",
            [bigint_array(values.tolist()) for values in asked.values()],
        )
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows

    def stats(self, cursor: Any, bit_counts: list[int]) -> list[TableStats]:
        """Bucket counts per table over the live postings."""
        tables = self.open_for_reading(cursor)
        union = " UNION ALL ".join(f"SELECT k, id FROM {table}" for table in tables)
        shift, mask = 64 - TABLE_BITS, (1 << TABLE_BITS) - 1
        cursor.execute(
            f"SELECT t, COUNT(*), MAX(n), AVG(n) FROM (SELECT (p.k >> {shift}) & {mask} AS t, "
            f"COUNT(*) AS n FROM ({union}) AS p JOIN {self.records_table} AS r ON r.id = p.id "
            "GROUP BY p.k) AS buckets GROUP BY t"
        )
        found = {int(row[0]): row for row in cursor.fetchall()}
        stats = []
        for table, bits in enumerate(bit_counts):
            _, buckets, largest, mean = found.get(table, (table, 0, 0, 0.0))
            stats.append(TableStats(table, bits, int(buckets or 0), int(largest or 0), float(mean or 0.0)))
        return stats

    def drop(self, cursor: Any) -> None:
        for table in self.tables(self.state(cursor)):
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
        cursor.execute(f"DROP TABLE IF EXISTS {self.records_table}")
        cursor.execute(f"DROP TABLE IF EXISTS {self.filters_table}")
        cursor.execute(f"DROP SEQUENCE IF EXISTS {self.sequence}")

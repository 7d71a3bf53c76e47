"""The runs layout of the SQL stores that hold large indexes (PostgreSQL and SQLite): records in
one table, postings in immutable runs built in bulk, each with a filter.

Tables (``<prefix>`` as in :mod:`neardup.storage.sql`):

- ``<prefix>_records(id, key_text, key_int, fingerprint, cluster_text, cluster_int,
  signature)``: one row per record; no block columns.
- ``<prefix>_postings(k, id)``: the postings of records added since the last cut, indexed on
  ``k``, one posting key per (table, block key) (:func:`~.run_filters.posting_keys`).
- ``<prefix>_run<n>(k, id)``: runs, each written once by ``CREATE TABLE … AS SELECT`` and
  indexed by ``CREATE INDEX`` (a sorted bulk build), never updated. Their names, sizes and
  tiers are the meta row ``runs``, with the last record id in a run (``cut``), the next id
  and how many records were removed.
- ``<prefix>_filters(name, bits)``: each run's filter (:mod:`.run_filters`; under 1 % false
  positives), read once per process and kept, since runs never change.

Why: the column layout inserts every record into 16 B-trees at random places. At 10^6
records, moving 131,072 recent records into them took 19–58 s on PostgreSQL (most leaf pages of
every index read, dirtied and written again), which held band check-and-add to ~1,400 docs/s.
Building a run of the same records costs one sort and one bulk index build, about 5 s.

Once ``<prefix>_postings`` holds the postings of :data:`RUN_RECORDS` records they become a run
of tier 0, and :data:`MERGE_RUNS` runs of one tier are merged into one of the next tier
(size-tiered, as in LSM trees): a posting is rewritten log_4(records / RUN_RECORDS) times and
at most 3 runs per tier are read. Once a record was removed, merges leave out the postings of
removed records (a remove deletes the record row only; postings whose id has no row are
ignored by every read).

Reads: one statement per batch, each run asked only for the keys that pass its filter (a few
hundred of a batch's 16,000: each probe of a B-tree is a descent from its root, so asking every
run for every key cost ~300 ms a run per batch). The recent postings are indexed by record id
only, and each process searches its own copy of them in memory
(:mod:`~neardup.storage.recent_postings`), so that an add appends instead of touching one
random index page per posting. Stores made before that (no ``stamp`` in the meta row) keep
their index by key and are asked by key.

Writers run one at a time (PostgreSQL: the advisory writer lock for the whole transaction;
SQLite: ``BEGIN IMMEDIATE``). Readers see the run list and the runs of one moment: SQLite's
WAL snapshot gives that; on PostgreSQL a reader locks ``<prefix>_postings`` in ACCESS SHARE
mode before it reads the list, and a writer that retires runs takes ACCESS EXCLUSIVE on it
before it empties it, drops the old runs and publishes the new list (the sort and index builds
run before that lock).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..blocks import BucketStats, TableStats
from ..similarity.bands import Scheme
from .base import (
    Candidates,
    IntArray,
    Key,
    RecordBatch,
    UInt64Array,
    bytes_to_words,
    key_columns,
    key_exists_error,
    key_from_columns,
    match_blocks,
    raced_key_error,
    words_to_bytes,
    words_to_int,
)
from .recent_postings import RecentPostings
from .run_filters import TABLE_BITS, build_filter, may_contain, posting_keys
from .sql import RECORD_COLUMNS, SqlStorage, stored_record

#: The layout a store of this module records in its meta row ``layout``.
LAYOUT = "runs-1"
#: Records whose postings make one run (the postings table holds at most about this many).
RUN_RECORDS = 32_768
#: Runs of one tier merged into one run of the next tier once there are this many.
MERGE_RUNS = 4


class PostingRuns:
    """The SQL of the runs layout for one table prefix; the caller owns the transaction.
    Dialects override the hooks at the end."""

    placeholder = "?"
    #: The index of the posting tables (PostgreSQL stores the id in the leaf: INCLUDE).
    posting_index = "(k, id)"

    def __init__(self, prefix: str, records_table: str, meta_table: str) -> None:
        self.prefix = prefix
        self.records_table = records_table
        self.meta_table = meta_table
        self.postings_table = f"{prefix}_postings"
        self.filters_table = f"{prefix}_filters"
        self.run_records = RUN_RECORDS
        #: Filters read so far, by run table (runs never change, so neither do they).
        self.filters: dict[str, UInt64Array] = {}
        self.recent = RecentPostings()
        #: Runs a function once the current transaction commits (set by the store).
        self.on_commit: Callable[[Callable[[], None]], None] = lambda function: None

    # -- creation and state ---------------------------------------------------------------
    def create(self, cursor: Any, record_columns: str) -> None:
        p = self.placeholder
        cursor.execute(f"CREATE TABLE {self.records_table} ({record_columns}, UNIQUE (key_text, key_int))")
        cursor.execute(f"CREATE TABLE {self.postings_table} (k BIGINT NOT NULL, id BIGINT NOT NULL)")
        cursor.execute(f"CREATE INDEX {self.postings_table}_id ON {self.postings_table} (id)")
        cursor.execute(
            f"CREATE TABLE {self.filters_table} (name VARCHAR(80) PRIMARY KEY, bits {self.blob} NOT NULL)"
        )
        state = {"runs": [], "cut": 0, "next_id": 1, "removed": 0, "stamp": _stamp()}
        cursor.execute(
            f"INSERT INTO {self.meta_table} (name, value) VALUES ('layout', {p}), ('runs', {p})",
            (LAYOUT, json.dumps(state)),
        )

    def state(self, cursor: Any) -> dict[str, Any]:
        """The meta row ``runs``: ``runs`` ([{"table", "postings", "tier"}], oldest first),
        ``cut`` (the last record id whose postings are in a run), ``next_id``, ``removed``
        (records removed so far) and ``stamp`` (new at every cut,
        :mod:`~neardup.storage.recent_postings`; absent in stores made before it)."""
        cursor.execute(f"SELECT value FROM {self.meta_table} WHERE name = 'runs'")
        state: dict[str, Any] = json.loads(cursor.fetchone()[0])
        return state

    def _save(self, cursor: Any, state: dict[str, Any]) -> None:
        cursor.execute(
            f"UPDATE {self.meta_table} SET value = {self.placeholder} WHERE name = 'runs'",
            (json.dumps(state),),
        )

    def tables(self, state: dict[str, Any]) -> list[str]:
        """Every table that holds postings, the recent one first."""
        return [self.postings_table, *(run["table"] for run in state["runs"])]

    # -- writes ---------------------------------------------------------------------------
    def reserve_ids(self, cursor: Any, count: int) -> tuple[list[int], dict[str, Any]]:
        """Ids for new records, from the meta row (so they are never handed out twice: a
        removed record's postings must not come back as another's), and the state as saved
        (for :meth:`cut_if_full` in the same transaction)."""
        state = self.state(cursor)
        first = int(state["next_id"])
        if first <= int(state["cut"]) + 1 and self.recent.usable_for(state) == "stale":
            empty = np.empty(0, np.int64)
            self.recent.reset(state, empty, empty)  # no recent postings: nothing to read
        state["next_id"] = first + count
        self._save(cursor, state)
        return list(range(first, first + count)), state

    def add(self, cursor: Any, keys: IntArray, ids: list[int], state: dict[str, Any]) -> None:
        """The postings of new records: ``keys`` is (records, tables), ``ids`` their ids (the
        last ones reserved) and ``state`` what :meth:`reserve_ids` returned. Once the
        transaction commits, this process's copy of the recent postings takes them, if it
        held every earlier one."""
        flat = keys.ravel()
        repeated = np.repeat(np.asarray(ids, dtype=np.int64), keys.shape[1])
        self._insert_postings(cursor, flat, repeated)
        stamp, first, after = state.get("stamp"), min(ids), int(state["next_id"])
        recent = self.recent

        def committed() -> None:
            if stamp is not None and recent.stamp == stamp and recent.next_id == first:
                recent.extend(flat, repeated, after)

        self.on_commit(committed)

    def note_removed(self, cursor: Any, count: int) -> None:
        """Count removed records, whose postings later merges must leave out."""
        state = self.state(cursor)
        state["removed"] += count
        self._save(cursor, state)

    def cut_if_full(self, cursor: Any, state: dict[str, Any], last_id: int) -> None:
        """Turn the recent postings into a run once :attr:`run_records` records were added
        since the last cut, then merge (see the module docstring). ``state``: the meta row
        as this transaction last saved it."""
        if last_id - int(state["cut"]) < self.run_records:
            return
        self._prepare_builds(cursor)
        runs: list[dict[str, Any]] = list(state["runs"])
        retired: list[str] = []
        runs.append(self._build(cursor, [self.postings_table], tier=0, live_only=False))
        while len(runs) >= MERGE_RUNS and len({run["tier"] for run in runs[-MERGE_RUNS:]}) == 1:
            merged, runs = runs[-MERGE_RUNS:], runs[:-MERGE_RUNS]
            tables = [run["table"] for run in merged]
            tier = merged[0]["tier"] + 1
            runs.append(self._build(cursor, tables, tier=tier, live_only=bool(state["removed"])))
            retired += tables
        self._empty_postings(cursor)
        for table in retired:
            cursor.execute(f"DROP TABLE {table}")
            cursor.execute(f"DELETE FROM {self.filters_table} WHERE name = {self.placeholder}", (table,))
        state.update(runs=runs, cut=last_id, stamp=_stamp())
        self._save(cursor, state)
        empty = np.empty(0, np.int64)
        self.on_commit(lambda: self.recent.reset(state, empty, empty))

    def _build(self, cursor: Any, sources: list[str], tier: int, live_only: bool) -> dict[str, Any]:
        """One new run of ``tier`` from the postings of ``sources`` (``live_only``: without
        the postings of removed records), with its filter."""
        # A random name is never reused (not even after a rollback), so a filter cached
        # under a run's name always belongs to that run.
        table = f"{self.prefix}_run_{secrets.token_hex(8)}"
        union = " UNION ALL ".join(f"SELECT k, id FROM {source}" for source in sources)
        live = f" WHERE EXISTS (SELECT 1 FROM {self.records_table} r WHERE r.id = p.id)" if live_only else ""
        # No ORDER BY: reads use the index only, and the index build sorts anyway.
        cursor.execute(f"CREATE TABLE {table} AS SELECT k, id FROM ({union}) AS p{live}")
        created = int(cursor.rowcount)  # -1 where the driver does not count (sqlite3)
        cursor.execute(f"CREATE INDEX {table}_k ON {table} {self.posting_index}")
        cursor.execute(f"ANALYZE {table}")  # the planner's row counts, before any autovacuum's
        keys = self._keys_of(cursor, table, created)
        bits = build_filter(keys)
        p = self.placeholder
        cursor.execute(
            f"INSERT INTO {self.filters_table} (name, bits) VALUES ({p}, {p})", (table, bits.tobytes())
        )
        self.filters[table] = bits
        return {"table": table, "postings": int(keys.size), "tier": tier}

    # -- reads ----------------------------------------------------------------------------
    def open_for_reading(self, cursor: Any) -> tuple[list[str], dict[str, Any]]:
        """The posting tables and the state, with the filters of the runs read; run changes
        are locked out for the rest of the transaction."""
        self._lock_for_reading(cursor)
        state = self.state(cursor)
        tables = self.tables(state)
        missing = [table for table in tables[1:] if table not in self.filters]
        if missing:
            for name, bits in self._read_filters(cursor, missing):
                self.filters[name] = np.frombuffer(bytes(bits), dtype=np.uint64)
        for table in set(self.filters) - set(tables):
            del self.filters[table]  # merged away
        return tables, state

    def find(self, cursor: Any, keys: IntArray, extra: Sequence[str] = ()) -> list[tuple[Any, ...]]:
        """(posting key, key_text, key_int, fingerprint, the ``extra`` record columns) of every
        live record that has one of ``keys``, once per posting."""
        tables, state = self.open_for_reading(cursor)
        unique = np.unique(keys)
        parts, parameters = [], []
        if self._recent_in_memory(cursor, state):
            found_keys, found_ids = self.recent.find(unique)
            if found_keys.size:
                part, given = self._given_postings(found_keys, found_ids)
                parts.append(part)
                parameters.extend(given)
        else:  # a store made before the stamps: its recent postings are indexed by key
            condition, parameter = self._one_of_keys(unique)
            parts.append(f"SELECT k, id FROM {tables[0]} WHERE {condition}")
            parameters.append(parameter)
        for table in tables[1:]:
            passed = unique[may_contain(self.filters[table], unique)]
            if passed.size:
                condition, parameter = self._one_of_keys(passed)
                parts.append(f"SELECT k, id FROM {table} WHERE {condition}")
                parameters.append(parameter)
        if not parts:
            return []
        columns = "".join(f", r.{column}" for column in extra)
        return self._fetch(
            cursor,
            f"SELECT p.k, r.key_text, r.key_int, r.fingerprint{columns} "
            f"FROM ({' UNION ALL '.join(parts)}) AS p JOIN {self.records_table} AS r ON r.id = p.id",
            parameters,
        )

    def _recent_in_memory(self, cursor: Any, state: dict[str, Any]) -> bool:
        """Bring this process's copy of the recent postings to ``state`` (reading another
        process's adds by id, or all of them after a cut); False for a store without stamps."""
        if state.get("stamp") is None:
            return False
        usable = self.recent.usable_for(state)
        if usable == "behind":
            keys, ids = self._postings_between(cursor, self.recent.next_id, int(state["next_id"]))
            self.recent.extend(keys, ids, int(state["next_id"]))
        elif usable == "stale":
            keys, ids = self._postings_between(cursor, 0, int(state["next_id"]))
            self.recent.reset(state, keys, ids)
        return True

    def stats(self, cursor: Any, bit_counts: list[int]) -> list[TableStats]:
        """Bucket counts per table over the live postings."""
        tables, _ = self.open_for_reading(cursor)
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

    # -- dialect hooks (SQLite's here) ----------------------------------------------------
    blob = "BLOB"

    def _insert_postings(self, cursor: Any, keys: IntArray, ids: IntArray) -> None:
        cursor.executemany(
            f"INSERT INTO {self.postings_table} (k, id) VALUES (?, ?)",
            zip(keys.tolist(), ids.tolist(), strict=True),
        )

    def _keys_of(self, cursor: Any, table: str, rows: int) -> IntArray:
        """Every posting key of a run (``rows`` of them, or -1: not counted), as one
        comma-separated text parsed by numpy (a row at a time through Python took 7.1 s for
        10^7 keys, this 3.1)."""
        cursor.execute(f"SELECT group_concat(k) FROM {table}")
        text = cursor.fetchone()[0]
        return np.fromstring(text, dtype=np.int64, sep=",") if text else np.empty(0, np.int64)

    def _read_filters(self, cursor: Any, names: list[str]) -> list[tuple[str, bytes]]:
        cursor.execute(
            f"SELECT name, bits FROM {self.filters_table} WHERE name IN (SELECT value FROM json_each(?))",
            (json.dumps(names),),
        )
        return [(row[0], bytes(row[1])) for row in cursor.fetchall()]

    def _one_of_keys(self, values: IntArray) -> tuple[str, Any]:
        """``k`` in ``values`` as a condition with one parameter."""
        return "k IN (SELECT value FROM json_each(?))", json.dumps(values.tolist())

    def _lock_for_reading(self, cursor: Any) -> None:
        """Keep the run list and the runs still for the transaction (SQLite: its snapshot)."""

    def _prepare_builds(self, cursor: Any) -> None:
        """Session settings for sorting and index builds."""

    def _empty_postings(self, cursor: Any) -> None:
        cursor.execute(f"DELETE FROM {self.postings_table}")

    def _postings_between(self, cursor: Any, first: int, stop: int) -> tuple[IntArray, IntArray]:
        """(keys, ids) of the recent postings of records ``first`` ≤ id < ``stop``."""
        cursor.execute(
            f"SELECT group_concat(k), group_concat(id) FROM {self.postings_table} WHERE id >= ? AND id < ?",
            (first, stop),
        )
        keys, ids = cursor.fetchone()
        if not keys:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return np.fromstring(keys, dtype=np.int64, sep=","), np.fromstring(ids, dtype=np.int64, sep=",")

    def _given_postings(self, keys: IntArray, ids: IntArray) -> tuple[str, list[Any]]:
        """A table of the given (k, id) pairs and its parameters, for the union with the
        runs' postings."""
        pairs = json.dumps(np.stack([keys, ids], axis=1).tolist())
        columns = "json_extract(value, '$[0]') AS k, json_extract(value, '$[1]') AS id"
        return f"SELECT {columns} FROM json_each(?)", [pairs]

    def _fetch(self, cursor: Any, statement: str, parameters: Any) -> list[tuple[Any, ...]]:
        """Every row of a read (PostgreSQL: in binary, which spares hex-coding the blobs)."""
        cursor.execute(statement, parameters)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


class RunsStorage(SqlStorage):
    """A SQL store whose new indexes use the runs layout; stores of the column layout made
    before it (no meta row ``layout``) are still served by :class:`SqlStorage` unchanged."""

    #: The layout new stores get (tests set "columns" to make a store of the earlier layout).
    create_layout = LAYOUT
    #: The id column of a runs-layout records table (ids come from the meta row).
    runs_id_column = "id BIGINT PRIMARY KEY"
    runs: PostingRuns
    #: Whether the attached store is in the runs layout (known at :meth:`attach`).
    _runs_layout = False

    def _create_tables(self, cursor: Any, tables: int) -> None:
        if self.create_layout == LAYOUT:
            self.runs.create(cursor, self.record_columns(self.runs_id_column))
        else:
            super()._create_tables(cursor, tables)

    def attach(self, scheme: Scheme, mu: float) -> None:
        super().attach(scheme, mu)
        self.runs.on_commit = self._on_commit
        with self._transaction() as cursor:
            cursor.execute(f"SELECT value FROM {self.meta_table} WHERE name = 'layout'")
            row = cursor.fetchone()
        self._runs_layout = row is not None and row[0] == LAYOUT

    def add_many(self, batch: RecordBatch) -> None:
        if not self._runs_layout:
            super().add_many(batch)
            return
        if not len(batch):
            return
        self._check_keys(batch.keys)
        keys = posting_keys(self.scheme.keys(batch.words))
        fingerprints = words_to_bytes(batch.words)
        with self._transaction(write=True) as cursor:
            self._lock(cursor)  # one writer at a time: a cut rewrites the postings
            stored = self._stored_keys(cursor, batch.keys)
            if stored:
                raise key_exists_error(stored[0], len(stored), self.where)
            ids, state = self.runs.reserve_ids(cursor, len(batch))
            rows = []
            for row, key in enumerate(batch.keys):
                cluster = batch.cluster(row)
                cluster_text, cluster_int = (None, None) if cluster is None else key_columns(cluster)
                signature = batch.signature(row)
                rows.append(
                    (ids[row], *key_columns(key), fingerprints[row], cluster_text, cluster_int, signature)
                )
            rows.sort(key=lambda row: (row[1], row[2]))  # see SqlStorage.add_many
            try:
                self._insert_records(cursor, rows)
            except self._integrity_errors() as exc:
                raise raced_key_error(self.where, exc) from exc
            self.runs.add(cursor, keys, ids, state)
            self.runs.cut_if_full(cursor, state, max(ids))

    def _insert_records(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        marks = self._marks(len(rows[0]))
        cursor.executemany(
            f"INSERT INTO {self.records_table} (id, key_text, key_int, fingerprint, cluster_text, "
            f"cluster_int, signature) VALUES ({marks})",
            rows,
        )

    def remove_many(self, keys: Sequence[Key]) -> None:
        # The record rows go; their postings are skipped by reads and dropped by merges.
        with self._transaction(write=True) as cursor:
            if self._runs_layout:
                self._lock(cursor)
            super().remove_many(keys)
            if self._runs_layout:
                self.runs.note_removed(cursor, len(set(keys)))

    def candidates(self, words: UInt64Array, *, records: bool = False) -> Candidates:
        if not self._runs_layout:
            return super().candidates(words, records=records)
        keys = posting_keys(self.scheme.keys(words))
        with self._transaction() as cursor:
            self._prefer_indexes(cursor)
            rows = self.runs.find(cursor, keys, RECORD_COLUMNS if records else ())
        if not rows:
            return Candidates(np.empty(0, np.int64), [], np.empty((0, words.shape[1]), np.uint64))
        found = np.array([row[0] for row in rows], dtype=np.int64).view(np.uint64)
        positions, found_rows = match_blocks(keys.reshape(-1, 1).view(np.uint64), found.reshape(-1, 1))
        found_words = bytes_to_words([bytes(row[3]) for row in rows], words.shape[1])
        record_keys = [key_from_columns(row[1], row[2]) for row in rows]
        read = {}
        if records:
            width = self.scheme.fingerprint_words
            for position, row in enumerate(rows):
                key = record_keys[position]
                if key not in read:  # a record comes once per posting found
                    read[key] = stored_record(key, words_to_int(found_words[position], width), row[4:])
        return Candidates(
            positions // keys.shape[1],
            [record_keys[i] for i in found_rows.tolist()],
            found_words[found_rows],
            read,
        )

    def stats(self) -> BucketStats:
        if not self._runs_layout:
            return super().stats()
        stats = BucketStats(scheme=self.scheme.describe())
        with self._transaction() as cursor:
            stats.tables.extend(self.runs.stats(cursor, [table.bit_count for table in self.scheme.tables]))
        return stats

    def drop(self) -> None:
        if not self._runs_layout:
            return super().drop()
        with self._transaction(write=True) as cursor:
            self.runs.drop(cursor)
            cursor.execute(f"DROP TABLE IF EXISTS {self.meta_table}")


def _stamp() -> str:
    """A token never used before (the meta row's ``stamp``, new at every cut)."""
    return secrets.token_hex(8)

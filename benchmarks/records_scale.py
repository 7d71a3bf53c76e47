"""`neardup records` at scale: planted duplicates in a 1,000,000-row table, SQLite and PostgreSQL.

What it measures (the issue's target: F1 ≥ 0.90, no real row joined to a synthetic one,
≥ 10,000 rows/s, streamed, peak memory reported):

- Data: FEBRL 1-3 of ../shared/data/dev/records/ (``--data DIR`` to point elsewhere). Every
  column but ``id`` and ``cluster`` (never features) is a column of table ``t``.
- Synthetic rows: each column drawn independently from that column's FEBRL values (seeded
  ``random.Random``), so they look like people but match nobody.
- Real rows: ``--planted N`` FEBRL rows sampled without replacement, each plus one planted copy
  with 1-2 column edits (a typo, two adjacent characters swapped, or the value missing).
- Gold: the planted pairs plus FEBRL's own duplicates among the sampled rows (same file, same
  ``cluster``); every other pair is a non-duplicate. ``real~synth`` counts the real or planted
  rows whose predicted cluster also holds a synthetic row (should be 0).
- Table: an SQLite file (a temporary folder, or ``--keep DIR``), integer primary key ``id``
  shuffled so the real rows are spread over the table. ``--postgres`` also COPYs it into a
  PostgreSQL server started on 127.0.0.1 by scripts/servers.py (stopped by PID at the end).
- Runs: the real CLI in a child process, ``neardup records URL --table t --key id --clusters
  OUT`` (the default: learned weights) and the same with ``-k auto`` (the Simhash path, the
  previous default) as the baseline. Wall seconds, rows/s, and the child's peak RSS: its own
  ``ru_maxrss`` from ``os.wait4`` (what ``/usr/bin/time -v`` reports; the PostgreSQL server's
  memory is not included). Each clusters file is scored pairwise (a pair = two rows in one
  cluster): precision, recall, F1, and the recall of the planted pairs alone (FEBRL row and
  its edited copy; FEBRL's own duplicates, the rest of the gold, carry heavier edits).

    python3 benchmarks/records_scale.py                     # 1,000,000 rows, 10,000 planted, SQLite
    python3 benchmarks/records_scale.py --quick             # 100,000 rows, 1,000 planted
    python3 benchmarks/records_scale.py --postgres          # SQLite and PostgreSQL
    python3 benchmarks/records_scale.py --rows 300000 --planted 3000 --seed 3 --keep /tmp/scale
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import sqlite3
import string
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store_speed import load_servers  # scripts/servers.py, loaded by path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "dev" / "records"
FILES = ("febrl_dataset1.csv", "febrl_dataset2.csv", "febrl_dataset3.csv")
NOT_FEATURES = ("id", "cluster")
TABLE = "t"
RUNS: dict[str, list[str]] = {"default": [], "-k auto": ["-k", "auto"]}
TARGET_F1 = 0.90
TARGET_ROWS_PER_SECOND = 10_000


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Febrl:
    """FEBRL rows: the feature columns' values, and each row's entity (file, cluster)."""

    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]
    entities: list[tuple[int, str]]


def read_febrl(folder: Path) -> Febrl:
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        sys.exit(f"records_scale: {', '.join(missing)} not found in {folder} (pass --data DIR)")
    columns: tuple[str, ...] = ()
    rows: list[tuple[str, ...]] = []
    entities: list[tuple[int, str]] = []
    for number, name in enumerate(FILES, start=1):
        with open(folder / name, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            header = tuple(column for column in reader.fieldnames or () if column not in NOT_FEATURES)
            if columns and header != columns:
                sys.exit(f"records_scale: {name} has columns {header}, expected {columns}")
            columns = header
            for record in reader:
                rows.append(tuple(record[column].strip() for column in columns))
                entities.append((number, record["cluster"]))
    return Febrl(columns, rows, entities)


def _typo(value: str, rng: random.Random) -> str:
    """One character replaced by another of its kind (digit for digit, letter for letter)."""
    at = rng.randrange(len(value))
    alphabet = string.digits if value[at].isdigit() else string.ascii_lowercase
    return value[:at] + rng.choice(alphabet.replace(value[at], "")) + value[at + 1 :]


def _swap(value: str, rng: random.Random) -> str | None:
    """Two different adjacent characters swapped; None when there are none."""
    spots = [at for at in range(len(value) - 1) if value[at] != value[at + 1]]
    if not spots:
        return None
    at = rng.choice(spots)
    return value[:at] + value[at + 1] + value[at] + value[at + 2 :]


def plant(row: tuple[str, ...], rng: random.Random) -> tuple[str, ...]:
    """A copy of `row` with 1-2 filled columns edited: typo, adjacent swap or missing value."""
    copy = list(row)
    filled = [at for at, value in enumerate(row) if value]
    for at in rng.sample(filled, min(len(filled), rng.choice((1, 2)))):
        edit = rng.choice(("typo", "swap", "missing"))
        if edit == "missing":
            copy[at] = ""
        elif edit == "swap":
            copy[at] = _swap(copy[at], rng) or _typo(copy[at], rng)
        else:
            copy[at] = _typo(copy[at], rng)
    return tuple(copy)


@dataclass
class Table:
    """The generated table's truth: which ids are real (or planted) and their gold groups."""

    path: Path
    columns: tuple[str, ...]
    rows: int
    real: dict[int, int]  # id of a real or planted row -> gold group (ids of other rows: synthetic)
    gold_pairs: int
    planted: int
    planted_pairs: list[tuple[int, int]]  # (id of a FEBRL row, id of its planted copy)


def build_table(febrl: Febrl, path: Path, rows: int, planted: int, seed: int) -> Table:
    """Write table `t` to the SQLite file `path`; ids 1..rows, real rows at random ids."""
    if planted > len(febrl.rows):
        sys.exit(f"records_scale: --planted {planted} exceeds the {len(febrl.rows):,} FEBRL rows")
    if 2 * planted > rows:
        sys.exit(f"records_scale: --rows {rows} cannot hold {planted} planted pairs")
    rng = random.Random(seed)
    values = [[row[at] for row in febrl.rows] for at in range(len(febrl.columns))]
    sampled = rng.sample(range(len(febrl.rows)), planted)
    places = rng.sample(range(1, rows + 1), 2 * planted)
    at_id: dict[int, tuple[str, ...]] = {}
    group_of_entity: dict[tuple[int, str], int] = {}
    real: dict[int, int] = {}
    pairs: list[tuple[int, int]] = []
    for number, source in enumerate(sampled):
        original = febrl.rows[source]
        first, second = places[2 * number], places[2 * number + 1]
        at_id[first], at_id[second] = original, plant(original, rng)
        group = group_of_entity.setdefault(febrl.entities[source], len(group_of_entity))
        real[first] = real[second] = group
        pairs.append((first, second))
    sizes = Counter(real.values())
    gold_pairs = sum(size * (size - 1) // 2 for size in sizes.values())

    def table_rows() -> Iterator[tuple[Any, ...]]:
        for row_id in range(1, rows + 1):
            row = at_id.get(row_id) or tuple(rng.choice(column) for column in values)
            yield (row_id, *(value or None for value in row))

    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.execute(
            f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, "
            + ", ".join(f"{column} TEXT" for column in febrl.columns)
            + ")"
        )
        marks = ", ".join("?" * (len(febrl.columns) + 1))
        db.executemany(f"INSERT INTO {TABLE} VALUES ({marks})", table_rows())
    return Table(path, febrl.columns, rows, real, gold_pairs, planted, pairs)


# --------------------------------------------------------------------------- PostgreSQL


def copy_to_postgres(table: Table, url: str) -> float:
    """COPY the SQLite table into PostgreSQL in id order; seconds taken."""
    import psycopg

    started = time.perf_counter()
    columns = ", ".join(table.columns)
    with sqlite3.connect(table.path) as source, psycopg.connect(url) as target:
        target.execute(f"DROP TABLE IF EXISTS {TABLE}")
        target.execute(
            f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, "
            + ", ".join(f"{column} TEXT" for column in table.columns)
            + ")"
        )
        with target.cursor() as cursor, cursor.copy(f"COPY {TABLE} (id, {columns}) FROM STDIN") as copy:
            for row in source.execute(f"SELECT id, {columns} FROM {TABLE} ORDER BY id"):
                copy.write_row(row)
        target.commit()
        target.execute(f"ANALYZE {TABLE}")
    return time.perf_counter() - started


# --------------------------------------------------------------------------- runs and scores


@dataclass
class Result:
    store: str
    run: str
    seconds: float
    rows_per_second: float
    peak_mb: float
    precision: float
    recall: float
    f1: float
    predicted_pairs: int
    gold_pairs: int
    real_joined: int
    mixed_clusters: int
    planted_recall: float = 0.0  # share of the planted pairs (FEBRL row, its copy) found
    failed: str = ""


def neardup_command() -> list[str]:
    found = shutil.which("neardup")
    return [found] if found else [sys.executable, "-m", "neardup"]


def run_child(command: Sequence[str], log: Path) -> tuple[int, float, float]:
    """Run `command` with stdout and stderr in `log`: exit status, wall seconds, peak RSS in MB
    (the child's ru_maxrss from wait4, kilobytes on Linux)."""
    with open(log, "wb") as output:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, seconds, usage.ru_maxrss / 1024


def score(clusters: Path, table: Table) -> dict[str, float]:
    """Pairwise precision, recall, F1 of a clusters file, from counts (no pair lists), and the
    real rows sharing a cluster with a synthetic row."""
    members: Counter[Any] = Counter()
    synthetic: Counter[Any] = Counter()
    overlap: Counter[tuple[Any, int]] = Counter()
    real_in: Counter[Any] = Counter()
    cluster_of: dict[int, Any] = {}
    with open(clusters, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            row_id, cluster = int(record["id"]), record["cluster"]
            members[cluster] += 1
            group = table.real.get(row_id)
            if group is None:
                synthetic[cluster] += 1
            else:
                cluster_of[row_id] = cluster
                real_in[cluster] += 1
                overlap[(cluster, group)] += 1
    predicted = sum(size * (size - 1) // 2 for size in members.values())
    right = sum(size * (size - 1) // 2 for size in overlap.values())
    precision = right / predicted if predicted else 1.0
    recall = right / table.gold_pairs if table.gold_pairs else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    mixed = [cluster for cluster in real_in if synthetic[cluster]]
    found = sum(cluster_of.get(a, a) == cluster_of.get(b, b) for a, b in table.planted_pairs)
    return {
        "rows": sum(members.values()),
        "predicted_pairs": predicted,
        "precision": precision,
        "recall": recall,
        "planted_recall": found / len(table.planted_pairs) if table.planted_pairs else 1.0,
        "f1": f1,
        "real_joined": sum(real_in[cluster] for cluster in mixed),
        "mixed_clusters": len(mixed),
    }


def measure(store: str, url: str, table: Table, folder: Path) -> list[Result]:
    results = []
    for run, extra in RUNS.items():
        tag = f"{store}-{'default' if not extra else 'k-auto'}"
        clusters, log = folder / f"clusters-{tag}.jsonl", folder / f"log-{tag}.txt"
        clusters.unlink(missing_ok=True)
        command = [*neardup_command(), "records", url, "--table", TABLE, "--key", "id"]
        command += [*extra, "--clusters", str(clusters)]
        print(f"records_scale: {store} {run}: neardup {' '.join(command[1:])}", file=sys.stderr, flush=True)
        status, seconds, peak = run_child(command, log)
        if status != 0 or not clusters.exists():
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            result = Result(store, run, seconds, 0, peak, 0, 0, 0, 0, table.gold_pairs, 0, 0,
                            failed=f"exit {status}: {tail[0]}")  # fmt: skip
            print(f"{store:8s} {run:8s} FAILED ({result.failed}); log {log}", flush=True)
        else:
            figures = score(clusters, table)
            if figures["rows"] != table.rows:
                print(f"  note: {clusters.name} has {figures['rows']:,} rows, the table {table.rows:,}")
            result = Result(
                store,
                run,
                seconds,
                table.rows / seconds,
                peak,
                figures["precision"],
                figures["recall"],
                figures["f1"],
                int(figures["predicted_pairs"]),
                table.gold_pairs,
                int(figures["real_joined"]),
                int(figures["mixed_clusters"]),
                figures["planted_recall"],
            )
            print(
                f"{store:8s} {run:8s} {seconds:7.1f} s  {result.rows_per_second:>8,.0f} rows/s  "
                f"peak RSS {peak:7,.0f} MB  P {result.precision:.3f} R {result.recall:.3f} "
                f"F1 {result.f1:.3f} (planted R {result.planted_recall:.3f})  "
                f"pairs {result.predicted_pairs:,} (gold {table.gold_pairs:,})  "
                f"real~synth {result.real_joined} rows in {result.mixed_clusters} clusters",
                flush=True,
            )
        results.append(result)
    return results


def print_table(results: list[Result]) -> None:
    print(
        f"\ntargets: F1 ≥ {TARGET_F1:.2f}, 0 real rows joined to a synthetic one, "
        f"≥ {TARGET_ROWS_PER_SECOND:,} rows/s"
    )
    print(
        "| store | run | seconds | rows/s | peak RSS MB | precision | recall | F1 | planted recall "
        "| predicted pairs | gold pairs | real~synth | targets |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        if r.failed:
            print(f"| {r.store} | {r.run} | {r.seconds:.1f} | failed: {r.failed} ||||||||||")
            continue
        met = r.f1 >= TARGET_F1 and r.real_joined == 0 and r.rows_per_second >= TARGET_ROWS_PER_SECOND
        print(
            f"| {r.store} | {r.run} | {r.seconds:.1f} | {r.rows_per_second:,.0f} | {r.peak_mb:,.0f} "
            f"| {r.precision:.3f} | {r.recall:.3f} | {r.f1:.3f} | {r.planted_recall:.3f} "
            f"| {r.predicted_pairs:,} "
            f"| {r.gold_pairs:,} | {r.real_joined} | {'met' if met else 'missed'} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the table")
    parser.add_argument("--planted", type=int, default=10_000, help="real FEBRL rows, each with a copy")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--data", type=Path, default=DATA, help="folder of febrl_dataset{1,2,3}.csv")
    parser.add_argument("--postgres", action="store_true", help="also measure on PostgreSQL")
    parser.add_argument("--keep", type=Path, help="write the table, clusters and logs here and keep them")
    parser.add_argument("--quick", action="store_true", help="100,000 rows, 1,000 planted")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.planted = 100_000, 1_000

    febrl = read_febrl(args.data)
    with tempfile.TemporaryDirectory(prefix="neardup-records-scale-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        print(f"records_scale: building a table of {args.rows:,} rows", file=sys.stderr, flush=True)
        table = build_table(febrl, folder / "table.db", args.rows, args.planted, args.seed)
        print(
            f"table {TABLE}: {table.rows:,} rows ({table.rows - 2 * table.planted:,} synthetic, "
            f"{table.planted:,} FEBRL rows + {table.planted:,} planted copies), {len(table.columns)} "
            f"columns, seed {args.seed}; gold pairs {table.gold_pairs:,} "
            f"({table.gold_pairs - table.planted:,} beyond the planted ones: FEBRL's own duplicates); "
            f"built in {time.perf_counter() - started:.0f} s: {table.path}",
            flush=True,
        )
        results = measure("sqlite", f"sqlite:///{table.path}", table, folder)
        if args.postgres:
            server = load_servers().start("postgres")
            try:
                seconds = copy_to_postgres(table, str(server.url))
                print(f"PostgreSQL {server.url}: COPY of {table.rows:,} rows in {seconds:.0f} s", flush=True)
                results += measure("postgres", str(server.url), table, folder)
            finally:
                server.stop(remove_dir=True)
        print_table(results)


if __name__ == "__main__":
    main()

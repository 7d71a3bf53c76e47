"""How fast a records index checks new rows (seed 002's Table 5 shape: mean milliseconds per
new row for "is there any duplicate?" and "return all duplicates", and check-and-add), with
N synthetic rows stored: person-like rows of 5 columns, entities of three rows (a typo in each
copy), beside the batch ``neardup records`` over the N stored rows in the same run.

    python benchmarks/records_check_speed.py --stored 20000
    python benchmarks/records_check_speed.py --stored 100000 --store sqlite \\
        --store 'postgresql://postgres@127.0.0.1:5432/bench' --store redis://127.0.0.1:6379/5
    python benchmarks/records_check_speed.py --stored 1000000 --new 10000 \\
        --keep /tmp/records-1e6 --store sqlite --store redis://127.0.0.1:6379/5

Each store must be empty, or hold what an earlier run of this command with the same
``--stored`` left there (then its first run is not made again, and says so): ``sqlite`` is a
new file in a temporary folder, or ``index-N.db`` (N: ``--stored``) in ``--keep``'s folder,
kept for the next run (storing 10^6 rows takes a while). The new rows are half copies of
stored rows under new keys and half rows of new entities; a run on a kept store takes other
stored rows and other new entities than the runs before it (its "round": the rows stored
beyond ``--stored``, in hundreds, which every run's adds move on whatever its ``--new``), so its
check-and-add adds new rows too. A longer ``--new`` (50,000: five batches) shows a long run,
where the blocks a process reads at its first batch serve the next ones.

Timed, per store: the first run (learning the model on the N rows and storing them; absent on a
kept store), opening the index (its model read), each mode over the new rows (``any``, ``all``,
then ``add``), each by the clock and by this process's CPU time (``cpu``), which a shared
machine moves less; a database server's own CPU is in the clock time only; and ``--one`` of the
new rows checked one call each (``one``, ms by the clock), as the service's
``/v1/records/check`` is called, by an index opened for them. Once per run: the
batch ``neardup records`` over the N stored rows (``--no-batch`` to skip it), rows/s by the
clock and of CPU. The checks run ``--batch-size`` rows a transaction (the library's default
unless given). At 10^6 rows give the database servers room: ``NEARDUP_POSTGRES_SETTINGS`` and
``NEARDUP_MARIADB_SETTINGS`` of ``scripts/servers.py`` (docs/results/seed002_table5_records.md).
"""

from __future__ import annotations

import argparse
import csv
import gc
import itertools
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neardup.records.incremental import (
    DEFAULT_BATCH_SIZE,
    SIZE_ENTRY,
    STATE_MAP,
    STORE_SHAPE,
    RecordsIndex,
    index_records,
)
from neardup.records.run import dedup_records
from neardup.records.schema import RecordSchema
from neardup.records.sources import open_source
from neardup.storage import open_storage

SYLLABLES = ["an", "bo", "ci", "da", "el", "fu", "ga", "hi", "jo", "ka", "li", "mu", "ne", "or", "pa", "qi"]
HEADER = ["id", "name", "street", "city", "born", "phone"]


def typo(text: str, rng: random.Random) -> str:
    position = rng.randrange(1, len(text) - 1)
    return text[:position] + text[position + 1] + text[position] + text[position + 2 :]


def rows(count: int, seed: int, prefix: str) -> list[list[str]]:
    """``count`` rows, entities of three rows each (typos in the copies), shuffled."""
    rng = random.Random(seed)
    out = []
    for entity in range((count + 2) // 3):
        name = " ".join("".join(rng.choices(SYLLABLES, k=3)) for _ in range(2))
        values = [
            name,
            f"{rng.randrange(1, 999)} {''.join(rng.choices(SYLLABLES, k=2))} road",
            "".join(rng.choices(SYLLABLES, k=3)),
            f"19{rng.randrange(10, 99)}-{rng.randrange(1, 12):02}-{rng.randrange(1, 28):02}",
            f"555{rng.randrange(10**6, 10**7)}",
        ]
        for copy in range(3):
            row = list(values)
            if copy:
                column = rng.randrange(len(row))
                row[column] = typo(row[column], rng)
            out.append([f"{prefix}{entity}-{copy}", *row])
    rng.shuffle(out)
    return out[:count]


def write(path: Path, body: list[list[str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(body)
    return path


#: Rows added per round: runs of any ``--new`` (of at least this many) never repeat a round.
ROUND_ROWS = 100


def new_rows(stored: list[list[str]], count: int, round_: int) -> list[list[str]]:
    """Half copies of stored rows (new keys), half rows of new entities; round 0 is what this
    benchmark always checked (the first stored rows, entities of seed 2), later rounds take the
    next stored rows and other entities."""
    half = count // 2
    start = (round_ * half) % max(1, len(stored) - half)
    again = [
        [f"c{round_ or ''}{'-' if round_ else ''}{n}", *row[1:]]
        for n, row in enumerate(stored[start : start + half])
    ]
    prefix = f"n{round_}-" if round_ else "n"
    return again + rows(count - len(again), 2 + round_, prefix)


def stored_rows(url: str) -> int:
    """The rows a records index holds (0 for an empty store)."""
    store = open_storage(url)
    try:
        store.attach(STORE_SHAPE)
        if store.read_meta() is None:
            return 0
        data = store.get_values(STATE_MAP, [SIZE_ENTRY])[0]
        return 0 if data is None else int(json.loads(data)["rows"])
    finally:
        store.close()


def timed(function: Callable[[], Any]) -> tuple[float, float, Any]:
    """Seconds by the clock and of this process's CPU, and what ``function`` returned."""
    started, cpu = time.perf_counter(), time.process_time()
    answer = function()
    return time.perf_counter() - started, time.process_time() - cpu, answer


def check(path: Path, url: str, mode: str, batch_size: int = DEFAULT_BATCH_SIZE) -> Any:
    with open_source(str(path)) as source:
        return index_records(source, url, RecordSchema(key="id"), mode=mode, batch_size=batch_size)


def batch(path: Path) -> Any:
    with open_source(str(path)) as source:
        return dedup_records(source, RecordSchema(key="id"))


def opened(url: str) -> None:
    RecordsIndex.open(url).close()


def one_by_one(path: Path, url: str, count: int) -> float:
    """Seconds by the clock per row of ``count`` new rows checked one call each ("all"), as the
    service's ``/v1/records/check`` does, by one index opened for them (nothing read before)."""
    with path.open(newline="", encoding="utf-8") as handle:
        wanted = list(itertools.islice(csv.DictReader(handle), count))
    with RecordsIndex.open(url) as index:
        started = time.perf_counter()
        for row in wanted:
            index.check_many([row], mode="all")
        return (time.perf_counter() - started) / max(1, len(wanted))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stored", type=int, default=20_000, help="rows stored before the checks")
    parser.add_argument("--new", type=int, default=1_000, help="new rows checked in each mode")
    parser.add_argument(
        "--store",
        action="append",
        help="store URL (empty, or kept by an earlier run), or 'sqlite' (repeatable)",
    )
    parser.add_argument(
        "--keep", type=Path, help="folder for the rows and the SQLite store, kept for the next run"
    )
    parser.add_argument("--no-batch", action="store_true", help="skip the batch run over the stored rows")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        help=f"rows a transaction in the later runs (default {DEFAULT_BATCH_SIZE:,}, the library's)",
    )
    parser.add_argument(
        "--one",
        type=int,
        default=100,
        help="new rows also checked one call each, by a newly opened index (0: none)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = args.keep or Path(folder)
        work.mkdir(parents=True, exist_ok=True)
        stored_path = work / f"stored-{args.stored}.csv"
        stored = rows(args.stored, 1, "s")
        if not stored_path.exists():
            write(stored_path, stored)
        # The generated rows (a list per row) stay in this process for the new rows of each store;
        # a `neardup records` process holds nothing like them, so the garbage collector's full
        # passes are kept off them (at 10^6 rows, scanning them made check-and-add on Redis cost
        # 0.75-0.78 ms a row instead of 0.36-0.54: docs/results/seed002_table5_records.md).
        gc.collect()
        gc.freeze()
        print(f"{args.stored:,} rows stored, {args.new:,} new rows (half of them copies of stored ones)")
        if not args.no_batch:
            clock, cpu, result = timed(lambda: batch(stored_path))
            print(
                f"batch `neardup records` over the {args.stored:,} stored rows: {clock:.1f} s "
                f"({args.stored / clock:,.0f} rows/s), CPU {cpu:.1f} s ({args.stored / cpu:,.0f} rows/s), "
                f"{len(result.pairs.i):,} pairs"
            )
            # the batch's result (10^6 rows' groups and pairs) is let go before the checks, whose
            # process would otherwise scan it in every full garbage collection (as a records
            # process does not): with it kept, check-and-add on Redis cost 0.46 ms a row of CPU
            # instead of 0.27-0.33 (docs/results/seed002_table5_records.md)
            del result
            gc.collect()
        columns = (
            "first s", "open s", "round", "any ms/row", "all ms/row", "add ms/row", "add rows/s",
            "any cpu ms", "all cpu ms", "add cpu ms", "add cpu rows/s", "duplicates", "one ms/row",
        )  # fmt: skip
        print(f"{'store':<34} " + " ".join(f"{name:>11}" for name in columns))
        for store in args.store or ["sqlite"]:
            url = str(work / f"index-{args.stored}.db") if store == "sqlite" else store
            held = stored_rows(url)
            first = "kept"
            if not held:
                first = f"{timed(lambda: check(stored_path, url, 'add'))[0]:.1f}"  # noqa: B023 - called at once
                held = args.stored
            elif held < args.stored:
                raise SystemExit(
                    f"{store} holds {held:,} rows, fewer than --stored {args.stored:,}: empty it"
                )
            round_ = (held - args.stored) // ROUND_ROWS
            new = write(work / "new.csv", new_rows(stored, args.new, round_))
            open_s = timed(lambda: opened(url))[0]  # noqa: B023
            size = args.batch_size
            any_s, any_cpu, found = timed(lambda: check(new, url, "any", size))  # noqa: B023
            all_s, all_cpu, _ = timed(lambda: check(new, url, "all", size))  # noqa: B023
            one = one_by_one(new, url, args.one) if args.one else None
            add_s, add_cpu, added = timed(lambda: check(new, url, "add", size))  # noqa: B023
            per = 1000 / args.new
            shown = store if "@" not in store else store.split("@", 1)[1]
            figures = (
                first, f"{open_s:.2f}", f"{round_}", f"{any_s * per:.3f}", f"{all_s * per:.3f}",
                f"{add_s * per:.3f}", f"{args.new / add_s:,.0f}", f"{any_cpu * per:.3f}",
                f"{all_cpu * per:.3f}", f"{add_cpu * per:.3f}", f"{args.new / add_cpu:,.0f}",
                f"{found.duplicates}", "-" if one is None else f"{one * 1000:.2f}",
            )  # fmt: skip
            print(f"{shown:<34} " + " ".join(f"{figure:>11}" for figure in figures), flush=True)
            if added.added != args.new:
                print(f"  (check-and-add added {added.added:,} rows of {args.new:,}: keys stored already)")


if __name__ == "__main__":
    main()

"""How fast a records index checks new rows (seed 002's Table 5 shape: mean milliseconds per
new row for "is there any duplicate?" and "return all duplicates", and check-and-add), with
N synthetic rows stored: person-like rows of 5 columns, a third of them copies with a typo.

    python benchmarks/records_check_speed.py --stored 20000
    python benchmarks/records_check_speed.py --stored 100000 --store sqlite \\
        --store 'postgresql://postgres@127.0.0.1:5432/bench' --store redis://127.0.0.1:6379/5

Each store must be empty (SQLite: a new file in a temporary folder when given as ``sqlite``).
The first run (learning the model on the N rows and storing them) is timed too. Figures vary
with the machine's load; run beside each other for a comparison. Each mode is timed by the
clock and by this process's CPU time (``cpu``), which a shared machine moves less; a database
server's own CPU is not in it.
"""

from __future__ import annotations

import argparse
import csv
import random
import tempfile
import time
from pathlib import Path

from neardup.records.incremental import index_records
from neardup.records.schema import RecordSchema
from neardup.records.sources import open_source

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


def timed(path: Path, url: str, mode: str) -> tuple[float, float, int]:
    """Seconds by the clock and of this process's CPU, and the duplicates found."""
    started, cpu = time.perf_counter(), time.process_time()
    with open_source(str(path)) as source:
        result = index_records(source, url, RecordSchema(key="id"), mode=mode)
    return time.perf_counter() - started, time.process_time() - cpu, result.duplicates


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stored", type=int, default=20_000, help="rows stored before the checks")
    parser.add_argument("--new", type=int, default=1_000, help="new rows checked in each mode")
    parser.add_argument(
        "--store", action="append", help="empty store URL, or 'sqlite' for a new file (repeatable)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        stored = write(work / "stored.csv", rows(args.stored, 1, "s"))
        # new rows: half copies of stored entities (the same generator, other typos), half new ones
        again = rows(args.stored, 1, "s")[: args.new // 2]
        fresh = rows(args.new - len(again), 2, "n")
        new = write(work / "new.csv", [[f"c{n}", *row[1:]] for n, row in enumerate(again)] + fresh)
        print(f"{args.stored:,} rows stored, {args.new:,} new rows (half of them copies of stored ones)")
        columns = (
            "first run s",
            "any ms/row",
            "all ms/row",
            "add ms/row",
            "add rows/s",
            "add cpu ms/row",
            "add cpu rows/s",
            "any cpu ms/row",
            "all cpu ms/row",
            "duplicates",
        )
        print(f"{'store':<40} " + " ".join(f"{name:>14}" for name in columns))
        for store in args.store or ["sqlite"]:
            url = str(work / "index.db") if store == "sqlite" else store
            first, _, _ = timed(stored, url, "add")
            any_s, any_cpu, found = timed(new, url, "any")
            all_s, all_cpu, _ = timed(new, url, "all")
            add_s, add_cpu, _ = timed(new, url, "add")
            per = 1000 / args.new
            shown = store if "@" not in store else store.split("@", 1)[1]
            figures = (
                f"{first:.1f}",
                f"{any_s * per:.2f}",
                f"{all_s * per:.2f}",
                f"{add_s * per:.2f}",
                f"{args.new / add_s:,.0f}",
                f"{add_cpu * per:.2f}",
                f"{args.new / add_cpu:,.0f}",
                f"{any_cpu * per:.2f}",
                f"{all_cpu * per:.2f}",
                f"{found}",
            )
            print(f"{shown:<40} " + " ".join(f"{figure:>14}" for figure in figures))


if __name__ == "__main__":
    main()

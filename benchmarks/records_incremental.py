"""Records incrementally against one batch run (issue 31): each dev set of
../shared/data/dev/records is shuffled (seeded) and fed in slices through a records index
(:func:`neardup.records.incremental.index_records`, what ``neardup records SLICE.csv --key id
--ignore cluster --index URL`` runs, with no other option); the union of the slices' groups
is scored pairwise against the gold ``cluster`` column next to one batch run over all rows
(:func:`neardup.records.run.dedup_records`, ``neardup records ALL.csv --key id --ignore
cluster``), and every stored row's group is read back from the store after each slice and
must never change.

    python benchmarks/records_incremental.py                     # FEBRL 1-3, Chicago CSV, SQLite
    python benchmarks/records_incremental.py --sets febrl_dataset3 --slices 10
    python benchmarks/records_incremental.py --store 'postgresql://u@127.0.0.1:5432/db?table=bench'

Exits 1 when a stored group changed; prints F1 (target ≥ 0.90 and within 0.02 of batch),
precision, recall and seconds per slice run.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import tempfile
import time
from pathlib import Path

from records_quality import GOLD, pairwise_scores

from neardup.records.incremental import ROWS_MAP, StoredRow, index_records
from neardup.records.run import dedup_records
from neardup.records.schema import schema_from_mapping
from neardup.records.sources import open_source
from neardup.storage import open_storage

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "dev" / "records"
SETS = ("febrl_dataset1", "febrl_dataset2", "febrl_dataset3", "dedupe_csv_example")


def read_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def write_rows(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def stored_groups(url: str, keys: list[object]) -> dict[object, object]:
    """Every given key's group as the store holds it (read back, not remembered)."""
    store = open_storage(url)
    try:
        found = store.get_values(ROWS_MAP, keys)
    finally:
        store.close()
    return {key: StoredRow.decode(data, key).group for key, data in zip(keys, found, strict=True) if data}


def run_set(name: str, data: Path, slices: int, seed: int, store: str | None, work: Path) -> bool:
    """Print one set's line; False when a stored group changed between slices."""
    header, rows = read_rows(data / f"{name}.csv")
    random.Random(seed).shuffle(rows)
    schema = schema_from_mapping({}, key="id", ignore=(GOLD,))
    url = store or str(work / f"{name}.db")
    groups: dict[object, object] = {}
    stable, seconds = True, []
    for number in range(slices):
        part = write_rows(work / f"{name}-{number}.csv", header, rows[number::slices])
        started = time.perf_counter()
        with open_source(str(part)) as source:
            result = index_records(source, url, schema)
        seconds.append(time.perf_counter() - started)
        before = stored_groups(url, list(groups))
        changed = [key for key, group in groups.items() if before.get(key) != group]
        if changed:
            stable = False
            print(
                f"{name}: slice {number + 1} changed the group of {len(changed)} stored rows", file=sys.stderr
            )
        groups.update((row.key, row.group) for row in result.rows if row.status == "added")
    gold = {row[0]: row[1] for row in rows}
    keys = [str(key) for key in groups]
    by_text = {str(key): str(group) for key, group in groups.items()}
    inc = pairwise_scores([by_text[key] for key in keys], [gold[key] for key in keys])
    started = time.perf_counter()
    with open_source(str(write_rows(work / f"{name}-all.csv", header, rows))) as source:
        batch = dedup_records(source, schema)
    batch_seconds = time.perf_counter() - started
    names = [str(key) for key in batch.keys]
    clusters = [names[index] for index in batch.clusters.cluster.tolist()]
    whole = pairwise_scores(clusters, [gold[key] for key in names])
    slice_times = " ".join(f"{value:.1f}" for value in seconds)
    print(
        f"{name:<20} {len(keys):>6} {inc[0]:>9.3f} {inc[1]:>7.3f} {inc[2]:>6.3f}"
        f" {whole[0]:>9.3f} {whole[1]:>7.3f} {whole[2]:>6.3f} {inc[2] - whole[2]:>+7.3f}"
        f" {'yes' if stable else 'NO':>7}   {slice_times} | {batch_seconds:.1f}"
    )
    return stable


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA, help="folder of the dev record sets")
    parser.add_argument("--sets", nargs="+", default=list(SETS), help="set names (files without .csv)")
    parser.add_argument("--slices", type=int, default=5, help="slices the shuffled rows are fed in")
    parser.add_argument("--seed", type=int, default=31, help="seed of the shuffle")
    parser.add_argument(
        "--store",
        help="store URL template with {set} for the set's name (empty stores); default a new SQLite "
        "file per set in a temporary folder",
    )
    args = parser.parse_args()
    if not args.data.is_dir():
        sys.exit(f"no dev record sets at {args.data}; give --data FOLDER")
    print(
        f"{args.slices} slices, seed {args.seed}; incremental (union of slices) | batch over all rows\n"
        f"{'set':<20} {'rows':>6} {'precision':>9} {'recall':>7} {'F1':>6}"
        f" {'precision':>9} {'recall':>7} {'F1':>6} {'ΔF1':>7} {'stable':>7}   seconds per slice | batch"
    )
    with tempfile.TemporaryDirectory() as folder:
        results = [
            run_set(
                name,
                args.data,
                args.slices,
                args.seed,
                args.store.format(set=name) if args.store else None,
                Path(folder),
            )
            for name in args.sets
        ]
    if not all(results):
        sys.exit(1)


if __name__ == "__main__":
    main()

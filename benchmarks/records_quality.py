"""Duplicate rows: pairwise precision/recall/F1 on the labelled record sets, and rows/s.

Quality: for each set of ../shared/data/dev/records/ (FEBRL 1-3 and the dedupe csv_example;
gold column ``cluster``, which is never a feature, nor is the key ``id``) the predicted
clusters are scored pair by pair: a pair is two rows in one cluster, precision = right pairs
/ predicted pairs, recall = right pairs / gold pairs. Three runs per set, all through
:func:`neardup.record_dedup.find_duplicate_records` over a streamed CSV source:

- ``default``   what ``neardup records FILE --key id --ignore cluster`` does (automatic
                kinds, weight 2 per short field, k = 8, no verification);
- ``tuned``     the per-set field kinds and weights, k and verification of :data:`TUNED`;
- ``row text``  plain Simhash of the whole row as one text (the values joined by spaces,
                ``neardup dedup``'s default settings), at k = 8 and at the tuned k.

Throughput: rows/s of the whole pipeline (read, fingerprint, pairs, clusters) on 1,000,000
synthetic complaint rows (ids, names, phones, dates, amounts, categories, a Chinese or
English complaint text; 10 % planted near-duplicates) streamed from an SQLite file, and the
read-only rate of the same source for reference.

    python benchmarks/records_quality.py              # quality on the 4 sets + 1 M rows
    python benchmarks/records_quality.py --quick      # 100,000 synthetic rows
    python benchmarks/records_quality.py --rows 0     # quality only
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neardup import Fingerprinter, cluster_records, find_all_pairs
from neardup.record_dedup import DEFAULT_MAX_DISTANCE, Verification, find_duplicate_records
from neardup.records import FieldSpec, RecordSchema
from neardup.sources import CsvSource, SqlSource

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "dev" / "records"
SETS = ("febrl_dataset1", "febrl_dataset2", "febrl_dataset3", "dedupe_csv_example")
GOLD = "cluster"

_FEBRL_FIELDS = (
    FieldSpec("given_name", "short", 2.0),
    FieldSpec("surname", "short", 2.0),
    FieldSpec("street_number", "short", 1.0),
    FieldSpec("address_1", "text", 1.0),
    FieldSpec("address_2", "text", 1.0),
    FieldSpec("suburb", "short", 1.5),
    FieldSpec("postcode", "short", 1.5),
    FieldSpec("state", "short", 0.5),
    FieldSpec("date_of_birth", "short", 2.0),
    FieldSpec("soc_sec_id", "short", 3.0),
)


@dataclass(frozen=True)
class Setting:
    """A run of find_duplicate_records: fields, distance, verification."""

    fields: tuple[FieldSpec, ...] = ()
    only_listed: bool = False
    max_distance: int | None = None  # None: -k auto
    check: Verification | str | None = "auto"


@dataclass(frozen=True)
class Tuned:
    febrl: Setting = field(
        default_factory=lambda: Setting(_FEBRL_FIELDS, True, 18, Verification("fields", 0.5))
    )
    dedupe: Setting = field(
        default_factory=lambda: Setting(
            (
                FieldSpec("Site name", "text", 1.0),
                FieldSpec("Address", "text", 1.0),
                FieldSpec("Zip", "short", 1.0),
                FieldSpec("Phone", "short", 2.0),
            ),
            True,
            12,
            Verification("jaccard", 0.5),
        )
    )

    def for_set(self, name: str) -> Setting:
        return self.febrl if name.startswith("febrl") else self.dedupe


TUNED = Tuned()


# -- scoring ------------------------------------------------------------------------------------


def pair_count(sizes: Sequence[int] | np.ndarray) -> int:
    values = np.asarray(sizes, dtype=np.int64)
    return int((values * (values - 1) // 2).sum())


def pairwise_scores(
    predicted: Sequence[object], gold: Sequence[object]
) -> tuple[float, float, float, int, int]:
    """Precision, recall, F1, predicted pairs and gold pairs of two clusterings of the same
    rows, from the sizes of the clusters and of their intersections."""
    both = pair_count(list(Counter(zip(predicted, gold, strict=True)).values()))
    found = pair_count(list(Counter(predicted).values()))
    truth = pair_count(list(Counter(gold).values()))
    precision = both / found if found else 1.0
    recall = both / truth if truth else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, found, truth


# -- runs ---------------------------------------------------------------------------------------


def run_fields(path: Path, setting: Setting) -> tuple[list[object], list[object], int]:
    """(predicted cluster per row, gold cluster per row, the distance searched)."""
    source = CsvSource(str(path))
    gold_index = source.columns.index(GOLD)
    gold: list[object] = []

    def chunks():  # type: ignore[no-untyped-def]
        for chunk in source.chunks():
            gold.extend(chunk.columns[gold_index])
            yield chunk

    schema = RecordSchema("id", setting.fields, ignore=(GOLD,), only_listed=setting.only_listed)
    result = find_duplicate_records(
        source.columns, chunks(), schema, max_distance=setting.max_distance, check=setting.check
    )
    return result.clusters.cluster.tolist(), gold, result.max_distance


def run_row_text(path: Path, max_distance: int, fingerprinter: Fingerprinter) -> tuple[list[object], float]:
    """Whole-row text Simhash: every value but the key and the gold, joined by spaces."""
    start = time.perf_counter()
    source = CsvSource(str(path))
    columns = source.columns
    used = [i for i, name in enumerate(columns) if name not in ("id", GOLD)]
    texts: list[str] = []
    for chunk in source.chunks():
        for row in zip(*(chunk.columns[i] for i in used), strict=True):
            texts.append(" ".join(value for value in row if value))
    fingerprints = fingerprinter.fingerprint_many(texts)
    pairs = find_all_pairs(fingerprints, max_distance)
    clusters = cluster_records(len(texts), pairs.i, pairs.j)
    return clusters.cluster.tolist(), time.perf_counter() - start


def quality(data: Path) -> None:
    print(f"{'set':19} {'run':16} {'k':>2} {'pairs':>7} {'gold':>6} {'precision':>9} {'recall':>7} {'F1':>6}")
    fingerprinter = Fingerprinter()
    for name in SETS:
        path = data / f"{name}.csv"
        if not path.exists():
            print(f"{name}: {path} is absent; skipped", file=sys.stderr)
            continue
        tuned = TUNED.for_set(name)
        runs: list[tuple[str, int, list[object]]] = []
        default, gold, searched = run_fields(path, Setting())
        runs.append(("default (auto)", searched, default))
        plain, _, _ = run_fields(path, Setting(max_distance=DEFAULT_MAX_DISTANCE, check=None))
        runs.append(("-k 8 alone", DEFAULT_MAX_DISTANCE, plain))
        predicted, _, _ = run_fields(path, tuned)
        runs.append(("tuned", tuned.max_distance, predicted))
        for k in sorted({DEFAULT_MAX_DISTANCE, tuned.max_distance}):
            predicted, _ = run_row_text(path, k, fingerprinter)
            runs.append(("row text", k, predicted))
        for label, k, predicted in runs:
            precision, recall, f1, found, truth = pairwise_scores(predicted, gold)
            print(
                f"{name:19} {label:16} {k:2d} {found:7d} {truth:6d} {precision:9.3f} {recall:7.3f} {f1:6.3f}"
            )


# -- throughput -----------------------------------------------------------------------------------

_SURNAMES = [
    "王",
    "李",
    "张",
    "刘",
    "陈",
    "杨",
    "黄",
    "赵",
    "吴",
    "周",
    "Smith",
    "Jones",
    "Brown",
    "Taylor",
    "Wilson",
    "Davies",
    "Evans",
    "Thomas",
]
_GIVEN = [
    "伟",
    "芳",
    "娜",
    "敏",
    "静",
    "丽",
    "强",
    "磊",
    "军",
    "洋",
    "John",
    "Mary",
    "David",
    "Sarah",
    "James",
    "Emma",
    "Robert",
    "Linda",
]
_CITIES = ["广州", "深圳", "北京", "上海", "杭州", "Chicago", "Boston", "Denver", "Austin", "Seattle"]
_TOPICS = ["教育", "城市管理", "城乡建设", "交通", "医疗", "housing", "transport", "noise", "water", "safety"]
_ZH = [
    "小区",
    "门口",
    "垃圾",
    "长期",
    "无人",
    "清理",
    "气味",
    "难闻",
    "希望",
    "城管",
    "部门",
    "尽快",
    "处理",
    "噪音",
    "施工",
    "夜间",
    "影响",
    "休息",
    "道路",
    "积水",
]
_EN = [
    "the",
    "street",
    "light",
    "outside",
    "has",
    "been",
    "broken",
    "for",
    "weeks",
    "please",
    "repair",
    "noise",
    "at",
    "night",
    "water",
    "leak",
    "road",
]


def synthetic_rows(count: int, seed: int = 7) -> list[tuple[object, ...]]:
    """Complaint rows with nulls, mixed types and 10 % near-duplicates of earlier rows."""
    rng = random.Random(seed)
    rows: list[tuple[object, ...]] = []
    for key in range(count):
        if rows and rng.random() < 0.1:
            base = list(rows[rng.randrange(len(rows))])
            base[0] = key
            text = str(base[6])
            cut = rng.randrange(len(text))
            base[6] = text[:cut] + rng.choice(_ZH + _EN) + text[cut + 1 :]
            rows.append(tuple(base))
            continue
        chinese = rng.random() < 0.5
        words = rng.sample(_ZH if chinese else _EN, 8)
        rows.append(
            (
                key,
                rng.choice(_SURNAMES) + rng.choice(_GIVEN),
                None if rng.random() < 0.2 else f"1{rng.randrange(10**10):010d}",
                f"20{rng.randrange(10, 25)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
                rng.choice(
                    [rng.randrange(100, 5000), f"{rng.randrange(1, 5)},{rng.randrange(1000):03d}", None]
                ),
                rng.choice(_CITIES) + " " + rng.choice(_TOPICS),
                ("" if chinese else " ").join(words),
            )
        )
    return rows


def throughput(count: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "complaints.db"
        start = time.perf_counter()
        connection = sqlite3.connect(path)
        connection.execute(
            "CREATE TABLE complaints (id INTEGER PRIMARY KEY, name TEXT, phone TEXT, filed TEXT, "
            "amount, category TEXT, content TEXT)"
        )
        step = 100_000
        for first in range(0, count, step):
            part = synthetic_rows(min(step, count - first), seed=first)
            part = [(first + row[0], *row[1:]) for row in part]  # type: ignore[operator]
            connection.executemany("INSERT INTO complaints VALUES (?, ?, ?, ?, ?, ?, ?)", part)
        connection.commit()
        connection.close()
        made = time.perf_counter() - start
        url = f"sqlite:///{path}"

        start = time.perf_counter()
        source = SqlSource(url, table="complaints")
        read = sum(chunk.count for chunk in source.chunks())
        read_seconds = time.perf_counter() - start
        source.dispose()

        runs: tuple[tuple[str, int | None, Verification | str | None], ...] = (
            ("k 8, no verification", DEFAULT_MAX_DISTANCE, None),
            ("k 8, --verify fields", DEFAULT_MAX_DISTANCE, Verification("fields")),
            ("neardup records defaults (-k auto)", None, "auto"),
        )
        for label, distance, check in runs:
            start = time.perf_counter()
            source = SqlSource(url, table="complaints")
            result = find_duplicate_records(
                source.columns, source.chunks(), RecordSchema("id"), max_distance=distance, check=check
            )
            seconds = time.perf_counter() - start
            source.dispose()
            groups = int(np.count_nonzero(result.clusters.representative != np.arange(len(result.keys))))
            print(
                f"{len(result.keys):,} rows from SQLite, {label} (k = {result.max_distance}): "
                f"{seconds:.1f} s = "
                f"{len(result.keys) / seconds:,.0f} rows/s ({len(result.pairs):,} pairs, {groups:,} rows "
                f"joined to a representative; {source.fetches} fetches of {source.chunk_size:,} rows)"
            )
        print(
            f"(reading alone: {read:,} rows in {read_seconds:.1f} s = {read / read_seconds:,.0f} rows/s; "
            f"writing the table took {made:.1f} s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA, help="folder of the record sets")
    parser.add_argument("--rows", type=int, default=None, help="synthetic rows for the speed run (0: none)")
    parser.add_argument("--quick", action="store_true", help="100,000 synthetic rows instead of 1,000,000")
    parser.add_argument("--no-quality", action="store_true", help="skip the quality runs")
    args = parser.parse_args()
    if not args.no_quality:
        quality(args.data)
    rows = args.rows if args.rows is not None else (100_000 if args.quick else 1_000_000)
    if rows:
        throughput(rows)


if __name__ == "__main__":
    main()

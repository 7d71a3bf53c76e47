"""Duplicate rows: pairwise precision/recall/F1 on the labelled record sets, and rows/s.

Quality: for each set of ../shared/data/dev/records/ (FEBRL 1-3 and the dedupe csv_example;
gold column ``cluster``, which is never a feature, nor is the key ``id``) the predicted
clusters are scored pair by pair: a pair is two rows in one cluster, precision = right pairs
/ predicted pairs, recall = right pairs / gold pairs. These runs measure the Simhash path
(``-k``, ``--verify``, ``--field``), not the default of ``neardup records`` (learned weights:
``--peers`` and records_scale.py measure that). Per set, all through
:func:`neardup.records.dedup.find_duplicate_records` over a streamed CSV source:

- ``-k auto``     ``neardup records FILE --key id --ignore cluster -k auto`` (automatic kinds,
                  weight 2 per short field, k and verification by row count: the default
                  before the learned weights);
- ``-k 8 alone``  the same at k = 8 without verification;
- ``tuned``       the per-set field kinds and weights, k and verification of :data:`TUNED`;
- ``row text``    plain Simhash of the whole row as one text (the values joined by spaces,
                  ``neardup dedup``'s default settings), at k = 8 and at the tuned k.

Throughput: rows/s of the Simhash path (read, fingerprint, pairs, clusters) on ``--rows``
synthetic complaint rows (default 100,000; ids, names, phones, dates, amounts, categories, a
Chinese or English complaint text; 10 % planted near-duplicates) streamed from an SQLite file,
and the read-only rate of the same source for reference. The defaults take a minute or two on
2 cores; ``--rows 1000000`` about ten (progress on stderr).

Peers (``--peers``, nothing else is run): on all 8 sets of the folder (the 4 above and the
test sets hpi_cora, bib_respiratory, bib_stroke, bib_digital_work; ``--sets`` picks some), one
line per set and method with pairwise precision, recall, F1 and seconds, scored as above:

- ``neardup default``  what ``neardup records FILE --key id --ignore cluster --clusters OUT``
                       does, through the call :mod:`neardup.cli.records` makes (open_source,
                       the columns but ``cluster`` selected, learned weights, --keep first).
- ``neardup -k auto``  the same with ``-k auto``: the Simhash path (-k auto, --verify auto,
                       fields weighting), the default before the learned weights.
- ``splink``           Splink (``pip install -e '.[peers]'``) on DuckDB; seconds from reading
                       the CSV to the clusters. Every set: the prior from deterministic rules
                       (``estimate_probability_two_random_records_match``), u by
                       ``estimate_u_using_random_sampling(max_pairs=1e6, seed=2)``, m by
                       ``estimate_parameters_using_expectation_maximisation`` once per training
                       rule, ``predict(threshold_match_probability=0.2)`` (the febrl3 example's
                       threshold) and ``cluster_pairwise_predictions_at_threshold`` at match
                       probability 0.9 (connected components; tutorial "Predicting which records
                       match"). ``id`` is only the unique_id, ``cluster`` is never read. A set on
                       which Splink raises is printed as ``failed: <reason>``.

  Per set (the settings were written down before the runs and not tuned on the results; the
  bib and cora sets are test sets):

  FEBRL 1-3 (person rows)   Splink's example "Deduplicating the febrl3 dataset" as it stands:
      blocking soc_sec_id | given_name | surname | date_of_birth | postcode; comparisons
      NameComparison(given_name), NameComparison(surname), DateOfBirthComparison(date_of_birth,
      string, %Y%m%d), DamerauLevenshteinAtThresholds(soc_sec_id, [2]), ExactMatch with term
      frequencies on street_number and postcode; prior from soc_sec_id | given_name + surname +
      date_of_birth | names swapped + date_of_birth at recall 0.9; EM on date_of_birth, then on
      postcode. (address_1/2, suburb and state are not used, as in the example.)
  dedupe_csv_example (Chicago sites)   After Splink's "Matching businesses" example (a name,
      the first number of the address, a postcode) and plain cleaning (lower case,
      punctuation out, empty → null; no Splink page prescribes one for this data): site_name and
      address lower-cased without punctuation, address_number = first number of the address,
      zip = 5 digits of Zip, phone = its digits. Blocking phone | site_name | address |
      address_number + first 3 letters of site_name | zip + same; comparisons
      JaroWinklerAtThresholds(site_name, [0.95, 0.88, 0.7], term frequencies),
      JaroWinklerAtThresholds(address, same), ExactMatch address_number, zip (term
      frequencies), phone; prior from site_name + address | phone + address_number at recall
      0.7; EM on phone, then on address_number. The other 30 columns are left out.
  hpi_cora, bib_* (citations)   Splink has no citation example; the same generic comparison-
      library model on each: title, authors (lower case, punctuation out), first_author (first
      word of the authors), venue (journal; cora: journal or booktitle), year (first 19xx/20xx
      of year; cora: of year or date), first_page (first number of pages), doi (digital_work
      only; null elsewhere). Blocking first 20 letters of title | first_author + year | year +
      first_page | doi; comparisons JaroWinklerAtThresholds title and authors [0.95, 0.88, 0.7],
      venue [0.9, 0.7], ExactMatch first_author (term frequencies), year, first_page, doi; prior
      from title + year | doi at recall 0.8; EM on year, then on the title prefix.

    python benchmarks/records_quality.py                  # quality on the 4 sets + 100,000 rows
    python benchmarks/records_quality.py --rows 1000000   # 1,000,000 synthetic rows
    python benchmarks/records_quality.py --rows 0         # quality only
    pip install -e '.[peers]'                         # Splink, for --peers
    python benchmarks/records_quality.py --peers      # neardup default vs Splink, 8 sets
    python benchmarks/records_quality.py --peers --sets febrl_dataset1 hpi_cora
    python benchmarks/records_quality.py --peers --sets febrl_dataset3 dedupe_csv_example --thresholds 0.5 0.9
"""

from __future__ import annotations

import argparse
import csv
import logging
import random
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neardup import Fingerprinter, cluster_records, find_all_pairs
from neardup.records.dedup import DEFAULT_MAX_DISTANCE, Verification, find_duplicate_records
from neardup.records.run import SimhashSearch, dedup_records
from neardup.records.schema import FieldSpec, RecordSchema, schema_from_mapping
from neardup.records.sources import DEFAULT_CHUNK_SIZE, CsvSource, SqlSource, open_source

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
        runs.append(("-k auto", searched, default))
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
        print(f"records_quality: writing {count:,} synthetic rows to SQLite", file=sys.stderr, flush=True)
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
            ("-k auto", None, "auto"),
        )
        for label, distance, check in runs:
            print(f"records_quality: {count:,} rows, {label}", file=sys.stderr, flush=True)
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
                f"joined to a representative; {source.fetches} fetches of {source.chunk_size:,} rows)",
                flush=True,
            )
        print(
            f"(reading alone: {read:,} rows in {read_seconds:.1f} s = {read / read_seconds:,.0f} rows/s; "
            f"writing the table took {made:.1f} s)"
        )


# -- peers: neardup's defaults against Splink ---------------------------------------------------

PEER_SETS = (*SETS, "hpi_cora", "bib_respiratory", "bib_stroke", "bib_digital_work")
PEERS_MISSING = "splink is not installed: pip install -e '.[peers]' (Splink 4+ with DuckDB)"
#: Splink's thresholds: predict keeps pairs at match probability >= 0.2 (as the febrl3
#: example), clustering joins pairs at >= 0.9; the u sample is fixed by its seed.
SPLINK_PREDICT = 0.2
SPLINK_CLUSTER = 0.9
SPLINK_U_PAIRS = 1e6
SPLINK_SEED = 2


def read_gold(path: Path) -> dict[str, str]:
    """id → gold cluster, in file order."""
    with path.open(encoding="utf-8", newline="") as handle:
        return {row["id"]: row[GOLD] for row in csv.DictReader(handle)}


def in_gold_order(assigned: dict[str, object], gold: dict[str, str]) -> list[object]:
    """Predicted cluster of every gold row (a row the run did not return stands alone)."""
    return [assigned.get(key, ("alone", key)) for key in gold]


def run_neardup_default(path: Path, name: str = "") -> dict[str, object]:
    """What ``neardup records FILE --key id --ignore cluster --clusters OUT`` does: learned
    weights (:mod:`neardup.records.learned`), --keep first; id → representative id."""
    return _run_neardup(path)


def _at_threshold(value: float) -> Callable[[Path, str], dict[str, object]]:
    """The default at ``--match-threshold value``."""
    return lambda path, name: _run_neardup(path, threshold=value)


def run_neardup_simhash(path: Path, name: str = "") -> dict[str, object]:
    """``neardup records FILE --key id --ignore cluster -k auto``: the Simhash path, the
    default before the learned weights (-k auto, --verify auto, fields weighting)."""
    return _run_neardup(path, simhash=SimhashSearch())


def _run_neardup(path: Path, **options: Any) -> dict[str, object]:
    """One neardup records path through the call the command makes
    (:func:`neardup.records.run.dedup_records`: the columns but ``cluster`` read, --keep
    first); id → representative id."""
    schema = schema_from_mapping({}, key="id", ignore=(GOLD,))
    with open_source(str(path), chunk_size=DEFAULT_CHUNK_SIZE) as source:
        result = dedup_records(source, schema, **options)
    keys = [str(key) for key in result.keys]
    return {key: keys[index] for key, index in zip(keys, result.clusters.cluster.tolist(), strict=True)}


def _splink_person(cl: Any, block_on: Any) -> dict[str, Any]:
    """FEBRL: Splink's "Deduplicating the febrl3 dataset" example, as it stands."""
    return {
        "select": "given_name, surname, street_number, postcode, date_of_birth, soc_sec_id",
        "blocking": [
            block_on("soc_sec_id"),
            block_on("given_name"),
            block_on("surname"),
            block_on("date_of_birth"),
            block_on("postcode"),
        ],
        "comparisons": [
            cl.NameComparison("given_name"),
            cl.NameComparison("surname"),
            cl.DateOfBirthComparison("date_of_birth", input_is_string=True, datetime_format="%Y%m%d"),
            cl.DamerauLevenshteinAtThresholds("soc_sec_id", [2]),
            cl.ExactMatch("street_number").configure(term_frequency_adjustments=True),
            cl.ExactMatch("postcode").configure(term_frequency_adjustments=True),
        ],
        "deterministic": [
            block_on("soc_sec_id"),
            block_on("given_name", "surname", "date_of_birth"),
            "l.given_name = r.surname and l.surname = r.given_name and l.date_of_birth = r.date_of_birth",
        ],
        "recall": 0.9,
        "em": [block_on("date_of_birth"), block_on("postcode")],
    }


def _splink_sites(cl: Any, block_on: Any) -> dict[str, Any]:
    """The Chicago sites: name, address, zip, phone, in the manner of Splink's "Matching
    businesses" example (name + address number + postcode), with string-similarity levels."""
    return {
        "select": (
            r"""nullif(trim(regexp_replace(lower("Site name"), '[^a-z0-9 ]', ' ', 'g')), '') as site_name,
            nullif(trim(regexp_replace(lower("Address"), '[^a-z0-9 ]', ' ', 'g')), '') as address,
            nullif(regexp_extract("Address", '(\d+[A-Za-z]?)'), '') as address_number,
            nullif(regexp_extract("Zip", '(\d{5})'), '') as zip,
            nullif(regexp_replace("Phone", '[^0-9]', '', 'g'), '') as phone"""
        ),
        "blocking": [
            block_on("phone"),
            block_on("site_name"),
            block_on("address"),
            block_on("address_number", "substr(site_name, 1, 3)"),
            block_on("zip", "substr(site_name, 1, 3)"),
        ],
        "comparisons": [
            cl.JaroWinklerAtThresholds("site_name", [0.95, 0.88, 0.7]).configure(
                term_frequency_adjustments=True
            ),
            cl.JaroWinklerAtThresholds("address", [0.95, 0.88, 0.7]),
            cl.ExactMatch("address_number"),
            cl.ExactMatch("zip").configure(term_frequency_adjustments=True),
            cl.ExactMatch("phone"),
        ],
        "deterministic": [block_on("site_name", "address"), block_on("phone", "address_number")],
        "recall": 0.7,
        "em": [block_on("phone"), block_on("address_number")],
    }


def _splink_bibliographic(name: str, cl: Any, block_on: Any) -> dict[str, Any]:
    """Citations: title, first author, authors, venue, year, first page (and DOI where the
    set has one); generic comparison-library levels, tutorial-style blocking and training."""
    if name == "hpi_cora":
        authors, venue, year = "authors", "coalesce(journal, booktitle)", "coalesce(year, date)"
        first_page, doi = "pages", "null"
    else:
        authors, venue, year, first_page = "author", "journal", "year", "pages"
        doi = "lower(doi)" if name == "bib_digital_work" else "null"
    return {
        "select": (
            rf"""nullif(trim(regexp_replace(lower(title), '[^[:alnum:] ]+', ' ', 'g')), '') as title,
            nullif(trim(regexp_replace(lower({authors}), '[^[:alnum:], ]+', ' ', 'g')), '') as authors,
            nullif(lower(regexp_extract(trim({authors}), '^([^ ,.]+)')), '') as first_author,
            nullif(trim(regexp_replace(lower({venue}), '[^[:alnum:] ]+', ' ', 'g')), '') as venue,
            nullif(regexp_extract({year}, '((19|20)\d\d)'), '') as year,
            nullif(regexp_extract({first_page}, '(\d+)'), '') as first_page,
            nullif({doi}, '') as doi"""
        ),
        "blocking": [
            block_on("substr(title, 1, 20)"),
            block_on("first_author", "year"),
            block_on("year", "first_page"),
            block_on("doi"),
        ],
        "comparisons": [
            cl.JaroWinklerAtThresholds("title", [0.95, 0.88, 0.7]),
            cl.JaroWinklerAtThresholds("authors", [0.95, 0.88, 0.7]),
            cl.ExactMatch("first_author").configure(term_frequency_adjustments=True),
            cl.JaroWinklerAtThresholds("venue", [0.9, 0.7]),
            cl.ExactMatch("year"),
            cl.ExactMatch("first_page"),
            cl.ExactMatch("doi"),
        ],
        "deterministic": [block_on("title", "year"), block_on("doi")],
        "recall": 0.8,
        "em": [block_on("year"), block_on("substr(title, 1, 20)")],
    }


def splink_config(name: str, cl: Any, block_on: Any) -> dict[str, Any]:
    if name.startswith("febrl"):
        return _splink_person(cl, block_on)
    if name == "dedupe_csv_example":
        return _splink_sites(cl, block_on)
    return _splink_bibliographic(name, cl, block_on)


def run_splink(path: Path, name: str) -> dict[str, object]:
    """id → Splink cluster: DuckDB, the set's configuration (:func:`splink_config`), the prior
    from deterministic rules, u by random sampling (seed :data:`SPLINK_SEED`), m by EM on
    each training blocking rule, predict, connected components at :data:`SPLINK_CLUSTER`."""
    import duckdb
    import splink
    import splink.comparison_library as cl
    from splink import DuckDBAPI, Linker, SettingsCreator, block_on

    config = splink_config(name, cl, block_on)
    connection = duckdb.connect()
    table = connection.sql(
        f"select id as unique_id, {config['select']} "
        f"from read_csv('{path}', header = true, all_varchar = true)"
    )
    db_api = DuckDBAPI(connection=connection)
    settings = SettingsCreator(
        link_type="dedupe_only",
        blocking_rules_to_generate_predictions=config["blocking"],
        comparisons=config["comparisons"],
        retain_intermediate_calculation_columns=False,
    )
    if int(splink.__version__.split(".")[0]) >= 5:
        linker = Linker(db_api.register(table), settings, log_level=logging.ERROR)
    else:  # Splink 4 takes the table and the database API separately
        linker = Linker(table, settings, db_api, set_up_basic_logging=False)
    linker.training.estimate_probability_two_random_records_match(
        config["deterministic"], recall=config["recall"]
    )
    linker.training.estimate_u_using_random_sampling(max_pairs=SPLINK_U_PAIRS, seed=SPLINK_SEED)
    for rule in config["em"]:
        linker.training.estimate_parameters_using_expectation_maximisation(rule)
    predictions = linker.inference.predict(threshold_match_probability=SPLINK_PREDICT)
    clusters = linker.clustering.cluster_pairwise_predictions_at_threshold(
        predictions, threshold_match_probability=SPLINK_CLUSTER
    )
    rows = clusters.as_duckdbpyrelation().select("unique_id, cluster_id").fetchall()
    connection.close()
    return {str(key): cluster for key, cluster in rows}


def peers(data: Path, names: Sequence[str], thresholds: Sequence[float] = ()) -> None:
    """The peer table; each of ``thresholds`` adds a run of the default at that
    --match-threshold (how the default's 0.99 was chosen)."""
    try:  # imported here once, so that no run's seconds include the imports
        import splink.comparison_library  # noqa: F401
        from splink import DuckDBAPI  # noqa: F401
    except ImportError:
        print(PEERS_MISSING)
        sys.exit(1)
    logging.getLogger("splink").setLevel(logging.ERROR)
    header = (
        f"{'set':19} {'method':16} {'pairs':>7} {'gold':>6} {'precision':>9} {'recall':>7} {'F1':>6} "
        f"{'seconds':>8}"
    )
    table: list[str] = []
    print(header, flush=True)
    for name in names:
        path = data / f"{name}.csv"
        if not path.exists():
            print(f"{name}: {path} is absent; skipped", file=sys.stderr)
            continue
        gold = read_gold(path)
        truth = list(gold.values())
        runs: list[tuple[str, Callable[[Path, str], dict[str, object]]]] = [
            ("neardup default", run_neardup_default),
            *[(f"neardup P>={value:g}", _at_threshold(value)) for value in thresholds],
            ("neardup -k auto", run_neardup_simhash),
            ("splink", run_splink),
        ]
        for label, run in runs:
            start = time.perf_counter()
            try:
                assigned = run(path, name)
            except Exception as exc:  # a peer that fails on a set is reported, not fatal
                reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
                line = f"{name:19} {label:16} failed: {reason}"
            else:
                seconds = time.perf_counter() - start
                precision, recall, f1, found, pairs = pairwise_scores(in_gold_order(assigned, gold), truth)
                line = (
                    f"{name:19} {label:16} {found:7d} {pairs:6d} {precision:9.3f} {recall:7.3f} "
                    f"{f1:6.3f} {seconds:8.1f}"
                )
            print(line, flush=True)
            table.append(line)
    print()
    print(header)
    print("\n".join(table))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA, help="folder of the record sets")
    parser.add_argument(
        "--rows", type=int, default=100_000, help="synthetic rows for the speed run (default 100000; 0: none)"
    )
    parser.add_argument("--no-quality", action="store_true", help="skip the quality runs")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="only the peer comparison: neardup's defaults against Splink on every set (needs .[peers])",
    )
    parser.add_argument(
        "--sets", nargs="+", metavar="NAME", choices=PEER_SETS, default=PEER_SETS, help="sets for --peers"
    )
    parser.add_argument(
        "--thresholds",
        nargs="+",
        type=float,
        default=[],
        metavar="P",
        help="with --peers: also run the default at these --match-threshold values",
    )
    args = parser.parse_args()
    if args.peers:
        peers(args.data, args.sets, args.thresholds)
        return
    if not args.no_quality:
        quality(args.data)
    if args.rows:
        throughput(args.rows)


if __name__ == "__main__":
    main()

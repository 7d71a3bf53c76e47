"""How well fingerprints separate near-duplicates from unrelated documents on the labelled
dev sets: mean Hamming distance of gold near-duplicate pairs vs all other pairs, and exact
(brute-force) pairwise precision / recall / F1 at max_distance k, per weighting scheme.

    python benchmarks/dev_separation.py [--data ../shared/data/dev] [--k 3] [--sets zh_news en_news]
    python benchmarks/dev_separation.py --k 3 10 --saturations raw:1 log:1 bm25:1 raw:0.1 log:0.1

``--saturations FORM:SHARE`` runs each weighting under each term-frequency saturation and
share cap (``FingerprintConfig.term_frequency`` / ``max_share``; docs/fingerprints.md), the
way issue 32's defaults were chosen; without it, the defaults. Several ``--k`` score the
same fingerprints at each distance.

The PyPI `simhash` package (char 4-grams, md5) runs on the same records as a reference.
Gold: records of one `cluster` whose `level` is original/light/medium are near-duplicates;
pairs involving `heavy` copies are left out of both precision and recall.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from neardup import Fingerprinter

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "dev"
NEAR_LEVELS = {"original", "light", "medium"}


def load(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def gold_pairs(records: list[dict]) -> tuple[set[tuple[int, int]], np.ndarray]:
    groups: dict[str, list[int]] = {}
    for position, record in enumerate(records):
        if record["level"] in NEAR_LEVELS:
            groups.setdefault(record["cluster"], []).append(position)
    pairs = {pair for members in groups.values() for pair in combinations(sorted(members), 2)}
    heavy = np.array([record["level"] == "heavy" for record in records])
    return pairs, heavy


def all_pairs_within(fingerprints: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Brute force: every pair (i < j) at distance <= k, and the distance histogram of all pairs."""
    rows, cols, histogram = [], [], np.zeros(65, dtype=np.int64)
    for i in range(len(fingerprints) - 1):
        distances = np.bitwise_count(fingerprints[i + 1 :] ^ fingerprints[i])
        histogram += np.bincount(distances, minlength=65)
        hits = np.flatnonzero(distances <= k)
        rows.append(np.full(len(hits), i))
        cols.append(hits + i + 1)
    return np.concatenate(rows), np.concatenate(cols), histogram


def evaluate(name: str, fingerprints: np.ndarray, records: list[dict], k: int) -> dict:
    gold, heavy = gold_pairs(records)
    rows, cols, histogram = all_pairs_within(fingerprints, k)
    keep = ~(heavy[rows] | heavy[cols])
    found = set(zip(rows[keep].tolist(), cols[keep].tolist(), strict=True))
    true_positive = len(found & gold)
    precision = true_positive / len(found) if found else 1.0
    recall = true_positive / len(gold) if gold else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    gold_list = np.array(sorted(gold))
    gold_distances = np.bitwise_count(fingerprints[gold_list[:, 0]] ^ fingerprints[gold_list[:, 1]])
    total_pairs = histogram.sum()
    all_mean = float((histogram * np.arange(65)).sum() / total_pairs)
    return {
        "method": name,
        "near_dup_mean": float(gold_distances.mean()),
        "all_pairs_mean": all_mean,
        "precision": precision,
        "recall": recall,
        "f1": f1,
    }


def pypi_simhash(records: list[dict]) -> np.ndarray:
    from simhash import Simhash

    return np.array([Simhash(record["text"]).value for record in records], dtype=np.uint64)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--k", type=int, nargs="+", default=[3])
    parser.add_argument("--saturations", nargs="+", default=[], metavar="FORM:SHARE")
    parser.add_argument("--sets", nargs="+", default=["zh_news", "en_news", "zh_short"])
    parser.add_argument("--weightings", nargs="+", default=["tf", "tfidf", "tfidf-len", "composite"])
    parser.add_argument("--ngram", type=int, default=0)
    parser.add_argument("--no-peer", action="store_true", help="skip the PyPI simhash package")
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"dev data not found at {args.data}; pass --data")
    print("distances are Hamming distances of 64-bit fingerprints\n")
    print(
        f"{'set':9s} {'method':30s} {'k':>2s} {'dup mean':>8s} {'all mean':>8s} "
        f"{'P':>6s} {'R':>6s} {'F1':>6s} {'s':>6s}"
    )
    saturations: list[dict[str, object]] = [{}]
    if args.saturations:
        forms = [item.split(":") for item in args.saturations]
        saturations = [{"term_frequency": form, "max_share": float(share)} for form, share in forms]
    for name in args.sets:
        records = load(args.data / f"{name}.jsonl")
        texts = [record["text"] for record in records]
        titles = [record.get("title") or None for record in records]
        methods: list[tuple[str, object, dict[str, object]]] = [
            (
                f"neardup {weighting}"
                + (f" ng{args.ngram}" if args.ngram else "")
                + (f" {options['term_frequency']}/{options['max_share']:g}" if options else ""),
                weighting,
                options,
            )
            for weighting in args.weightings
            for options in saturations
        ]
        if not args.no_peer:
            methods.append(("pypi simhash", None, {}))
        for label, weighting, options in methods:
            started = time.perf_counter()
            if weighting is None:
                fingerprints = pypi_simhash(records)
            else:
                fingerprinter = Fingerprinter(weighting=str(weighting), ngram=args.ngram, **options)
                fingerprints = fingerprinter.fingerprint_many(texts, titles)
            seconds = time.perf_counter() - started
            for k in args.k:
                row = evaluate(label, fingerprints, records, k)
                print(
                    f"{name:9s} {label:30s} {k:2d} {row['near_dup_mean']:8.2f} {row['all_pairs_mean']:8.2f} "
                    f"{row['precision']:6.3f} {row['recall']:6.3f} {row['f1']:6.3f} {seconds:6.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()

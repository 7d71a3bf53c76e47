"""Pairwise precision and recall of the ``neardup dedup`` command on the labelled dev sets.

Runs the real command (a subprocess, timed end to end) and scores its PAIRS file against the
gold pairs of benchmarks/dev_separation.py (records of one cluster at level
original/light/medium). Pairs that involve a heavy copy are neither right nor wrong and are
left out. The search itself is exact (tests/test_batch.py checks it against brute force),
so these figures measure the fingerprints at each distance.

    python3 benchmarks/dedup_quality.py                      # zh_news, en_news, zh_short at k = 3
    python3 benchmarks/dedup_quality.py --max-distance 3 6 --sets zh_news
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dev_separation import gold_pairs, load

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "dev"


def score(found: set[tuple[int, int]], gold: set[tuple[int, int]]) -> tuple[float, float, float]:
    right = len(found & gold)
    precision = right / len(found) if found else 1.0
    recall = right / len(gold) if gold else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def run_dedup(path: Path, max_distance: int, extra: list[str]) -> tuple[list[dict], float]:
    with tempfile.TemporaryDirectory() as folder:
        pairs = Path(folder) / "pairs.jsonl"
        command = ["neardup", "dedup", str(path), "--pairs", str(pairs), "-k", str(max_distance), *extra]
        start = time.perf_counter()
        subprocess.run(command, check=True, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        rows = [json.loads(line) for line in pairs.read_text().splitlines()]
    return rows, seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", nargs="+", default=["zh_news", "en_news", "zh_short"])
    parser.add_argument("--max-distance", nargs="+", type=int, default=[3])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("extra", nargs="*", help="more neardup dedup options, after --")
    args = parser.parse_args()
    print(
        f"{'set':9} {'k':>2} {'pairs':>6} {'gold':>6} {'precision':>9} {'recall':>7} {'F1':>6} {'seconds':>8}"
    )
    for name in args.sets:
        path = args.data / f"{name}.jsonl"
        if not path.exists():
            print(f"{name}: {path} is absent; skipped", file=sys.stderr)
            continue
        records = load(path)
        gold, heavy = gold_pairs(records)
        position = {record["id"]: index for index, record in enumerate(records)}
        for k in args.max_distance:
            rows, seconds = run_dedup(path, k, args.extra)
            found = set()
            for row in rows:
                a, b = sorted((position[row["a"]], position[row["b"]]))
                if not (heavy[a] or heavy[b]):
                    found.add((a, b))
            precision, recall, f1 = score(found, gold)
            print(
                f"{name:9} {k:2d} {len(found):6d} {len(gold):6d} {precision:9.3f} {recall:7.3f} "
                f"{f1:6.3f} {seconds:8.2f}"
            )


if __name__ == "__main__":
    main()

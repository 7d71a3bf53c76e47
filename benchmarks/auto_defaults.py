"""What `neardup dedup` finds with no options, and what the -k auto rule of `--search simhash` costs.

1. Cost: the exact pair search of uniform 64-bit fingerprints at each step of the -k auto size
   rule of `--search simhash` (neardup.dedup.auto.AUTO_STEPS), against the classic k = 3 on
   the same fingerprints in the same run; uniform fingerprints are the worst case for
   candidates per true pair.
2. Quality: pairwise precision/recall/F1 of `neardup dedup INPUT` with no options on the
   labelled dev sets (`neardup eval`), beside `--search simhash` (the -k auto Simhash search
   that was the default before the shingle LSH) and `-k 3` (Simhash alone, the seeds' default).

    python3 benchmarks/auto_defaults.py              # both parts
    python3 benchmarks/auto_defaults.py --quality    # only part 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from neardup import find_all_pairs
from neardup.dedup.auto import AUTO_STEPS, CLASSIC_DISTANCE

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "dev"
SETS = ("zh_news", "en_news", "zh_short")


def timed_search(values: np.ndarray, k: int) -> tuple[float, int]:
    started = time.perf_counter()
    pairs = find_all_pairs(values, k)
    return time.perf_counter() - started, len(pairs)


def cost() -> None:
    print("| records | auto k | seconds | pairs | k = 3 seconds | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(1)
    for size, k in AUTO_STEPS:
        values = rng.integers(0, 2**64 - 1, size=size, dtype=np.uint64)
        seconds, pairs = timed_search(values, k)
        classic, _ = timed_search(values, CLASSIC_DISTANCE)
        print(
            f"| {size:,} | {k} | {seconds:.1f} | {pairs:,} | {classic:.2f} | {seconds / classic:.0f}x |",
            flush=True,
        )


def neardup(*args: str) -> str:
    command = [sys.executable, "-c", "from neardup.cli.main import main; main()", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def quality() -> None:
    print("\n| set | options | P | R | F1 | seconds |")
    print("|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for name in SETS:
            source = DATA / f"{name}.jsonl"
            if not source.exists():
                print(f"| {name} | (absent: {source}) | | | | |")
                continue
            for options in ([], ["--search", "simhash"], ["-k", "3"]):
                pairs = Path(folder) / f"{name}.pairs.jsonl"
                started = time.perf_counter()
                neardup("dedup", str(source), "--pairs", str(pairs), *options)
                seconds = time.perf_counter() - started
                scores = json.loads(neardup("eval", str(source), str(pairs), "--format", "json"))
                shown = " ".join(options) or "(none)"
                print(
                    f"| {name} | {shown} | {scores['precision']:.3f} | {scores['recall']:.3f} "
                    f"| {scores['f1']:.3f} | {seconds:.1f} |",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quality", action="store_true", help="only the dev-set quality")
    args = parser.parse_args()
    if not args.quality:
        cost()
    quality()


if __name__ == "__main__":
    main()

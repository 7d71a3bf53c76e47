"""Time and memory of clustering many kept pairs (``neardup.dedup.clusters.components``), this
tree against a baseline tree side by side: what the last step of a batch run costs at 10^7
records.

Each tree runs in a subprocess of its own (``--worker``), which draws the same pairs (seed
fixed: ``--pairs`` pairs over ``--records`` records, each record paired with one of the next
1,000, as the near-duplicates of a sorted batch are), resets its peak resident size
(/proc/self/clear_refs) once the pairs are held, clusters them, and reports the seconds and
the peak over the pairs held. The labels of the two trees are compared by a digest.

    python3 benchmarks/cluster_memory.py --baseline-src /path/to/older/worktree/src
    python3 benchmarks/cluster_memory.py --records 10000000 --pairs 49700000 --baseline-src ...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"


def _kb(field: str) -> int:
    with open("/proc/self/status", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def worker(records: int, pairs: int) -> None:
    import numpy as np

    from neardup.dedup.clusters import components

    rng = np.random.default_rng(0)
    i = np.sort(rng.integers(0, records - 1, pairs))
    j = np.minimum(i + rng.integers(1, 1000, pairs), records - 1)
    with open("/proc/self/clear_refs", "w", encoding="utf-8") as handle:
        handle.write("5")  # VmHWM starts again from the resident size now
    held = _kb("VmRSS:")
    start = time.perf_counter()
    labels = components(records, i, j)
    seconds = time.perf_counter() - start
    digest = hashlib.sha256(labels.astype(np.int64).tobytes()).hexdigest()[:16]
    print(json.dumps({"seconds": seconds, "over_mb": (_kb("VmHWM:") - held) / 1024, "digest": digest}))


def run(source: Path, records: int, pairs: int) -> dict[str, float | str]:
    command = [sys.executable, __file__, "--worker", "--records", str(records), "--pairs", str(pairs)]
    output = subprocess.run(
        command, check=True, capture_output=True, text=True, env={"PYTHONPATH": str(source), "PATH": ""}
    )
    result: dict[str, float | str] = json.loads(output.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--records", type=int, default=10_000_000, help="records (default 10^7)")
    parser.add_argument("--pairs", type=int, default=49_700_000, help="kept pairs (default 4.97*10^7)")
    parser.add_argument("--baseline-src", type=Path, help="the src folder of the tree to compare with")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.records, args.pairs)
        return
    trees = [("this tree", SOURCE)] + ([("baseline", args.baseline_src)] if args.baseline_src else [])
    results = {name: run(source, args.records, args.pairs) for name, source in trees}
    print(f"components of {args.pairs:,} pairs over {args.records:,} records")
    for name, result in results.items():
        seconds, over = f"{result['seconds']:7.2f} s", f"{result['over_mb']:7.0f} MB over the pairs"
        print(f"  {name:9s} {seconds}  {over}  labels {result['digest']}")
    if len(results) == 2:
        now, before = results["this tree"], results["baseline"]
        print(
            f"  this tree / baseline: time {float(now['seconds']) / float(before['seconds']):.2f}, "
            f"memory {float(now['over_mb']) / float(before['over_mb']):.2f}, "
            f"same labels: {now['digest'] == before['digest']}"
        )


if __name__ == "__main__":
    main()

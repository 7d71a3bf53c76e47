"""What the check stage of ``neardup dedup`` costs when its candidates spill to tiles (issue 30):
seconds, CPU seconds (this process and its forked workers) and texts shingled by the exact
check, for this tree's code and a baseline's, run side by side on the same corpus under the
same ``--memory`` budget, alternating, each in a subprocess of its own.

Below a large collection's size the candidates stay in memory; a small budget makes them spill
to tiles as they do at 10^7 under the default 4 GB, so the check's cost per tile can be seen at
10^6 in minutes.

    git worktree add /tmp/base <commit>
    python3 benchmarks/check_cost.py --corpus /work/corpora/en_1000000.g2.jsonl --memory 256M \\
        --baseline-src /tmp/base/src

CPU seconds move less than seconds on a shared machine; the texts shingled are counts (by
``ShingleSets.of`` and ``ShingleSets.written``). Peak MB: the largest ``ru_maxrss`` of the
worker and of its forked workers (a forked worker counts the pages it shares with its parent,
and the pages of mapped shingle sets it reads).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"


def cpu_seconds() -> float:
    """User + system CPU of this process and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def worker(corpus: Path, memory: int) -> dict[str, Any]:
    """One run of ``dedup_documents`` on ``corpus``: the check stage's cost."""
    import neardup.dedup.lsh as lsh
    from neardup.dedup.pipeline import DedupSettings, dedup_documents
    from neardup.io.read import read_records

    shingled = [0]

    def counting(original: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            shingled[0] += args[1] if isinstance(args[0], Path) else args[0]  # written(path, count)
            return original(*args, **kwargs)

        return counted

    lsh.ShingleSets.of = counting(lsh.ShingleSets.of)  # type: ignore[method-assign]
    if hasattr(lsh.ShingleSets, "written"):  # since 87914ab: the sets written to a file and mapped
        lsh.ShingleSets.written = counting(lsh.ShingleSets.written)
    marks: dict[str, tuple[float, float]] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in marks:
            marks[stage] = (time.perf_counter(), cpu_seconds())

    with tempfile.TemporaryDirectory() as spill:
        settings = DedupSettings(memory=memory, tmp_dir=spill)
        result = dedup_documents(read_records(corpus), settings=settings, progress=progress)
    (wall0, cpu0), (wall1, cpu1) = marks["check"], marks["distances"]
    return {
        "check_s": wall1 - wall0,
        "check_cpu_s": cpu1 - cpu0,
        "shingled": shingled[0],
        "documents": len(result.ids),
        "candidates": int(result.candidates),
        "pairs": len(result.pairs),
        "peak_mb": max(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
        )
        >> 10,
    }


def run(src: Path, corpus: Path, memory: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, __file__, "--worker", "--corpus", str(corpus), "--memory", str(memory)]
    output = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="JSONL with id and text fields")
    parser.add_argument("--memory", type=size, default=256 << 20, help="the run's budget, e.g. 256M")
    parser.add_argument("--baseline-src", type=Path, help="a baseline's src folder (a git worktree's)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.corpus, args.memory)))
        return
    trees = {"this tree": SRC, **({"baseline": args.baseline_src} if args.baseline_src else {})}
    print(f"{args.corpus.name}, --memory {args.memory >> 20} MB")
    header = f"{'code':<10} {'check s':>8} {'check cpu s':>12} {'texts shingled':>15} {'candidates':>11}"
    print(f"{header} {'pairs':>8} {'peak MB':>8}")
    for _ in range(args.repeat):
        for name, src in trees.items():
            got = run(src, args.corpus, args.memory)
            print(
                f"{name:<10} {got['check_s']:>8.1f} {got['check_cpu_s']:>12.1f} {got['shingled']:>15,} "
                f"{got['candidates']:>11,} {got['pairs']:>8,} {got['peak_mb']:>8,}",
                flush=True,
            )


if __name__ == "__main__":
    main()

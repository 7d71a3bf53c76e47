"""What the sketch stage of ``neardup dedup`` costs a document, part by part (issue 30: the
stage is half of a 10^7 run): normalization, shingles, the one-permutation sketch before and
in its densification, band keys and check bins, for this tree's code and a baseline's, side
by side, each in a subprocess of its own, in CPU seconds (which a shared machine moves less
than seconds), the best of ``--repeat`` runs of each, the trees alternating.

    git worktree add /tmp/base <commit>
    python3 benchmarks/sketch_cost.py --corpus /work/corpora/zh_1000000.g2.jsonl --baseline-src /tmp/base/src

Each part is timed on the output of the one before, as the batch search runs them
(``neardup.dedup.lsh.sketch_texts``). The two trees must give the same band keys: the script
says so.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"


def best(function: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The least CPU seconds of ``repeat`` calls, and the last call's result."""
    seconds, result = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        result = function()
        seconds = min(seconds, time.process_time() - start)
    return seconds, result


def worker(corpus: Path, documents: int, repeat: int) -> dict[str, Any]:
    import numpy as np

    from neardup.dedup.candidates import split_short
    from neardup.dedup.pipeline import DedupSettings
    from neardup.similarity import shingles, sketches
    from neardup.text.normalize import Normalizer

    with corpus.open(encoding="utf-8") as lines:
        texts = [json.loads(line)["text"] for line in itertools.islice(lines, documents)]
    settings = DedupSettings().lsh_settings()
    normalizer = Normalizer()
    times: dict[str, float] = {}
    times["normalize"], normalized = best(lambda: normalizer.normalize_many(texts), repeat)
    times["shingles"], found = best(lambda: shingles.shingles_of(normalized, Normalizer()), repeat)
    _, _, long = split_short(found, settings)
    renumber = np.full(found.count, -1, dtype=np.int64)
    renumber[long] = np.arange(long.size)
    chosen = renumber[found.documents] >= 0
    subset = shingles.Shingles(found.hashes[chosen], renumber[found.documents[chosen]], int(long.size))
    densify = sketches._densify
    sketches._densify = lambda *_: None  # type: ignore[assignment]
    times["sketch"], raw = best(lambda: sketches.oph_sketches(subset, sketches.TEXT_SKETCH_BINS), repeat)
    sketches._densify = densify
    nonempty = subset.sizes > 0

    def densified() -> Any:
        sketch = raw.copy()
        densify(sketch, nonempty, 1)
        return sketch

    times["densify"], dense = best(densified, repeat)
    columns = sketches.band_columns(settings.rows, settings.band_count)
    times["band keys"], keys = best(
        lambda: sketches.hashed_band_keys(dense[:, columns], settings.rows, settings.band_count), repeat
    )
    times["check bins"], _ = best(lambda: sketches.byte_bins(dense, settings.check_bins), repeat)
    digest = hashlib.sha256(np.ascontiguousarray(keys).tobytes()).hexdigest()[:16]
    return {"times": times, "documents": len(texts), "keys": digest}


def run(src: Path, corpus: Path, documents: int, repeat: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, __file__, "--worker", "--corpus", str(corpus)]
    command += ["--documents", str(documents), "--repeat", str(repeat)]
    output = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="JSONL with a text field")
    parser.add_argument("--documents", type=int, default=20_000, help="the first N documents")
    parser.add_argument("--baseline-src", type=Path, help="a baseline's src folder (a git worktree's)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.corpus, args.documents, args.repeat)))
        return
    trees = {"this tree": SRC, **({"baseline": args.baseline_src} if args.baseline_src else {})}
    results: dict[str, dict[str, Any]] = {}
    for _ in range(args.repeat):  # the trees alternate, so a burst of load hits both alike
        for name, src in trees.items():
            got = run(src, args.corpus, args.documents, 1)
            if name in results:
                kept = results[name]["times"]
                got["times"] = {part: min(kept[part], seconds) for part, seconds in got["times"].items()}
            results[name] = got
    parts = list(next(iter(results.values()))["times"])
    print(f"{args.corpus.name}, first {args.documents:,} documents: CPU µs a document, best of {args.repeat}")
    ratio = "       ratio" if len(results) > 1 else ""
    print(f"{'part':<12}" + "".join(f"{name:>12}" for name in results) + ratio)
    for part in [*parts, "total"]:
        values = [sum(r["times"].values()) if part == "total" else r["times"][part] for r in results.values()]
        row = f"{part:<12}" + "".join(f"{1e6 * v / args.documents:>12.1f}" for v in values)
        if len(values) > 1:
            row += f"{values[0] / values[1]:>12.2f}" if values[1] else ""
        print(row)
    keys = {r["keys"] for r in results.values()}
    print("band keys:", "the same" if len(keys) == 1 else f"DIFFERENT ({', '.join(sorted(keys))})")


if __name__ == "__main__":
    main()

"""Check-and-add into the default band index with N real documents stored, this tree beside a
baseline tree in the same run.

``store_speed.py`` stores random fingerprints and sketches, which never collide by chance
beyond 2^-24 a band; real text does. Here the stored documents are the first ``--stored``
lines of a ``scale_quality.py`` corpus (Reuters or People's Daily sentences drawn from one
pool, so stored texts share sentences, as news does), filled once into a SQLite band index
(``Index.open(path)``, the defaults of ``neardup index add``) and kept in ``--dir`` for the
next run. Each round copies that store for each version in turn (this tree, and with
``--baseline-src`` a baseline's ``src`` on ``PYTHONPATH``, alternating), checks and adds
``--warm`` fresh documents (SQLite's page cache filled as a long-running service's is), then
times ``Index.check_and_add`` of the next ``--fresh`` in batches of ``--batch``, prepared
beforehand (preparing is the same for both and is not timed). Prints docs/s, matches a
document (the same for both when nothing but speed changed), for a tree with the band bins'
prefilter the candidates it saw and kept a document, and the ratio to the baseline.

    python3 benchmarks/index_growth.py --corpus /work/corpora/en_3000000.g2.jsonl --stored 1000000 \\
        --dir /tmp/growth --baseline-src /tmp/base/src
    python3 benchmarks/index_growth.py --corpus CORPUS --stored 20000 --dir /tmp/g --fresh 1000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
SRC = HERE.parents[1] / "src"


def stream(corpus: Path, start: int, count: int) -> Iterator[Any]:
    """Records of lines [start, start + count) of the corpus."""
    from neardup.io.record import Record

    with corpus.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle):
            if line_number >= start + count:
                return
            if line_number >= start:
                row = json.loads(line)
                yield Record(str(row["id"]), row["text"], None, str(line_number))


def records(corpus: Path, start: int, count: int) -> list[Any]:
    return list(stream(corpus, start, count))


def fill(corpus: Path, stored: int, path: Path) -> None:
    from neardup import Index

    partial = path.with_suffix(".partial")
    for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
        leftover.unlink(missing_ok=True)
    start = time.perf_counter()
    with Index.open(str(partial)) as index:
        chunk: list[Any] = []
        for record in stream(corpus, 0, stored):
            chunk.append(record)
            if len(chunk) == 5000:
                index.add(index.prepare(chunk))
                chunk = []
        if chunk:
            index.add(index.prepare(chunk))
    partial.rename(path)
    print(f"filled {stored:,} documents in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


def worker(args: argparse.Namespace) -> None:
    """One version's timing on a copy of the kept store: a JSON line on stdout."""
    from neardup import Index

    work = args.dir / "work.db"
    for name in (work, Path(f"{work}-wal"), Path(f"{work}-shm")):
        name.unlink(missing_ok=True)
    shutil.copyfile(args.dir / f"stored-{args.stored}.db", work)
    fresh = records(args.corpus, args.stored, args.warm + args.fresh)
    with Index.open(str(work)) as index:
        batches = [index.prepare(fresh[low : low + args.batch]) for low in range(0, len(fresh), args.batch)]
        warm = args.warm // args.batch
        for batch in batches[:warm]:
            index.check_and_add(batch)
        counts = count_prefilter(index)
        start, matches = time.perf_counter(), 0
        for batch in batches[warm:]:
            matches += sum(len(assignment.matches) for assignment in index.check_and_add(batch))
        seconds = time.perf_counter() - start
    timed = len(fresh) - warm * args.batch
    result = {"docs_per_second": timed / seconds, "matches_per_doc": matches / timed}
    if counts is not None:
        result["candidates_per_doc"] = counts[0] / timed
        result["kept_per_doc"] = counts[1] / timed
    print(json.dumps(result))
    for name in (work, Path(f"{work}-wal"), Path(f"{work}-shm")):
        name.unlink(missing_ok=True)


def count_prefilter(index: Any) -> list[int] | None:
    """[candidates, kept] that the band bins' prefilter sees from now on, counted as it runs
    (None for a tree without it); the count costs a len() a batch."""
    prefilter = getattr(index.deduper, "prefilter", None)
    if prefilter is None:
        return None
    counts = [0, 0]

    def counted(found: Any, queries: Any) -> Any:
        kept = prefilter(found, queries)
        counts[0] += len(found.keys)
        counts[1] += len(kept.keys)
        return kept

    index.deduper.prefilter = counted
    return counts


def run_version(src: Path, args: argparse.Namespace) -> dict[str, float]:
    command = [sys.executable, str(HERE), "--worker", "--corpus", str(args.corpus), "--dir", str(args.dir)]
    command += ["--stored", str(args.stored), "--fresh", str(args.fresh), "--warm", str(args.warm)]
    command += ["--batch", str(args.batch)]
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the run with {src} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, required=True, help="a scale_quality.py corpus (JSON lines)")
    parser.add_argument("--stored", type=int, default=1_000_000, help="documents stored (default 10^6)")
    parser.add_argument("--dir", type=Path, required=True, help="where the filled store is kept")
    parser.add_argument("--fresh", type=int, default=2000, help="documents timed (default 2000)")
    parser.add_argument("--warm", type=int, default=4000, help="documents checked before timing")
    parser.add_argument("--batch", type=int, default=500, help="documents a check-and-add batch")
    parser.add_argument("--baseline-src", type=Path, help="a baseline's src folder (a git worktree's)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, versions alternating (default 2)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    args.dir.mkdir(parents=True, exist_ok=True)
    kept = args.dir / f"stored-{args.stored}.db"
    if not kept.exists():
        sys.path.insert(0, str(SRC))
        fill(args.corpus, args.stored, kept)
    versions = {"this tree": SRC, **({"baseline": args.baseline_src} if args.baseline_src else {})}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in versions}
    for round_number in range(args.rounds):
        order = list(versions.items())
        for name, src in order if round_number % 2 == 0 else order[::-1]:
            result = run_version(src, args)
            results[name].append(result)
            seen = (
                f", {result['candidates_per_doc']:.1f} candidates a document, "
                f"{result['kept_per_doc']:.1f} past the prefilter"
                if "candidates_per_doc" in result
                else ""
            )
            print(
                f"round {round_number + 1} {name}: {result['docs_per_second']:,.0f} docs/s, "
                f"{result['matches_per_doc']:.2f} matches a document{seen}",
                flush=True,
            )
    print(f"\ncheck-and-add with {args.stored:,} stored ({args.corpus.name}), median of {args.rounds}:")
    base = statistics.median(r["docs_per_second"] for r in results.get("baseline", results["this tree"]))
    for name, runs in results.items():
        rate = statistics.median(r["docs_per_second"] for r in runs)
        print(f"  {name:10s} {rate:8,.0f} docs/s  {rate / base:5.2f}x the baseline")


if __name__ == "__main__":
    main()

"""Documents per second of ``neardup spark dedup`` on local[1] vs local[2], time split by stage.

A synthetic corpus (default 1,000,000 documents) of English-like text — words drawn from a
Zipf-distributed (s = 0.8) vocabulary of 200,000 made-up words, 30-80 words a document — with 5 %
near-duplicates (a copy of an earlier document with one to three words replaced) is written
once as JSONL; then each master runs the whole job in its own process (a JVM has one master):
fingerprints, buckets, pairs, clusters and output (pairs and clusters as single local .jsonl
files, as a user would ask for them). Both the job and the baseline, ``neardup dedup`` in a
process of its own (the single-machine path), run the default search (the shingle LSH), or with
``--search simhash`` the exact Simhash search at k = 3 (``-k 3``). Each step is announced on
stderr.

    python benchmarks/spark_scaling.py                 # 1 M documents, the default search
    python benchmarks/spark_scaling.py --docs 100000   # quicker
    python benchmarks/spark_scaling.py --search simhash --masters 'local[2]'
    python benchmarks/spark_scaling.py --corpus /work/corpora/zh_1000000.g2.jsonl   # any JSONL
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

STAGES = ("fingerprints", "buckets", "pairs", "clusters", "output")
#: ``--search``: the Spark job's max_distance and the baseline's extra arguments.
SEARCHES: dict[str, tuple[int | None, list[str]]] = {"lsh": (None, []), "simhash": (3, ["-k", "3"])}
VOCABULARY = 200_000


def make_corpus(path: Path, docs: int, seed: int = 7, duplicate_share: float = 0.05) -> None:
    """Write the synthetic corpus; vectorised so 1 M documents take seconds, not minutes."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 11, size=VOCABULARY)
    vocabulary = ["".join(rng.choice(letters, size=int(n))) for n in lengths]
    ranks = np.arange(1, len(vocabulary) + 1, dtype=np.float64)
    weights = 1.0 / ranks**0.8
    weights /= weights.sum()
    counts = rng.integers(30, 81, size=docs)
    words = rng.choice(len(vocabulary), size=int(counts.sum()), p=weights)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    copies = rng.random(docs) < duplicate_share
    with path.open("w", encoding="utf-8") as handle:
        for index in range(docs):
            chosen = words[bounds[index] : bounds[index + 1]]
            if copies[index] and index > 0:
                source = int(rng.integers(0, index))
                chosen = words[bounds[source] : bounds[source + 1]].copy()
                for position in rng.integers(0, chosen.size, size=int(rng.integers(1, 4))):
                    chosen[position] = int(rng.integers(0, len(vocabulary)))
            text = " ".join(vocabulary[w] for w in chosen.tolist())
            handle.write(json.dumps({"id": f"d{index:07d}", "text": text}) + "\n")


def progress(text: str) -> None:
    print(f"spark_scaling: {text}", file=sys.stderr, flush=True)


def run_worker(master: str, source: str, folder: str, partitions: int, search: str) -> dict[str, object]:
    """Run the whole job once under ``master``; called in a child process."""
    from neardup.fingerprint.config import FingerprintConfig
    from neardup.spark.job import DedupJob, run_dedup
    from neardup.spark.output import Outputs
    from neardup.spark.session import build_session
    from neardup.spark.tasks import ReadSettings

    started = time.perf_counter()
    # local mode runs the executors in the driver's JVM: 10^6 documents ran out of a 3 GB heap
    conf = {"spark.ui.enabled": "false", "spark.driver.memory": "8g"}
    session = build_session(master, partitions, conf, app_name="neardup-benchmark")
    ready = time.perf_counter()
    job = DedupJob(
        input=source,
        read=ReadSettings(format="jsonl"),
        config=FingerprintConfig(),
        max_distance=SEARCHES[search][0],
        partitions=partitions,
    )
    outputs = Outputs(pairs=f"{folder}/pairs.jsonl", clusters=f"{folder}/clusters.jsonl")
    result = run_dedup(session, job, outputs, stats=False)
    session.stop()
    return {
        "master": master,
        "startup": ready - started,
        "seconds": result.seconds,
        "records": result.records,
        "pairs": result.pairs,
        "clusters": result.clusters,
        "rounds": result.rounds,
        "scheme": result.scheme.describe() if result.scheme else "",
    }


def local_baseline(source: Path, folder: Path, search: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            "neardup",
            "dedup",
            str(source),
            *SEARCHES[search][1],
            "--pairs",
            str(folder / "local.pairs.jsonl"),
            "--no-progress",
        ],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000, help="documents in the synthetic corpus")
    parser.add_argument("--masters", default="local[1],local[2]", help="comma-separated Spark masters")
    parser.add_argument("--partitions", type=int, default=8, help="input splits and shuffle partitions")
    parser.add_argument("--corpus", type=Path, help="reuse (or create) the corpus at this path")
    parser.add_argument("--no-local", action="store_true", help="skip the neardup dedup baseline")
    parser.add_argument(
        "--search", choices=sorted(SEARCHES), default="lsh", help="lsh (the default search) or simhash (-k 3)"
    )
    parser.add_argument("--worker", nargs=3, metavar=("MASTER", "INPUT", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(run_worker(*args.worker, args.partitions, args.search)))
        return

    with tempfile.TemporaryDirectory(prefix="neardup-spark-bench-") as temporary:
        folder = Path(temporary)
        source = args.corpus or folder / "corpus.jsonl"
        documents = args.docs
        if source.exists():
            with source.open(encoding="utf-8") as handle:
                documents = sum(1 for _ in handle)
            print(f"corpus: {source} ({documents:,} documents, {source.stat().st_size / 1e6:.0f} MB), reused")
        else:
            progress(f"writing {args.docs:,} documents")
            started = time.perf_counter()
            make_corpus(source, args.docs)
            print(
                f"corpus: {args.docs:,} documents, {source.stat().st_size / 1e6:.0f} MB, "
                f"written in {time.perf_counter() - started:.0f} s"
            )
        print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}", flush=True)
        if not args.no_local:
            baseline = " ".join(["neardup dedup", *SEARCHES[args.search][1]])
            progress(f"{baseline} (the baseline)")
            seconds = local_baseline(source, folder, args.search)
            rate = documents / seconds
            print(f"{baseline} (one process): {seconds:.1f} s, {rate:,.0f} documents/s", flush=True)
        rates = {}
        for master in args.masters.split(","):
            out = folder / master.replace("[", "_").replace("]", "").replace("*", "all")
            out.mkdir()
            command = [
                sys.executable,
                __file__,
                "--partitions",
                str(args.partitions),
                "--search",
                args.search,
                "--worker",
                master,
                str(source),
                str(out),
            ]
            progress(f"neardup spark dedup under {master}")
            completed = subprocess.run(command, capture_output=True, text=True, check=False)
            if completed.returncode:  # the job's own error, not a traceback of this wrapper
                errors = [line for line in completed.stderr.splitlines() if "Error" in line] or ["?"]
                sys.exit(f"neardup spark dedup under {master} failed: {errors[0][:500]}")
            report = json.loads(completed.stdout.strip().splitlines()[-1])
            seconds = report["seconds"]
            total = sum(seconds.values())
            rates[master] = report["records"] / total
            local_pairs = folder / "local.pairs.jsonl"
            if local_pairs.exists():
                same = (out / "pairs.jsonl").read_bytes() == local_pairs.read_bytes()
                print(
                    f"{master}: pairs file identical to neardup dedup's: {'yes' if same else 'NO'}",
                    flush=True,
                )
            stages = ", ".join(f"{stage} {seconds.get(stage, 0.0):.1f}" for stage in STAGES)
            print(
                f"{master}: {total:.1f} s ({stages}; start-up {report['startup']:.1f} not counted), "
                f"{rates[master]:,.0f} documents/s; {report['pairs']:,} pairs, {report['clusters']:,} "
                f"clusters of 2+, {report['rounds']} components rounds; {report['scheme']}",
                flush=True,
            )
        names = list(rates)
        if len(names) == 2:
            print(f"speed-up {names[1]} / {names[0]}: {rates[names[1]] / rates[names[0]]:.2f}x")


if __name__ == "__main__":
    main()

"""Seed 002 table 5 made real: incremental dedup speed per store.

For each backend, with ``--stored`` documents already in the store (default 100 k):

- batched check-and-add throughput (docs/s): ``check_and_add_many`` in batches of
  ``--batch`` fresh documents, each batch one locked transaction (query + assign + insert);
- single-query latency p50/p99 (``query`` of one fingerprint, one round trip).

Fingerprints are precomputed (random 64-bit values with planted near-duplicates), so the
figures are the store's; fingerprinting costs the same for every store (see
fingerprint_speed.py). The in-memory index runs in the same process as the baseline. Server
backends run on real servers started on 127.0.0.1 by scripts/servers.py and stopped by PID at
the end (install them with ``bash scripts/install-servers.sh``).

By default memory, SQLite, Redis and PostgreSQL run, both searches, 100 k stored: a few
minutes on 2 cores. ``mysql`` (MariaDB), ``mongo`` (one document per record) and
``mongo-buckets`` (seed 002's bucket documents) are opt-in with ``--backends``; the MongoDB
ones run on the jongodb test server unless NEARDUP_MONGODB_URL names a real MongoDB, and
jongodb takes hours at the default sizes (use ``--stored 3000 --fresh 500`` there).
Progress goes to stderr, the figures and a final table to stdout.

    python3 benchmarks/store_speed.py                    # memory sqlite redis postgres, 100 k stored
    python3 benchmarks/store_speed.py --stored 20000 --backends sqlite redis
    python3 benchmarks/store_speed.py --backends mongo mongo-buckets --stored 3000 --fresh 500

Versions side by side: ``--versions base=/work/wt-base/src now=src --bands 16 40 --rounds 3``
runs each (version, bands) pair in a process of its own with that ``PYTHONPATH`` (a baseline
is a ``git worktree`` of the commit compared against), round after round in alternating order,
and prints the median check-and-add docs/s of each and its ratio to the first version's
first band count.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from neardup import IncrementalDeduper, SimhashIndex
from neardup.index.config import IndexConfig
from neardup.similarity.bands import DEFAULT_BANDS, SKETCH_BYTES, BandScheme
from neardup.similarity.verify import Verifier

ROOT = Path(__file__).resolve().parents[1]
#: sqlite-columns: SQLite with ``?layout=columns`` (seed 002's table, SQLite's default before runs).
BACKENDS = ["memory", "sqlite", "sqlite-columns", "redis", "postgres", "mysql", "mongo", "mongo-buckets"]
#: What runs without --backends: the stores issue 17 sets targets for, in minutes on 2 cores
#: (MongoDB runs on a test server here, which takes hours at these sizes).
DEFAULT_BACKENDS = ["memory", "sqlite", "redis", "postgres"]
SEARCHES = ("blocks", "bands")
SERVER_NAMES = {
    "redis": "redis",
    "postgres": "postgres",
    "mysql": "mariadb",
    "mongo": "mongo",
    "mongo-buckets": "mongo",
}
#: URL options per backend: mongo-buckets is seed 002's bucket-document layout.
URL_OPTIONS = {"mongo-buckets": "?layout=buckets"}
TARGET_DOCS_PER_SECOND = 5000


def load_servers() -> Any:
    spec = importlib.util.spec_from_file_location("neardup_servers", ROOT / "scripts" / "servers.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["neardup_servers"] = module
    spec.loader.exec_module(module)
    return module


def fingerprints(count: int, seed: int) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """Random fingerprints, 30 % of them 1-3 bits away from an earlier one."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**64 - 1, size=count, dtype=np.uint64)
    copies = np.flatnonzero(rng.random(count) < 0.3)
    copies = copies[copies > 0]
    sources = (rng.random(copies.size) * copies).astype(np.int64)
    flips = np.zeros(copies.size, dtype=np.uint64)
    for _ in range(3):
        flips |= np.uint64(1) << rng.integers(0, 64, size=copies.size).astype(np.uint64)
    values[copies] = values[sources] ^ flips
    return values


def sketches(count: int, seed: int) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """Random 512-bin text sketches, 30 % of them an earlier one with a quarter of its bins
    redrawn (a shingle Jaccard near 0.6: a medium edit, found through some band)."""
    rng = np.random.default_rng(seed)
    bins = rng.integers(0, 256, size=(count, SKETCH_BYTES), dtype=np.uint8)
    copies = np.flatnonzero(rng.random(count) < 0.3)
    copies = copies[copies > 0]
    sources = (rng.random(copies.size) * copies).astype(np.int64)
    bins[copies] = bins[sources]
    redrawn = rng.random((copies.size, SKETCH_BYTES)) < 0.25
    bins[copies] = np.where(redrawn, rng.integers(0, 256, size=redrawn.shape, dtype=np.uint8), bins[copies])
    return np.ascontiguousarray(bins).view(np.uint64)


def measure(
    url: str, stored: int, fresh: int, batch: int, queries: int, search: str, bands: int = DEFAULT_BANDS
) -> dict[str, float]:
    """One store's figures for one search: ``blocks`` (Simhash, k = 3, the earlier default)
    or ``bands`` (the default band index: 16 bands of 3 bins of a 512-byte sketch)."""
    values = fingerprints(stored + fresh, seed=5)
    signed = search == "bands"
    texts = sketches(stored + fresh, seed=6) if signed else None
    scheme = BandScheme(64, bands=bands)
    config = IndexConfig(scheme=scheme, verification={"mode": "sketch"}) if signed else IndexConfig()

    def rows(start: int, stop: int) -> Any:
        return None if texts is None else texts[start:stop]

    with SimhashIndex.open(url, config) as index:
        started = time.perf_counter()
        for start in range(0, stored, 10_000):
            stop = min(start + 10_000, stored)
            index.add_many(list(range(start, stop)), values[start:stop], signatures=rows(start, stop))
        load = time.perf_counter() - started
        started = time.perf_counter()
        duplicates = 0
        deduper = IncrementalDeduper(index, Verifier("sketch") if signed else None)
        for start in range(stored, stored + fresh, batch):
            stop = min(start + batch, stored + fresh)
            results = deduper.check_and_add_many(
                list(range(start, stop)), values[start:stop], signatures=rows(start, stop)
            )
            duplicates += sum(result.duplicate for result in results)
        check = time.perf_counter() - started
        assert len(index) == stored + fresh
        probe = fingerprints(queries, seed=9)
        probe[: queries // 2] = values[: queries // 2] ^ np.uint64(0b101)  # half of them hit
        probe_sketches = sketches(queries, seed=10) if signed else None
        if probe_sketches is not None and texts is not None:
            probe_sketches[: queries // 2] = texts[: queries // 2]
        latencies = []
        for row, value in enumerate(probe.tolist()):
            began = time.perf_counter()
            deduper.query(value, signature=None if probe_sketches is None else probe_sketches[row])
            latencies.append(time.perf_counter() - began)
    latencies.sort()
    return {
        "load_per_s": stored / load,
        "check_per_s": fresh / check,
        "duplicates": duplicates / fresh,
        "p50_ms": statistics.median(latencies) * 1e3,
        "p99_ms": latencies[int(0.99 * (len(latencies) - 1))] * 1e3,
    }


def _drop(url: str) -> None:
    """Empty a server store between searches (an SQLite file per search needs nothing)."""
    if url.startswith(("sqlite", "memory")):
        return
    with SimhashIndex.open(url, create=False, check_files=False) as index:
        index.storage.drop()


def measure_backends(
    backends: list[str],
    stored: int,
    fresh: int,
    batch: int,
    queries: int,
    echo: bool = True,
    searches: tuple[str, ...] = ("blocks",),
    bands: int = DEFAULT_BANDS,
) -> list[tuple[str, dict[str, float]]]:
    """Figures per backend, starting the servers it needs (and stopping them by PID)."""
    servers = load_servers()
    started: list[Any] = []
    rows: list[tuple[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="neardup-store-speed-") as folder:
        urls = {"memory": "memory://", "sqlite": f"sqlite:///{folder}/store.db"}
        try:
            for name in backends:
                external = os.environ.get("NEARDUP_MONGODB_URL") if name.startswith("mongo") else None
                if external:  # a real MongoDB instead of the jongodb test server
                    urls[name] = external + URL_OPTIONS.get(name, "")
                elif name in SERVER_NAMES:
                    server = servers.start(SERVER_NAMES[name])
                    started.append(server)
                    urls[name] = str(server.url) + URL_OPTIONS.get(name, "")
            for name in backends:
                for search in searches:
                    url = urls.get(name, "")
                    if name == "sqlite":
                        url = f"sqlite:///{folder}/store-{search}.db"
                    elif name == "sqlite-columns":
                        url = f"sqlite:///{folder}/store-{search}-columns.db?layout=columns"
                    print(
                        f"store_speed: {name} {search}: loading {stored:,}, then checking {fresh:,}",
                        file=sys.stderr,
                        flush=True,
                    )
                    figures = measure(url, stored, fresh, batch, queries, search, bands)
                    _drop(url)
                    label = f"{name} {search}"
                    rows.append((label, figures))
                    if echo:
                        print(
                            f"{label:20s} load {figures['load_per_s']:>9,.0f}/s  check-and-add "
                            f"{figures['check_per_s']:>8,.0f} docs/s  query p50 {figures['p50_ms']:6.2f} ms  "
                            f"p99 {figures['p99_ms']:6.2f} ms  ({figures['duplicates']:.0%} duplicates)",
                            flush=True,
                        )
        finally:
            for server in started:
                server.stop(remove_dir=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        choices=BACKENDS,
        default=DEFAULT_BACKENDS,
        help=f"default: {' '.join(DEFAULT_BACKENDS)} (a few minutes on 2 cores); mysql, mongo and "
        "mongo-buckets only when named (MongoDB on the jongodb test server takes hours at the "
        "default sizes: add --stored 3000 --fresh 500)",
    )
    parser.add_argument(
        "--searches",
        nargs="+",
        choices=SEARCHES,
        default=list(SEARCHES),
        help="blocks: Simhash k = 3 (the earlier default); bands: the default band index",
    )
    parser.add_argument(
        "--stored", type=int, default=100_000, help="documents stored before measuring (default 100000)"
    )
    parser.add_argument(
        "--fresh", type=int, default=20_000, help="documents checked and added (default 20000)"
    )
    parser.add_argument(
        "--batch", type=int, default=1000, help="documents per check-and-add batch (default 1000)"
    )
    parser.add_argument("--queries", type=int, default=1000, help="single queries timed (default 1000)")
    parser.add_argument(
        "--bands",
        type=int,
        nargs="+",
        default=[DEFAULT_BANDS],
        help=f"bands of the band index (default {DEFAULT_BANDS}, the default index's; 36 keeps the "
        "batch search's recall at Jaccard 0.5)",
    )
    parser.add_argument(
        "--versions",
        nargs="+",
        metavar="LABEL=SRC[@B,...]",
        help="compare versions: each LABEL=SRC runs in its own process with PYTHONPATH=SRC, for each "
        "of --bands (or the band counts after @), alternated over --rounds; the first is the "
        "baseline of the ratios",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --versions (default 3)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one run, for --versions
    args = parser.parse_args()
    if args.versions:
        compare_versions(args)
        return
    if len(args.bands) != 1:
        parser.error("several --bands need --versions")
    args.bands = args.bands[0]
    if args.json:
        rows = measure_backends(args.backends, args.stored, args.fresh, args.batch, args.queries, echo=False,
                                searches=tuple(args.searches), bands=args.bands)  # fmt: skip
        print(json.dumps(rows))
        return
    print(f"stored {args.stored:,}; check-and-add {args.fresh:,} in batches of {args.batch}; "
          f"{args.queries} single queries; blocks: 64-bit fingerprints, k = 3, pigeonhole 4 x 16 bits; "
          f"bands: {BandScheme(bands=args.bands).describe()}")  # fmt: skip
    rows = measure_backends(
        args.backends,
        args.stored,
        args.fresh,
        args.batch,
        args.queries,
        searches=tuple(args.searches),
        bands=args.bands,
    )
    print("\n| store | check-and-add docs/s | vs target 5,000 | query p50 ms | query p99 ms | load docs/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, figures in rows:
        print(
            f"| {name} | {figures['check_per_s']:,.0f} "
            f"| {figures['check_per_s'] / TARGET_DOCS_PER_SECOND:.1f}x "
            f"| {figures['p50_ms']:.2f} | {figures['p99_ms']:.2f} | {figures['load_per_s']:,.0f} |"
        )


def compare_versions(args: argparse.Namespace) -> None:
    """Each (version, bands) pair in its own process, rounds alternating the order; medians of
    check-and-add docs/s per store and their ratio to the first pair's."""
    pairs = []
    for item in args.versions:  # LABEL=SRC, or LABEL=SRC@B1,B2 for band counts of its own
        label, _, rest = item.partition("=")
        source, _, counts = rest.partition("@")
        pairs += [
            (label, source, bands)
            for bands in ([int(c) for c in counts.split(",")] if counts else args.bands)
        ]
    figures: dict[tuple[str, int, str], list[float]] = {}
    for round_number in range(args.rounds):
        for label, source, bands in pairs if round_number % 2 == 0 else pairs[::-1]:
            command = [sys.executable, __file__, "--json", "--backends", *args.backends,
                       "--searches", *args.searches, "--stored", str(args.stored),
                       "--fresh", str(args.fresh), "--batch", str(args.batch),
                       "--queries", str(args.queries), "--bands", str(bands)]  # fmt: skip
            environment = {**os.environ, "PYTHONPATH": str(Path(source).resolve())}
            done = subprocess.run(command, env=environment, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{label} {bands} bands failed:\n{done.stderr[-3000:]}")
            output = done.stdout
            for name, measured in json.loads(output.strip().splitlines()[-1]):
                figures.setdefault((label, bands, name), []).append(measured["check_per_s"])
                print(f"round {round_number + 1}: {label} {bands} bands {name}: "
                      f"{measured['check_per_s']:,.0f} docs/s", flush=True)  # fmt: skip
    first_label, _, first_bands = pairs[0]
    print(f"\n| store | version, bands | check-and-add docs/s (median of {args.rounds}) | runs | "
          f"ratio to {first_label}, {first_bands} bands |")  # fmt: skip
    print("|---|---|---:|---|---:|")
    for name in dict.fromkeys(name for _, _, name in figures):
        base = statistics.median(figures[(first_label, first_bands, name)])
        for label, _, bands in pairs:
            runs = figures[(label, bands, name)]
            listed = " / ".join(f"{run:,.0f}" for run in runs)
            median = statistics.median(runs)
            print(f"| {name} | {label}, {bands} | {median:,.0f} | {listed} | {median / base:.2f} |")


if __name__ == "__main__":
    main()

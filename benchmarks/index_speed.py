"""Speed and memory of exact near-duplicate search: all pairs of a collection, and an online index.

    python benchmarks/index_speed.py [--quick] [--skip-pypi] [--sections 1,2,...] [--data DIR]

Sections (each comparison runs side by side in one run; the machine is noisy, so read ratios):
  1. ``find_all_pairs`` on 1 M and 10 M random 64-bit fingerprints with 1 % planted near-duplicates
     (k = 3; each copy at distance 0..3 from a random other fingerprint): time, pairs, planted pairs
     recovered, peak memory, the auto-tuned scheme, and the pigeonhole scheme BlockScheme(64, 3) at
     the smaller size. From the two schemes' timings and candidate counts it also solves for the
     relative cost of one verified candidate versus one sorted table entry (``blocks.PAIR_COST``).
  2. A numpy brute-force scan (XOR + ``np.bitwise_count``) for a sample of queries, scaled to the
     n²/2 comparisons of all pairs, versus ``find_all_pairs`` on the same collection.
  3. The PyPI ``simhash`` package's ``SimhashIndex`` (f = 64, k = 3 passed explicitly: its default k
     is 2) on 100 k fingerprints, build + query every document, versus ``find_all_pairs``.
  4. ``neardup.SimhashIndex`` on 10 M fingerprints: ``add_many`` time, bytes per indexed
     fingerprint, single ``query`` latency (p50 / p99, half planted near-duplicates, half random)
     versus a linear numpy scan, and ``query_many`` throughput on 100 k queries. Every answer is
     checked (planted queries find their source; sampled queries equal the scan and query_many).
     ``--index-scheme M,T`` overrides the scheme the index picks from ``expected_size``.
  5. Seed 002's Table 4: Single-Pass clustering versus the index (``find_all_pairs`` +
     ``cluster_records``) on 1 k .. 30 k fingerprints of real documents: zh_news paragraphs, then
     (past its 9,745) Reuters bodies, then zh_news sentences; random fingerprints if data is absent.
  6. Seed 000's second hash: ``find_all_pairs`` with and without splitting oversized buckets on a
     skewed collection (a quarter of the fingerprints share one 16-bit block) under the pigeonhole
     scheme. 200 k fingerprints by default (``--skew-size``): without splitting, the work grows
     with the square of the shared bucket (about 10 minutes at 1 M), so 1 M is only extrapolated.
``--quick`` shrinks every size about tenfold for a smoke run (under a minute); targets are judged at
the sizes they name. The defaults take a few minutes on 2 cores; each section announces itself
on stderr, and a summary table ends the output.

Memory: resident set size from /proc/self/status. Each measured size runs in its own subprocess
(sections 1 and 4), the peak is reset through /proc/self/clear_refs right before the measured
step, and "peak growth" is VmHWM after the step minus VmRSS before it. (Where clear_refs is not
writable, the peak is the whole process's VmHWM, an upper bound.) glibc's malloc_trim runs
before each RSS reading, so freed heap blocks do not count. The index's retained memory is VmRSS
with the index built and every input array freed, minus VmRSS before the inputs were made.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import inspect
import json
import math
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from neardup.blocks import PAIR_COST, BlockScheme
from neardup.dedup.batch import BucketStats, find_all_pairs, single_pass
from neardup.dedup.clusters import cluster_records

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "raw"
K = 3
PLANTED_RATE = 0.01
#: Index keys are offset from positions so that a key/position mix-up shows as a failed check.
KEY_OFFSET = 1_000_000_000_000
SKEW_VALUE = np.uint64(0xBEEF)
#: Targets printed next to the figures (seconds, microseconds, bytes).
ALL_PAIRS_TARGETS = {1_000_000: 1.0, 10_000_000: 30.0}
QUERY_TARGET_US = 20.0
QUERY_TARGET_SIZE = 10_000_000
BYTES_TARGET = 64.0

UInt64Array = npt.NDArray[np.uint64]
IntArray = npt.NDArray[np.int64]
T = TypeVar("T")


@dataclass
class Row:
    """One line of the final summary."""

    figure: str
    value: str
    target: str = ""
    met: str = ""


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("yes" if ok else "NO")


#: Times below this (seconds) are too short to divide by: timer resolution and call overhead.
MEASURABLE = 1e-5


def ratio(numerator: float, denominator: float) -> str:
    """``numerator / denominator`` as "113 x", "3.7 x" or "0.24 x" (two significant digits below 1,
    so never "0 x"), or "n/a" when either time is too small to measure."""
    if min(numerator, denominator) < MEASURABLE:
        return "n/a"
    value = numerator / denominator
    return f"{value:,.0f} x" if value >= 100 else f"{value:.1f} x" if value >= 1 else f"{value:.2g} x"


_STARTED = time.perf_counter()


def progress(text: str) -> None:
    print(f"index_speed: [{time.perf_counter() - _STARTED:.0f} s] {text}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- data


@dataclass
class Collection:
    fingerprints: UInt64Array
    planted_i: IntArray  # planted pairs (i < j)
    planted_j: IntArray
    planted_distance: npt.NDArray[np.int64]


def random_fingerprints(rng: np.random.Generator, n: int) -> UInt64Array:
    return rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)


def flip_masks(rng: np.random.Generator, distances: npt.NDArray[np.int64], bits: int = 64) -> UInt64Array:
    """One mask per entry with exactly ``distances[r]`` distinct bits set (distances <= K)."""
    width = int(distances.max(initial=0))
    masks = np.zeros(distances.size, dtype=np.uint64)
    if width == 0:
        return masks
    positions = np.argpartition(rng.random((distances.size, bits)), width - 1, axis=1)[:, :width]
    for column in range(width):
        use = distances > column
        masks[use] |= np.left_shift(np.uint64(1), positions[use, column].astype(np.uint64))
    return masks


def planted_collection(n: int, seed: int, rate: float = PLANTED_RATE, skew: float = 0.0) -> Collection:
    """n random fingerprints of which ``rate`` are copies at distance 0..K of another (an original).

    With ``skew``, that fraction of the originals first get one value, SKEW_VALUE, in their top
    16 bits (block 0 of the pigeonhole scheme); their copies mostly keep it.
    """
    rng = np.random.default_rng(seed)
    fingerprints = random_fingerprints(rng, n)
    if skew:
        chosen = rng.random(n) < skew
        low_bits = fingerprints[chosen] & np.uint64((1 << 48) - 1)
        fingerprints[chosen] = low_bits | (SKEW_VALUE << np.uint64(48))
    copies = int(n * rate)
    permutation = rng.permutation(n)
    copy_at, originals = permutation[:copies], permutation[copies:]
    source_at = rng.choice(originals, size=copies)
    distance = rng.integers(0, K + 1, size=copies)
    fingerprints[copy_at] = fingerprints[source_at] ^ flip_masks(rng, distance)
    low, high = np.minimum(copy_at, source_at), np.maximum(copy_at, source_at)
    return Collection(fingerprints, low.astype(np.int64), high.astype(np.int64), distance.astype(np.int64))


def recovered(collection: Collection, i: IntArray, j: IntArray) -> int:
    """How many planted pairs appear among the found pairs (i, j)."""
    n = np.int64(collection.fingerprints.size)
    found = np.asarray(i, dtype=np.int64) * n + np.asarray(j, dtype=np.int64)
    planted = collection.planted_i * n + collection.planted_j
    return int(np.count_nonzero(np.isin(planted, found)))


# --------------------------------------------------------------------------- measuring


def status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def rss_bytes() -> int:
    return status_kb("VmRSS") * 1024


def release_free_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc malloc_trim), so RSS
    reflects live arrays: glibc keeps freed blocks below its (adaptive) mmap threshold."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if not permitted."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def peak_bytes() -> int:
    return status_kb("VmHWM") * 1024


def timed(run: Callable[[], T]) -> tuple[float, T]:
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def best_of(run: Callable[[], T], repeat: int, budget: float = 10.0) -> tuple[float, T]:
    """Best time of up to ``repeat`` runs, stopping early once ``budget`` seconds are spent."""
    best, result = timed(run)
    spent = best
    for _ in range(repeat - 1):
        if spent > budget:
            break
        seconds, result = timed(run)
        spent += seconds
        best = min(best, seconds)
    return best, result


def megabytes(value: float) -> str:
    return f"{value / 1e6:8.1f} MB"


def size_label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000} M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000} k"
    return str(n)


def run_worker(kind: str, size: int, *extra: str) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; it prints a JSON line last."""
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--size", str(size), *extra]
    completed = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


# --------------------------------------------------------------------------- workers


def worker_all_pairs(size: int, scheme_name: str, seed: int) -> dict[str, Any]:
    collection = planted_collection(size, seed)
    scheme = None if scheme_name == "auto" else parse_scheme(scheme_name)
    release_free_memory()
    before = rss_bytes()
    exact_peak = reset_peak()
    stats = BucketStats()
    seconds, pairs = timed(lambda: find_all_pairs(collection.fingerprints, K, scheme=scheme, stats=stats))
    peak = peak_bytes()  # without the reset, the process's whole peak: an upper bound
    return {
        "size": size,
        "scheme": stats.scheme,
        "tables": len(stats.tables),
        "seconds": seconds,
        "pairs": len(pairs),
        "planted": int(collection.planted_i.size),
        "recovered": recovered(collection, pairs.i, pairs.j),
        "candidates": stats.candidates,
        "largest": stats.largest,
        "peak_growth": peak - before,
        "exact_peak": exact_peak,
    }


def parse_scheme(text: str) -> BlockScheme:
    """``pigeonhole`` or ``M,T`` (blocks, key blocks) as a 64-bit, k = K scheme."""
    if text == "pigeonhole":
        return BlockScheme(64, K)
    blocks, key_blocks = (int(part) for part in text.split(","))
    return BlockScheme(64, K, blocks, key_blocks)


def worker_index(
    size: int, seed: int, queries: int, scan_queries: int, batch_queries: int, scheme: str | None
) -> dict[str, Any]:
    from neardup.index.simhash_index import SimhashIndex

    out: dict[str, Any] = {"size": size}
    release_free_memory()
    baseline = rss_bytes()
    collection = planted_collection(size, seed)
    fingerprints = collection.fingerprints
    keys = np.arange(size, dtype=np.int64) + KEY_OFFSET
    rng = np.random.default_rng(seed + 1)

    # Queries: half near-duplicates (distance 0..K) of indexed fingerprints, half random.
    def mixed(count: int) -> tuple[UInt64Array, IntArray, npt.NDArray[np.int64]]:
        near = count // 2
        source = rng.integers(0, size, size=near)
        distance = rng.integers(0, K + 1, size=near)
        values = np.concatenate(
            (fingerprints[source] ^ flip_masks(rng, distance), random_fingerprints(rng, count - near))
        )
        sources = np.concatenate((source, np.full(count - near, -1))).astype(np.int64)
        distances = np.concatenate((distance, np.full(count - near, -1))).astype(np.int64)
        order = rng.permutation(count)
        return values[order], sources[order], distances[order]

    single, single_source, single_distance = mixed(queries)
    batch, _, _ = mixed(batch_queries)
    del collection
    release_free_memory()

    if scheme is None:
        index = SimhashIndex(bits=64, max_distance=K, expected_size=size)
    else:
        index = SimhashIndex(bits=64, max_distance=K, scheme=parse_scheme(scheme))
    before = rss_bytes()
    exact_peak = reset_peak()
    started = time.perf_counter()
    index.add_many(keys, fingerprints)
    out["build_seconds"] = time.perf_counter() - started
    out["build_peak_growth"] = peak_bytes() - before
    out["exact_peak"] = exact_peak
    del fingerprints, keys
    release_free_memory()
    out["retained"] = rss_bytes() - baseline - single.nbytes - batch.nbytes
    memory_bytes = getattr(index, "memory_bytes", None)
    out["memory_bytes"] = int(memory_bytes()) if callable(memory_bytes) else None
    stats = index.stats()
    out["stats"] = stats.format() if hasattr(stats, "format") else str(stats)

    # Single queries: warm up, then time each one.
    for value in single[:50].tolist():
        index.query(value)
    latencies = np.empty(queries, dtype=np.float64)
    results = []
    for position, value in enumerate(single.tolist()):
        started = time.perf_counter_ns()
        matches = index.query(value)
        latencies[position] = (time.perf_counter_ns() - started) / 1000.0
        results.append(matches)
    near = single_source >= 0
    out["query_p50"] = float(np.percentile(latencies, 50))
    out["query_p99"] = float(np.percentile(latencies, 99))
    out["query_near_p50"] = float(np.percentile(latencies[near], 50))
    out["query_random_p50"] = float(np.percentile(latencies[~near], 50))
    out["query_mean_matches"] = float(np.mean([len(matches) for matches in results]))

    # Checks: every planted query finds its source, at the right distance and fingerprint.
    fingerprints = planted_collection(size, seed).fingerprints  # the same values, regenerated
    found = 0
    wrong = 0
    expected = zip(single_source.tolist(), single_distance.tolist(), strict=True)
    for matches, (source, distance) in zip(results, expected, strict=True):
        for match in matches:
            position = int(match.key) - KEY_OFFSET
            if not 0 <= position < size or int(match.fingerprint) != int(fingerprints[position]):
                wrong += 1
        if source >= 0 and any(
            int(m.key) - KEY_OFFSET == source and int(m.distance) == distance for m in matches
        ):
            found += 1
    out["planted_queries"] = int(np.count_nonzero(near))
    out["planted_found"] = found
    out["bad_matches"] = wrong

    # Linear numpy scan of the whole collection, single queries; same answers as the index?
    scan_times = np.empty(scan_queries, dtype=np.float64)
    mismatched = 0
    for position in range(scan_queries):
        value = single[position]
        started = time.perf_counter_ns()
        hits = np.flatnonzero(np.bitwise_count(fingerprints ^ value) <= K)
        scan_times[position] = (time.perf_counter_ns() - started) / 1000.0
        if set(hits.tolist()) != {int(m.key) - KEY_OFFSET for m in results[position]}:
            mismatched += 1
    out["scan_p50"] = float(np.percentile(scan_times, 50))
    out["scan_p99"] = float(np.percentile(scan_times, 99))
    out["scan_mismatched"] = mismatched
    out["scan_queries"] = scan_queries

    # Batch queries.
    release_free_memory()
    before = rss_bytes()
    reset_peak()
    out["batch_seconds"], batch_results = timed(lambda: index.query_many(batch))
    out["batch_peak_growth"] = peak_bytes() - before
    out["batch_queries"] = int(batch.size)
    sample = range(0, batch.size, max(1, batch.size // 200))
    out["batch_mismatched"] = sum(
        sorted((int(m.key), int(m.distance)) for m in batch_results[p])
        != sorted((int(m.key), int(m.distance)) for m in index.query(int(batch[p])))
        for p in sample
    )
    out["batch_checked"] = len(sample)
    return out


# --------------------------------------------------------------------------- sections


def section_all_pairs(sizes: Sequence[int]) -> list[Row]:
    print("== 1. find_all_pairs, random 64-bit fingerprints with 1 % planted near-duplicates (k = 3)")
    print("   each run in its own subprocess; memory = peak RSS growth of the find_all_pairs call")
    runs: list[tuple[str, dict[str, Any]]] = []
    for size in sizes:
        runs.append(("auto", run_worker("all-pairs", size, "--scheme", "auto")))
        if size == sizes[0]:
            runs.append(("pigeonhole", run_worker("all-pairs", size, "--scheme", "pigeonhole")))
    auto_small, pigeon = runs[0][1], runs[1][1]
    # The cost fit needs two schemes with different table counts on one collection.
    fit_partner = auto_small
    if auto_small["tables"] == pigeon["tables"]:
        fit_partner = run_worker("all-pairs", sizes[0], "--scheme", "5,2")
        runs.append(("5 blocks/2", fit_partner))
    print(
        f"   {'n':>6s} {'scheme':10s} {'seconds':>8s} {'pairs':>8s} {'planted found':>15s} "
        f"{'candidates':>11s} {'peak growth':>12s} {'B/fp':>6s}"
    )
    rows = []
    for name, run in runs:
        size = run["size"]
        print(
            f"   {size_label(size):>6s} {name:10s} {run['seconds']:8.2f} {run['pairs']:8d} "
            f"{run['recovered']:7d}/{run['planted']:<7d} {run['candidates']:11d} "
            f"{megabytes(run['peak_growth'])} {run['peak_growth'] / size:6.1f}"
        )
    for name, run in runs:
        print(f"   {size_label(run['size'])} {name}: {run['scheme']}")
    if not all(run["exact_peak"] for _, run in runs):
        print("   (/proc/self/clear_refs not writable: peaks are whole-process peaks, upper bounds)")
    print(
        f"   pigeonhole / auto at {size_label(sizes[0])}: "
        f"{ratio(pigeon['seconds'], auto_small['seconds'])} time, "
        f"{pigeon['peak_growth'] / max(auto_small['peak_growth'], 1):.2f} x peak memory"
    )
    # time = sort_cost * tables * n + pair_cost * candidates, solved for two schemes (one run each).
    n = sizes[0]
    matrix = np.array(
        [[run["tables"] * n, run["candidates"]] for run in (fit_partner, pigeon)], dtype=np.float64
    )
    try:
        sort_cost, pair_cost = np.linalg.solve(matrix, [fit_partner["seconds"], pigeon["seconds"]])
    except np.linalg.LinAlgError:
        sort_cost = pair_cost = 0.0
    implied = float(pair_cost / sort_cost) if sort_cost > 0 and pair_cost > 0 else None
    fit_at = f"   cost fit at {size_label(n)} ({fit_partner['tables']} vs {pigeon['tables']} tables): "
    if implied is None:
        print(
            fit_at + "no fit: the sizes were too small (runs too short against timing noise) to fit "
            f"positive costs; a larger size may fit them (blocks.PAIR_COST = {PAIR_COST})"
        )
    else:
        print(
            fit_at + f"{sort_cost * 1e9:.0f} ns per table entry, {pair_cost * 1e9:.0f} ns per candidate "
            f"-> PAIR_COST {implied:.2f} (blocks.PAIR_COST = {PAIR_COST})"
        )
    if implied is not None:
        costs = sorted({PAIR_COST, round(implied, 2)})
        print(
            "   auto-tuner's choice (blocks m / key blocks t) with "
            + ", ".join(f"PAIR_COST {c}" for c in costs)
        )
        for size in (10**5, 10**6, 10**7):
            choices = []
            for cost in costs:
                scheme = _auto_with_cost(size, cost)
                choices.append(f"m={scheme.blocks_count} t={scheme.key_blocks} ({scheme.table_count} tables)")
            print(f"     {size_label(size):>6s}: " + "   ".join(choices))
    print()
    for name, run in runs:
        label = f"all pairs {size_label(run['size'])} ({name})"
        target = ALL_PAIRS_TARGETS.get(run["size"]) if name == "auto" else None
        rows.append(
            Row(
                label + " time",
                f"{run['seconds']:.2f} s",
                f"<= {target:g} s" if target else "",
                verdict(run["seconds"] <= target) if target else "",
            )
        )
        rows.append(
            Row(
                label + " planted found",
                f"{run['recovered']}/{run['planted']}",
                "all",
                verdict(run["recovered"] == run["planted"]),
            )
        )
    rows.append(
        Row(
            f"PAIR_COST fitted (library {PAIR_COST})",
            "n/a (too small to fit)" if implied is None else f"{implied:.2f}",
        )
    )
    return rows


def _auto_with_cost(size: int, cost: float) -> BlockScheme:
    import neardup.blocks as blocks

    saved = blocks.PAIR_COST
    blocks.PAIR_COST = cost
    try:
        return BlockScheme.auto(size, 64, K)
    finally:
        blocks.PAIR_COST = saved


def section_brute(size: int, samples: int, repeat: int) -> list[Row]:
    print(f"== 2. brute-force numpy scan vs find_all_pairs, {size_label(size)} fingerprints (one process)")
    collection = planted_collection(size, seed=2)
    fingerprints = collection.fingerprints
    index_seconds, pairs = best_of(lambda: find_all_pairs(fingerprints, K), repeat)
    rng = np.random.default_rng(3)
    rows_sampled = rng.choice(size, size=samples, replace=False)
    mismatched = 0
    started = time.perf_counter()
    hits_per_row = []
    for row in rows_sampled.tolist():
        hits_per_row.append(np.flatnonzero(np.bitwise_count(fingerprints ^ fingerprints[row]) <= K))
    per_query = (time.perf_counter() - started) / samples
    for row, hits in zip(rows_sampled.tolist(), hits_per_row, strict=True):
        expected = np.concatenate((pairs.j[pairs.i == row], pairs.i[pairs.j == row]))
        if set(hits.tolist()) - {row} != set(expected.tolist()):
            mismatched += 1
    brute_total = per_query * size / 2
    speedup = ratio(brute_total, index_seconds)
    print(f"   find_all_pairs                      {index_seconds:9.2f} s  ({len(pairs)} pairs)")
    print(f"   brute force, one row against all    {per_query * 1e3:9.2f} ms ({samples} rows sampled)")
    print(f"   brute force, scaled to n²/2 pairs   {brute_total:9.1f} s")
    print(f"   brute / find_all_pairs              {speedup:>11s}")
    print(f"   sampled rows whose brute-force neighbours differ from find_all_pairs: {mismatched}\n")
    return [
        Row(f"brute force / find_all_pairs at {size_label(size)}", speedup),
        Row("brute-force rows differing from find_all_pairs", str(mismatched), "0", verdict(mismatched == 0)),
    ]


def section_pypi(size: int, repeat: int) -> list[Row]:
    print(f"== 3. PyPI simhash.SimhashIndex vs find_all_pairs, {size_label(size)} fingerprints")
    try:
        from simhash import Simhash, SimhashIndex
    except ImportError:
        print("   the simhash package is not installed (pip install 'neardup[eval]'): skipped\n")
        return [Row("PyPI SimhashIndex", "skipped (not installed)")]
    collection = planted_collection(size, seed=4)
    fingerprints = collection.fingerprints
    values = fingerprints.tolist()
    wrap_seconds, objects = timed(
        lambda: [(str(key), Simhash(value, f=64)) for key, value in enumerate(values)]
    )
    build_seconds, index = timed(lambda: SimhashIndex(objects, f=64, k=K))
    query_seconds, answers = timed(lambda: [index.get_near_dups(simhash) for _, simhash in objects])
    pypi_pairs = (sum(len(answer) for answer in answers) - size) // 2
    ours_seconds, pairs = best_of(lambda: find_all_pairs(fingerprints, K), repeat)
    pypi_seconds = build_seconds + query_seconds
    speedup = ratio(pypi_seconds, ours_seconds)
    defaults = inspect.signature(SimhashIndex.__init__).parameters
    print(
        f"   SimhashIndex(f={index.f}, k={index.k}) (its defaults: f={defaults['f'].default}, "
        f"k={defaults['k'].default}); block offsets {index.offsets}, i.e. pigeonhole on 16-bit blocks"
    )
    print(f"   Simhash objects from ints            {wrap_seconds:8.2f} s (not counted below)")
    print(f"   SimhashIndex build                   {build_seconds:8.2f} s")
    print(f"   get_near_dups for every document     {query_seconds:8.2f} s   -> {pypi_pairs} pairs")
    print(f"   find_all_pairs                       {ours_seconds:8.3f} s   -> {len(pairs)} pairs")
    print(f"   SimhashIndex (build + query) / find_all_pairs  {speedup:>10s}\n")
    return [
        Row(f"PyPI SimhashIndex / find_all_pairs at {size_label(size)}", speedup),
        Row("PyPI SimhashIndex pairs = find_all_pairs pairs", f"{pypi_pairs} / {len(pairs)}", "equal",
            verdict(pypi_pairs == len(pairs))),
    ]  # fmt: skip


def section_index(
    size: int, queries: int, scan_queries: int, batch_queries: int, scheme: str | None
) -> list[Row]:
    print(f"== 4. neardup.SimhashIndex, online queries on {size_label(size)} fingerprints (subprocess)")
    if scheme is None:
        print(
            f"   SimhashIndex(bits=64, max_distance={K}, expected_size={size}) "
            f"(for comparison, BlockScheme.auto({size}) without a table cap: "
            f"{BlockScheme.auto(size, 64, K).describe().split(':')[0]})"
        )
    else:
        print(f"   SimhashIndex(bits=64, max_distance={K}, scheme={parse_scheme(scheme)}) (--index-scheme)")
    try:
        import neardup.index.simhash_index  # noqa: F401
    except ImportError as error:
        print(f"   neardup.index is not available ({error}): skipped\n")
        return [Row("online index", f"skipped ({error})")]
    run = run_worker(
        "index", size, "--queries", str(queries), "--scan-queries", str(scan_queries),
        "--batch-queries", str(batch_queries), *(["--index-scheme", scheme] if scheme else []),
    )  # fmt: skip
    per_fp = run["retained"] / size
    print(f"   add_many of {size_label(size)}                  {run['build_seconds']:8.2f} s")
    print(f"   peak RSS growth during add_many     {megabytes(run['build_peak_growth'])}")
    print(f"   retained RSS (index, inputs freed)  {megabytes(run['retained'])} = {per_fp:.1f} B/fp")
    if run["memory_bytes"] is not None:
        print(
            f"   index.memory_bytes()                {megabytes(run['memory_bytes'])} = "
            f"{run['memory_bytes'] / size:.1f} B/fp"
        )
    print("   " + run["stats"].replace("\n", "\n   "))
    print(f"   {'single query latency':34s} {'p50 µs':>9s} {'p99 µs':>9s}")
    print(f"   {'index.query (mixed)':34s} {run['query_p50']:9.1f} {run['query_p99']:9.1f}")
    near, random = run["query_near_p50"], run["query_random_p50"]
    print(f"   {'index.query p50 (near-dup / random)':34s} {near:9.1f} {random:9.1f}")
    print(f"   {'linear numpy scan':34s} {run['scan_p50']:9.0f} {run['scan_p99']:9.0f}")
    speedup = ratio(run["scan_p50"] * 1e-6, run["query_p50"] * 1e-6)
    print(f"   scan / index (p50)                  {speedup:>11s}")
    batch_rate = run["batch_queries"] / run["batch_seconds"]
    print(
        f"   query_many of {run['batch_queries']} queries         {run['batch_seconds']:8.2f} s = "
        f"{batch_rate:,.0f} queries/s ({1e6 / batch_rate:.1f} µs each), "
        f"peak RSS growth {run['batch_peak_growth'] / 1e6:.0f} MB"
    )
    print(
        f"   checks: planted queries finding their source {run['planted_found']}/{run['planted_queries']}, "
        f"matches with a wrong fingerprint {run['bad_matches']}, "
        f"scan answers differing {run['scan_mismatched']}/{run['scan_queries']}, "
        f"query_many differing from query {run['batch_mismatched']}/{run['batch_checked']}"
    )
    print(f"   mean matches per query {run['query_mean_matches']:.2f}\n")
    at_target = size == QUERY_TARGET_SIZE
    rows = [
        Row(f"index add_many {size_label(size)}", f"{run['build_seconds']:.1f} s"),
        Row(
            f"index query p50 at {size_label(size)}",
            f"{run['query_p50']:.1f} µs",
            f"<= {QUERY_TARGET_US:g} µs at 10 M",
            verdict(run["query_p50"] <= QUERY_TARGET_US if at_target else None),
        ),
        Row(
            f"index query p99 at {size_label(size)}",
            f"{run['query_p99']:.1f} µs",
            f"<= {QUERY_TARGET_US:g} µs at 10 M",
            verdict(run["query_p99"] <= QUERY_TARGET_US if at_target else None),
        ),
        Row("linear scan / index query (p50)", speedup),
        Row(f"query_many throughput at {size_label(size)}", f"{batch_rate:,.0f} q/s"),
        Row("index bytes per fingerprint (RSS)", f"{per_fp:.1f} B", f"<= {BYTES_TARGET:g} B",
            verdict(per_fp <= BYTES_TARGET)),
    ]  # fmt: skip
    if run["memory_bytes"] is not None:
        own = run["memory_bytes"] / size
        met = verdict(own <= BYTES_TARGET)
        rows.append(
            Row("index bytes per fingerprint (memory_bytes)", f"{own:.1f} B", f"<= {BYTES_TARGET:g} B", met)
        )
    correct = (
        run["planted_found"] == run["planted_queries"]
        and run["bad_matches"] == 0
        and run["scan_mismatched"] == 0
        and run["batch_mismatched"] == 0
    )
    rows.append(Row("index answers (planted found, = scan, = query_many)", "ok" if correct else "WRONG",
                    "exact", verdict(correct)))  # fmt: skip
    return rows


def real_documents(data: Path, count: int) -> tuple[list[str], str]:
    """Up to ``count`` texts: zh_news paragraphs, then Reuters bodies, then zh_news sentences of
    paragraphs with two or more sentences (not equal to any paragraph). Empty if zh_news is absent."""
    zh_path, en_path = data / "zh_news.txt", data / "en_reuters.jsonl"
    if not zh_path.exists():
        return [], ""
    paragraphs = [line.strip() for line in zh_path.open(encoding="utf-8") if line.strip()]
    parts: list[tuple[str, list[str]]] = [("zh_news paragraphs", paragraphs)]
    if en_path.exists():
        with en_path.open(encoding="utf-8") as handle:
            parts.append(("en_reuters documents", [json.loads(line)["text"] for line in handle]))
    sentences = []
    for paragraph in paragraphs:
        pieces = [piece for piece in re.split(r"(?<=[。！？])", paragraph) if piece.strip()]
        if len(pieces) > 1:
            sentences.extend(pieces)
    parts.append(("zh_news sentences", sentences))
    texts: list[str] = []
    used = []
    for name, items in parts:
        take = items[: count - len(texts)]
        if take:
            texts.extend(take)
            used.append(f"{len(take)} {name}")
    return texts, " + ".join(used)


def section_single_pass(sizes: Sequence[int], data: Path, repeat: int) -> list[Row]:
    from neardup import Fingerprinter

    print("== 5. seed 002 Table 4: Single-Pass clustering vs index (find_all_pairs + cluster_records)")
    largest = max(sizes)
    texts, source = real_documents(data, largest)
    if len(texts) >= largest:
        seconds, fingerprints = timed(lambda: Fingerprinter().fingerprint_many(texts))
        print(f"   fingerprints of {source} ({data}), Fingerprinter defaults, {seconds:.1f} s")
    else:
        fingerprints = planted_collection(largest, seed=5).fingerprints
        print(f"   {data / 'zh_news.txt'} not found: RANDOM fingerprints with 1 % planted near-duplicates")
    print(
        f"   {'n':>6s} {'Single-Pass ms':>15s} {'index ms':>10s} {'ratio':>8s} {'SP clusters':>12s} clusters"
    )
    rows = []
    for size in sizes:
        subset = fingerprints[:size]
        sp_seconds, labels = best_of(partial(single_pass, subset, K), repeat, budget=5.0)

        def index_clusters(subset: UInt64Array = subset) -> int:
            pairs = find_all_pairs(subset, K)
            return cluster_records(subset.size, pairs.i, pairs.j).count

        ix_seconds, clusters = best_of(index_clusters, repeat)
        times = ratio(sp_seconds, ix_seconds)
        sp_clusters = int(np.unique(labels).size)
        print(
            f"   {size_label(size):>6s} {sp_seconds * 1e3:15.1f} {ix_seconds * 1e3:10.1f} {times:>8s} "
            f"{sp_clusters:12d} {clusters:9d}"
        )
        rows.append(Row(f"Single-Pass / index at {size_label(size)}", times))
    print("   (Single-Pass joins the first centre within k: its clusters differ from connected components)\n")
    return rows


def section_second_hash(size: int, fraction: float, full_size: int) -> list[Row]:
    print(
        f"== 6. seed 000 second hash, {size_label(size)} fingerprints, {fraction:.0%} sharing one "
        "16-bit block, scheme BlockScheme(64, 3)"
    )
    collection = planted_collection(size, seed=6, skew=fraction)
    fingerprints = collection.fingerprints
    shared = int(np.count_nonzero((fingerprints >> np.uint64(48)) == SKEW_VALUE))
    scheme = BlockScheme(64, K)
    results = []
    thresholds: tuple[tuple[str, float | None], ...] = (
        ("without (split_threshold=inf)", math.inf),
        ("with (mu = 2)", None),
    )
    for label, threshold in thresholds:
        stats = BucketStats()
        run = partial(find_all_pairs, fingerprints, K, scheme=scheme, split_threshold=threshold, stats=stats)
        seconds, pairs = timed(run)
        results.append((label, seconds, pairs, stats))
    print(f"   shared-block bucket: {shared} fingerprints")
    print(f"   {'':30s} {'seconds':>8s} {'candidates':>14s} {'pairs':>7s} {'planted found':>14s} split")
    for label, seconds, pairs, stats in results:
        print(
            f"   {label:30s} {seconds:8.2f} {stats.candidates:14d} {len(pairs):7d} "
            f"{recovered(collection, pairs.i, pairs.j):6d}/{collection.planted_i.size:<7d} {stats.split:6d}"
        )
    (_, without_s, without_pairs, without_stats), (_, with_s, with_pairs, with_stats) = results
    same = np.array_equal(without_pairs.i, with_pairs.i) and np.array_equal(without_pairs.j, with_pairs.j)
    speedup = ratio(without_s, with_s)
    scale = (full_size / size) ** 2
    fewer = without_stats.candidates / max(with_stats.candidates, 1)
    print(f"   without / with: {speedup} time, {fewer:,.0f} x candidates")
    print(f"   identical pair lists: {same}")
    if full_size != size:
        print(
            f"   at {size_label(full_size)} the shared bucket would be {full_size / size:.0f} x larger: "
            f"without ~ {without_s * scale:.0f} s (its candidates grow quadratically), not run\n"
        )
    else:
        print()
    return [
        Row(f"second hash speed-up, skewed {size_label(size)}", speedup),
        Row("second hash: same pairs with and without", str(same), "True", verdict(same)),
    ]


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="sizes about 10 x smaller (smoke run)")
    parser.add_argument("--skip-pypi", action="store_true", help="skip section 3 (PyPI simhash)")
    parser.add_argument("--sections", default="1,2,3,4,5,6", help="comma-separated section numbers")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with zh_news.txt")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs for short timings")
    parser.add_argument("--skew-size", type=int, help="section 6 size (default 200 k; quick 100 k)")
    parser.add_argument(
        "--index-scheme",
        help="section 4: the index's scheme, 'pigeonhole' or 'M,T' (default: its own from expected_size)",
    )
    # Internal: one measurement in a subprocess.
    parser.add_argument("--worker", choices=["all-pairs", "index"], help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--scheme", default="auto", help=argparse.SUPPRESS)
    parser.add_argument("--queries", type=int, default=2000, help=argparse.SUPPRESS)
    parser.add_argument("--scan-queries", type=int, default=30, help=argparse.SUPPRESS)
    parser.add_argument("--batch-queries", type=int, default=100_000, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker == "all-pairs":
        print(json.dumps(worker_all_pairs(args.size, args.scheme, seed=1)))
        return
    if args.worker == "index":
        result = worker_index(
            args.size, 7, args.queries, args.scan_queries, args.batch_queries, args.index_scheme
        )
        print(json.dumps(result))
        return

    sections = {int(part) for part in args.sections.split(",") if part.strip()}
    quick = args.quick
    small, large = (100_000, 1_000_000) if quick else (1_000_000, 10_000_000)
    skew_size = args.skew_size or (100_000 if quick else 200_000)
    print(
        f"index_speed: {'QUICK (smaller sizes), ' if quick else ''}k = {K}, 64-bit fingerprints, "
        f"numpy {np.__version__}\n"
    )
    started = time.perf_counter()
    rows: list[Row] = []
    if 1 in sections:
        progress(f"1. all pairs at {size_label(small)} and {size_label(large)}")
        rows += section_all_pairs([small, large])
    if 2 in sections:
        progress(f"2. brute force at {size_label(small)}")
        rows += section_brute(small, 200, args.repeat)
    if 3 in sections:
        progress("3. PyPI simhash")
        if args.skip_pypi:
            print("== 3. PyPI simhash: skipped (--skip-pypi)\n")
        else:
            rows += section_pypi(20_000 if quick else 100_000, args.repeat)
    if 4 in sections:
        progress(f"4. online index at {size_label(large)}")
        rows += section_index(large, 2000, 10 if quick else 30, 100_000, args.index_scheme)
    if 5 in sections:
        progress("5. Single-Pass vs index")
        sizes = [1000, 5000] if quick else [1000, 5000, 10_000, 30_000]
        rows += section_single_pass(sizes, args.data, args.repeat)
    if 6 in sections:
        progress(f"6. second hash at {size_label(skew_size)}")
        rows += section_second_hash(skew_size, 0.25, 1_000_000)

    print(f"== Summary ({time.perf_counter() - started:.0f} s)")
    width = max(len(row.figure) for row in rows) if rows else 10
    print(f"   {'figure':{width}s} {'value':>16s}  {'target':22s} met?")
    for row in rows:
        print(f"   {row.figure:{width}s} {row.value:>16s}  {row.target:22s} {row.met}")


if __name__ == "__main__":
    main()

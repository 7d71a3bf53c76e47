"""The compact index beside the default band index, on SQLite, in the same run: check-and-add
docs/s with ``--stored`` records stored (default 10^6), and the bytes a record takes.

Both stores are filled with the same records: half of the labelled en_news dev set (even rows)
and haystack documents of ``scale_quality.py`` (sentences of the raw Reuters stories in
../shared/data/raw, read, never copied), prepared by worker processes (``Index.prepare``:
fingerprint, 512-byte text sketch, digest; the band index keeps its text too, as it does by
default). Then ``--fresh`` new documents (the other half of en_news, whose near-duplicates are
stored, and new haystack), prepared ahead, are checked and added in batches of ``--batch``,
and the store calls alone are timed (``Index.check_and_add``). The preparation's own rate is
printed apart: the whole path per document is the sum of the two. The kinds run one after the
other, each store deleted before the next is built (the band store of 10^6 records is 2.7 GB),
so the load averages of each phase are printed with it.

Bytes: the SQLite file (database and WAL) per record, its tables' pages by role (records,
postings, kept texts; SQLite's dbstat), and the value columns of a record (the stored words,
the signature, the text digest).

``--candidates`` also counts, for the compact kind, the candidates its check-and-add reads (the
stored records sharing a band with a query, each estimated) and how many reach the threshold;
how many of them would pass if a posting carried the record's 1-bit tail and only candidates
agreeing in at least N of its bins were read (the ones reaching the threshold kept, in %); and
the sizes of the posting lists (how many records a band key lists) with the share of what
queries read that the largest keys make. The counting runs inside the timed check: time
without it.

    nice -n 19 python3 benchmarks/compact_index.py --dir /path/to/scratch          # 10^6 stored
    nice -n 19 python3 benchmarks/compact_index.py --dir /tmp/x --stored 20000 --fresh 4000
    python3 benchmarks/compact_index.py --dir /path/to/scratch --candidates
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_quality import haystack, read_dev

from neardup import Index
from neardup.dedup.documents import Prepared
from neardup.index.compact_index import CompactIndex
from neardup.index.config import IndexConfig
from neardup.io.record import Record

KINDS = ("band", "compact")
CHUNK = 5000
TARGET_DOCS_PER_SECOND = 5000

_worker: Index | None = None


def _prepare(records: list[tuple[str, str]]) -> Prepared:
    """A worker's :meth:`Index.prepare` of (id, text) pairs under the default settings."""
    global _worker
    if _worker is None:
        _worker = Index.open("memory://", IndexConfig.band_index())
    return _worker.prepare([Record(key, text, None, key) for key, text in records])


def documents(stored: int, fresh: int) -> tuple[Iterator[tuple[str, str]], list[tuple[str, str]]]:
    """The stored documents (a stream) and the fresh ones: en_news split by row parity, the
    rest haystack texts shaped by en_news' lengths (two generators of their own seeds)."""
    dev = read_dev("en")
    lengths = [len(row["text"]) for row in dev]
    kept = [(str(row["id"]), str(row["text"])) for row in dev[::2]][:stored]
    new = [(str(row["id"]), str(row["text"])) for row in dev[1::2]][:fresh]

    def stream() -> Iterator[tuple[str, str]]:
        yield from kept
        bodies = haystack("en", lengths, seed=7)
        for number in range(stored - len(kept)):
            yield f"h{number}", json.loads(f'"{next(bodies)}"')

    bodies = haystack("en", lengths, seed=8)
    extra = [(f"f{number}", json.loads(f'"{next(bodies)}"')) for number in range(fresh - len(new))]
    return stream(), new + extra


def chunks(items: Iterator[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    part: list[tuple[str, str]] = []
    for item in items:
        part.append(item)
        if len(part) == size:
            yield part
            part = []
    if part:
        yield part


def for_kind(kind: str, prepared: Prepared) -> Prepared:
    """The batch as the index of ``kind`` takes it: the compact index keeps no texts."""
    return dataclasses.replace(prepared, texts=None) if kind == "compact" else prepared


def build(index: Index, kind: str, stored: Iterator[tuple[str, str]], pool: Any) -> float:
    """Add every stored document to the index; the seconds the store took."""
    seconds, done = 0.0, 0
    for prepared in pool.imap(_prepare, chunks(stored, CHUNK)):
        started = time.perf_counter()
        index.add(for_kind(kind, prepared), existing="fail")
        seconds += time.perf_counter() - started
        done += len(prepared)
        if done % 200_000 < CHUNK:
            print(f"  {kind}: stored {done:,}", file=sys.stderr, flush=True)
    return seconds


def check(index: Index, kind: str, batches: list[Prepared]) -> tuple[float, int]:
    """Check and add the fresh batches; the seconds the store took, and duplicates found."""
    seconds, duplicates = 0.0, 0
    for batch in batches:
        started = time.perf_counter()
        results = index.check_and_add(for_kind(kind, batch))
        seconds += time.perf_counter() - started
        duplicates += sum(result.duplicate for result in results)
    return seconds, duplicates


def phase(kind: str, args: argparse.Namespace, batches: list[Prepared], pool: Any) -> dict[str, Any]:
    """Build the store of ``kind``, time its check-and-add, measure it, delete it (unless --keep)."""
    path = args.dir / f"{kind}.db"
    remove(path)
    config = IndexConfig.compact() if kind == "compact" else IndexConfig.band_index()
    stored, _ = documents(args.stored, 0)
    with Index.open(str(path), config) as index:
        built = build(index, kind, stored, pool)
        load = os.getloadavg()[0]
        counted = count_candidates(index) if args.candidates and kind == "compact" else None
        seconds, duplicates = check(index, kind, batches)
        count = len(index)
    out = {"built": built, "seconds": seconds, "duplicates": duplicates, "count": count}
    if counted is not None:
        out["candidates"] = counted | posting_lists(path)
    out |= {"load": (load, os.getloadavg()[0]), "bytes": storage_bytes(path, count)}
    if not args.keep:
        remove(path)
    return out


#: Tail bins (of 64) a candidate must agree in, for the pass rates ``--candidates`` prints.
TAIL_AGREEMENTS = (34, 36, 38, 40, 42, 44)


def count_candidates(index: Index) -> dict[str, Any]:
    """Counts of what the compact index decides during the check that follows: its decision
    is wrapped (on this instance) to count the candidates, those reaching the threshold, and
    those a tail agreement of each of :data:`TAIL_AGREEMENTS` would pass, by its records."""
    compact = index.index
    assert isinstance(compact, CompactIndex), "--candidates counts the compact index"
    decide, tail = compact._decide, compact.scheme.words - 1  # the tail is the record's last word
    counts: dict[str, Any] = {"queries": 0, "candidates": 0, "kept": 0}
    counts["passed"] = dict.fromkeys(TAIL_AGREEMENTS, 0)
    counts["kept passed"] = dict.fromkeys(TAIL_AGREEMENTS, 0)

    def counting(
        queries: npt.NDArray[np.uint64], rows: npt.NDArray[np.int64], words: npt.NDArray[np.uint64]
    ) -> npt.NDArray[np.bool_]:
        kept = decide(queries, rows, words)
        agree = 64 - np.bitwise_count(queries[rows, tail] ^ words[:, tail]).astype(np.int64)
        counts["queries"] += len(queries)
        counts["candidates"] += int(rows.size)
        counts["kept"] += int(kept.sum())
        for least in TAIL_AGREEMENTS:
            counts["passed"][least] += int((agree >= least).sum())
            counts["kept passed"][least] += int((agree[kept] >= least).sum())
        return kept

    compact._decide = counting  # type: ignore[method-assign]
    return counts


def posting_lists(path: Path) -> dict[str, Any]:
    """The records each posting key lists, over every run table of the store (the recent
    postings, a few thousand, are left out)."""
    with sqlite3.connect(path) as connection:
        tables = [
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'neardup_run_%'"
            )
        ]
        keys = [
            np.fromiter((key for (key,) in connection.execute(f"SELECT k FROM {table}")), dtype=np.int64)
            for table in tables
        ]
    _, sizes = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *keys]), return_counts=True)
    largest = np.sort(sizes)[::-1].astype(np.float64)
    read = np.cumsum(largest**2) / max(
        float((largest**2).sum()), 1.0
    )  # a query meets a key as often as it is listed
    return {
        "keys": len(sizes),
        "median": float(np.median(sizes)) if len(sizes) else 0.0,
        "99.9%": float(np.percentile(sizes, 99.9)) if len(sizes) else 0.0,
        "largest": int(largest[0]) if len(sizes) else 0,
        "read by largest": {top: float(read[min(top, len(read)) - 1]) for top in (1000, 10_000) if len(read)},
    }


def remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def storage_bytes(path: Path, records: int) -> dict[str, float]:
    """Bytes per record: the file (and WAL), the pages of each role, and the value columns."""
    size = sum(
        os.path.getsize(f"{path}{suffix}") for suffix in ("", "-wal") if os.path.exists(f"{path}{suffix}")
    )
    roles: dict[str, int] = {"records": 0, "postings": 0, "texts": 0, "other": 0}
    with sqlite3.connect(path) as connection:
        for name, pages in connection.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            role = "other"
            if "records" in name:
                role = "records"
            elif "postings" in name or "_run" in name or "filters" in name:
                role = "postings"
            elif "values" in name:
                role = "texts"
            roles[role] += int(pages)
        words, signature, digest = connection.execute(
            "SELECT avg(length(fingerprint)), avg(coalesce(length(signature), 0)), avg(length(digest)) "
            "FROM neardup_records"
        ).fetchone()
        (texts,) = connection.execute(
            "SELECT coalesce(sum(length(value)), 0) FROM neardup_values WHERE name = 'texts'"
        ).fetchone()
    out = {"file": size / records, "words": words, "signature": signature, "digest": digest}
    out["text value"] = texts / records
    out.update({f"{role} pages": value / records for role, value in roles.items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, type=Path, help="where the SQLite files go")
    parser.add_argument("--stored", type=int, default=1_000_000)
    parser.add_argument("--fresh", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2, help="processes preparing texts")
    parser.add_argument("--keep", action="store_true", help="keep the SQLite files")
    parser.add_argument(
        "--candidates", action="store_true", help="count the compact index's candidates and posting lists"
    )
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    _, fresh = documents(0, args.fresh)
    print(f"compact_index: {args.stored:,} stored, {len(fresh):,} fresh", file=sys.stderr, flush=True)
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:  # before any store opens
        pool.map(_prepare, [[("warm", "a text to load the settings")]] * args.workers, chunksize=1)
        started = time.perf_counter()
        batches = pool.map(_prepare, list(chunks(iter(fresh), args.batch)))
        prepare_seconds = time.perf_counter() - started
        results = {kind: phase(kind, args, batches, pool) for kind in KINDS}
    report(args, results, prepare_seconds, len(fresh))


def report(
    args: argparse.Namespace, results: dict[str, dict[str, Any]], prepare_seconds: float, fresh: int
) -> None:
    print(
        f"stored {args.stored:,} (en_news even rows + haystack), fresh {fresh:,} in batches of {args.batch}"
    )
    print(f"prepare (fingerprint + sketch, {args.workers} processes): {fresh / prepare_seconds:,.0f} docs/s")
    rates = {kind: fresh / result["seconds"] for kind, result in results.items()}
    for kind, result in results.items():
        print(
            f"{kind:8s} check-and-add {rates[kind]:8,.0f} docs/s ({result['seconds']:.1f} s), "
            f"{result['duplicates']:,} duplicates, holds {result['count']:,}; store add while building "
            f"{args.stored / result['built']:,.0f} docs/s; "
            f"load {result['load'][0]:.1f} -> {result['load'][1]:.1f}"
        )
    print(
        f"compact / band: {rates['compact'] / rates['band']:.2f}x (target {TARGET_DOCS_PER_SECOND:,} docs/s)"
    )
    print(f"{'bytes a record':18s} {'band':>9s} {'compact':>9s}")
    for name in results["band"]["bytes"]:
        print(f"{name:18s} {results['band']['bytes'][name]:9.1f} {results['compact']['bytes'][name]:9.1f}")
    counted = results["compact"].get("candidates")
    if counted:
        print(
            f"compact candidates: {counted['candidates'] / max(counted['queries'], 1):,.1f} a query "
            f"({counted['candidates']:,} for {counted['queries']:,}), {counted['kept']:,} reach the threshold"
        )
        for least in TAIL_AGREEMENTS:
            passed = counted["passed"][least] / max(counted["candidates"], 1)
            kept = counted["kept passed"][least] / max(counted["kept"], 1)
            print(f"  tail agreeing in >= {least} of 64 bins: {passed:6.1%} pass, {kept:7.2%} of those kept")
        shares = ", ".join(
            f"largest {top:,}: {share:.0%}" for top, share in counted["read by largest"].items()
        )
        print(
            f"posting lists: {counted['keys']:,} keys, median {counted['median']:.0f}, 99.9% <= "
            f"{counted['99.9%']:.0f}, largest {counted['largest']:,}; share of reads by the {shares}"
        )


if __name__ == "__main__":
    main()

"""Quality of the online paths: pairwise F1 of each path's default band index on the dev sets.

``neardup index add``, ``neardup dedup --index`` and ``neardup serve`` create, by default, a
band index: a 512-byte text sketch per record, postings on 16 bands of 3 sketch bins, and a
candidate kept when its sketch Jaccard estimate reaches 0.5. This runs each path the way a
user does (``python -m neardup`` subprocesses, default options, a fresh index each) on the
labelled dev sets zh_news (2,118 records) and en_news (4,972) of ../shared/data/dev:

(a) dedup  ``neardup dedup DEV --index URL --clusters c.jsonl``: each record's cluster id;
(b) index  ``neardup index add URL DEV``, ``neardup index query URL DEV -o m.jsonl``: each
           record's matches (itself excluded) as predicted pairs;
(c) serve  a real ``neardup serve URL`` and one ``POST /v1/check`` per record from ``--clients``
           concurrent clients (httpx, one connection each; a free client takes the next record
           of the file, so arrival order differs from file order): each answer's cluster id.

Predictions are scored with :mod:`neardup.eval.metrics` (pairwise precision, recall, F1: the
records of one gold cluster at level original/light/medium are near-duplicates; pairs with
heavy copies are left out) and written in ``neardup eval``'s formats (``--keep DIR`` keeps
them: ``neardup eval DEV FILE`` prints the same figures). ``seconds`` is the wall time of the
path (serve: from launch to stop). The last line says whether every F1 reaches 0.95 (exit
status 1 when one does not). ``--store redis|postgres`` starts that server on 127.0.0.1 with
scripts/servers.py (stopped by PID at the end); each run gets its own key or table prefix.

    python3 benchmarks/online_quality.py                        # sqlite, both sets, all paths
    python3 benchmarks/online_quality.py --sets zh_news --paths serve --clients 16
    python3 benchmarks/online_quality.py --store redis --keep /tmp/online-quality
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from neardup.eval.metrics import Gold, Prediction, Scores, evaluate

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "dev"
SETS = ("zh_news", "en_news")
PATHS = ("dedup", "index", "serve")
STORES = ("sqlite", "redis", "postgres")
TARGET_F1 = 0.95
#: The record fields a system may look at (dev/README.txt); the others are gold annotations.
INPUT_FIELDS = ("id", "title", "text", "tags")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
REQUEST_TIMEOUT = 120.0
ATTEMPTS = 3  # a check retried after a lost connection gets its first answer (added: false)


# -- data and scores ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DevSet:
    """A labelled dev set: its file, each record's input fields (file order) and the gold."""

    name: str
    path: Path
    documents: list[dict[str, Any]]
    gold: Gold

    @property
    def ids(self) -> list[Any]:
        return [document["id"] for document in self.documents]


def load_set(path: Path) -> DevSet:
    """A dev JSONL file (id, title, text, tags; gold cluster, level, derived_from)."""
    rows = read_jsonl(path)
    position = {row["id"]: number for number, row in enumerate(rows)}
    gold = Gold.from_labels(
        [row["cluster"] for row in rows],
        [row.get("level") for row in rows],
        derived_from=[position.get(row.get("derived_from"), -1) for row in rows],
    )
    documents = [{name: row[name] for name in INPUT_FIELDS if name in row} for row in rows]
    return DevSet(path.stem, path, documents, gold)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def score_clusters(dev: DevSet, clusters: Mapping[Any, Any]) -> Scores:
    """Scores of one cluster id per record (every record must have one)."""
    missing = [key for key in dev.ids if key not in clusters]
    if missing:
        raise RuntimeError(f"{dev.name}: {len(missing)} records got no cluster id, e.g. {missing[:3]}")
    codes: dict[tuple[bool, Any], int] = {}  # (is str, id): an int id never equals a str one
    labels = [
        codes.setdefault((isinstance(clusters[key], str), clusters[key]), len(codes)) for key in dev.ids
    ]
    return evaluate(dev.gold, Prediction.from_labels(labels))


def score_pairs(dev: DevSet, pairs: Iterable[tuple[Any, Any]]) -> Scores:
    """Scores of predicted pairs of ids (in either order, repeats allowed)."""
    position = {key: at for at, key in enumerate(dev.ids)}
    ends = np.array([(position[a], position[b]) for a, b in pairs], dtype=np.int64).reshape(-1, 2)
    return evaluate(dev.gold, Prediction.from_pairs(ends[:, 0], ends[:, 1]))


@dataclass(frozen=True)
class Result:
    """One row of the table."""

    set: str
    path: str
    records: int
    scores: Scores
    seconds: float

    @property
    def passed(self) -> bool:
        return self.scores.f1 >= TARGET_F1

    def row(self) -> str:
        s = self.scores
        return (
            f"| {self.set} | {self.path} | {self.records:,} | {s.f1:.4f} | {s.precision:.4f} "
            f"| {s.recall:.4f} | {self.seconds:.1f} |"
        )


TABLE_HEAD = (
    "| set | path | records | F1 | precision | recall | seconds |\n|---|---|---:|---:|---:|---:|---:|"
)


def verdict(results: list[Result]) -> str:
    failed = ", ".join(f"{r.set} {r.path} ({r.scores.f1:.4f})" for r in results if not r.passed)
    passed = f"PASS: every F1 >= {TARGET_F1} ({len(results)} runs)"
    return f"FAIL: F1 below {TARGET_F1} for {failed}" if failed else passed


# -- the paths ---------------------------------------------------------------------------------


def neardup(*args: str, cwd: Path) -> str:
    """Run ``python -m neardup ARGS`` as a user would; its stderr (the summary line)."""
    done = subprocess.run(
        [sys.executable, "-m", "neardup", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"neardup {' '.join(args)} exited with {done.returncode}:\n{done.stderr}")
    return done.stderr


def run_dedup(dev: DevSet, url: str, folder: Path) -> Scores:
    """(a): ``neardup dedup DEV --index URL --clusters FILE``, scored by cluster id."""
    clusters = folder / f"{dev.name}-dedup-clusters.jsonl"
    neardup("dedup", str(dev.path), "--index", url, "--clusters", str(clusters), cwd=folder)
    return score_clusters(dev, {row["id"]: row["cluster"] for row in read_jsonl(clusters)})


def run_index(dev: DevSet, url: str, folder: Path) -> Scores:
    """(b): ``neardup index add`` then ``neardup index query``, each match a predicted pair
    (also written as ``{"a", "b"}`` lines for ``neardup eval``)."""
    matches = folder / f"{dev.name}-index-matches.jsonl"
    neardup("index", "add", url, str(dev.path), cwd=folder)
    neardup("index", "query", url, str(dev.path), "-o", str(matches), cwd=folder)
    pairs = [
        (row["id"], match["id"])
        for row in read_jsonl(matches)
        for match in row["matches"]
        if match["id"] != row["id"]
    ]
    write_jsonl(folder / f"{dev.name}-index-pairs.jsonl", ({"a": a, "b": b} for a, b in pairs))
    return score_pairs(dev, pairs)


def run_serve(dev: DevSet, url: str, folder: Path, clients: int) -> Scores:
    """(c): a real ``neardup serve URL``, one ``POST /v1/check`` per record from ``clients``
    concurrent clients, scored by each answer's cluster id."""
    with Service(url, folder / f"{dev.name}-serve.log") as service:
        clusters = check_all(service.base, dev.documents, clients)
    write_jsonl(
        folder / f"{dev.name}-serve-clusters.jsonl",
        ({"id": key, "cluster": clusters[key]} for key in dev.ids if key in clusters),
    )
    return score_clusters(dev, clusters)


def servers_module() -> Any:
    """scripts/servers.py (not a package), loaded by path once."""
    for name in ("neardup_servers", "neardup_test_servers"):
        if name in sys.modules:
            return sys.modules[name]
    spec = importlib.util.spec_from_file_location("neardup_servers", ROOT / "scripts" / "servers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["neardup_servers"] = module
    spec.loader.exec_module(module)
    return module


class Service:
    """``neardup serve URL`` on a free loopback port, answering /healthz; stopped by its PID
    (SIGTERM, SIGKILL after STOP_TIMEOUT), and required to stop cleanly."""

    def __init__(self, url: str, log: Path) -> None:
        servers = servers_module()
        port = servers.free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.log = log
        command = [
            sys.executable,
            "-m",
            "neardup",
            "serve",
            url,
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=servers._die_with_parent,  # no server outlives this process
            )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"neardup serve exited with {self.process.returncode}:\n{log.read_text()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200:
                    return
            if time.monotonic() >= deadline:
                self.stop()
                raise RuntimeError(f"neardup serve did not answer /healthz:\n{log.read_text()}")
            time.sleep(0.1)

    def stop(self) -> int:
        """Its exit status (0 after a clean SIGTERM; negative when it had to be killed)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> Service:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        status = self.stop()
        if status != 0 and kind is None:
            raise RuntimeError(f"neardup serve stopped with status {status}:\n{self.log.read_text()}")


def check_all(base: str, documents: list[dict[str, Any]], clients: int) -> dict[Any, Any]:
    """POST every document to ``/v1/check`` from ``clients`` concurrent clients (each with one
    keep-alive connection, taking the next document when free); each id's cluster id."""

    async def run() -> dict[Any, Any]:
        clusters: dict[Any, Any] = {}
        upcoming = iter(documents)  # shared: one event loop, so each document goes out once
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)

        async def client() -> None:
            async with httpx.AsyncClient(base_url=base, limits=limits, timeout=REQUEST_TIMEOUT) as http:
                for document in upcoming:
                    answer = await check_one(http, document)
                    if answer.get("id") != document["id"]:
                        raise RuntimeError(f"asked for {document['id']!r}, answered {answer}")
                    clusters[document["id"]] = answer["cluster"]

        await asyncio.gather(*(client() for _ in range(clients)))
        return clusters

    return asyncio.run(run())


async def check_one(http: httpx.AsyncClient, document: dict[str, Any]) -> dict[str, Any]:
    """One check, retried after a lost connection (a retry gets the first answer)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            response = await http.post("/v1/check", json=document)
            break
        except httpx.TransportError:
            if attempt == ATTEMPTS:
                raise
    if response.status_code != 200:
        raise RuntimeError(f"/v1/check {document['id']!r}: {response.status_code} {response.text[:300]}")
    answer: dict[str, Any] = response.json()
    return answer


# -- stores and the run ------------------------------------------------------------------------


@contextlib.contextmanager
def store_urls(store: str, folder: Path) -> Iterator[Callable[[str, str], str]]:
    """A fresh store URL per (set, path): an SQLite file, or a key/table prefix on a Redis or
    PostgreSQL server started here and stopped by PID afterwards."""
    if store == "sqlite":

        def fresh_file(name: str, path: str) -> str:
            for old in folder.glob(f"{name}-{path}.db*"):  # from an earlier run into --keep
                old.unlink()
            return f"sqlite:///{folder}/{name}-{path}.db"

        yield fresh_file
        return
    server = servers_module().start(store)
    option = "prefix" if store == "redis" else "table"
    try:
        yield lambda name, path: f"{server.url}?{option}=oq_{name}_{path}"
    finally:
        server.stop(remove_dir=True)


def run_path(dev: DevSet, path: str, url: str, folder: Path, clients: int) -> Result:
    started = time.perf_counter()
    if path == "dedup":
        scores = run_dedup(dev, url, folder)
    elif path == "index":
        scores = run_index(dev, url, folder)
    else:
        scores = run_serve(dev, url, folder, clients)
    return Result(dev.name, path, len(dev.documents), scores, time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients of the serve path")
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--keep", type=Path, help="write the indexes, predictions and logs here (kept)")
    args = parser.parse_args()
    if args.clients < 1:
        parser.error("--clients must be at least 1")
    missing = [name for name in args.sets if not (DEV / f"{name}.jsonl").exists()]
    if missing:
        sys.exit(
            f"online_quality: {', '.join(missing)} not found in {DEV} (see ../shared/data/dev/README.txt)"
        )
    results: list[Result] = []
    with contextlib.ExitStack() as stack:
        if args.keep is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="neardup-online-quality-")))
        else:
            folder = args.keep.resolve()
            folder.mkdir(parents=True, exist_ok=True)
        url_of = stack.enter_context(store_urls(args.store, folder))
        print(f"store {args.store}, {args.clients} clients for serve; default options everywhere", flush=True)
        for name in args.sets:
            dev = load_set(DEV / f"{name}.jsonl")
            for path in args.paths:
                result = run_path(dev, path, url_of(name, path), folder, args.clients)
                results.append(result)
                print(
                    f"  {result.set} {result.path}: F1 {result.scores.f1:.4f} in {result.seconds:.1f} s",
                    flush=True,
                )
    print()
    print(TABLE_HEAD)
    print("\n".join(result.row() for result in results))
    print(f"\n{verdict(results)}")
    sys.exit(0 if all(result.passed for result in results) else 1)


if __name__ == "__main__":
    main()

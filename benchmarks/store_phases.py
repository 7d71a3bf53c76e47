"""Where a band check-and-add batch spends its time, per store: milliseconds per batch in each
phase, and docs/s (what store_speed.py measures, here with the phases timed).

For each backend, ``--stored`` documents are loaded (the same fingerprints and 512-byte
sketches as store_speed.py), then ``--fresh`` documents are checked and added in batches of
``--batch`` through :class:`neardup.IncrementalDeduper`, with these methods timed (inclusive
times: a phase contains the ones it calls, and timing adds a little to every call):

- ``query``     ``SimhashIndex.query_many_with_records``: the candidate statement and the
                matched records (``find``: the runs layout's statement alone);
- ``add``       ``SimhashIndex.add_many``: records and postings written (``postings``: the
                runs layout's postings alone; ``cuts``: its cuts and merges, amortised);
- ``rest``      everything else of the batch: reading the batch's own ids, deciding, the
                transaction's commit.

SQLite runs in a temporary file (``sqlite``: runs, the default layout; ``sqlite-columns``:
seed 002's table); PostgreSQL on a server started on 127.0.0.1 by scripts/servers.py and
stopped by PID at the end. Defaults take a minute; issue 17's scale is ``--stored 1000000
--fresh 140000`` (about 5 minutes per store on 2 cores).

    python3 benchmarks/store_phases.py --backends sqlite postgres
    python3 benchmarks/store_phases.py --backends postgres --stored 1000000 --fresh 140000
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from store_speed import fingerprints, load_servers, sketches

from neardup import IncrementalDeduper, SimhashIndex
from neardup.index.config import IndexConfig
from neardup.similarity.bands import BandScheme
from neardup.similarity.verify import Verifier
from neardup.storage.runs import PostingRuns

BACKENDS = ("sqlite", "sqlite-columns", "postgres")
#: (phase, class, method) timed; inclusive times.
PHASES: tuple[tuple[str, type, str], ...] = (
    ("query", SimhashIndex, "query_many_with_records"),
    ("find", PostingRuns, "find"),
    ("add", SimhashIndex, "add_many"),
    ("postings", PostingRuns, "add"),
    ("cuts", PostingRuns, "cut_if_full"),
)


@contextlib.contextmanager
def timed(seconds: dict[str, float]) -> Iterator[None]:
    """Time the methods of :data:`PHASES` into ``seconds`` while the block runs."""
    originals = [(owner, name, getattr(owner, name)) for _, owner, name in PHASES]

    def wrapper(phase: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                seconds[phase] += time.perf_counter() - began

        return timed_call

    for (phase, owner, name), (_, _, method) in zip(PHASES, originals, strict=True):
        setattr(owner, name, wrapper(phase, method))
    try:
        yield
    finally:
        for owner, name, method in originals:
            setattr(owner, name, method)


def measure(url: str, stored: int, fresh: int, batch: int) -> dict[str, float]:
    """Docs/s and milliseconds per batch by phase, for one store."""
    values = fingerprints(stored + fresh, seed=5)
    texts = sketches(stored + fresh, seed=6)
    config = IndexConfig(scheme=BandScheme(64), verification={"mode": "sketch"})
    seconds: dict[str, float] = collections.defaultdict(float)
    with SimhashIndex.open(url, config) as index:
        for start in range(0, stored, 10_000):
            stop = min(start + 10_000, stored)
            index.add_many(list(range(start, stop)), values[start:stop], signatures=texts[start:stop])
        deduper = IncrementalDeduper(index, Verifier("sketch"))
        began = time.perf_counter()
        with timed(seconds):
            for start in range(stored, stored + fresh, batch):
                stop = min(start + batch, stored + fresh)
                deduper.check_and_add_many(
                    list(range(start, stop)), values[start:stop], signatures=texts[start:stop]
                )
        total = time.perf_counter() - began
    batches = -(-fresh // batch)
    figures = {phase: 1e3 * seconds[phase] / batches for phase, _, _ in PHASES}
    figures["rest"] = 1e3 * total / batches - figures["query"] - figures["add"]
    figures["docs_per_s"] = fresh / total
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=["sqlite", "postgres"])
    parser.add_argument("--stored", type=int, default=100_000, help="stored first (default 100000)")
    parser.add_argument(
        "--fresh", type=int, default=20_000, help="documents checked and added (default 20000)"
    )
    parser.add_argument("--batch", type=int, default=1000, help="documents per batch (default 1000)")
    args = parser.parse_args()
    servers = load_servers()
    names = ("query", "find", "add", "postings", "cuts", "rest")
    print(
        f"stored {args.stored:,}; {args.fresh:,} checked and added in batches of {args.batch}; ms per batch"
    )
    print("\n| store | docs/s | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    with tempfile.TemporaryDirectory(prefix="neardup-store-phases-") as folder:
        for name in args.backends:
            print(f"store_phases: {name}: loading {args.stored:,}", file=sys.stderr, flush=True)
            if name == "postgres":
                server = servers.start("postgres")
                try:
                    figures = measure(str(server.url), args.stored, args.fresh, args.batch)
                finally:
                    server.stop(remove_dir=True)
            else:
                layout = "?layout=columns" if name == "sqlite-columns" else ""
                figures = measure(
                    f"sqlite:///{folder}/{name}.db{layout}", args.stored, args.fresh, args.batch
                )
            cells = " | ".join(f"{figures[phase]:.1f}" for phase in names)
            print(f"| {name} | {figures['docs_per_s']:,.0f} | {cells} |", flush=True)


if __name__ == "__main__":
    main()

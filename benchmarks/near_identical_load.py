"""What one request costs when the store holds a family of near-identical documents:
``--stored`` documents differing in one number are added to a fresh SQLite band index,
then one batch of ``--batch`` *different* near-identical documents is queried and one is
checked and added, through the library calls the service makes
(:meth:`neardup.Index.query` and ``check_and_add``), with
``--max-matches`` per document. Prints seconds and the matches listed.

A query runs in store calls of 16 documents in the service, so it delays other requests by
one chunk; a check is one transaction, so other checks wait for the whole of it.

    python3 benchmarks/near_identical_load.py
    python3 benchmarks/near_identical_load.py --stored 3000 --batch 1000 --max-matches 100
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from neardup import Index
from neardup.io.record import Record

BASE = (
    "The city council approved the new budget on Tuesday after a long debate about schools, "
    "roads and the public library, which will open on Sundays from next year"
)


def family(prefix: str, count: int) -> list[Record]:
    return [Record(f"{prefix}{i:06d}", f"{BASE} {prefix}{i}", None, f"{prefix}{i}") for i in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stored", type=int, default=3000, help="near-identical documents stored")
    parser.add_argument("--batch", type=int, default=1000, help="documents in the measured request")
    parser.add_argument("--max-matches", type=int, default=100, help="matches listed per document")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'family.db'}"
        with Index.open(url) as documents:
            stored = family("s", args.stored)
            for start in range(0, len(stored), 1000):
                documents.add(documents.prepare(stored[start : start + 1000]))
            for name in ("query", "check"):
                batch = documents.prepare(family("q" if name == "query" else "c", args.batch))
                began = time.perf_counter()
                if name == "query":
                    answers = [list(found) for found in documents.query(batch, max_matches=args.max_matches)]
                else:
                    answers = [
                        list(found.matches)
                        for found in documents.check_and_add(batch, max_matches=args.max_matches)
                    ]
                seconds = time.perf_counter() - began
                listed = sum(len(matches) for matches in answers)
                print(
                    f"{name}: {args.batch} near-identical documents against {args.stored} stored: "
                    f"{seconds:.2f} s, {listed} matches listed (at most {args.max_matches} each)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())

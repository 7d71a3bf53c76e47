"""Candidates per document as the collection grows (issue 30, item 2): what the LSH search of
``neardup dedup`` hands its check, split by what the pairs are, at several sizes of the
benchmark haystack, for the default bands (a pair found by 2 of 235 bands of 5 rows) and,
side by side on the same sketches' texts, the one-hit layout it replaced (146 bands of 5, a
pair found by one band).

For each size N (haystack documents of ``scale_quality.py``, the dev news hidden inside) and
each layout it sketches the corpus as ``neardup dedup`` does (``Sketcher``, 2 workers), takes
the candidate pairs (``band_candidates``) and estimates each one's Jaccard from the 512 check
bins (exact for two short texts), then prints per document: all candidates, the short texts'
(prefix search), and the rest by estimate: below 0.1 (chance collisions of unrelated texts),
0.1-0.42 (related texts: sharing a sentence or a few), 0.42 and up (near the threshold or
above it: the pairs the check must see). A search whose candidates grow only with the
collection's own near-duplicates keeps the first two classes flat; the third is what the
corpus holds (in this haystack, texts drawn from the same long sentences are near-duplicates,
and there are more of them per document as N grows).

    python3 benchmarks/candidate_growth.py --sizes 100000 300000 1000000 --lang en --corpus-dir /work/corpora

Counts, not times: the figures do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_quality

from neardup.dedup.candidates import CandidateSettings
from neardup.dedup.key_buckets import as_pairs
from neardup.dedup.lsh import Sketcher, band_candidates
from neardup.dedup.pipeline import DedupSettings
from neardup.io.read import read_records
from neardup.text.normalize import Normalizer

#: Estimate classes: chance collisions, related texts, near or above the threshold.
EDGES = (0.1, 0.42)


def layouts() -> dict[str, CandidateSettings]:
    """The default (two hits) and the one-hit layout it replaced."""
    default = DedupSettings().lsh_settings()
    return {
        f"{default.hits} of {default.band_count}": default,
        "1 of 146": dataclasses.replace(default, bands=146, hits=1),
    }


def candidates_of(path: Path, settings: CandidateSettings) -> dict[str, float]:
    """Sketch the corpus at ``path`` under ``settings``; the candidates per document by class."""
    start = time.perf_counter()
    sketcher = Sketcher(settings, Normalizer(), workers=2)
    batch = []
    for record in read_records(path):
        batch.append(record)
        if len(batch) == scale_quality.CHUNK:
            sketcher.add(batch)
            batch = []
    if batch:
        sketcher.add(batch)
    sketches = sketcher.finish()
    search = sketches.search
    count = search.count
    pairs = as_pairs(band_candidates(sketches).all())
    search.prepare()
    estimate = search.similarities(pairs)
    is_short = np.zeros(count, dtype=bool)
    is_short[search.short_documents()] = True
    short = is_short[pairs[:, 0]] & is_short[pairs[:, 1]]
    rest = estimate[~short]
    return {
        "documents": count,
        "all": len(pairs) / count,
        "short": int(short.sum()) / count,
        "chance": int((rest < EDGES[0]).sum()) / count,
        "related": int(((rest >= EDGES[0]) & (rest < EDGES[1])).sum()) / count,
        "near": int((rest >= EDGES[1]).sum()) / count,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--lang", choices=("zh", "en"), default="en")
    parser.add_argument("--corpus-dir", type=Path, default=Path("corpora"), help="where corpora are cached")
    args = parser.parse_args()
    args.corpus_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"{'N':>10s} {'layout':>10s} {'all':>7s} {'short':>7s} {'<0.1':>7s} {'0.1-0.42':>9s} {'>=0.42':>7s}"
    )
    for size in args.sizes:
        path, _ = scale_quality.build_corpus(args.lang, size, args.corpus_dir)
        for name, settings in layouts().items():
            row = candidates_of(path, settings)
            print(
                f"{row['documents']:>10,d} {name:>10s} {row['all']:7.3f} {row['short']:7.3f} "
                f"{row['chance']:7.3f} {row['related']:9.3f} {row['near']:7.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()

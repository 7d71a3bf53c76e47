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
from neardup.dedup.workspace import Workspace
from neardup.io.read import read_records
from neardup.text.normalize import Normalizer

#: Estimate classes: chance collisions, related texts, near or above the threshold.
EDGES = (0.1, 0.42)
#: Where the check decides by the estimate alone (above this; ``CHECK_MARGIN`` past 0.5).
DECIDED = 0.58


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
    with Workspace() as workspace:  # the command's default budget: spills past it, as it does
        return _candidates_in(path, settings, workspace, start)


def _candidates_in(
    path: Path, settings: CandidateSettings, workspace: Workspace, start: float
) -> dict[str, float]:
    sketcher = Sketcher(settings, Normalizer(), workers=2, workspace=workspace)
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
    tiles = band_candidates(sketches)
    search.prepare()
    is_short = np.zeros(count, dtype=bool)
    is_short[search.short_documents()] = True
    totals = dict.fromkeys(("all", "short", "chance", "related", "near", "undecided", "identical"), 0)
    for tile in tiles.tiles():  # a tile at a time, as the check reads them: memory stays bounded
        pairs = as_pairs(tile)
        estimate = search.similarities(pairs)
        short = is_short[pairs[:, 0]] & is_short[pairs[:, 1]]
        rest = estimate[~short]
        totals["all"] += len(pairs)
        totals["short"] += int(short.sum())
        totals["chance"] += int((rest < EDGES[0]).sum())
        totals["related"] += int(((rest >= EDGES[0]) & (rest < EDGES[1])).sum())
        totals["near"] += int((rest >= EDGES[1]).sum())
        totals["undecided"] += int(((rest >= EDGES[1]) & (rest < DECIDED)).sum())
        totals["identical"] += int((rest >= 1.0).sum())
    row: dict[str, float] = {name: value / count for name, value in totals.items()}
    row["documents"] = count
    row["seconds"] = time.perf_counter() - start
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--lang", choices=("zh", "en"), default="en")
    parser.add_argument("--corpus-dir", type=Path, default=Path("corpora"), help="where corpora are cached")
    parser.add_argument(
        "--layouts", choices=("both", "default"), default="both", help="default: today's layout only"
    )
    args = parser.parse_args()
    args.corpus_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"{'N':>10s} {'layout':>10s} {'all':>7s} {'short':>7s} {'<0.1':>7s} {'0.1-0.42':>9s} {'>=0.42':>7s}"
        f" {'0.42-0.58':>9s} {'=1':>7s} {'seconds':>8s}"
    )
    for size in args.sizes:
        path, _ = scale_quality.build_corpus(args.lang, size, args.corpus_dir)
        chosen = layouts()
        if args.layouts == "default":
            chosen = dict(list(chosen.items())[:1])
        for name, settings in chosen.items():
            row = candidates_of(path, settings)
            print(
                f"{row['documents']:>10,d} {name:>10s} {row['all']:7.3f} {row['short']:7.3f} "
                f"{row['chance']:7.3f} {row['related']:9.3f} {row['near']:7.3f} "
                f"{row['undecided']:9.3f} {row['identical']:7.3f} {row['seconds']:8.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()

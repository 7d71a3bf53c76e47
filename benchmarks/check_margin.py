"""The error of the default search's sketch estimate against the exact shingle Jaccard, which
sets the band around the threshold where texts decide (``similarity.sketches.CHECK_MARGIN``).

Builds the English corpus of ``scale_quality.py`` (dev news among N haystack documents), runs
the default LSH stage, and for every sketched candidate with an estimate in [0.2, 0.8)
computes the exact Jaccard (``ShingleSets``): the error's standard deviation by exact-Jaccard
band, the largest error, and how many candidates each margin would decide wrongly.

    python3 benchmarks/check_margin.py --size 200000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_quality import build_corpus

from neardup.dedup.key_buckets import as_pairs
from neardup.dedup.lsh import Sketcher, band_candidates, exact_jaccard
from neardup.dedup.pipeline import DedupSettings
from neardup.fingerprint.fingerprinter import Fingerprinter
from neardup.io.read import read_records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200_000, help="haystack documents (default 200000)")
    parser.add_argument("--lang", choices=("zh", "en"), default="en")
    args = parser.parse_args()
    fingerprinter = Fingerprinter()
    stage = Sketcher(DedupSettings().lsh_settings(), fingerprinter.normalizer)
    with tempfile.TemporaryDirectory() as folder:
        print(f"check_margin: building {args.size:,} haystack documents", file=sys.stderr, flush=True)
        path, _ = build_corpus(args.lang, args.size, Path(folder))
        print("check_margin: sketching and the LSH stage", file=sys.stderr, flush=True)
        batch = []
        for record in read_records(path):
            batch.append(record)
            if len(batch) == 4096:
                stage.add(batch)
                batch = []
        if batch:
            stage.add(batch)
    sketches = stage.finish()
    found = as_pairs(band_candidates(sketches).all())
    sketches.search.prepare()
    estimate = sketches.search.similarities(found)
    is_short, _, _ = sketches.search._lookups()
    chosen = ~(is_short[found[:, 0]] & is_short[found[:, 1]]) & (estimate >= 0.2) & (estimate < 0.8)
    pairs, estimate = found[chosen], estimate[chosen]
    print(f"check_margin: exact Jaccard of {len(pairs):,} candidates", file=sys.stderr, flush=True)
    exact = exact_jaccard(sketches, pairs, fingerprinter.normalizer)
    error = estimate - exact
    print(f"{len(pairs)} sketched candidates with an estimate in [0.2, 0.8)")
    for low in (0.3, 0.4, 0.45, 0.5, 0.55, 0.6):
        band = (exact >= low) & (exact < low + 0.05)
        if band.any():
            print(
                f"  exact in [{low:.2f}, {low + 0.05:.2f}): {band.sum():6d}, error sd {error[band].std():.4f}"
            )
    print(f"  largest error {np.abs(error).max():.3f}")
    for margin in (0.05, 0.08, 0.10, 0.15):
        undecided = (estimate >= 0.5 - margin) & (estimate < 0.5 + margin)
        wrong = ((estimate >= 0.5 + margin) & (exact < 0.5)) | ((estimate < 0.5 - margin) & (exact >= 0.5))
        print(f"  margin {margin:.2f}: {undecided.sum():6d} left to the texts, {wrong.sum()} decided wrongly")
    for margin in (0.04, 0.05, 0.06, 0.07, 0.08):
        below = (estimate >= 0.5 - margin) & (estimate < 0.5)
        missed = (estimate < 0.5 - margin) & (exact >= 0.5)
        left = f"{below.sum():6d} left to the texts"
        print(f"  below 0.5 alone, margin {margin:.2f}: {left}, {missed.sum()} missed")


if __name__ == "__main__":
    main()

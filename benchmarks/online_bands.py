"""How many band postings per document a store needs (issue 17's design question).

A persistent index cannot keep the texts, so its candidates must come from postings it can
look up (band keys of the shingle LSH) and be decided by a stored sketch alone. Every posting
is a row (SQL), a set member (Redis) or an index entry (MongoDB) per document, so the band
count is the store's cost. This prints, for each (bands, rows) on the labelled dev sets: the
candidates per document, the recall of the candidates against brute force (shingle Jaccard >=
0.5), and the pairwise F1 of the pairs whose 512-bin b-bit estimate reaches 0.5 (no texts), as
an index would decide them. 146 x 5 (one band to agree) was the batch search's until it took
pairs that 2 of 235 bands of 5 find.

    python3 benchmarks/online_bands.py
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from neardup.arrays import sorted_unique
from neardup.dedup.key_buckets import as_pairs, keyed_pairs
from neardup.eval.metrics import Gold, Prediction, evaluate
from neardup.similarity.shingles import shingles_of
from neardup.similarity.sketches import byte_bins, estimate_from_bins, hashed_band_keys, oph_sketches
from neardup.similarity.verify import Shingles

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
CONFIGS = ((146, 5), (64, 4), (32, 4), (40, 3), (24, 3), (16, 2))
CHECK_BINS = 512


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    for name in ("zh_news", "en_news"):
        with (SHARED / "dev" / f"{name}.jsonl").open(encoding="utf-8") as handle:
            dev = [json.loads(line) for line in handle]
        texts = [record["text"] for record in dev]
        gold = Gold.from_labels([r["cluster"] for r in dev], [r["level"] for r in dev])
        exact = Shingles.of(texts)
        matrix, sizes = exact.matrix(), exact.sizes
        common = (matrix @ matrix.T).tocoo()
        upper = common.row < common.col
        a, b, shared = common.row[upper], common.col[upper], common.data[upper]
        good = shared >= 0.5 * (sizes[a] + sizes[b] - shared) - 1e-9
        truth = set(zip(a[good].tolist(), b[good].tolist(), strict=True))
        shingles = shingles_of(texts)
        owners = np.arange(len(texts), dtype=np.int64)
        print(f"{name}: {len(texts)} records, {len(truth)} pairs of Jaccard >= 0.5")
        for bands, rows in CONFIGS:
            sketch = oph_sketches(shingles, max(bands * rows, CHECK_BINS))
            keys = hashed_band_keys(sketch, rows, bands)
            parts = [keyed_pairs(keys[band], owners, 200, 2) for band in range(bands)]
            found = as_pairs(np.asarray(sorted_unique(np.concatenate(parts)), dtype=np.int64))
            checks = byte_bins(sketch, CHECK_BINS)
            estimate = estimate_from_bins(checks[found[:, 0]], checks[found[:, 1]])
            kept = found[estimate >= 0.5]
            recall = len(truth & set(map(tuple, found.tolist()))) / max(1, len(truth))
            f1 = evaluate(gold, Prediction.from_pairs(kept[:, 0], kept[:, 1])).f1
            print(
                f"  {bands:>3} bands x {rows} rows: {len(found) / len(texts):5.2f} candidates/doc, "
                f"candidate recall {recall:.3f}, F1 on the sketch alone {f1:.4f}"
            )


if __name__ == "__main__":
    main()

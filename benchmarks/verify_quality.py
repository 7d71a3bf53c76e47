"""Precision / recall / F1 of Simhash alone and with each candidate verification on the dev sets.

For each set the records are fingerprinted once (default settings, as ``neardup dedup``), all
pairs within the largest k are found exactly with ``find_all_pairs``, and for every k and mode
the candidates within k are verified with ``Verifier.verify_texts`` — the functions behind
``neardup dedup -k K --verify MODE`` — and scored against the gold pairs of
benchmarks/dev_separation.py (pairs with a heavy copy are left out). Metadata for ``combined``
are the records' ``tags`` (zh_news, en_news) or the texts' top keywords (zh_short has none).

    python benchmarks/verify_quality.py                        # k = 3 6 10, every mode, three sets
    python benchmarks/verify_quality.py --k 10 16 --sets zh_short
    python benchmarks/verify_quality.py --sweep                # F1 per threshold (how defaults were chosen)
    python benchmarks/verify_quality.py --lengths              # Simhash precision by text length
"""

from __future__ import annotations

import argparse
import sys
import time
from itertools import pairwise
from pathlib import Path

import numpy as np
from dedup_quality import score
from dev_separation import DEFAULT_DATA, gold_pairs, load

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from neardup import Fingerprinter, MinHasher, find_all_pairs
from neardup.similarity.verify import VERIFY_MODES, Verifier, metadata_of

SWEEP = {
    "jaccard": [0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7],
    "minhash": [0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7],
    "combined": [0.1, 0.12, 0.15, 0.18, 0.2, 0.22, 0.25, 0.3],
}
LENGTH_BANDS = [0, 20, 40, 60, 100, 200, 400, 10**9]


def prepare(path: Path, max_k: int, ngram: int) -> dict:
    records = load(path)
    texts = [record["text"] for record in records]
    titles = [record.get("title") or None for record in records]
    fingerprinter = Fingerprinter(ngram=ngram)
    fingerprints = fingerprinter.fingerprint_many(texts, titles)
    pairs = find_all_pairs(fingerprints, max_k)
    gold, heavy = gold_pairs(records)
    return {
        "records": records,
        "texts": texts,
        "metadata": [metadata_of(record) for record in records],
        "fingerprinter": fingerprinter,
        "pairs": pairs,
        "gold": gold,
        "heavy": heavy,
    }


def scored(data: dict, mask: np.ndarray) -> tuple[int, float, float, float]:
    pairs, heavy = data["pairs"], data["heavy"]
    i, j = pairs.i[mask], pairs.j[mask]
    clean = ~(heavy[i] | heavy[j])
    found = set(zip(i[clean].tolist(), j[clean].tolist(), strict=True))
    return (len(found), *score(found, data["gold"]))


def verified(data: dict, k: int, verifier: Verifier) -> tuple[np.ndarray, float]:
    pairs = data["pairs"]
    within = pairs.distance <= k
    started = time.perf_counter()
    result = verifier.verify_texts(
        pairs.distance[within],
        pairs.i[within],
        pairs.j[within],
        data["texts"],
        data["metadata"],
        data["fingerprinter"],
    )
    seconds = time.perf_counter() - started
    mask = np.zeros(len(pairs), dtype=bool)
    mask[np.flatnonzero(within)[result.kept]] = True
    return mask, seconds


def table(data: dict, name: str, ks: list[int], modes: list[str]) -> None:
    for k in ks:
        for mode in modes:
            verifier = Verifier(mode)
            mask, seconds = verified(data, k, verifier)
            found, precision, recall, f1 = scored(data, mask)
            threshold = "-" if mode == "none" else f"{verifier.cutoff:.2f}"
            print(
                f"| {name} | {k} | {mode} | {threshold} | {found} | {precision:.3f} | {recall:.3f} "
                f"| {f1:.3f} | {seconds:.2f} |"
            )


def sweep(data: dict, name: str, ks: list[int]) -> None:
    for k in ks:
        for mode, thresholds in SWEEP.items():
            cells = []
            for threshold in thresholds:
                mask, _ = verified(data, k, Verifier(mode, threshold=threshold))
                cells.append(f"{threshold:.2f}:{scored(data, mask)[3]:.3f}")
            print(f"{name:9} k={k:<2} {mode:8} " + " ".join(cells))


def lengths(data: dict, name: str, ks: list[int]) -> None:
    """Precision of Simhash-alone pairs by the length of the shorter text."""
    pairs, heavy, gold = data["pairs"], data["heavy"], data["gold"]
    size = np.array([len(text) for text in data["texts"]])
    shorter = np.minimum(size[pairs.i], size[pairs.j])
    for k in ks:
        cells = []
        for low, high in pairwise(LENGTH_BANDS):
            mask = (pairs.distance <= k) & (shorter >= low) & (shorter < high)
            mask &= ~(heavy[pairs.i] | heavy[pairs.j])
            if not mask.any():
                continue
            right = sum(
                (a, b) in gold for a, b in zip(pairs.i[mask].tolist(), pairs.j[mask].tolist(), strict=True)
            )
            cells.append(f"[{low},{high if high < 10**9 else '∞'}): {right / mask.sum():.3f} of {mask.sum()}")
        print(f"{name:9} k={k:<2} " + "; ".join(cells))


def minhash_speed(num_perm: int = 128, sets: int = 2000, elements: int = 500) -> None:
    """MinHash throughput in element x function cells per second, on random string sets."""
    rng = np.random.default_rng(4)
    words = [[f"w{value}" for value in rng.integers(0, 10**9, size=elements)] for _ in range(sets)]
    hasher = MinHasher(num_perm)
    started = time.perf_counter()
    hasher.signatures(words)
    seconds = time.perf_counter() - started
    cells = sets * elements * num_perm
    print(f"MinHash: {sets} sets of {elements} elements x {num_perm} functions in {seconds:.2f} s "
          f"= {cells / seconds / 1e6:.0f} M cells/s")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sets", nargs="+", default=["zh_short", "zh_news", "en_news"])
    parser.add_argument("--k", nargs="+", type=int, default=[3, 6, 10])
    parser.add_argument("--modes", nargs="+", default=list(VERIFY_MODES), choices=VERIFY_MODES)
    parser.add_argument("--ngram", type=int, default=0, help="fingerprint character n-grams (0: words)")
    parser.add_argument("--sweep", action="store_true", help="F1 per threshold instead of the table")
    parser.add_argument("--lengths", action="store_true", help="Simhash precision by text length")
    parser.add_argument("--speed", action="store_true", help="only MinHash signature throughput")
    args = parser.parse_args()
    if args.speed:
        minhash_speed()
        return
    if not args.sweep and not args.lengths:
        print("| set | k | verify | threshold | pairs | precision | recall | F1 | verify s |")
        print("|---|---|---|---|---|---|---|---|---|")
    for name in args.sets:
        path = args.data / f"{name}.jsonl"
        if not path.exists():
            print(f"{name}: {path} is absent; skipped", file=sys.stderr)
            continue
        data = prepare(path, max(args.k), args.ngram)
        if args.sweep:
            sweep(data, name, args.k)
        elif args.lengths:
            lengths(data, name, args.k)
        else:
            table(data, name, args.k, args.modes)


if __name__ == "__main__":
    main()

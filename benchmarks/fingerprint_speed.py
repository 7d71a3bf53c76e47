"""Fingerprint throughput on real text, side by side in one process.

    python benchmarks/fingerprint_speed.py [--data ../shared/data/raw] [--repeat 3] [--peer-docs 2000]

Measures, on the same documents and with the best of ``--repeat`` runs each:
  * Chinese (People's Daily paragraphs): neardup ``fingerprint_many`` vs rjieba segmentation
    alone (``rjieba.cut`` per document, the lower bound for any jieba-based pipeline);
  * English (Reuters bodies): neardup ``fingerprint_many`` vs the PyPI ``simhash`` package
    (1e0ng's, pure Python), which runs on the first ``--peer-docs`` documents only.
Prints MB/s (UTF-8 bytes of input text) and the ratios the project targets:
Chinese >= 0.5 x segmentation alone, English >= 50 x the simhash package.
The fingerprinter is created fresh for each run, so token-hash caching across runs is not
counted; within a run it is (that is how the CLI runs).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from neardup import Fingerprinter  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "raw"
BATCH = 2048


def megabytes(texts: list[str]) -> float:
    return sum(len(text.encode("utf-8")) for text in texts) / 1e6


def best_rate(label: str, texts: list[str], run: Callable[[list[str]], object], repeat: int) -> float:
    size = megabytes(texts)
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run(texts)
        best = min(best, time.perf_counter() - started)
    rate = size / best
    print(f"  {label:44s} {size:7.2f} MB {best:7.3f} s {rate:8.2f} MB/s")
    return rate


def in_batches(fingerprint: Callable[[list[str]], object]) -> Callable[[list[str]], None]:
    def run(texts: list[str]) -> None:
        for start in range(0, len(texts), BATCH):
            fingerprint(texts[start : start + BATCH])

    return run


def neardup_run(**settings: object) -> Callable[[list[str]], None]:
    def run(texts: list[str]) -> None:
        fingerprinter = Fingerprinter(**settings)  # type: ignore[arg-type]
        in_batches(fingerprinter.fingerprint_many)(texts)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peer-docs", type=int, default=2000)
    args = parser.parse_args()
    zh_path, en_path = args.data / "zh_news.txt", args.data / "en_reuters.jsonl"
    if not zh_path.exists() or not en_path.exists():
        sys.exit(f"raw data not found under {args.data}; pass --data")
    chinese = [line.strip() for line in zh_path.open(encoding="utf-8") if line.strip()]
    english = [json.loads(line)["text"] for line in en_path.open(encoding="utf-8")]

    import rjieba

    Fingerprinter()  # load the default IDF table once, outside the timings

    print(f"Chinese: {len(chinese)} paragraphs")
    segmentation = best_rate("rjieba.cut alone", chinese, lambda texts: [rjieba.cut(t, False) for t in texts], args.repeat)
    zh_rates = {}
    for weighting in ("tfidf-len", "tf", "composite"):
        zh_rates[weighting] = best_rate(
            f"neardup fingerprint_many ({weighting})", chinese, neardup_run(weighting=weighting), args.repeat
        )

    print(f"English: {len(english)} documents")
    en_rate = best_rate("neardup fingerprint_many (tfidf-len)", english, neardup_run(), args.repeat)
    best_rate("neardup fingerprint_many (tf, lang=en)", english, neardup_run(weighting="tf", lang="en"), args.repeat)
    from simhash import Simhash

    peer_texts = english[: args.peer_docs]
    peer_rate = best_rate(
        f"PyPI simhash.Simhash ({len(peer_texts)} docs)", peer_texts, lambda texts: [Simhash(t) for t in texts], 1
    )

    print("\nRatios (targets: Chinese >= 0.5, English >= 50)")
    for weighting, rate in zh_rates.items():
        print(f"  Chinese {weighting:10s} / rjieba.cut alone   = {rate / segmentation:6.2f}")
    print(f"  English tfidf-len  / PyPI simhash       = {en_rate / peer_rate:6.1f}")


if __name__ == "__main__":
    main()

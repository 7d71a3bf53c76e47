"""Fingerprint throughput on real text, side by side in one process.

    python benchmarks/fingerprint_speed.py [--data ../shared/data/raw] [--repeat 3] [--peer-docs 2000]
        [--warm-up pass|minimal] [--clock wall|cpu]
    python benchmarks/fingerprint_speed.py --large-batch 200000   # one call: chunked vs whole

Measures, on the same documents and with the best of ``--repeat`` runs each:
  * Chinese (People's Daily paragraphs): neardup ``fingerprint_many`` vs rjieba segmentation
    alone (``rjieba.cut`` per document, the lower bound for any jieba-based pipeline);
  * English (Reuters bodies): neardup ``fingerprint_many`` vs the PyPI ``simhash`` package
    (1e0ng's, pure Python), which runs on the first ``--peer-docs`` documents only.
Prints MB/s (UTF-8 bytes of input text) and the ratios the project targets (issue 32):
Chinese >= 0.75 x segmentation alone, English >= 100 x the simhash package, for the default
settings (``tfidf-len``, log term frequency, share cap 0.1, normalizer 2).
Two figures per neardup setting: "cold", a fresh Fingerprinter on its first pass (every
distinct token is hashed and weighed once, as when a CLI run starts), and "warm", the same
Fingerprinter on a later pass (its token cache is full, as after the first few MB of a long
run: on this 2.8 MB Chinese corpus 43k distinct tokens are new in the cold pass). Process-wide
one-time costs (loading jieba's dictionary and IDF table, building lookup tables, the memory
allocator's first growth to batch-sized arrays) are paid before any timing, by a throwaway
Fingerprinter's pass over the same texts (``--warm-up pass``, the default; its token cache is
not the measured one's); ``--warm-up minimal`` fingerprints one short text instead, as this
script did before, and leaves the allocator's growth in the first cold figure.
For Chinese it also prints rjieba.cut on each batch of texts joined by line breaks, one call per
batch, which is how neardup calls it (same tokens, without rjieba's cost per call).

``--large-batch N`` measures one ``fingerprint_many`` call on N texts (Reuters bodies and
People's Daily paragraphs, cycled), each way in its own process: encoded in chunks of
``ENCODE_CHUNK`` texts (what the library does) and as one whole batch (what it did before),
with seconds and peak resident memory (the texts themselves included).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from neardup import Fingerprinter

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "raw"
BATCH = 2048


def megabytes(texts: list[str]) -> float:
    return sum(len(text.encode("utf-8")) for text in texts) / 1e6


#: time.perf_counter (wall clock) or time.process_time (this process's CPU time: on a machine
#: busy with other jobs, wall-clock figures mostly measure the scheduler), set by --clock.
CLOCK: Callable[[], float] = time.perf_counter


def best_rate(label: str, texts: list[str], run: Callable[[list[str]], object], repeat: int) -> float:
    size = megabytes(texts)
    best = float("inf")
    for _ in range(repeat):
        started = CLOCK()
        run(texts)
        best = min(best, CLOCK() - started)
    rate = size / best
    print(f"  {label:44s} {size:7.2f} MB {best:7.3f} s {rate:8.2f} MB/s")
    return rate


def in_batches(fingerprint: Callable[[list[str]], object]) -> Callable[[list[str]], None]:
    def run(texts: list[str]) -> None:
        for start in range(0, len(texts), BATCH):
            fingerprint(texts[start : start + BATCH])

    return run


def neardup_rates(label: str, texts: list[str], repeat: int, **settings: object) -> tuple[float, float]:
    """(cold, warm) MB/s of one setting."""
    fingerprinter = Fingerprinter(**settings)  # type: ignore[arg-type]
    run = in_batches(fingerprinter.fingerprint_many)
    cold = best_rate(f"{label}, cold", texts, run, 1)
    warm = best_rate(f"{label}, warm", texts, run, repeat)
    return cold, warm


def chinese_texts(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def english_texts(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle]


def chinese_section(path: Path, repeat: int) -> list[str]:
    import rjieba

    chinese = chinese_texts(path)
    print(f"Chinese: {len(chinese)} paragraphs")
    segmentation = best_rate(
        "rjieba.cut alone", chinese, lambda texts: [rjieba.cut(t, False) for t in texts], repeat
    )
    best_rate(
        "rjieba.cut, one call per batch (reference)",
        chinese,
        in_batches(lambda batch: rjieba.cut("\n".join(batch), False)),
        repeat,
    )
    ratios = []
    for weighting in ("tfidf-len", "tf", "composite"):
        cold, warm = neardup_rates(f"neardup {weighting}", chinese, repeat, weighting=weighting)
        ratios.append(
            f"  Chinese {_label(weighting)} / rjieba.cut alone  "
            f"{cold / segmentation:6.2f} / {warm / segmentation:6.2f}"
        )
    return ratios


def english_section(path: Path, repeat: int, peer_docs: int) -> list[str]:
    from simhash import Simhash

    english = english_texts(path)
    print(f"English: {len(english)} documents")
    peer_texts = english[:peer_docs]
    peer_rate = best_rate(
        f"PyPI simhash.Simhash ({len(peer_texts)} docs)",
        peer_texts,
        lambda texts: [Simhash(t) for t in texts],
        1,
    )
    ratios = []
    for weighting in ("tfidf-len", "tf"):
        cold, warm = neardup_rates(f"neardup {weighting}", english, repeat, weighting=weighting)
        ratios.append(
            f"  English {_label(weighting)} / PyPI simhash      "
            f"{cold / peer_rate:6.1f} / {warm / peer_rate:6.1f}"
        )
    return ratios


def _label(weighting: str) -> str:
    return f"{weighting} (default)" if weighting == "tfidf-len" else f"{weighting:20s}"


def large_batch_texts(data: Path, count: int) -> list[str]:
    english = english_texts(data / "en_reuters.jsonl")
    chinese = chinese_texts(data / "zh_news.txt")
    pool = [text for pair in zip(english, chinese, strict=False) for text in pair]
    return [pool[number % len(pool)] for number in range(count)]


def large_batch(args: argparse.Namespace) -> None:
    """One call on --large-batch texts, chunked and whole, each in a fresh process."""
    if args.large_batch_mode is None:
        print(f"One fingerprint_many call on {args.large_batch:,} texts (each way in its own process)")
        results = {}
        for mode in ("chunked", "whole"):
            command = [sys.executable, __file__, "--large-batch", str(args.large_batch)]
            command += ["--large-batch-mode", mode, "--data", str(args.data)]
            line = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            results[mode] = json.loads(line)
            seconds, peak = results[mode]["seconds"], results[mode]["peak_mb"]
            print(f"  {mode:8s} {seconds:7.1f} s   peak RSS {peak:7,.0f} MB")
        chunked, whole = results["chunked"], results["whole"]
        print(
            f"  whole / chunked: {whole['seconds'] / chunked['seconds']:.2f}x the time, "
            f"{whole['peak_mb'] / chunked['peak_mb']:.2f}x the peak memory"
        )
        return
    import resource

    from neardup.fingerprint import fingerprinter as fingerprint

    texts = large_batch_texts(args.data, args.large_batch)
    if args.large_batch_mode == "whole":
        fingerprint.ENCODE_CHUNK = len(texts)
    fingerprinter = Fingerprinter()
    fingerprinter.fingerprint_many(["预热 warm up"])
    start = time.perf_counter()
    fingerprinter.fingerprint_many(texts)
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mb": peak_mb}))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peer-docs", type=int, default=2000)
    parser.add_argument(
        "--only", choices=["zh", "en"], help="measure one language in this process (default: each in its own)"
    )
    parser.add_argument("--large-batch", type=int, metavar="N", help="time one call on N texts instead")
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="time by the wall clock, or by this process's CPU time (for a busy machine)",
    )
    parser.add_argument(
        "--warm-up",
        choices=["pass", "minimal"],
        default="pass",
        help="before timing: a throwaway Fingerprinter's pass over the texts, or one short text",
    )
    parser.add_argument("--large-batch-mode", choices=["chunked", "whole"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.large_batch:
        large_batch(args)
        return
    zh_path, en_path = args.data / "zh_news.txt", args.data / "en_reuters.jsonl"
    if not zh_path.exists() or not en_path.exists():
        sys.exit(f"raw data not found under {args.data}; pass --data")
    if args.only is None:
        # One process per language: each comparison still runs side by side in one process,
        # and neither language inherits the other's heap (which cost English ~15 % here).
        for language in ("zh", "en"):
            command = [sys.executable, __file__, "--only", language, "--repeat", str(args.repeat)]
            command += [
                "--peer-docs",
                str(args.peer_docs),
                "--data",
                str(args.data),
                "--warm-up",
                args.warm_up,
            ]
            subprocess.run(command, check=True)
        return

    # Process-wide one-time work (lookup tables; for Chinese, jieba's dictionary) before any
    # timing. English text never loads jieba's dictionary, so its warm-up does not either.
    warm_up = Fingerprinter(weighting="composite")
    warm_up.fingerprint_many(["预热 warm up ｗａｒｍ"] if args.only == "zh" else ["warm up ｗａｒｍ"])
    if args.warm_up == "pass":
        in_batches(Fingerprinter(weighting="tf").fingerprint_many)(
            chinese_texts(zh_path) if args.only == "zh" else english_texts(en_path)
        )
    if args.only == "zh":
        ratios = chinese_section(zh_path, args.repeat)
        target = "Chinese >= 0.75 x rjieba.cut alone"
    else:
        ratios = english_section(en_path, args.repeat, args.peer_docs)
        target = "English >= 100 x PyPI simhash"
    print(f"Ratios, cold / warm (target: {target})")
    print("\n".join(ratios), end="\n\n")


if __name__ == "__main__":
    main()

"""Recall at scale: the labelled dev news hidden among N haystack documents, every candidate
design of ``neardup.dedup.candidates`` (``oph``, ``segments``, ``minhash``) against today's
default ``neardup dedup`` (``neardup``), ``neardup dedup --search simhash`` (``simhash``: the
-k auto Simhash search, the default before the shingle LSH; k = 3 alone above 10⁶ records) and
rensa MinHash-LSH (``rensa``), side by side on the same input (issue 16; docs/candidates.md).

Haystack. ../shared/data/raw/zh_news.txt (one People's Daily paragraph a line) and
en_reuters.jsonl (Reuters bodies, wrapping undone) are cut into sentences, each tagged with its
source article. A haystack document takes a length from the dev set's length distribution (the
length of a random dev record) and is filled with sentences drawn uniformly at random (seed
fixed) from the whole pool, at most one per source article, grouped 3-5 to a paragraph. So a
haystack document holds at most one sentence of any article, and therefore of any dev document
(the dev sets are built from the same corpora): its shingle Jaccard with a dev document or with
another haystack document stays far below the 0.5 of a near-duplicate (a dev document of ~15
sentences shares at most ~1/15 of them). The dev records are shuffled in among the haystack.

Scores: pairwise precision / recall / F1 of the pairs each method outputs, on the dev records
only (pairs with a haystack document are ignored; ``neardup.eval.evaluate``: pairs involving
heavy copies are left out). For the candidate designs also the recall of their candidates
against the brute-force pairs of shingle Jaccard >= 0.5 among the dev records, and candidates
per document. Each method runs in a subprocess of its own; its peak memory is that process's
VmHWM (``neardup dedup``: the ru_maxrss of the command, started from the small worker), its
seconds are wall-clock per stage (the shingle stage computes the sets ``--verify jaccard``
compares, with ``similarity.shingles.shingles_of``; verification is ``Verifier("jaccard").verify_texts``
of today, 65,536 candidate pairs a call).

    nice -n 10 python3 benchmarks/scale_quality.py --size 20000 --lang zh
    nice -n 10 python3 benchmarks/scale_quality.py --size 200000 --lang both --methods oph neardup rensa
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from neardup.dedup.candidates import CandidateSearch, CandidateSettings
from neardup.dedup.clusters import components
from neardup.eval.metrics import Gold, Prediction, evaluate
from neardup.similarity.shingles import shingles_of
from neardup.similarity.verify import Shingles, Verifier
from neardup.text.normalize import Normalizer

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
METHODS = ("oph", "segments", "minhash", "neardup", "simhash", "rensa")
CHUNK = 4096
VERIFY_CHUNK = 1 << 16
_ZH_SENTENCE = re.compile(r"(?<=[。！？])")
_EN_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


# -- the corpus --------------------------------------------------------------------------------


def sentence_pool(lang: str) -> list[tuple[int, str]]:
    """(source article, sentence) for every sentence of the raw corpus of ``lang``."""
    pool: list[tuple[int, str]] = []
    if lang == "zh":
        lines = (SHARED / "raw" / "zh_news.txt").read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):  # one paragraph a line: the paragraph is the source
            pool.extend((number, s.strip()) for s in _ZH_SENTENCE.split(line) if len(s.strip()) >= 8)
    else:
        with (SHARED / "raw" / "en_reuters.jsonl").open(encoding="utf-8") as handle:
            for number, line in enumerate(handle):
                body = " ".join(json.loads(line)["text"].split())
                pool.extend((number, s.strip()) for s in _EN_SENTENCE.split(body) if len(s.strip()) >= 20)
    return pool


def haystack(lang: str, size: int, lengths: list[int], seed: int = 7) -> list[str]:
    """``size`` documents of random sentences, at most one per source article (docstring)."""
    rng = random.Random(seed)
    pool = sentence_pool(lang)
    documents: list[str] = []
    for _ in range(size):
        target = rng.choice(lengths)
        used: set[int] = set()
        sentences: list[str] = []
        total = 0
        while total < target:
            source, sentence = pool[rng.randrange(len(pool))]
            if source in used:
                continue
            used.add(source)
            sentences.append(sentence)
            total += len(sentence)
        joiner = "" if lang == "zh" else " "
        paragraphs, start = [], 0
        while start < len(sentences):
            step = rng.randint(3, 5)
            paragraphs.append(joiner.join(sentences[start : start + step]))
            start += step
        documents.append("\n".join(paragraphs))
    return documents


def build_corpus(lang: str, size: int, folder: Path) -> tuple[Path, list[dict[str, Any]]]:
    """Write the dev records of ``lang`` shuffled among ``size`` haystack documents."""
    name = "zh_news" if lang == "zh" else "en_news"
    with (SHARED / "dev" / f"{name}.jsonl").open(encoding="utf-8") as handle:
        dev = [json.loads(line) for line in handle]
    hay = haystack(lang, size, [len(record["text"]) for record in dev])
    rows = [{"id": r["id"], "title": r.get("title", ""), "text": r["text"]} for r in dev]
    rows += [{"id": f"hay-{k:08d}", "title": "", "text": text} for k, text in enumerate(hay)]
    random.Random(11).shuffle(rows)
    path = folder / f"{lang}_{size}.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path, dev


def read_corpus(path: Path) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            ids.append(row["id"])
            texts.append(row["text"])
    return ids, texts


# -- workers (one subprocess each) -------------------------------------------------------------


def run_candidates(method: str, path: Path) -> dict[str, Any]:
    """Shingles and candidates a chunk at a time, then jaccard verification, then clusters."""
    ids, texts = read_corpus(path)
    seconds: dict[str, float] = {}
    search = CandidateSearch(CandidateSettings(method=method))
    start = time.perf_counter()
    for low in range(0, len(texts), CHUNK):
        chunk = texts[low : low + CHUNK]
        search.add(shingles_of(chunk), chunk)
    seconds["shingles+sketch"] = time.perf_counter() - start
    start = time.perf_counter()
    candidates = search.pairs()
    seconds["pairs"] = time.perf_counter() - start
    start = time.perf_counter()
    i, j = candidates[:, 0], candidates[:, 1]
    verifier, kept = Verifier("jaccard"), np.zeros(len(i), dtype=bool)
    for low in range(0, len(i), VERIFY_CHUNK):  # the existing verifier, a bounded batch at a time
        part = slice(low, low + VERIFY_CHUNK)
        kept[part] = verifier.verify_texts(np.zeros(len(i[part])), i[part], j[part], texts).kept
    seconds["verify"] = time.perf_counter() - start
    start = time.perf_counter()
    components(len(texts), i[kept], j[kept])
    seconds["clusters"] = time.perf_counter() - start
    dev = np.array([not name.startswith("hay-") for name in ids])
    inside = dev[i] & dev[j]
    return {
        "seconds": seconds,
        "documents": len(texts),
        "candidates": len(i),
        "candidate_pairs": [
            [ids[a], ids[b]] for a, b in zip(i[inside].tolist(), j[inside].tolist(), strict=True)
        ],
        "pairs": [
            [ids[a], ids[b]]
            for a, b in zip(i[kept & inside].tolist(), j[kept & inside].tolist(), strict=True)
        ],
    }


def rensa_shingles(text: str) -> list[str]:
    """rensa's input as in issue 16: 5-character shingles of Chinese, 3-word shingles else."""
    normalized = Normalizer().normalize(text)
    if re.search(r"[\u4e00-\u9fff]", normalized):
        letters = "".join(ch for ch in normalized if ch.isalnum())
        return [letters[k : k + 5] for k in range(max(1, len(letters) - 4))]
    words = re.findall(r"\w+", normalized)
    return [" ".join(words[k : k + 3]) for k in range(max(1, len(words) - 2))]


def lsh_bands(threshold: float, num_perm: int) -> int:
    """datasketch's choice: the (b, r) minimising false positive + false negative areas (rensa
    wants b to divide num_perm; 128 perms at t = 0.5 give b = 32, r = 4)."""
    grid = np.linspace(0.0, 1.0, 1001)
    best, best_b = float("inf"), 1
    for b in (b for b in range(1, num_perm + 1) if num_perm % b == 0):
        r = num_perm // b
        p = 1 - (1 - grid**r) ** b
        error = float(np.trapezoid(np.where(grid < threshold, p, 1 - p), grid))
        if error < best:
            best, best_b = error, b
    return best_b


def run_rensa(path: Path) -> dict[str, Any]:
    from rensa import RMinHash, RMinHashLSH  # type: ignore[import-untyped]

    ids, texts = read_corpus(path)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    sketches = []
    for text in texts:
        sketch = RMinHash(num_perm=128, seed=42)
        sketch.update(rensa_shingles(text))
        sketches.append(sketch)
    seconds["sketch"] = time.perf_counter() - start
    start = time.perf_counter()
    lsh = RMinHashLSH(threshold=0.5, num_perm=128, num_bands=lsh_bands(0.5, 128))
    for key, sketch in enumerate(sketches):
        lsh.insert(key, sketch)
    found: list[tuple[int, int]] = []
    candidates = 0
    for key, sketch in enumerate(sketches):
        for other in lsh.query(sketch):
            if other > key:
                candidates += 1
                if sketch.jaccard(sketches[other]) >= 0.5:
                    found.append((key, other))
    seconds["lsh+verify"] = time.perf_counter() - start
    dev = [not name.startswith("hay-") for name in ids]
    pairs = [[ids[a], ids[b]] for a, b in found if dev[a] and dev[b]]
    return {"seconds": seconds, "documents": len(texts), "candidates": candidates, "pairs": pairs}


def run_neardup(path: Path, *options: str) -> dict[str, Any]:
    """Today's default ``neardup dedup`` with ``options`` (the command itself, so its own peak
    memory); ``simhash`` is ``--search simhash``, the default before the shingle LSH."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "pairs.jsonl"
        start = time.perf_counter()
        process = subprocess.Popen(
            ["neardup", "dedup", str(path), "--pairs", str(out), *options], stderr=subprocess.DEVNULL
        )
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        if status:
            raise SystemExit(f"neardup dedup failed with status {status}")
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    pairs = [[r["a"], r["b"]] for r in rows if not (r["a"].startswith("hay-") or r["b"].startswith("hay-"))]
    return {"seconds": {"end to end": seconds}, "pairs": pairs, "child_maxrss_kb": usage.ru_maxrss}


def peak_kb() -> int:
    """This process's peak resident memory (VmHWM belongs to the address space exec made, so
    unlike ru_maxrss it does not inherit the forking parent's size)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def worker(method: str, path: Path, out: Path) -> None:
    if method == "neardup":
        result = run_neardup(path)
    elif method == "simhash":
        result = run_neardup(path, "--search", "simhash")
    elif method == "rensa":
        result = run_rensa(path)
    else:
        result = run_candidates(method, path)
    result["peak_kb"] = max(peak_kb(), result.get("child_maxrss_kb", 0))
    out.write_text(json.dumps(result), encoding="utf-8")


# -- the driver --------------------------------------------------------------------------------


def brute_force(dev: list[dict[str, Any]], threshold: float = 0.5) -> set[tuple[str, str]]:
    """Every pair of dev records with shingle Jaccard >= threshold, by one sparse product."""
    shingles = Shingles.of([record["text"] for record in dev])
    matrix, sizes = shingles.matrix(), shingles.sizes
    common = (matrix @ matrix.T).tocoo()
    upper = common.row < common.col
    a, b, shared = common.row[upper], common.col[upper], common.data[upper]
    good = shared >= threshold * (sizes[a] + sizes[b] - shared) - 1e-9
    return {
        tuple(sorted((dev[x]["id"], dev[y]["id"])))
        for x, y in zip(a[good].tolist(), b[good].tolist(), strict=True)
    }


def score(dev: list[dict[str, Any]], pairs: list[list[str]]) -> float:
    position = {record["id"]: k for k, record in enumerate(dev)}
    gold = Gold.from_labels([r["cluster"] for r in dev], [r["level"] for r in dev])
    i = [position[a] for a, _ in pairs]
    j = [position[b] for _, b in pairs]
    return evaluate(gold, Prediction.from_pairs(i, j)).f1


def measure(
    method: str, path: Path, dev: list[dict[str, Any]], truth: set[tuple[str, str]]
) -> dict[str, Any]:
    out = path.with_suffix(f".{method}.json")
    process = subprocess.Popen(
        [sys.executable, __file__, "--worker", method, "--corpus", str(path), "--out", str(out)]
    )
    if process.wait():
        raise SystemExit(f"{method} failed with status {process.returncode}")
    result = json.loads(out.read_text(encoding="utf-8"))
    peak = result["peak_kb"] / 1024
    row = {"method": method, "f1": score(dev, result["pairs"]), "peak_mb": peak, "seconds": result["seconds"]}
    if "candidate_pairs" in result:
        found = {tuple(sorted(pair)) for pair in result["candidate_pairs"]}
        row["candidate_recall"] = len(truth & found) / len(truth) if truth else 1.0
        row["candidates_per_doc"] = result["candidates"] / result["documents"]
    elif "candidates" in result:
        row["candidates_per_doc"] = result["candidates"] / result["documents"]
    return row


def progress(text: str) -> None:
    print(f"scale_quality: {text}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=20_000, help="haystack documents (default 20000)")
    parser.add_argument("--lang", choices=("zh", "en", "both"), default="both")
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=METHODS,
        default=["neardup", "rensa"],
        help="default: neardup rensa (the candidate designs oph, segments, minhash take long past 2e5)",
    )
    parser.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.corpus, args.out)
        return
    if "rensa" in args.methods and importlib.util.find_spec("rensa") is None:
        print("rensa is not installed, so it is left out: pip install rensa==0.5.0 to compare")
        args.methods = [method for method in args.methods if method != "rensa"]
    for lang in ("zh", "en") if args.lang == "both" else (args.lang,):
        with tempfile.TemporaryDirectory() as folder:
            progress(f"{lang}: building the corpus ({args.size:,} haystack documents)")
            start = time.perf_counter()
            path, dev = build_corpus(lang, args.size, Path(folder))
            truth = brute_force(dev)
            print(
                f"\n{lang}: {len(dev)} dev + {args.size} haystack documents "
                f"(built in {time.perf_counter() - start:.0f} s); {len(truth)} dev pairs of Jaccard >= 0.5"
            )
            for method in args.methods:
                progress(f"{lang}: {method}")
                row = measure(method, path, dev, truth)
                stages = ", ".join(f"{name} {value:.1f}" for name, value in row["seconds"].items())
                extra = ""
                if "candidate_recall" in row:
                    extra = f" candidate recall {row['candidate_recall']:.4f}"
                if "candidates_per_doc" in row:
                    extra += f" candidates/doc {row['candidates_per_doc']:.2f}"
                total = sum(row["seconds"].values())
                print(
                    f"  {method:9s} F1 {row['f1']:.4f}{extra}  {total:.1f} s ({stages})"
                    f"  peak {row['peak_mb']:.0f} MB",
                    flush=True,
                )


if __name__ == "__main__":
    main()

"""Recall at scale: the labelled dev news hidden among N haystack documents, every candidate
design of ``neardup.dedup.candidates`` (``oph``, ``segments``, ``minhash``) against today's
default ``neardup dedup`` (``neardup``), ``neardup dedup --search simhash`` (``simhash``: the
-k auto Simhash search, the default before the shingle LSH; k = 3 alone above 10⁶ records),
rensa MinHash-LSH (``rensa``) and datatrove's MinHash deduplication (``datatrove``), side by
side on the same input (issues 16 and 30; docs/candidates.md).

Haystack. ../shared/data/raw/zh_news.txt (one People's Daily paragraph a line) and
en_reuters.jsonl (Reuters bodies, wrapping undone) are cut into sentences, each tagged with its
source article. A haystack document takes a length from the dev set's length distribution (the
length of a random dev record) and is filled with sentences drawn uniformly at random (seed
fixed) from the whole pool, at most one per source article (a repeat is drawn again), until it
reaches that length, grouped 3-5 to a paragraph. So a haystack document holds at most one
sentence of any article, and therefore of any dev document (the dev sets are built from the
same corpora): its shingle Jaccard with a dev document or with another haystack document stays
far below the 0.5 of a near-duplicate (a dev document of ~15 sentences shares at most ~1/15 of
them). The dev records sit at positions drawn at random (seed fixed) among the haystack.
``--lang zh-short`` hides the short reviews of zh_short.jsonl (8-60 characters) among short
texts pieced together from random bits of the zh sentences (``short_haystack``): the corpus of
the exact prefix search alone, which keeps every shingle set of it.

The corpus is written a document at a time (memory bounded at any size; sentences drawn in
bulk with numpy, each kept as its JSON escape, so a line is joined, never encoded) and cached
in ``--corpus-dir`` as ``<lang>_<size>.g<GENERATOR>.jsonl`` beside ``.dev.json`` (the dev
records' line numbers, and the build time); a cached corpus of the same generator is reused.

Scores: pairwise precision / recall / F1 of the pairs each method outputs, on the dev records
only (pairs with a haystack document are ignored; ``neardup.eval.evaluate``: pairs involving
heavy copies are left out). For the candidate designs also the recall of their candidates
against the brute-force pairs of shingle Jaccard >= 0.5 among the dev records. Candidates per
document: the pairs each method checks (``DedupResult.candidates`` for ``neardup`` and
``simhash``), rensa's LSH hits, datatrove's bucket matches (unchecked: they are its pairs).

Runs. Each method runs in a subprocess of its own (``--worker``): ``neardup`` and ``simhash``
call ``neardup.dedup.pipeline.dedup_documents`` on ``neardup.io.read.read_records`` of the
corpus, as ``neardup dedup`` does (``--memory`` is ``DedupSettings(memory=)``, ``neardup
dedup --memory``); rensa sketches the corpus as it reads it (5-character shingles of Chinese,
3-word shingles else, 128 permutations, LSH bands by datasketch's rule, candidates checked on
the sketch Jaccard >= 0.5); datatrove runs its four documented stages (``scale_peers.py``),
and the driver then joins its bucket matches into its clusters (``datatrove_pairs``).
``--baseline-src SRC`` runs neardup's defaults once more from another tree (a ``git worktree``
of the commit compared against, on ``PYTHONPATH``) right after this tree's, as the row
``baseline``, on the same corpus and scored the same way (``--baseline-memory default`` for a
tree whose dedup has no memory budget).
Seconds: wall-clock of the worker from start to exit (imports and reading the corpus included,
and for all but datatrove picking the dev pairs out of the output), its own stages in brackets.
Peak memory: the largest resident size of any one process of the worker's tree (the worker,
and neardup's or datatrove's worker processes; a forked worker counts the pages it shares with
its parent): every 0.2 s the driver walks /proc for the tree and reads each process's VmHWM
(the kernel's exact high-water mark, so only growth in a process's last 0.2 s can be missed),
and the worker reports its own VmHWM as it ends (exact). Not ``ru_maxrss`` of wait4 or
RUSAGE_CHILDREN: a child started by Popen's vfork starts at the driver's peak. Methods that
hold the whole corpus in memory are skipped, with the reason printed, where their peak per
document measured (``KB_PER_DOCUMENT``) would pass half of the machine's memory.

Building the corpus ran at 75,000-80,000 (zh) and 91,000 (en) documents/s at 200,000 on a quiet
moment of the 2 shared cores, 34,000 (zh) under load (nice 19): 2-5 minutes at 10^7, in ~18 GB
(zh; en ~11 GB) of ``--corpus-dir``.

    nice -n 19 python3 benchmarks/scale_quality.py --size 20000 --lang zh
    nice -n 19 python3 benchmarks/scale_quality.py --size 200000 --lang zh --methods neardup rensa datatrove
    nice -n 19 python3 benchmarks/scale_quality.py --size 10000000 --lang zh --corpus-dir /data/corpora \\
        --methods neardup datatrove --memory 1G
    python3 benchmarks/scale_quality.py --size 1000000 --lang zh-short --methods neardup
    python3 benchmarks/scale_quality.py --size 1000000 --lang both --methods neardup \
        --baseline-src /tmp/base/src --baseline-memory default   # against an older tree

Peers (issue 30): ``pip install rensa==0.5.0 datatrove==0.10.1 spacy==3.8.18 tokenizers``
(``datatrove.pipeline.dedup`` imports tokenizers; its word tokenizers are spaCy's, Chinese
segmented by jieba, a neardup dependency; datatrove's huggingface-hub needs click >= 8.4.2).
Measured with rensa 0.5.0, datatrove 0.10.1, spaCy 3.8.18, tokenizers 0.23.3, xxhash 4.1.0
(datatrove's wrappers patched for it, see ``scale_peers.py``), numpy 2.4.6, Python 3.11.7.
"""

from __future__ import annotations

import argparse
import bisect
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from neardup.dedup.candidates import CandidateSearch, CandidateSettings
from neardup.dedup.clusters import components
from neardup.eval.metrics import Gold, Prediction, Scores, evaluate
from neardup.similarity.verify import Shingles, Verifier
from neardup.text.normalize import Normalizer

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
METHODS = ("oph", "segments", "minhash", "neardup", "simhash", "rensa", "datatrove")
#: What each peer imports, and the line that installs it.
PEERS = {
    "rensa": (("rensa",), "rensa==0.5.0"),
    "datatrove": (("datatrove", "spacy", "tokenizers"), "datatrove==0.10.1 spacy==3.8.18 tokenizers"),
}
#: The haystack generator; a cached corpus of another version is built again.
GENERATOR = 2
CHUNK = 4096
VERIFY_CHUNK = 1 << 16
POLL_SECONDS = 0.2
HEADER = f"{'peak MB':>8s} {'cand/doc':>9s}"
#: Peak resident kB per document of the methods that hold the whole corpus in memory (the rise
#: of the peak from 22,118 to 202,118 zh documents; segments and minhash from 4,118 to 22,118,
#: minhash then taken as oph's, which it exceeds). rensa: 6 kB, its peak at 10^6 documents in
#: docs/candidates.md (5.7-5.8 GB, texts held then), where this worker, which keeps no texts,
#: rose by 3.1 kB a document to 200,000: nothing above 200,000 was run here, so the larger.
KB_PER_DOCUMENT = {"rensa": 6.0, "simhash": 1.9, "oph": 8.1, "minhash": 8.1, "segments": 63.0}
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


class _Stream:
    """Uniform draws of ``high`` values, made ``block`` at a time, read in order; ``sums`` are
    running totals of ``weights`` of the draws (for finding where a length is reached)."""

    def __init__(self, rng: np.random.Generator, high: int, block: int, weights: np.ndarray) -> None:
        self.rng, self.high, self.block, self.weights = rng, high, block, weights
        self.values: list[int] = []
        self.sums: list[int] = []
        self.at = 0

    def more(self) -> None:
        """Drop what was read and draw another block."""
        offset = self.sums[self.at - 1] if self.at else 0
        drawn = self.rng.integers(0, self.high, self.block)
        sums = np.cumsum(self.weights[drawn]) + (self.sums[-1] - offset if self.sums else 0)
        self.values = self.values[self.at :] + drawn.tolist()
        self.sums = [s - offset for s in self.sums[self.at :]] + sums.tolist()
        self.at = 0


def haystack(lang: str, lengths: Sequence[int], seed: int = 7) -> Iterator[str]:
    """Haystack documents without end (docstring), each as its JSON string escape (no quotes).

    The sentences of a document are the draws until their lengths reach its target; when two
    of them share a source the document is redrawn from the same draws one at a time, skipping
    repeats, which is the rejection rule of drawing them one at a time in the first place."""
    pool = sentence_pool(lang)
    sources = [source for source, _ in pool]
    escaped = [json.dumps(sentence, ensure_ascii=False)[1:-1] for _, sentence in pool]
    sizes = np.array([len(sentence) for _, sentence in pool], dtype=np.int64)
    source_of, text_of = sources.__getitem__, escaped.__getitem__
    joiner = "" if lang == "zh" else " "
    rng = np.random.default_rng(seed)
    targets = np.asarray(lengths, dtype=np.int64)
    per_document = int(targets.mean() / sizes.mean()) + 2
    draws = _Stream(rng, len(pool), CHUNK * per_document, sizes)
    steps = _Stream(rng, 3, CHUNK * per_document, np.ones(3, dtype=np.int64))
    while True:
        for target in targets[rng.integers(0, len(targets), CHUNK)].tolist():
            if draws.at + 4 * per_document > len(draws.values):
                draws.more()
            start = draws.at
            base = draws.sums[start - 1] if start else 0
            end = bisect.bisect_left(draws.sums, base + target, lo=start)
            while end == len(draws.sums):  # a long target past the draws made
                draws.more()
                start, base = 0, 0
                end = bisect.bisect_left(draws.sums, target)
            chosen = draws.values[start : end + 1] if target > 0 else []
            if len(set(map(source_of, chosen))) == len(chosen):
                draws.at = start + len(chosen)
            else:
                chosen = _one_at_a_time(draws, sources, sizes, target)
            if steps.at + len(chosen) > len(steps.values):
                steps.more()
            texts, paragraphs, low = list(map(text_of, chosen)), [], 0
            while low < len(texts):
                step = steps.values[steps.at] + 3
                steps.at += 1
                paragraphs.append(joiner.join(texts[low : low + step]))
                low += step
            yield "\\n".join(paragraphs)


def short_haystack(lengths: Sequence[int], seed: int = 7) -> Iterator[str]:
    """Short haystack documents without end (``--lang zh-short``), each as its JSON string
    escape: a length drawn from the dev set's (zh_short: reviews of 8-60 characters), filled
    with pieces of 4-12 characters cut at random places from random sentences of the zh pool,
    then cut to that length. Two documents share a piece only by chance, so their character
    bigram Jaccard stays far below 0.5; the dev records sit among them as in ``haystack``."""
    pool = [sentence for _, sentence in sentence_pool("zh")]
    sizes = np.array([len(sentence) for sentence in pool], dtype=np.int64)
    rng = np.random.default_rng(seed)
    targets = np.asarray(lengths, dtype=np.int64)
    while True:
        chosen = targets[rng.integers(0, len(targets), CHUNK)]
        pieces = int(chosen.sum() // 4) + CHUNK
        sentences = rng.integers(0, len(pool), pieces)
        widths = rng.integers(4, 13, pieces)
        starts = (rng.random(pieces) * np.maximum(1, sizes[sentences] - widths + 1)).astype(np.int64)
        at = 0
        for target in chosen.tolist():
            text = ""
            while len(text) < target:
                start = int(starts[at])
                text += pool[int(sentences[at])][start : start + int(widths[at])]
                at += 1
            yield json.dumps(text[:target], ensure_ascii=False)[1:-1]


def _one_at_a_time(draws: _Stream, sources: list[int], sizes: np.ndarray, target: int) -> list[int]:
    """Draws in order, a repeated source skipped, until the lengths reach ``target``."""
    used: set[int] = set()
    chosen: list[int] = []
    total = 0
    while total < target:
        if draws.at == len(draws.values):
            draws.more()
        k = draws.values[draws.at]
        draws.at += 1
        if sources[k] not in used:
            used.add(sources[k])
            chosen.append(k)
            total += int(sizes[k])
    return chosen


@dataclass(frozen=True)
class Corpus:
    """A built corpus: its file, the dev records, the dev records' line numbers, its documents,
    the seconds building took and whether it came from the cache."""

    path: Path
    dev: list[dict[str, Any]]
    positions: dict[int, str]
    documents: int
    seconds: float
    reused: bool


def read_dev(lang: str) -> list[dict[str, Any]]:
    name = {"zh": "zh_news", "en": "en_news", "zh-short": "zh_short"}[lang]
    with (SHARED / "dev" / f"{name}.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def manifest_of(path: Path) -> Path:
    return path.with_suffix(".dev.json")


def corpus(lang: str, size: int, folder: Path) -> Corpus:
    """The corpus of ``lang`` with ``size`` haystack documents in ``folder``, built there (a
    document at a time) unless it is there already."""
    dev = read_dev(lang)
    path = folder / f"{lang}_{size}.g{GENERATOR}.jsonl"
    reused = path.exists() and manifest_of(path).exists()
    if not reused:
        write_corpus(lang, size, dev, path)
    manifest = json.loads(manifest_of(path).read_text(encoding="utf-8"))
    positions = {int(line): name for line, name in manifest["dev"]}
    return Corpus(path, dev, positions, manifest["documents"], manifest["seconds"], reused)


def write_corpus(lang: str, size: int, dev: list[dict[str, Any]], path: Path) -> None:
    """Write the corpus and its manifest under temporary names, then rename them (the corpus
    last), so an interrupted build is never taken for a cached one."""
    start = time.perf_counter()
    rng = np.random.default_rng(11)
    total = size + len(dev)
    lines = np.sort(rng.choice(total, size=len(dev), replace=False)).tolist()
    order = rng.permutation(len(dev)).tolist()
    rows = [dev[k] for k in order]
    lengths = [len(record["text"]) for record in dev]
    bodies = short_haystack(lengths) if lang == "zh-short" else haystack(lang, lengths)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    buffer: list[str] = []
    hay = placed = 0
    with partial.open("w", encoding="utf-8") as out:
        for line, row in zip([*lines, total], [*rows, None], strict=True):
            while hay + placed < line:  # haystack documents up to the next dev record's line
                buffer.append(f'{{"id": "hay-{hay:08d}", "title": "", "text": "{next(bodies)}"}}\n')
                hay += 1
                if len(buffer) >= CHUNK:  # a dev record may have taken it past CHUNK
                    out.write("".join(buffer))
                    buffer.clear()
            if row is not None:
                record = {"id": row["id"], "title": row.get("title", ""), "text": row["text"]}
                buffer.append(json.dumps(record, ensure_ascii=False) + "\n")
                placed += 1
        out.write("".join(buffer))
    manifest = {
        "lang": lang,
        "size": size,
        "generator": GENERATOR,
        "documents": total,
        "seconds": time.perf_counter() - start,
        "dev": [[line, row["id"]] for line, row in zip(lines, rows, strict=True)],
    }
    manifest_partial = partial.with_suffix(".dev.json")
    manifest_partial.write_text(json.dumps(manifest), encoding="utf-8")
    os.replace(manifest_partial, manifest_of(path))
    os.replace(partial, path)


def build_corpus(lang: str, size: int, folder: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The corpus file of ``lang`` with ``size`` haystack documents in ``folder``, and the dev
    records (``corpus`` for the rest)."""
    built = corpus(lang, size, folder)
    return built.path, built.dev


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
    from neardup.similarity.shingles import shingles_of  # here, so a baseline tree need not have it

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
    """Sketches made as the corpus is read (no texts kept), then the LSH and its check."""
    from rensa import RMinHash, RMinHashLSH  # type: ignore[import-untyped]

    seconds: dict[str, float] = {}
    start = time.perf_counter()
    sketches, dev = [], {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if not row["id"].startswith("hay-"):
                dev[len(sketches)] = row["id"]
            sketch = RMinHash(num_perm=128, seed=42)
            sketch.update(rensa_shingles(row["text"]))
            sketches.append(sketch)
    seconds["read+sketch"] = time.perf_counter() - start
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
    pairs = [[dev[a], dev[b]] for a, b in found if a in dev and b in dev]
    return {"seconds": seconds, "documents": len(sketches), "candidates": candidates, "pairs": pairs}


class StageLog:
    """neardup's progress as lines on stderr (the worker's log): each stage's start and then a
    line a minute, with the records done, this process's resident and peak MB and its
    workers' largest peak, so a long run shows where its time and memory go (and where it
    was, if it is stopped)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.stage, self.done, self.total, self.last = "", 0, None, 0.0

    def __call__(self, stage: str, advance: int, total: int | None) -> None:
        now = time.perf_counter()
        if stage != self.stage:
            self.stage, self.done, self.last = stage, 0, 0.0
        self.done += advance
        self.total = total if total is not None else self.total
        if advance == 0 or now - self.last >= 60:
            self.last = now
            of = f" of {self.total:,}" if self.total else ""
            me = os.getpid()
            resident, peak = _high_water_kb(me, "VmRSS:") // 1024, _high_water_kb(me) // 1024
            workers = [pid for pid, parent in _parents().items() if parent == me]
            largest = max((_high_water_kb(pid) for pid in workers), default=0) // 1024
            print(
                f"{now - self.start:8.1f} s  {stage}: {self.done:,}{of}  rss {resident:,} MB "
                f"(peak {peak:,} MB; workers now {len(workers)}, their largest peak {largest:,} MB)",
                file=sys.stderr,
                flush=True,
            )


def run_neardup(path: Path, search: str | None = None, memory: int | None = None) -> dict[str, Any]:
    """``dedup_documents`` on the records ``neardup dedup`` reads: the default search, or
    ``search="simhash"`` (``--search simhash``, the default before the shingle LSH)."""
    from neardup.dedup.pipeline import DedupSettings, dedup_documents
    from neardup.io.read import read_records

    chosen = {"search": search, "memory": memory}
    settings = DedupSettings(**{name: value for name, value in chosen.items() if value is not None})
    result = dedup_documents(read_records(path), settings=settings, progress=StageLog())
    ids = result.ids
    dev = np.array([not str(name).startswith("hay-") for name in ids])
    i, j = result.pairs.i, result.pairs.j
    inside = dev[i] & dev[j]
    pairs = [[ids[a], ids[b]] for a, b in zip(i[inside].tolist(), j[inside].tolist(), strict=True)]
    return {"seconds": result.seconds, "documents": len(ids), "candidates": result.candidates, "pairs": pairs}


def worker(method: str, path: Path, out: Path, memory: int | None) -> None:
    if method == "neardup":
        result = run_neardup(path, memory=memory)
    elif method == "simhash":
        result = run_neardup(path, search="simhash")
    elif method == "rensa":
        result = run_rensa(path)
    elif method == "datatrove":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from scale_peers import run_datatrove

        manifest = json.loads(manifest_of(path).read_text(encoding="utf-8"))
        result = run_datatrove(path, manifest["lang"], manifest["documents"], out.with_suffix(".work"))
    else:
        result = run_candidates(method, path)
    result["peak_kb"] = _high_water_kb(os.getpid())  # exact, where polling may miss the end
    out.write_text(json.dumps(result), encoding="utf-8")


# -- measuring a worker ------------------------------------------------------------------------


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process in /proc."""
    parents = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", encoding="utf-8") as handle:
                    parents[int(entry.name)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def _high_water_kb(pid: int, field: str = "VmHWM:") -> int:
    """VmHWM (or ``field``) of ``pid`` in kB (0 when it is gone or a zombie)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreePeak(threading.Thread):
    """Polls the VmHWM of every process descending from ``root`` until stopped."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.peaks: dict[int, int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while True:
            self.sample()
            if self.done.wait(POLL_SECONDS):
                return

    def sample(self) -> None:
        children: dict[int, list[int]] = defaultdict(list)
        for pid, parent in _parents().items():
            children[parent].append(pid)
        todo = [self.root]
        while todo:
            pid = todo.pop()
            self.peaks[pid] = max(self.peaks.get(pid, 0), _high_water_kb(pid))
            todo.extend(children.get(pid, ()))

    def stop(self) -> int:
        """The largest peak of any process seen, in kB."""
        self.done.set()
        self.join()
        return max(self.peaks.values(), default=0)


def measured(command: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[int, float, float]:
    """Run ``command`` (stderr to ``log``): exit status, wall seconds and the largest polled
    peak resident MB of its processes. (Not ``ru_maxrss`` from wait4: Popen's vfork makes the
    child's start at the driver's own peak.)"""
    with log.open("wb") as errors:
        start = time.perf_counter()
        process = subprocess.Popen(command, stderr=errors, env=env)
        watch = TreePeak(process.pid)
        watch.start()
        status = process.wait()
        seconds = time.perf_counter() - start
        peak = watch.stop()
    return status, seconds, peak / 1024


# -- the driver --------------------------------------------------------------------------------


def datatrove_pairs(folder: Path, tasks: int, positions: dict[int, str]) -> tuple[list[list[str]], int]:
    """Every pair of dev records (``positions``: line -> id) in one of datatrove's clusters, and
    its bucket matches: the ``.dups`` records (task, index, task, index) of uint32, joined as
    ``MinhashDedupCluster`` joins them (connected components)."""
    parts = [np.fromfile(path, dtype="<u4").reshape(-1, 4) for path in sorted(folder.glob("*.dups"))]
    found = np.concatenate(parts).astype(np.int64) if parts else np.empty((0, 4), dtype=np.int64)
    ends = np.concatenate([found[:, 1] * tasks + found[:, 0], found[:, 3] * tasks + found[:, 2]])
    nodes, inverse = np.unique(ends, return_inverse=True)
    labels = components(len(nodes), inverse[: len(found)], inverse[len(found) :])
    groups: dict[int, list[str]] = defaultdict(list)
    for node, label in zip(nodes.tolist(), labels.tolist(), strict=True):
        if node in positions:
            groups[label].append(positions[node])
    pairs = [list(pair) for group in groups.values() for pair in combinations(sorted(group), 2)]
    return pairs, len(found)


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


def score(dev: list[dict[str, Any]], pairs: list[list[str]]) -> Scores:
    position = {record["id"]: k for k, record in enumerate(dev)}
    gold = Gold.from_labels([r["cluster"] for r in dev], [r["level"] for r in dev])
    i = [position[a] for a, _ in pairs]
    j = [position[b] for _, b in pairs]
    return evaluate(gold, Prediction.from_pairs(i, j))


def memory_total_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    return 0


def too_big(method: str, documents: int) -> str | None:
    """Why ``method`` is skipped at ``documents`` (it would not fit), or None."""
    per_document = KB_PER_DOCUMENT.get(method)
    if per_document is None:
        return None
    need, have = per_document * documents, memory_total_kb() / 2
    if need <= have:
        return None
    return (
        f"it holds the corpus in memory, ~{per_document:g} kB a document: ~{need / 2**20:.1f} GB "
        f"at {documents:,} documents, past half of this machine's {2 * have / 2**20:.0f} GB"
    )


def measure(
    method: str,
    built: Corpus,
    truth: set[tuple[str, str]],
    work: Path,
    memory: int | None,
    src: Path | None = None,
) -> dict[str, Any]:
    """One method's run and scores; with ``src``, neardup's defaults run from that tree (the
    row ``baseline``), its budget left to the tree when it has none."""
    label = "baseline" if src else method
    out = work / f"{label}.json"
    command = [sys.executable, __file__, "--worker", method, "--corpus", str(built.path), "--out", str(out)]
    if method == "neardup" and memory is not None:
        command += ["--memory", str(memory)]
    env = {**os.environ, "PYTHONPATH": str(src)} if src else None
    status, seconds, peak = measured(command, work / f"{label}.log", env)
    if status:
        tail = (work / f"{label}.log").read_text(encoding="utf-8", errors="replace").splitlines()[-30:]
        raise SystemExit(f"{label} failed with status {status}:\n" + "\n".join(tail))
    result = json.loads(out.read_text(encoding="utf-8"))
    peak = max(peak, result["peak_kb"] / 1024)
    if method == "datatrove":
        buckets = out.with_suffix(".work") / "buckets"
        result["pairs"], result["candidates"] = datatrove_pairs(buckets, result["tasks"], built.positions)
    scores = score(built.dev, result["pairs"])
    row = {
        "method": label,
        "f1": scores.f1,
        "precision": scores.precision,
        "recall": scores.recall,
        "seconds": seconds,
        "stages": result["seconds"],
        "peak_mb": peak,
        "candidates_per_doc": result["candidates"] / result["documents"],
    }
    if "candidate_pairs" in result:
        found = {tuple(sorted(pair)) for pair in result["candidate_pairs"]}
        row["candidate_recall"] = len(truth & found) / len(truth) if truth else 1.0
    return row


def progress(text: str) -> None:
    print(f"scale_quality: {text}", file=sys.stderr, flush=True)


def size_in_bytes(value: str) -> int:
    """``--memory``: bytes, or a size such as 512M or 4G, as ``neardup dedup --memory`` reads it."""
    import click

    from neardup.cli.common import parse_size
    from neardup.dedup.workspace import MIN_MEMORY

    try:
        size = parse_size(None, None, value)  # type: ignore[arg-type]
    except click.BadParameter as error:
        raise argparse.ArgumentTypeError(error.message) from None
    if size < MIN_MEMORY:
        raise argparse.ArgumentTypeError(f"{value!r} is below the {MIN_MEMORY >> 20}M a run needs")
    return size


def print_row(row: dict[str, Any]) -> None:
    stages = ", ".join(f"{name} {value:.1f}" for name, value in row["stages"].items())
    recall = f"  candidate recall {row['candidate_recall']:.4f}" if "candidate_recall" in row else ""
    print(
        f"  {row['method']:9s} {row['f1']:6.4f} {row['precision']:9.4f} {row['recall']:6.4f} "
        f"{row['seconds']:9.1f} {row['peak_mb']:8.0f} {row['candidates_per_doc']:9.2f}  ({stages}){recall}",
        flush=True,
    )


def run_language(lang: str, args: argparse.Namespace, folder: Path, work: Path) -> None:
    progress(f"{lang}: the corpus ({args.size:,} haystack documents) in {folder}")
    built = corpus(lang, args.size, folder)
    truth = brute_force(built.dev)
    how = "reused, built" if built.reused else "built"
    rate = (built.documents - len(built.dev)) / built.seconds if built.seconds else 0.0
    print(
        f"\n{lang}: {len(built.dev):,} dev + {args.size:,} haystack documents ({how} in "
        f"{built.seconds:.1f} s, {rate:,.0f} haystack documents/s); {len(truth)} dev pairs of Jaccard >= 0.5"
    )
    print(f"  {'method':9s} {'F1':>6s} {'precision':>9s} {'recall':>6s} {'seconds':>9s} {HEADER}")
    for method in args.methods:
        reason = too_big(method, built.documents)
        if reason:
            print(f"  {method:9s} skipped: {reason}", flush=True)
            continue
        progress(f"{lang}: {method}")
        print_row(measure(method, built, truth, work, args.memory))
        keep_log(args.logs, work, f"{lang}_{args.size}", method)
        if method == "neardup" and args.baseline_src:
            progress(f"{lang}: neardup from {args.baseline_src}")
            memory = None if args.baseline_memory == "default" else args.memory
            print_row(measure(method, built, truth, work, memory, args.baseline_src))
            keep_log(args.logs, work, f"{lang}_{args.size}", "baseline")


def keep_log(logs: Path | None, work: Path, run: str, label: str) -> None:
    if logs:
        logs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(work / f"{label}.log", logs / f"{run}.{label}.log")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=20_000, help="haystack documents (default 20000)")
    parser.add_argument(
        "--lang",
        choices=("zh", "en", "both", "zh-short"),
        default="both",
        help="both: zh and en news; zh-short: the short reviews of zh_short among short texts",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=METHODS,
        default=["neardup", "rensa"],
        help="default: neardup rensa (the candidate designs oph, segments, minhash take long past 2e5)",
    )
    parser.add_argument(
        "--corpus-dir",
        type=Path,
        help="where corpora are built and kept, by language, size and generator version, for the "
        "next run to reuse (default: a temporary directory removed at the end)",
    )
    parser.add_argument(
        "--memory",
        type=size_in_bytes,
        default="4G",
        help="neardup's memory budget, as neardup dedup --memory SIZE: what its search holds in "
        "memory before it spills to files (default 4G)",
    )
    parser.add_argument(
        "--logs",
        type=Path,
        help="keep each run's log here as <lang>_<size>.<method>.log (neardup's lines: each "
        "stage's start, then a line a minute with records done and resident and peak MB); "
        "default: removed with the run",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="also run neardup's defaults from this src folder (a git worktree of the commit "
        "compared against), right after neardup, as the row 'baseline'",
    )
    parser.add_argument(
        "--baseline-memory",
        choices=("same", "default"),
        default="same",
        help="same: the baseline gets --memory too; default: it runs with its own defaults "
        "(for a tree whose dedup had no memory budget)",
    )
    parser.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.corpus, args.out, args.memory)
        return
    for method, (modules, install) in PEERS.items():
        missing = [name for name in modules if importlib.util.find_spec(name) is None]
        if method in args.methods and missing:
            print(f"{', '.join(missing)} not installed, so {method} is left out: pip install {install}")
            args.methods = [name for name in args.methods if name != method]
    with tempfile.TemporaryDirectory(prefix="scale_quality-") as temporary:
        folder = args.corpus_dir or Path(temporary) / "corpora"
        folder.mkdir(parents=True, exist_ok=True)
        for lang in ("zh", "en") if args.lang == "both" else (args.lang,):
            work = Path(temporary) / f"{lang}-runs"
            work.mkdir()
            run_language(lang, args, folder, work)
            shutil.rmtree(work)


if __name__ == "__main__":
    main()

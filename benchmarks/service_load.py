"""Load test of ``neardup serve``: many concurrent clients on loopback, then an exact audit.

For each store (SQLite in a temp file, Redis started on 127.0.0.1 by scripts/servers.py and
stopped by PID at the end), a real ``neardup serve`` process (default settings: the band
index, 64-bit fingerprints) takes ``--clients`` concurrent clients for ``--seconds``. Each
client has its own keep-alive connection and loops: POST /v1/check of the next fresh
document, or (``--query-share`` of the time) POST /v1/query of a document already
acknowledged. With ``--baseline`` each store runs again with ``--max-batch 1`` (one request
per store call), so the ratio shows what coalescing concurrent requests into batch store
calls buys. With ``--workers N`` (N > 1) each store also runs with ``neardup serve --workers
N``: N server processes on one port and one store.

The documents are families: an original (a People's Daily paragraph or a Reuters story from
shared/data, or, once those are used up, a new paragraph of sentences of several of them)
and 0-3 planted copies made by light edits (a character or the final punctuation changed or
deleted, case and whitespace changes). Which answers are right depends on the index the
service creates, and the families are chosen under the rule of that index, so the answer of
every check is known exactly. By default that is the band index ``neardup serve`` creates:
a stored record is a near-duplicate of a new text when the two share one of the 16 band keys
of their 512-byte text sketches and the sketches estimate their shingle Jaccard at 0.5 or
more. The corpus computes the same sketches and keys with the library's own functions; a
copy is kept only when it shares a band key with every member of its family at a similarity
of 0.6 or more (any member may arrive first, and each later one must match an earlier one),
and a family is dropped when any of its documents shares a band key with another family's at
0.4 or more (the service decides on the very same sketches, so the margins of 0.1 around its
threshold are a safeguard, not a necessity). With ``--index
simhash`` the service runs a Simhash block index instead (``-k 3 --verify none``, its
default before band indexes) and the rule is the old one: copies within 3 bits of every
family member, families more than 3 bits from every other family. The audit checks first
that the service created the index the corpus assumes. Families arrive interleaved, their
members sometimes seconds apart and sometimes at once.

After the server stops (SIGTERM), the store is opened directly and audited: every
acknowledged add is stored exactly once with the cluster id the service answered, every
family shares one cluster started by its first stored member and every later member was
answered duplicate=true, no answer matched another family, and every query found its own
document. Any FAIL (or any non-2xx answer) makes the exit status 1.

The clients run in ``--processes`` load processes (default 2, one asyncio loop each, uvloop
when installed), on the same cores as the server: the CPU use of the clients, the service,
the Redis server and the whole machine is printed beside the figures, so a saturated load
generator is visible. On a 2-core machine one load process (~0.7 cores busy) drives the
service 10-15 % below two.

    python3 benchmarks/service_load.py                          # sqlite and redis, 64 clients, 60 s
    python3 benchmarks/service_load.py --quick --stores sqlite  # 10 s per run
    python3 benchmarks/service_load.py --seconds 20 --no-baseline --query-share 0.5
    python3 benchmarks/service_load.py --quick --index simhash  # a k = 3 Simhash block index
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
from store_speed import load_servers

from neardup import (
    BandScheme,
    FingerprintConfig,
    Fingerprinter,
    SimhashIndex,
    Verifier,
    find_all_pairs,
    to_ints,
)
from neardup.similarity.sketches import sketch_similarity

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
STORES = ["sqlite", "redis"]
#: The Simhash ground truth of ``--index simhash``: the k of `neardup serve -k 3 --verify none`.
MAX_DISTANCE = 3
#: The band ground truth: a copy stays when its sketch similarity to every member of its
#: family is at least KEEP_SIMILARITY, and a family is dropped when one of its documents
#: shares a band key with another family's at DROP_SIMILARITY or more: 0.1 on either side of
#: the band index's threshold (0.5), whose decision the service takes on the same sketches.
KEEP_SIMILARITY = 0.6
DROP_SIMILARITY = 0.4
#: Sketch pairs compared at a time (two (n, 512) byte temporaries).
PAIR_CHUNK = 65_536
#: Documents prepared per second of run: twice the best rate seen on loopback, so the run never runs out.
DOCS_PER_SECOND = 2000
FINGERPRINT_CHUNK = 4096
MIN_CHARS = 40  # shorter paragraphs (headlines, bylines) are left out
#: A new original (once the base texts are used up) has at least this many sentences.
MIN_SENTENCES = 3
MIN_SENTENCE_CHARS = 10  # shorter pieces of a split are not sentences
#: Where English and Chinese texts split into sentences.
SPLITTERS = (re.compile(r"(?<=[.!?])\s+(?=[A-Z\"])"), re.compile(r"(?<=[。！？])"))
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
REQUEST_TIMEOUT = 120.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# -- corpus ------------------------------------------------------------------------------------


@dataclass
class Corpus:
    """Documents in arrival order, each ``(id, text)``, the family of every id, and the
    ground truth (the index the service is run with) the families were chosen under."""

    documents: list[tuple[str, str]]
    family: dict[str, int]
    families: int
    planted: int
    dropped_copies: int
    dropped_families: int
    truth: Truth


def base_texts() -> tuple[list[str], list[str]]:
    """(English, Chinese) texts from shared/data/raw, else from shared/data/dev."""
    english: list[str] = []
    chinese: list[str] = []
    raw_en, raw_zh = DATA / "raw" / "en_reuters.jsonl", DATA / "raw" / "zh_news.txt"
    if raw_en.exists():
        english = [json.loads(line)["text"] for line in raw_en.open(encoding="utf-8") if line.strip()]
    elif (DATA / "dev" / "en_news.jsonl").exists():
        english = [
            json.loads(line)["text"] for line in (DATA / "dev" / "en_news.jsonl").open(encoding="utf-8")
        ]
    if raw_zh.exists():
        chinese = [line.strip() for line in raw_zh.open(encoding="utf-8")]
    elif (DATA / "dev" / "zh_news.jsonl").exists():
        chinese = [
            json.loads(line)["text"] for line in (DATA / "dev" / "zh_news.jsonl").open(encoding="utf-8")
        ]
    english = [text.strip() for text in english if len(text.strip()) >= MIN_CHARS]
    chinese = [text for text in chinese if len(text) >= MIN_CHARS]
    if not english and not chinese:
        sys.exit(
            f"service_load: no documents: expected {raw_en}, {raw_zh} or dev/en_news.jsonl and "
            f"dev/zh_news.jsonl under {DATA} (see {DATA / 'README.txt'})"
        )
    return english, chinese


def originals(english: list[str], chinese: list[str], rng: random.Random) -> Iterator[str]:
    """Every base text once (shuffled), then new paragraphs of sentences of several of them.

    Whole base texts joined (as this benchmark used to make its later originals) share about
    half their shingles with each text they join, which a band index rightly finds, so nearly
    all of them were dropped. A new paragraph instead takes each of its sentences from a
    different place of a shuffled list of the language's distinct sentences (reshuffled when
    used up) until it has at least MIN_SENTENCES, is as long as a random base text of its
    language, and no sentence is more than 1/MIN_SENTENCES of it: what it shares with a base
    text or another new paragraph is (nearly always) one sentence, under a third of it, below
    DROP_SIMILARITY.
    """
    english_sentences, chinese_sentences = SPLITTERS
    pools = [
        (pool, joiner, splitter)
        for pool, joiner, splitter in ((english, " ", english_sentences), (chinese, "", chinese_sentences))
        if pool
    ]
    first = [text for pool, *_ in pools for text in pool]
    rng.shuffle(first)
    yield from first
    sentences = [_sentences(pool, splitter) for pool, _, splitter in pools]
    queues: list[list[str]] = [[] for _ in pools]
    while True:
        which = rng.randrange(len(pools))
        (pool, joiner, _), queue = pools[which], queues[which]
        length = len(pool[rng.randrange(len(pool))])
        parts: list[str] = []
        while (
            len(parts) < MIN_SENTENCES
            or sum(map(len, parts)) < length
            or max(map(len, parts)) * MIN_SENTENCES > sum(map(len, parts))
        ):
            if not queue:
                queue.extend(sentences[which])
                rng.shuffle(queue)
            parts.append(queue.pop())
        yield joiner.join(parts)


def _sentences(texts: list[str], splitter: re.Pattern[str]) -> list[str]:
    """The distinct sentences of ``texts`` (in first-seen order), fragments left out."""
    found = (sentence.strip() for text in texts for sentence in splitter.split(text))
    return list(dict.fromkeys(sentence for sentence in found if len(sentence) >= MIN_SENTENCE_CHARS)) or [
        text.strip() for text in texts
    ]


PUNCTUATION = "。！？，、；：.!?,;:"
SWAPS = {"。": "！", "！": "。", "？": "。", "，": "、", "、": "，", ".": "!", "!": ".", "?": ".", ",": ";"}


def edit(text: str, rng: random.Random) -> str:
    """One light edit: final punctuation changed or dropped, 1-2 characters deleted or
    replaced, a case change or a whitespace change."""
    kind = rng.choice(("punctuation", "delete", "replace", "case", "space"))
    if kind == "punctuation":
        tail = max(0, len(text) - 12)
        spots = [at for at in range(tail, len(text)) if text[at] in PUNCTUATION]
        if not spots:
            return text + ("." if text.isascii() else "。")
        at = spots[-1]
        return text[:at] + SWAPS.get(text[at], "") + text[at + 1 :]
    if kind in ("delete", "replace"):
        chars = list(text)
        for _ in range(rng.choice((1, 2))):
            at = rng.randrange(len(chars))
            if kind == "delete":
                del chars[at]
            else:
                chars[at] = chars[rng.randrange(len(chars))]
        return "".join(chars)
    if kind == "case" and text.isascii():
        words = text.split(" ")
        at = rng.randrange(len(words))
        words[at] = words[at].swapcase() if rng.random() < 0.5 else words[at].upper()
        return " ".join(words)
    # whitespace: a doubled space, a newline turned into a space, or surrounding blanks
    choice = rng.randrange(3)
    if choice == 0 and " " in text:
        at = text.index(" ", rng.randrange(len(text) - text[::-1].index(" ")))
        return text[:at] + "  " + text[at + 1 :]
    if choice == 1 and "\n" in text:
        return text.replace("\n", " ", 1)
    return "  " + text + "\n"


class BandTruth:
    """Ground truth for the index ``neardup serve`` creates by default, a band index: a stored
    record is a near-duplicate of a new text when the two share one of the 16 band keys of
    their 512-byte text sketches and the sketches estimate their shingle Jaccard at 0.5 or
    more (``--verify sketch``). Sketches and band keys are made here by the very functions the
    service uses (``Verifier("sketch").signatures``, ``BandScheme.keys``), so a shared key is
    known exactly; the similarity keeps a margin on both sides of the threshold all the same.
    """

    name = "bands"
    serve_options: tuple[str, ...] = ()  # the default index

    def __init__(self) -> None:
        self.verifier = Verifier("sketch")
        self.scheme = BandScheme()

    @property
    def rule(self) -> str:
        return (
            f"each sharing a band key with every member of its family at sketch similarity "
            f">= {KEEP_SIMILARITY}; no document sharing a band key with another family's at "
            f">= {DROP_SIMILARITY}"
        )

    def index_text(self) -> str:
        return f"band index ({self.scheme.describe()}), the default of `neardup serve`"

    def measure(self, texts: list[str]) -> npt.NDArray[np.uint64]:
        """(n, 64) uint64: the text sketch the service stores for each text."""
        return self.verifier.signatures(texts)

    def keys(self, sketches: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        """(n, bands) band keys: the postings the service files each record under."""
        fingerprints = np.zeros((len(sketches), self.scheme.fingerprint_words), dtype=np.uint64)
        return self.scheme.keys(self.scheme.compose(fingerprints, sketches))

    def close(
        self, sketches: npt.NDArray[np.uint64], first: npt.NDArray[np.int64], second: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        """Whether the service surely matches each pair: a shared band key and a similarity
        at least KEEP_SIMILARITY."""
        shared = np.any(self.keys(sketches[first]) == self.keys(sketches[second]), axis=1)
        return shared & (similarities(sketches, first, second) >= KEEP_SIMILARITY)

    def near_pairs(
        self, sketches: npt.NDArray[np.uint64], family_of: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The pairs (i, j) of different families that share a band key at a similarity of at
        least DROP_SIMILARITY: the candidates come from sorting each band's keys (the members
        of a run of equal keys are the pairs that band finds), then the sketches decide."""
        count = len(sketches)
        keys = self.keys(sketches)
        codes = [np.zeros(0, dtype=np.int64)]
        for band in range(keys.shape[1]):
            order = np.argsort(keys[:, band], kind="stable").astype(np.int64)
            ordered = keys[order, band]
            for offset in range(1, count):  # pairs `offset` apart inside a run of equal keys
                same = ordered[offset:] == ordered[:-offset]
                if not same.any():
                    break
                left, right = order[:-offset][same], order[offset:][same]
                across = family_of[left] != family_of[right]
                left, right = left[across], right[across]
                codes.append(np.minimum(left, right) * count + np.maximum(left, right))
        unique = np.unique(np.concatenate(codes))
        first, second = unique // count, unique % count
        near = similarities(sketches, first, second) >= DROP_SIMILARITY
        return first[near], second[near]

    def built_index(self, index: SimhashIndex) -> tuple[bool, str]:
        """Whether the service created the index this truth assumes."""
        stored = None if index.verification is None else Verifier(**index.verification)
        ok = (
            index.bands == self.scheme
            and stored is not None
            and stored.mode == "sketch"
            and DROP_SIMILARITY < stored.cutoff <= KEEP_SIMILARITY
        )
        found = "a Simhash block index" if index.bands is None else index.bands.describe()
        verified = "no verification" if stored is None else f"{stored.mode} >= {stored.cutoff}"
        return ok, (
            f"the service created the index the corpus assumes: {found}, {verified} "
            f"(between {DROP_SIMILARITY} and {KEEP_SIMILARITY})"
        )


class SimhashTruth:
    """Ground truth for a Simhash block index (``neardup serve -k 3 --verify none``, the
    service's default before band indexes): a near-duplicate is within 3 bits."""

    name = "simhash"
    serve_options: tuple[str, ...] = ("-k", str(MAX_DISTANCE), "--verify", "none")

    def __init__(self) -> None:
        self.fingerprinter = Fingerprinter(config=FingerprintConfig())  # what the server's index uses

    @property
    def rule(self) -> str:
        return (
            f"each within {MAX_DISTANCE} bits of every member of its family; no document within "
            f"{MAX_DISTANCE} bits of another family's"
        )

    def index_text(self) -> str:
        return f"Simhash block index, k = {MAX_DISTANCE} (`neardup serve {' '.join(self.serve_options)}`)"

    def measure(self, texts: list[str]) -> npt.NDArray[np.uint64]:
        """Each text's 64-bit fingerprint, in chunks: one call over 100 k texts would hold
        gigabytes of token columns."""
        fingerprint = self.fingerprinter.fingerprint_many
        values = [
            value
            for start in range(0, len(texts), FINGERPRINT_CHUNK)
            for value in to_ints(fingerprint(texts[start : start + FINGERPRINT_CHUNK]))
        ]
        return np.asarray(values, dtype=np.uint64)

    def close(
        self, values: npt.NDArray[np.uint64], first: npt.NDArray[np.int64], second: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        return np.asarray(
            [
                (a ^ b).bit_count() <= MAX_DISTANCE
                for a, b in zip(values[first].tolist(), values[second].tolist(), strict=True)
            ],
            dtype=bool,
        )

    def near_pairs(
        self, values: npt.NDArray[np.uint64], family_of: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        pairs = find_all_pairs(values, MAX_DISTANCE, bits=64)
        first, second = np.asarray(pairs.i, dtype=np.int64), np.asarray(pairs.j, dtype=np.int64)
        across = family_of[first] != family_of[second]
        return first[across], second[across]

    def built_index(self, index: SimhashIndex) -> tuple[bool, str]:
        ok = index.bands is None and index.max_distance == MAX_DISTANCE and index.verification is None
        kind = "a band index" if index.bands is not None else f"a block index, k = {index.max_distance}"
        verified = "no verification" if index.verification is None else index.verification.get("mode")
        return ok, f"the service created the index the corpus assumes: {kind}, {verified}"


Truth = BandTruth | SimhashTruth
TRUTHS: dict[str, type[BandTruth] | type[SimhashTruth]] = {"bands": BandTruth, "simhash": SimhashTruth}


def similarities(
    sketches: npt.NDArray[np.uint64], first: npt.NDArray[np.int64], second: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """sketch_similarity of the pairs (first[t], second[t]), a chunk of rows at a time."""
    out = np.empty(len(first), dtype=np.float64)
    for low in range(0, len(first), PAIR_CHUNK):
        high = low + PAIR_CHUNK
        out[low:high] = sketch_similarity(sketches[first[low:high]], sketches[second[low:high]])
    return out


def build_corpus(target: int, seed: int, truth: Truth) -> Corpus:
    """At least ``target`` documents in families whose near-duplicates under ``truth`` (the
    index the service creates) are known exactly."""
    rng = random.Random(seed)
    english, chinese = base_texts()
    source = originals(english, chinese, rng)
    kept: list[list[str]] = []  # accepted families' texts
    kept_features = truth.measure([])
    total = dropped_copies = dropped_families = 0
    while total < target:
        want = max(1000, int((target - total) / 2.8))  # a family keeps ~2.8 of its 1 + 1..3 members
        candidates = [
            [text, *(edit(text, rng) for _ in range(rng.randint(1, 3)))] for text in _take(source, want)
        ]
        sizes = [len(members) for members in candidates]
        starts = np.cumsum([0, *sizes[:-1]]).tolist()
        features = truth.measure([text for members in candidates for text in members])
        inside = [  # every pair of a family's candidates
            (start + a, start + b)
            for start, size in zip(starts, sizes, strict=True)
            for a in range(size)
            for b in range(a + 1, size)
        ]
        first, second = (np.asarray(side, dtype=np.int64) for side in zip(*inside, strict=True))
        close = dict(zip(inside, truth.close(features, first, second).tolist(), strict=True))
        fresh: list[list[str]] = []
        fresh_rows: list[int] = []
        for members, start, size in zip(candidates, starts, sizes, strict=True):
            chosen = [0]
            for row in range(1, size):  # a copy stays when it is near the original and every copy kept
                if all(close[(start + other, start + row)] for other in chosen):
                    chosen.append(row)
            dropped_copies += size - len(chosen)
            fresh.append([members[row] for row in chosen])
            fresh_rows.extend(start + row for row in chosen)
        family_of = np.concatenate(
            [
                np.full(len(kept_features), -1, dtype=np.int64),
                np.repeat(np.arange(len(fresh), dtype=np.int64), [len(m) for m in fresh]),
            ]
        )
        every = np.concatenate([kept_features, features[fresh_rows]])
        near_first, near_second = truth.near_pairs(every, family_of)  # pairs of two families
        bad = set(family_of[near_first].tolist()) | set(family_of[near_second].tolist())
        bad.discard(-1)
        for number, members in enumerate(fresh):
            if number in bad:
                dropped_families += 1
                continue
            kept.append(members)
            total += len(members)
        keep_rows = np.flatnonzero(~np.isin(family_of, list(bad)) & (family_of >= 0))
        kept_features = np.concatenate([kept_features, every[keep_rows]])
    return _arrange(kept, rng, dropped_copies, dropped_families, truth)


def _take(source: Iterator[str], count: int) -> list[str]:
    return [next(source) for _ in range(count)]


def _arrange(
    kept: list[list[str]], rng: random.Random, dropped_copies: int, dropped_families: int, truth: Truth
) -> Corpus:
    """Arrival order: families in random order, each member at a random delay after the
    family's slot: a third of them within a few requests (in flight together), the others
    up to ~20,000 requests later. The member sent first is as often a copy as the original."""
    slots: list[tuple[float, str, str]] = []
    family: dict[str, int] = {}
    order = list(range(len(kept)))
    rng.shuffle(order)
    position = 0.0
    for number in order:
        members = list(enumerate(kept[number]))
        rng.shuffle(members)
        for rank, (member, text) in enumerate(members):
            delay = (
                0.0 if rank == 0 else rng.uniform(0, 8) if rng.random() < 1 / 3 else rng.uniform(0, 20_000)
            )
            key = f"{number}-{member}"
            slots.append((position + delay, key, text))
            family[key] = number
        position += len(members)
    slots.sort()
    planted = sum(len(members) - 1 for members in kept)
    documents = [(key, text) for _, key, text in slots]
    return Corpus(documents, family, len(kept), planted, dropped_copies, dropped_families, truth)


# -- load --------------------------------------------------------------------------------------


def run_loop(coroutine: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    result: dict[str, Any] = uvloop.run(coroutine)
    return result


async def drive(
    base: str,
    documents: list[tuple[str, str]],
    clients: int,
    seconds: float,
    query_share: float,
    seed: int,
    watch: list[int],
) -> dict[str, Any]:
    """``clients`` clients, each with its own connection, until the deadline; every answer kept,
    with this process's CPU seconds, the CPU seconds of the ``watch`` PIDs and the machine's.

    One ``httpx.AsyncClient`` per client rather than one shared pool: a shared pool of 64
    connections spends most of its CPU in httpcore's pool bookkeeping (encode/httpx#3215) and
    caps the load at ~150 requests/s here.
    """
    rng = random.Random(seed)
    upcoming = 0  # the next document to check
    ran_out = 0.0  # seconds into the run when the documents ran out, if they did
    acknowledged: list[tuple[str, str]] = []
    #: (id, cluster, duplicate, added, match ids, sent, answered): perf_counter is system-wide on Linux
    checks: list[tuple[str, Any, bool, bool, list[str], float, float]] = []
    queries: list[tuple[str, bool, list[str]]] = []
    latency: dict[str, list[float]] = {"check": [], "query": []}
    errors: list[tuple[str, str, str, str]] = []
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    watched, busy = [process_cpu(pid) for pid in watch], machine_busy()
    started = time.perf_counter()
    cpu = time.process_time()
    deadline = started + seconds

    async def client() -> None:
        nonlocal upcoming, ran_out
        async with httpx.AsyncClient(base_url=base, limits=limits, timeout=REQUEST_TIMEOUT) as http:
            while time.perf_counter() < deadline:
                if acknowledged and rng.random() < query_share:
                    key, text = acknowledged[rng.randrange(len(acknowledged))]
                    kind = "query"
                else:
                    if upcoming >= len(documents):
                        ran_out = ran_out or time.perf_counter() - started
                        return
                    key, text = documents[upcoming]
                    upcoming += 1
                    kind = "check"
                began = time.perf_counter()
                try:
                    response = await http.post(f"/v1/{kind}", json={"id": key, "text": text})
                except httpx.HTTPError as exc:
                    errors.append((kind, key, type(exc).__name__, str(exc)[:300]))
                    continue
                elapsed = time.perf_counter() - began
                if not response.is_success:
                    errors.append((kind, key, str(response.status_code), response.text[:300]))
                    continue
                latency[kind].append(elapsed)
                answer = response.json()
                matches = [match["id"] for match in answer["matches"]]
                if kind == "check":
                    ended = began + elapsed
                    checks.append(
                        (
                            answer["id"],
                            answer["cluster"],
                            answer["duplicate"],
                            answer["added"],
                            matches,
                            began,
                            ended,
                        )
                    )
                    if answer["added"]:
                        acknowledged.append((key, text))
                else:
                    queries.append((key, answer["duplicate"], matches))

    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - started
    return {
        "wall": wall,
        "cpu": time.process_time() - cpu,
        "watched": [process_cpu(pid) - before for pid, before in zip(watch, watched, strict=True)],
        "machine": machine_busy() - busy,
        "ran_out": ran_out,
        "checks": checks,
        "queries": queries,
        "latency": latency,
        "errors": errors,
    }


def _load_process(results: Any, barrier: Any, number: int, *task: Any) -> None:
    """One load process of ``--processes``: start with the others, send the result back."""
    barrier.wait()
    results.put((number, run_loop(drive(*task))))


def generate_load(
    base: str,
    corpus: Corpus,
    args: argparse.Namespace,
    watch: list[int],
) -> dict[str, Any]:
    """The merged result of the load, driven by this process or by ``--processes`` processes
    (the first of them measures the ``watch`` PIDs and the machine)."""
    settings = (args.seconds, args.query_share)
    if args.processes <= 1:
        return run_loop(drive(base, corpus.documents, args.clients, *settings, args.seed, watch))
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    barrier = context.Barrier(args.processes)
    workers = []
    for number in range(args.processes):
        share = args.clients // args.processes + (number < args.clients % args.processes)
        documents = corpus.documents[number :: args.processes]
        task = (base, documents, share, *settings, args.seed + number, watch if number == 0 else [])
        workers.append(
            context.Process(target=_load_process, args=(results, barrier, number, *task), daemon=True)
        )
    for worker in workers:
        worker.start()
    timeout = args.seconds + START_TIMEOUT + REQUEST_TIMEOUT
    parts = dict(results.get(timeout=timeout) for _ in workers)
    for worker in workers:
        worker.join()
    merged: dict[str, Any] = {
        "wall": max(part["wall"] for part in parts.values()),
        "cpu": sum(part["cpu"] for part in parts.values()),
        "watched": parts[0]["watched"],
        "machine": parts[0]["machine"],
        "ran_out": min((part["ran_out"] for part in parts.values() if part["ran_out"]), default=0.0),
        "latency": {"check": [], "query": []},
    }
    for name in ("checks", "queries", "errors"):
        merged[name] = [item for part in parts.values() for item in part[name]]
    for part in parts.values():
        for kind, values in part["latency"].items():
            merged["latency"][kind].extend(values)
    return merged


# -- the server --------------------------------------------------------------------------------


@dataclass
class Run:
    store: str
    mode: str
    url: str
    load: dict[str, Any] = field(default_factory=dict)
    store_calls: int = 0
    store_requests: int = 0
    server_cpu: float = 0.0
    store_cpu: float | None = None  # the Redis server's; SQLite runs inside the service
    machine_cpu: float = 0.0
    exit_code: int | None = None
    killed: bool = False
    checks: list[tuple[bool, str]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return not all(ok for ok, _ in self.checks)


def machine_busy() -> float:
    """CPU seconds all cores spent busy since boot (Linux /proc/stat; idle and iowait excluded)."""
    values = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(values) - values[3] - values[4]) / CLOCK_TICKS


def descendants(pid: int) -> list[int]:
    """The processes started by ``pid``, at any depth (uvicorn's worker processes)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def serve(url: str, port: int, options: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``neardup serve`` in its own process, answering /healthz."""
    servers = sys.modules["neardup_servers"]
    command = [sys.executable, "-m", "neardup", "serve", url, "--port", str(port), "--log-level", "warning"]
    command += options
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=servers._die_with_parent,  # no server outlives this benchmark
        )
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"neardup serve exited with status {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        if time.monotonic() >= deadline:
            stop(process)
            raise RuntimeError(
                f"neardup serve did not answer /healthz in {START_TIMEOUT:.0f} s:\n{log.read_text()}"
            )
        time.sleep(0.1)


def stop(process: subprocess.Popen[bytes]) -> bool:
    """SIGTERM by PID, SIGKILL after STOP_TIMEOUT; True if it had to be killed."""
    if process.poll() is not None:
        return False
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT)
        return False
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return True


def service_figures(base: str) -> tuple[int, int]:
    facts = httpx.get(f"{base}/v1/stats", timeout=REQUEST_TIMEOUT).json()["service"]
    return int(facts["store_calls"]), int(facts["store_requests"])


def warm_up(base: str, corpus: Corpus) -> None:
    """Load the tokenizers and touch the store before the clock starts (nothing is added)."""
    texts = [{"text": text} for _, text in corpus.documents[:32]]
    for path in ("/v1/fingerprint", "/v1/query"):
        httpx.post(f"{base}{path}", json={"documents": texts}, timeout=REQUEST_TIMEOUT).raise_for_status()


def run_one(run: Run, corpus: Corpus, args: argparse.Namespace, folder: Path, store_pid: int | None) -> None:
    servers = sys.modules["neardup_servers"]
    port = servers.free_port()
    base = f"http://127.0.0.1:{port}"
    log = folder / f"serve-{run.store}-{run.mode}.log"
    options = {"baseline": ["--max-batch", "1"], "workers": ["--workers", str(args.workers)]}
    process = serve(run.url, port, [*corpus.truth.serve_options, *options.get(run.mode, [])], log)
    try:
        warm_up(base, corpus)
        calls, requests = service_figures(base)
        service = [process.pid, *descendants(process.pid)]
        watch = service if store_pid is None else [*service, store_pid]
        run.load = generate_load(base, corpus, args, watch)
        run.server_cpu = sum(run.load["watched"][: len(service)])
        run.store_cpu = None if store_pid is None else run.load["watched"][-1]
        run.machine_cpu = run.load["machine"]
        after_calls, after_requests = service_figures(base)
        if run.mode != "workers":  # each worker counts its own calls; /v1/stats answers for one
            # the stats route's own store call is one call carrying one request
            run.store_calls, run.store_requests = after_calls - calls - 1, after_requests - requests - 1
    finally:
        run.killed = stop(process)
        run.exit_code = process.returncode
    errors = run.load["errors"]
    if errors:
        print(f"  {len(errors)} failed requests; the first ones:", flush=True)
        for kind, key, status, text in errors[:5]:
            print(f"    {kind} {key}: {status} {text}", flush=True)
        print(f"  (server log: {log})")


# -- the audit ---------------------------------------------------------------------------------


def audit(run: Run, corpus: Corpus) -> list[tuple[bool, str]]:
    """PASS/FAIL facts about a finished run, from its answers and from the store itself."""
    load = run.load
    checks: list[tuple[bool, str]] = []

    def check(ok: bool, text: str) -> None:
        checks.append((ok, text))

    check(not run.killed and run.exit_code == 0, f"server stopped cleanly on SIGTERM (exit {run.exit_code})")
    errors = Counter(f"{kind} {status}" for kind, _, status, _ in load["errors"])
    check(not errors, f"no failed requests ({', '.join(f'{n} x {e}' for e, n in errors.items()) or 'none'})")
    answers = load["checks"]
    added = Counter(key for key, _, _, was_added, *_ in answers if was_added)
    twice = [key for key, count in added.items() if count > 1]
    not_added = [key for key, _, _, was_added, *_ in answers if not was_added]
    check(not twice, f"no id acknowledged twice with added=true ({len(twice)} were)")
    check(not not_added, f"every fresh id answered added=true ({len(not_added)} answered false)")
    cluster_of = {key: cluster for key, cluster, _, was_added, *_ in answers if was_added}
    with SimhashIndex.open(run.url, create=False) as index:
        checks.append(corpus.truth.built_index(index))
        stored = set(index)
        size = len(index)
        keys = sorted(stored & set(cluster_of))
        records = [
            record
            for start in range(0, len(keys), 10_000)
            for record in index.get_many(keys[start : start + 10_000])
        ]
    missing, unexpected = set(cluster_of) - stored, stored - set(cluster_of)
    check(
        not missing and not unexpected and size == len(cluster_of),
        f"stored ids = acknowledged ids: {len(cluster_of):,} acknowledged, {size:,} stored "
        f"({len(missing)} acknowledged but missing, {len(unexpected)} stored but not acknowledged)",
    )
    wrong = [
        key
        for key, record in zip(keys, records, strict=True)
        if record is None or record.cluster != cluster_of[key]
    ]
    check(
        not wrong,
        f"every stored cluster id is the one the service answered ({len(wrong)} differ, e.g. {wrong[:3]})",
    )
    by_family: dict[int, list[tuple[str, Any, bool, float, float]]] = defaultdict(list)
    foreign = 0
    for key, cluster, duplicate, was_added, matches, sent, answered in answers:
        if was_added:
            by_family[corpus.family[key]].append((key, cluster, duplicate, sent, answered))
        foreign += sum(corpus.family[match] != corpus.family[key] for match in matches)
    split, starters, missed, overlapping = [], [], 0, 0
    for members in by_family.values():
        clusters = {cluster for _, cluster, *_ in members}
        first = [member for member in members if not member[2]]
        missed += max(0, len(first) - 1)
        if len(clusters) > 1:
            split.append(members[0][0])
        if len(first) != 1 or clusters != {first[0][0]}:
            starters.append(members[0][0])
        elif len(members) > 1:  # sent before the first member's answer came back: truly concurrent
            overlapping += sum(member[3] < first[0][4] for member in members if member is not first[0])
    planted = sum(len(members) - 1 for members in by_family.values())
    check(
        not split,
        f"each family's acknowledged members share one cluster ({len(split)} of {len(by_family):,} split)",
    )
    check(
        not missed and not starters,
        f"every planted near-duplicate detected: of {planted:,} family members stored after their "
        f"family's first ({overlapping:,} sent while it was in flight), {missed} answered duplicate=false; "
        f"{len(starters)} families whose cluster id is not the id of their one non-duplicate member",
    )
    check(not foreign, f"no match across families ({foreign} matches named another family's document)")
    lost = sum(key not in matches for key, _, matches in load["queries"])
    stray = sum(
        corpus.family[match] != corpus.family[key] for key, _, matches in load["queries"] for match in matches
    )
    check(
        not lost and not stray,
        f"every query of an acknowledged document found it ({len(load['queries']):,} queries, {lost} missed, "
        f"{stray} matches of another family)",
    )
    return checks


# -- report ------------------------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1e3


def figures(run: Run) -> dict[str, float]:
    load = run.load
    wall = load["wall"]
    checks, queries = load["latency"]["check"], load["latency"]["query"]
    return {
        "requests_per_s": (len(checks) + len(queries)) / wall,
        "checks_per_s": len(checks) / wall,
        "check_p50": percentile(checks, 0.50),
        "check_p99": percentile(checks, 0.99),
        "query_p50": percentile(queries, 0.50),
        "query_p99": percentile(queries, 0.99),
        "errors": len(load["errors"]),
        "gain": run.store_requests / run.store_calls if run.store_calls else float("nan"),
        "client_cpu": load["cpu"] / wall,
        "server_cpu": run.server_cpu / wall,
        "store_cpu": float("nan") if run.store_cpu is None else run.store_cpu / wall,
        "machine_cpu": run.machine_cpu / wall,
    }


def gain_text(gain: float) -> str:
    """Requests per store call, or "-" where it was not measured (--workers runs)."""
    return "-" if math.isnan(gain) else f"{gain:.1f}"


def print_tables(runs: list[Run]) -> None:
    print(
        "\n| store | mode | requests/s | check docs/s | check p50 ms | check p99 ms | query p50 ms "
        "| query p99 ms | errors | requests per store call | client CPU | server CPU | store CPU "
        "| machine CPU |"
    )
    print("|---|---|" + "---:|" * 12)
    for run in runs:
        f = figures(run)
        print(
            f"| {run.store} | {run.mode} | {f['requests_per_s']:,.0f} | {f['checks_per_s']:,.0f} "
            f"| {f['check_p50']:.1f} | {f['check_p99']:.1f} | {f['query_p50']:.1f} | {f['query_p99']:.1f} "
            f"| {f['errors']:.0f} | {gain_text(f['gain'])} | {f['client_cpu']:.2f} | {f['server_cpu']:.2f} "
            f"| {'-' if run.store_cpu is None else format(f['store_cpu'], '.2f')} | {f['machine_cpu']:.2f} |"
        )
    for mode, other in (("default", "baseline"), ("workers", "default")):
        pairs = [
            (first, second)
            for first in runs
            for second in runs
            if first.store == second.store and first.mode == mode and second.mode == other
        ]
        if not pairs:
            continue
        print(
            f"\n| store | requests/s {mode}/{other} | check p50 {mode}/{other} | check p99 {mode}/{other} |"
        )
        print("|---|---:|---:|---:|")
        for first, second in pairs:
            a, b = figures(first), figures(second)
            print(
                f"| {first.store} | {a['requests_per_s'] / b['requests_per_s']:.2f}x "
                f"| {a['check_p50'] / b['check_p50']:.2f}x | {a['check_p99'] / b['check_p99']:.2f}x |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stores", nargs="+", choices=STORES, default=STORES)
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=60.0, help="load per store and mode")
    parser.add_argument("--quick", action="store_true", help="10 s per store and mode")
    parser.add_argument("--query-share", type=float, default=0.2, help="share of requests that are queries")
    parser.add_argument(
        "--baseline",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run each store with --max-batch 1 (one request per store call)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="also run each store with neardup serve --workers N (N > 1: server processes)",
    )
    parser.add_argument("--processes", type=int, default=2, help="load processes the clients are split over")
    parser.add_argument(
        "--documents", type=int, help=f"documents prepared [default: {DOCS_PER_SECOND} x seconds]"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--index",
        choices=sorted(TRUTHS),
        default="bands",
        help="the index the service creates, and the ground truth the corpus follows: bands (the "
        f"default of neardup serve, and of this benchmark) or simhash (-k {MAX_DISTANCE} --verify none)",
    )
    args = parser.parse_args()
    if args.quick:
        args.seconds = 10.0
    if args.clients < 1 or args.processes < 1 or args.processes > args.clients or args.seconds <= 0:
        parser.error("need clients >= processes >= 1 and seconds > 0")
    if not 0 <= args.query_share < 1:
        parser.error("--query-share must be in [0, 1)")
    target = args.documents or int(DOCS_PER_SECOND * args.seconds)
    began = time.perf_counter()
    truth = TRUTHS[args.index]()
    corpus = build_corpus(target, args.seed, truth)
    print(
        f"corpus for a {truth.index_text()}: {len(corpus.documents):,} documents in "
        f"{corpus.families:,} families, {corpus.planted:,} planted near-duplicates ({truth.rule}; "
        f"{corpus.dropped_copies:,} edited copies too far and {corpus.dropped_families:,} families near "
        f"another family dropped) in {time.perf_counter() - began:.0f} s",
        flush=True,
    )
    modes = ["default", "baseline"] if args.baseline else ["default"]
    modes += ["workers"] if args.workers > 1 else []
    print(
        f"{args.clients} clients in {args.processes} load process(es), {args.seconds:.0f} s per run, "
        f"{args.query_share:.0%} queries; {os.cpu_count()} CPU cores shared by clients, server and store",
        flush=True,
    )
    servers = load_servers()
    runs: list[Run] = []
    started: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="neardup-service-load-") as name:
        folder = Path(name)
        try:
            for store in args.stores:
                redis = None
                if store == "redis":
                    redis = servers.start("redis")
                    started.append(redis)
                for number, mode in enumerate(modes, start=1):
                    url = (
                        f"sqlite:///{folder}/{mode}.db"
                        if redis is None
                        else f"redis://127.0.0.1:{redis.port}/{number}"
                    )
                    run = Run(store, mode, url)
                    flags = {"baseline": " (--max-batch 1)", "workers": f" (--workers {args.workers})"}
                    print(f"\n{store} {mode}{flags.get(mode, '')}: {url}", flush=True)
                    print(
                        f"service_load: {store} {mode}: {args.seconds:.0f} s of load, then the audit",
                        file=sys.stderr,
                        flush=True,
                    )
                    run_one(run, corpus, args, folder, None if redis is None else redis.pid)
                    run.checks = audit(run, corpus)
                    f = figures(run)
                    print(
                        f"  {f['requests_per_s']:,.0f} requests/s, {f['checks_per_s']:,.0f} checks/s, "
                        f"check p50/p99 {f['check_p50']:.1f}/{f['check_p99']:.1f} ms, "
                        f"{gain_text(f['gain'])} requests per store call, CPU client {f['client_cpu']:.2f} "
                        f"server {f['server_cpu']:.2f} machine {f['machine_cpu']:.2f} cores",
                        flush=True,
                    )
                    if run.load["ran_out"]:
                        print(
                            f"  WARNING: the documents ran out after {run.load['ran_out']:.1f} s; "
                            "use --documents"
                        )
                    for ok, text in run.checks:
                        print(f"  {'PASS' if ok else 'FAIL'} {text}", flush=True)
                    runs.append(run)
        finally:
            for server in started:
                server.stop(remove_dir=True)
    print_tables(runs)
    failed = [f"{run.store} {run.mode}" for run in runs if run.failed]
    print(
        f"\n{len(runs)} runs in {time.perf_counter() - began:.0f} s; "
        + (f"FAIL: {', '.join(failed)}" if failed else "every audit passed")
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

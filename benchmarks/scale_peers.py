"""datatrove's MinHash deduplication as a peer of ``scale_quality.py`` (issue 30 item 4).

Its four documented stages on one corpus file of ``scale_quality.py``, each a
``LocalPipelineExecutor`` with the default ``MinhashConfig()`` (word 5-grams, 14 buckets of 8
hashes, 64-bit xxhash) and the tokenizer of the corpus language (``language=``): signatures
(2 tasks), buckets (one task per bucket, the number the stage requires), clusters (1 task, as
required) and the filter that writes the kept documents (2 tasks, gzip JSON lines); 2 workers
where a stage has several tasks. The reader is :class:`StridedJsonl`: datatrove shards its input
by file, and the corpus is one file, so task ``r`` of ``n`` takes lines ``r, r + n, ...``.

datatrove 0.10.1 hands ``str`` to xxhash, which xxhash 4 refuses ("Strings must be encoded
before hashing", huggingface/datatrove#508); neardup's environment has xxhash 4, so its two
wrappers are replaced, in this process only, by the fix of huggingface/datatrove#519: UTF-8 first,
which is what xxhash 3 did, so the hashes are those of datatrove with ``xxhash<4``.

A module of its own (not ``scale_quality.py``, which runs as ``__main__``) so that datatrove's
worker processes can unpickle the reader by reference.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import datatrove.utils.hashes.xxhash as wrappers
import xxhash
from datatrove.data import Document, DocumentsPipeline
from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup import MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
)
from datatrove.pipeline.writers.jsonl import JsonlWriter
from datatrove.utils.typeshelper import Languages

TASKS = 2
WORKERS = 2
LANGUAGES = {"zh": Languages.mandarin_chinese, "en": Languages.english}


def xxhash32(data: str | bytes) -> int:
    """datatrove's ``xxhash32`` with ``str`` encoded as UTF-8 (huggingface/datatrove#519)."""
    return int(xxhash.xxh32_intdigest(data.encode("utf-8") if isinstance(data, str) else data))


def xxhash64(data: str | bytes) -> int:
    """datatrove's ``xxhash64`` with ``str`` encoded as UTF-8 (huggingface/datatrove#519)."""
    return int(xxhash.xxh64_intdigest(data.encode("utf-8") if isinstance(data, str) else data))


class StridedJsonl(PipelineStep):
    """Documents of one JSON-lines file, task ``rank`` of ``world_size`` taking every
    ``world_size``-th line from line ``rank``: the ``doc_id`` datatrove gives a document in
    task ``r`` is its index ``d`` there, line ``d * world_size + r`` of the file."""

    name = "strided JSON lines"
    type = "📖 - READER"

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = str(path)

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with open(self.path, "rb") as handle:
            for number, line in enumerate(handle):
                if number % world_size == rank:
                    row = json.loads(line)
                    self.stat_update("documents")
                    yield Document(text=row["text"], id=row["id"])


def run_datatrove(corpus: Path, lang: str, documents: int, folder: Path) -> dict[str, Any]:
    """The four stages on ``corpus`` (``documents`` lines) with their outputs under ``folder``:
    seconds per stage (the bucket matches, ``folder / "buckets" / "*.dups"``, are read by the
    driver, ``scale_quality.datatrove_pairs``)."""
    wrappers.xxhash32, wrappers.xxhash64 = xxhash32, xxhash64  # before the steps take them
    config = MinhashConfig()
    logs = folder / "logs"
    signatures = LocalPipelineExecutor(
        pipeline=[
            StridedJsonl(corpus),
            MinhashDedupSignature(
                output_folder=str(folder / "signatures"), config=config, language=LANGUAGES[lang]
            ),
        ],
        tasks=TASKS,
        workers=WORKERS,
        logging_dir=str(logs / "signatures"),
    )
    buckets = LocalPipelineExecutor(
        pipeline=[
            MinhashDedupBuckets(
                input_folder=str(folder / "signatures"), output_folder=str(folder / "buckets"), config=config
            )
        ],
        tasks=config.num_buckets,
        workers=WORKERS,
        logging_dir=str(logs / "buckets"),
        depends=signatures,
    )
    cluster = LocalPipelineExecutor(
        pipeline=[
            MinhashDedupCluster(
                input_folder=str(folder / "buckets"), output_folder=str(folder / "remove_ids"), config=config
            )
        ],
        tasks=1,
        logging_dir=str(logs / "clusters"),
        depends=buckets,
    )
    keep = LocalPipelineExecutor(
        pipeline=[
            StridedJsonl(corpus),
            MinhashDedupFilter(input_folder=str(folder / "remove_ids")),
            JsonlWriter(output_folder=str(folder / "deduplicated")),
        ],
        tasks=TASKS,
        workers=WORKERS,
        logging_dir=str(logs / "filter"),
        depends=cluster,
    )
    seconds: dict[str, float] = {}
    for stage, executor in (
        ("signatures", signatures),
        ("buckets", buckets),
        ("clusters", cluster),
        ("filter", keep),
    ):
        start = time.perf_counter()
        executor.run()
        seconds[stage] = time.perf_counter() - start
    return {"seconds": seconds, "documents": documents, "tasks": TASKS}

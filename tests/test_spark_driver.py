"""The Spark job keeps nothing per record on the driver: the short documents' prefix search
runs as Spark operations (the candidates of ``prefix_pairs``, hub rule and ties included), a
corpus of short documents gives ``neardup dedup``'s files byte for byte while no per-record
row is collected to the driver, and the file outputs are written by the executors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neardup import Fingerprinter
from neardup.dedup.candidates import CandidateSettings, as_pairs, prefix_pairs
from neardup.similarity.shingles import shingles_of

from .conftest import read_jsonl, shared_file, write_lines
from .test_spark import _run, _spark_args, spark  # noqa: F401 - the session fixture

pytestmark = pytest.mark.spark

from pyspark.sql import SparkSession  # noqa: E402 - after test_spark's skips

from neardup.spark.keyed import prefix_candidates  # noqa: E402

# -- the prefix search, distributed -------------------------------------------------------------


def _random_shorts(rng: np.random.Generator, count: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Shingle sets of 1-127 distinct hashes from a small vocabulary (many frequency ties),
    half of it above 2^63 (the unsigned order matters), plus 12 copies of one set (a bucket
    over the test's max_bucket) and near-copies of it."""
    vocabulary = np.unique(rng.integers(0, 1 << 64, size=600, dtype=np.uint64, endpoint=False))
    weights = 1.0 / np.arange(1, vocabulary.size + 1) ** 0.7
    weights /= weights.sum()
    sets = []
    for _ in range(count):
        size = int(rng.integers(1, 128))
        sets.append(np.unique(rng.choice(vocabulary, size=size, replace=False, p=weights)))
    base = np.unique(rng.choice(vocabulary, size=30, replace=False))
    sets += [base] * 12 + [np.unique(np.append(base[:-k], vocabulary[:k])) for k in range(1, 6)]
    order = rng.permutation(len(sets))
    return [sets[k] for k in order.tolist()], base


def _local_candidates(sets: list[np.ndarray], orders: list[int], settings: CandidateSettings) -> set[Any]:
    flat = np.concatenate(sets)
    documents = np.repeat(np.arange(len(sets), dtype=np.int64), [s.size for s in sets])
    found = as_pairs(prefix_pairs(flat, documents, settings.threshold, settings.max_bucket, settings.hub))
    return {(orders[a], orders[b]) for a, b in found.tolist()}


@pytest.mark.parametrize("threshold", [0.5, 0.7])
def test_spark_prefix_candidates_are_prefix_pairs(spark: SparkSession, threshold: float) -> None:  # noqa: F811
    """The same candidate set as ``prefix_pairs`` over all the documents, by order keys that
    are sparse (only their order is the local numbering); the hub rule dropped pairs."""
    rng = np.random.default_rng(30)
    sets, base = _random_shorts(rng, 400)
    orders = sorted(rng.choice(1 << 50, size=len(sets), replace=False).tolist())
    settings = CandidateSettings(threshold=threshold, max_bucket=8, hub=2)
    expected = _local_candidates(sets, orders, settings)
    rows = [(order, s.tobytes()) for order, s in zip(orders, sets, strict=True)]
    rows.reverse()  # arrival order is not the numbering
    frame = spark.createDataFrame(rows, "order long, short binary")
    found = prefix_candidates(spark, frame, 3, settings).collect()
    assert len(expected) > 100
    assert set(found) == expected
    assert all(a < b for a, b in found)
    copies = [order for order, s in zip(orders, sets, strict=True) if np.array_equal(s, base)]
    assert len(copies) == 12
    assert any((a, b) not in expected for a in copies for b in copies if a < b), "the hub rule never applied"


# -- a corpus of short documents ------------------------------------------------------------------


def _short_corpus(path: Path, fingerprinter: Fingerprinter, lines: int = 1200) -> Path:
    """zh_short records with fewer than 64 shingles (so only the prefix search sees them) and
    205 copies of one review (a prefix token over max_bucket: the hub rule)."""
    parsed = read_jsonl(shared_file("dev/zh_short.jsonl"))[:lines]
    sizes = shingles_of([r["text"] for r in parsed], fingerprinter.normalizer).sizes.tolist()
    kept = [
        {"id": r["id"], "text": r["text"]} for r, size in zip(parsed, sizes, strict=True) if 0 < size < 64
    ]
    copies = [{"id": f"copy{k}", "text": "房间干净，服务热情，早餐丰富，下次还会再来。"} for k in range(205)]
    return write_lines(path, *kept[:600], *copies, *kept[600:])


def test_spark_all_short_corpus_same_files_as_local(
    spark: SparkSession,  # noqa: F811
    tmp_path: Path,
    default_fingerprinter: Fingerprinter,
) -> None:
    """Every record short: the distributed prefix search gives local's pairs and clusters."""
    source = _short_corpus(tmp_path / "short.jsonl", default_fingerprinter)
    assert len(source.read_bytes().splitlines()) > 1000
    results = {}
    for kind in ("local", "spark"):
        outputs = [f"--pairs={tmp_path / f'{kind}.p.jsonl'}", f"--clusters={tmp_path / f'{kind}.c.jsonl'}"]
        args = ["dedup", str(source), *outputs]
        result = _run(_spark_args(*args[1:]) if kind == "spark" else args)
        assert result.exit_code == 0, result.output
        results[kind] = result.stderr.strip().splitlines()[-1]
    assert results["spark"] == results["local"]
    assert "by LSH" in results["local"] and ", 0 pairs" not in results["local"]
    for output in ("p", "c"):
        local = (tmp_path / f"local.{output}.jsonl").read_bytes()
        assert (tmp_path / f"spark.{output}.jsonl").read_bytes() == local, output

"""The Spark job: the same pairs and clusters as ``neardup dedup`` on the labelled sets, the
distributed connected components against scipy (chains and long paths included), the second
hash of crowded buckets, block keys computed in SQL against ``BitSelection.extract``, the
per-task functions without Spark, errors, Parquet, and the message when pyspark is missing.

One local[2] SparkSession serves the whole test session (starting one costs ~10 s)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from neardup import BlockScheme, ConfigError, FingerprintConfig, Fingerprinter
from neardup.cli.main import main
from neardup.dedup.batch import brute_force_pairs
from neardup.dedup.candidates import CandidateSettings
from neardup.dedup.clusters import components
from neardup.dedup.key_buckets import as_pairs, keyed_pairs
from neardup.io.record import Record

from .conftest import shared_file, write_lines

pytest.importorskip("pyspark", reason="needs pyspark: pip install 'neardup[spark]'")
if shutil.which("java") is None:  # pragma: no cover - Java is on the development machines
    pytest.skip("needs a Java runtime for Spark (java not on PATH)", allow_module_level=True)

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from neardup.spark.components import connected_components
from neardup.spark.groups import VerifyPlan, verify_groups
from neardup.spark.keyed import bucket_pair_column, bucket_pairs
from neardup.spark.keys import selection_column
from neardup.spark.pairs import PairSearch
from neardup.spark.session import build_session
from neardup.spark.tasks import (
    ReadSettings,
    fingerprint_records,
    jsonl_records,
    order_key,
)

SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("local[2]", 2, SPARK_CONF, app_name="neardup-tests")
    yield session
    session.stop()


def _run(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def _spark_args(*args: str) -> list[str]:
    return ["spark", "dedup", *args, "--master", "local[2]", "--partitions", "2"]


# -- the same results as neardup dedup ------------------------------------------------------------


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("en_news.jsonl", ["--keep", "longest", "--emit", "dropped"]),
        # A fitted IDF file (broadcast to the executors) and a stopword list (shipped with addFile).
        ("zh_news.jsonl", ["--idf", "{idf}", "--stopwords", str(FIXTURES / "stopwords.txt")]),
    ],
)
def test_same_pairs_and_clusters_as_local_dedup(
    spark: SparkSession, tmp_path: Path, name: str, options: list[str]
) -> None:
    source = str(shared_file(f"dev/{name}"))
    if "{idf}" in options:
        idf = tmp_path / "idf.json"
        assert _run(["idf", "fit", source, "-o", str(idf)]).exit_code == 0
        options = [str(idf) if option == "{idf}" else option for option in options]
    results = {}
    for kind in ("local", "spark"):
        outputs = [
            f"--pairs={tmp_path / f'{kind}.pairs.jsonl'}",
            f"--clusters={tmp_path / f'{kind}.clusters.jsonl'}",
        ]
        if "--emit" in options:
            outputs.append(f"--output={tmp_path / f'{kind}.records.jsonl'}")
        args = ["dedup", source, *outputs, "-k", "3", *options]
        result = _run(_spark_args(*args[1:]) if kind == "spark" else args)
        assert result.exit_code == 0, result.output
        results[kind] = result.stderr.strip().splitlines()[-1]
    assert results["spark"] == results["local"]
    assert ", 0 pairs" not in results["local"]
    for output in ("pairs", "clusters", *(["records"] if "--emit" in options else [])):
        local = (tmp_path / f"local.{output}.jsonl").read_bytes()
        assert (tmp_path / f"spark.{output}.jsonl").read_bytes() == local, output


def _default_fixture(path: Path) -> Path:
    """Short texts (the prefix search), long ones with edits (the banded search), an empty
    one, texts in both scripts, and 205 copies of one text (a bucket over max_bucket)."""
    base = (
        "近日，国家统计局发布了最新的经济数据，显示第三季度国内生产总值同比增长百分之四点九，"
        + "消费和投资保持稳定。"
    )
    english = "Near-duplicate detection finds pages that differ only in small edits " + "such as timestamps. "
    lines: list[dict[str, Any]] = [
        {"id": "z0", "text": base * 3},
        {"id": "z1", "text": base * 3 + "记者张三报道。"},
        {"id": "e0", "text": english * 2},
        {"id": "e1", "text": english * 2 + "Updated at noon."},
        {"id": "s0", "text": "短文本重复测试一下"},
        {"id": "s1", "text": "短文本重复测试一下吧"},
        {"id": "s2", "text": "completely different short note"},
        {"id": "empty", "text": "。。。"},
        {"id": "far", "text": "天气晴朗，适合出游。" * 20},
    ]
    lines += [{"id": f"copy{k}", "text": "同一条模板新闻正文，" * 10 + english} for k in range(205)]
    return write_lines(path, *lines)


@pytest.mark.parametrize("sample", ["fixture", "zh_news"])
def test_default_search_same_as_local_default(spark: SparkSession, tmp_path: Path, sample: str) -> None:
    """Without -k both run the verified shingle LSH: byte-identical pairs, clusters, summary."""
    if sample == "fixture":
        source = _default_fixture(tmp_path / "docs.jsonl")
    else:
        lines = shared_file("dev/zh_news.jsonl").read_bytes().splitlines(keepends=True)[:800]
        source = tmp_path / "zh_sample.jsonl"
        source.write_bytes(b"".join(lines))
    results = {}
    for kind in ("local", "spark"):
        outputs = [f"--pairs={tmp_path / f'{kind}.p.jsonl'}", f"--clusters={tmp_path / f'{kind}.c.jsonl'}"]
        args = ["dedup", str(source), *outputs, "--keep", "longest"]
        result = _run(_spark_args(*args[1:]) if kind == "spark" else args)
        assert result.exit_code == 0, result.output
        results[kind] = result.stderr.strip().splitlines()[-1]
    assert results["spark"] == results["local"]
    assert "by LSH" in results["local"] and ", 0 pairs" not in results["local"]
    for output in ("p", "c"):
        assert (tmp_path / f"spark.{output}.jsonl").read_bytes() == (
            tmp_path / f"local.{output}.jsonl"
        ).read_bytes()


def test_the_library_call_writes_what_the_command_writes(spark: SparkSession, tmp_path: Path) -> None:
    """``neardup.spark.dedup.dedup`` (the call the command makes) on a job built by hand
    writes the command's pairs and clusters byte for byte, and refuses a CSV input first."""
    from neardup.spark.dedup import dedup
    from neardup.spark.job import DedupJob
    from neardup.spark.output import Outputs

    source = _default_fixture(tmp_path / "docs.jsonl")
    command = [f"--pairs={tmp_path / 'cli.p.jsonl'}", f"--clusters={tmp_path / 'cli.c.jsonl'}"]
    assert _run(_spark_args(str(source), *command)).exit_code == 0
    job = DedupJob(
        input=str(source), read=ReadSettings(format="jsonl"), config=FingerprintConfig(), max_distance=None
    )
    outputs = Outputs(pairs=str(tmp_path / "lib.p.jsonl"), clusters=str(tmp_path / "lib.c.jsonl"))
    result = dedup(job, outputs, master="local[2]", conf=SPARK_CONF)
    assert result.records > 0 and result.pairs > 0 and result.session_seconds >= 0
    for output in ("p", "c"):
        assert (tmp_path / f"lib.{output}.jsonl").read_bytes() == (
            tmp_path / f"cli.{output}.jsonl"
        ).read_bytes()
    with pytest.raises(ConfigError, match="JSONL or Parquet"):
        dedup(dataclasses.replace(job, read=ReadSettings(format="csv")), outputs)


def test_spark_search_simhash_needs_k(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "d.jsonl", {"id": 1, "text": "x"})
    result = CliRunner().invoke(
        main, ["spark", "dedup", str(source), "--pairs", str(tmp_path / "p.jsonl"), "--search", "simhash"]
    )
    assert result.exit_code == 2 and "give -k K" in result.stderr


# -- connected components -----------------------------------------------------------------------


def _labels(
    spark: SparkSession, edges: list[tuple[int, int]], rounds: list[int] | None = None
) -> dict[int, int]:
    frame = spark.createDataFrame(edges, "u long, v long")
    return {
        int(row["node"]): int(row["root"]) for row in connected_components(frame, rounds=rounds).collect()
    }


def _scipy_labels(nodes: int, edges: list[tuple[int, int]]) -> dict[int, int]:
    i, j = zip(*edges, strict=True) if edges else ((), ())
    labels = components(nodes, list(i), list(j)).tolist()
    touched = {node for edge in edges for node in edge}
    return {node: labels[node] for node in sorted(touched)}


def test_components_match_scipy_on_random_chains_and_paths(spark: SparkSession) -> None:
    rng = np.random.default_rng(9)
    nodes = 400
    permutation = rng.permutation(nodes).tolist()
    edges: list[tuple[int, int]] = []
    # A path of 120 nodes in shuffled id order (the hard case: long diameter, no order to exploit),
    edges += [(permutation[k], permutation[k + 1]) for k in range(119)]
    # a chain in id order, a star, a cycle, random sparse edges and a self-loop.
    edges += [(k, k + 1) for k in range(400, 439)]
    edges += [(440, k) for k in range(441, 460)]
    edges += [(460 + k, 460 + (k + 1) % 12) for k in range(12)]
    edges += [tuple(int(x) for x in rng.integers(120, nodes, 2)) for _ in range(60)]  # type: ignore[misc]
    edges += [(470, 470)]
    rounds: list[int] = []
    found = _labels(spark, edges, rounds)
    expected = _scipy_labels(480, [edge for edge in edges if edge[0] != edge[1]])
    assert found == expected
    assert rounds and rounds[0] <= 20


def test_components_of_no_edges(spark: SparkSession) -> None:
    assert _labels(spark, []) == {}


# -- block keys, pair search and the second hash -----------------------------------------------------


def _fingerprint_frame(spark: SparkSession, words: np.ndarray) -> Any:
    words = words.reshape(len(words), -1).astype(np.uint64)
    low = words[:, 0].view(np.int64).tolist()
    high = words[:, 1].view(np.int64).tolist() if words.shape[1] == 2 else [0] * len(words)
    rows = [(order_key(0, index * 3), a, b) for index, (a, b) in enumerate(zip(low, high, strict=True))]
    return spark.createDataFrame(rows, "order long, w0 long, w1 long")


@pytest.mark.parametrize("bits", [32, 64, 128])
def test_sql_keys_equal_bit_selection_extract(spark: SparkSession, bits: int) -> None:
    rng = np.random.default_rng(bits)
    words = rng.integers(0, 2**64, size=(50, 2 if bits == 128 else 1), dtype=np.uint64)
    if bits == 32:
        words &= np.uint64(0xFFFFFFFF)
    scheme = BlockScheme(bits, 3, 6, 2)
    plan = VerifyPlan(scheme, 3)
    selections = [*plan.keys, *plan.sub_blocks(0), *plan.sub_blocks(scheme.table_count - 1)]
    frame = _fingerprint_frame(spark, words)
    columns = [F.col("w0"), F.col("w1")]
    rows = frame.orderBy("order").select(*[selection_column(s, columns) for s in selections]).collect()
    found = np.array([list(row) for row in rows], dtype=np.int64).view(np.uint64)
    for index, selection in enumerate(selections):
        assert found[:, index].tolist() == selection.extract(words).tolist(), selection


def _planted(rng: np.random.Generator, count: int, shared_top: int) -> np.ndarray:
    """Random 64-bit fingerprints, ``shared_top`` of them sharing their top 20 bits (a skewed
    bucket), with near-duplicates (1-3 flipped bits) of a few of them."""
    values = rng.integers(0, 2**64, size=count, dtype=np.uint64)
    values[:shared_top] = (values[:shared_top] & np.uint64((1 << 44) - 1)) | np.uint64(0xABCDE << 44)
    copies = []
    for source in rng.choice(count, 40, replace=False):
        flipped = values[source]
        for bit in rng.choice(44, int(rng.integers(1, 4)), replace=False):
            flipped ^= np.uint64(1 << int(bit))
        copies.append(flipped)
    return np.concatenate([values, np.array(copies, dtype=np.uint64)])


def test_pair_search_splits_crowded_buckets_and_stays_exact(spark: SparkSession) -> None:
    rng = np.random.default_rng(3)
    words = _planted(rng, 600, 300)
    scheme = BlockScheme(64, 3)  # 4 tables of 16 bits: the 300 shared top bits crowd table 0
    search = PairSearch(VerifyPlan(scheme, 3), len(words), mu=2.0, partitions=2)
    frame = _fingerprint_frame(spark, words)
    groups = search.groups(frame)
    sizes = groups.groupBy("table", "sub", "key", "subkey").count()
    crowded = sizes.where(F.col("sub") >= 0)
    assert crowded.count() > 0, "the skewed bucket was not split"
    assert crowded.agg(F.max("count")).first()[0] < 300 / 4
    pairs = search.run(spark, frame).collect()
    search.release()
    found = sorted((int(r["a"]) // 3, int(r["b"]) // 3, int(r["distance"])) for r in pairs)
    expected = brute_force_pairs(words, 3)
    assert found == list(
        zip(expected.i.tolist(), expected.j.tolist(), expected.distance.tolist(), strict=True)
    )
    assert len(found) >= 40


def test_band_buckets_pair_as_keyed_pairs_does_each_pair_once(spark: SparkSession) -> None:
    """The JVM's pairing of a bucket (all pairs, or above max_bucket those of the first hub
    members) is ``keyed_pairs``' for one band, each pair once, at sizes around max_bucket."""
    settings = CandidateSettings(max_bucket=6, hub=2)
    rng = np.random.default_rng(8)
    buckets = [sorted(rng.choice(1 << 50, size=size, replace=False).tolist()) for size in (2, 3, 6, 7, 12)]
    rows = [(key, order) for key, members in enumerate(buckets) for order in reversed(members)]
    frame = (
        spark.createDataFrame(rows, "key long, order long")
        .groupBy("key")
        .agg(F.collect_list("order").alias("members"))
    )
    pairs = frame.select("key", F.inline(bucket_pair_column(F.array_sort("members"), settings))).collect()
    for key, members in enumerate(buckets):
        found = [(int(r["a"]), int(r["b"])) for r in pairs if r["key"] == key]
        owners = np.asarray(members, dtype=np.int64)
        local = as_pairs(keyed_pairs(np.zeros(len(members)), np.arange(len(members)), 6, 2))
        expected = sorted((members[i], members[j]) for i, j in local.tolist())
        assert sorted(found) == expected == sorted(bucket_pairs(owners.tolist(), settings))
        assert len(set(found)) == len(found)
    assert len([r for r in pairs if r["key"] == 4]) == 11 + 10


def test_verify_groups_without_spark_matches_brute_force() -> None:
    """The task function alone: rows of two tables, one bucket split, each pair once."""
    rng = np.random.default_rng(5)
    words = _planted(rng, 200, 120)
    scheme = BlockScheme(64, 3)
    plan = VerifyPlan(scheme, 3)
    rows = []
    for table, key in enumerate(plan.keys):
        keys = key.extract(words.reshape(-1, 1)).view(np.int64).tolist()
        for order, (value, word) in enumerate(zip(keys, words.view(np.int64).tolist(), strict=True)):
            if table == 0:  # split every bucket of table 0 by the second hash
                for sub, selection in enumerate(plan.sub_blocks(0)):
                    subkey = int(selection.extract(words[order : order + 1].reshape(1, 1))[0])
                    rows.append((table, sub, value, subkey, order, word, 0))
            else:
                rows.append((table, -1, value, 0, order, word, 0))
    rows.sort()
    seen: dict[int, int] = {}
    found = sorted(
        (a, b, d)
        for a, b, d, _ in verify_groups(rows, plan, lambda t, n: seen.__setitem__(t, seen.get(t, 0) + n))
    )
    expected = brute_force_pairs(words, 3)
    assert found == list(
        zip(expected.i.tolist(), expected.j.tolist(), expected.distance.tolist(), strict=True)
    )
    assert set(seen) == {0, 1, 2, 3}


# -- per-task reading and fingerprints ----------------------------------------------------------------


def test_jsonl_records_order_keys_blank_lines_and_errors() -> None:
    settings = ReadSettings(format="jsonl", files=("file:/a.jsonl", "file:/b.jsonl"))
    rows = [
        ("file:/a.jsonl", 0, '\ufeff{"id": 1, "text": "x"}'.encode()),
        ("file:/a.jsonl", 0, b"   "),
        ("file:/a.jsonl", 0, b'{"id": 2, "text": 5}\r'),
        ("file:///a.jsonl", 100, b'{"id": "c", "text": "y", "title": "t"}'),
        ("file:/b.jsonl", 0, b"\xff"),
    ]
    items = list(jsonl_records(rows, settings))
    assert [order for order, _ in items] == [0, 2, 100, order_key(1, 0)]
    first, bad, third, undecodable = (item for _, item in items)
    assert isinstance(first, Record) and first.id == 1
    assert "must be a string" in str(bad)
    assert isinstance(third, Record) and third.title == "t"
    assert "invalid UTF-8" in str(undecodable)


def test_fingerprint_records_match_the_fingerprinter(default_fingerprinter: Fingerprinter) -> None:
    texts = ["中央关于１９９８年工作的指导方针", "near-duplicate detection with simhash", ""]
    records = [(index, Record(index, text, None, "")) for index, text in enumerate(texts)]
    settings = ReadSettings(format="jsonl", keep_rows=True)
    rows = list(fingerprint_records(iter(records), default_fingerprinter, settings, 2, 1000))
    expected = default_fingerprinter.fingerprint_many(texts).view(np.int64).tolist()
    assert [row[4] for row in rows] == expected
    assert [row[3] for row in rows] == [False, False, True]
    assert json.loads(str(rows[1][6])) == {"id": 1, "text": texts[1]}


# -- errors, Parquet, usage ------------------------------------------------------------------------


def test_bad_records_and_repeated_ids_give_the_local_messages(spark: SparkSession, tmp_path: Path) -> None:
    source = write_lines(
        tmp_path / "bad.jsonl",
        {"id": "a", "text": "the first text about simhash fingerprints"},
        b"not json",
        {"id": "b", "text": "another text"},
        {"id": "a", "text": "a repeated id"},
    )
    for extra in ([], ["--on-error", "skip"]):
        local = CliRunner().invoke(main, ["dedup", str(source), "--pairs", str(tmp_path / "p.jsonl"), *extra])
        remote = CliRunner().invoke(
            main, _spark_args(str(source), "--pairs", str(tmp_path / "s.jsonl"), *extra)
        )
        assert remote.exit_code == local.exit_code == 1
        assert remote.stderr.strip().splitlines()[-1] == local.stderr.strip().splitlines()[-1]
    skipping = write_lines(
        tmp_path / "skip.jsonl", {"id": 1, "text": "one"}, b"[1, 2]", {"id": 2, "text": "one"}
    )
    local = _run(["dedup", str(skipping), "--clusters", str(tmp_path / "l.jsonl"), "--on-error", "skip"])
    remote = _run(_spark_args(str(skipping), "--clusters", str(tmp_path / "r.jsonl"), "--on-error", "skip"))
    assert remote.stderr.strip().splitlines()[-2:] == local.stderr.strip().splitlines()[-2:]
    assert (tmp_path / "r.jsonl").read_bytes() == (tmp_path / "l.jsonl").read_bytes()


def test_parquet_input_and_output(spark: SparkSession, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    text = "Near-duplicate detection finds pages that differ only in small edits such as timestamps."
    table = pa.table({"id": [10, 11, 12], "text": [text, text.upper(), "an unrelated sentence entirely"]})
    source = tmp_path / "docs.parquet"
    pq.write_table(table, source)
    local = _run(["dedup", str(source), "--pairs", str(tmp_path / "pairs.jsonl")])
    remote = _run(_spark_args(str(source), "--pairs", str(tmp_path / "pairs.parquet")))
    assert remote.exit_code == 0, remote.output
    written = pq.read_table(tmp_path / "pairs.parquet").to_pylist()
    expected = [json.loads(line) for line in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    assert written == expected and len(expected) == 1
    assert remote.stderr.strip().splitlines()[-1] == local.stderr.strip().splitlines()[-1]


def test_usage_errors_before_spark_starts(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["spark", "dedup", str(tmp_path / "missing.jsonl"), "--pairs", "p.jsonl"]
    )
    assert result.exit_code == 1 and "no such file" in result.stderr
    csv = tmp_path / "docs.csv"
    csv.write_text("id,text\n1,x\n")
    result = CliRunner().invoke(main, ["spark", "dedup", str(csv), "--pairs", str(tmp_path / "p.jsonl")])
    assert result.exit_code == 1 and "JSONL or Parquet" in result.stderr
    result = CliRunner().invoke(main, ["spark", "dedup", str(csv)])
    assert result.exit_code == 2 and "nothing to write" in result.stderr


def test_without_pyspark_the_command_prints_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import neardup.spark

    monkeypatch.setattr(neardup.spark, "find_spec", lambda name: None)
    result = CliRunner().invoke(main, ["spark", "dedup", "x.jsonl", "--pairs", "p.jsonl"])
    assert result.exit_code == 1
    assert "pip install 'neardup[spark]'" in result.stderr

"""The Spark job keeps nothing per record on the driver: the short documents' prefix search
runs as Spark operations (the candidates of ``prefix_pairs``, hub rule and ties included), a
corpus of short documents gives ``neardup dedup``'s files byte for byte while no per-record
row is collected to the driver, and the file outputs are written by the executors."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neardup import FingerprintConfig, Fingerprinter
from neardup.dedup.candidates import CandidateSettings
from neardup.dedup.key_buckets import as_pairs
from neardup.dedup.prefix_search import prefix_pairs
from neardup.similarity.shingles import shingles_of

from .conftest import read_jsonl, shared_file, write_lines
from .test_spark import _default_fixture, _run, _spark_args, spark  # noqa: F401 - the session fixture

pytestmark = pytest.mark.spark

from pyspark.sql import SparkSession  # noqa: E402 - after test_spark's skips
from pyspark.sql import functions as F  # noqa: E402

from neardup.errors import OutputError  # noqa: E402
from neardup.spark.job import DedupJob, run_dedup  # noqa: E402
from neardup.spark.keyed import prefix_candidates  # noqa: E402
from neardup.spark.output import Outputs, part_names, write_single  # noqa: E402
from neardup.spark.progress import StageProgress  # noqa: E402
from neardup.spark.session import session_settings  # noqa: E402
from neardup.spark.tasks import ReadSettings  # noqa: E402

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


# -- rows on the driver --------------------------------------------------------------------------

#: Rows the job may collect whatever the corpus size: the counts, the pair totals and the
#: cluster summary (one aggregate row each).
DRIVER_ROWS = 3


class Collected:
    """Counts the rows (or Arrow batches) that reach the driver's Python: every collect, take,
    first, toLocalIterator, toPandas and runJob reads them through pyspark.util's
    ``_load_from_socket`` or ``_local_iterator_from_socket``, patched here in each pyspark
    module that imported them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import pyspark.util

        self.rows = 0
        wrappers: dict[str, Callable[[Any], Any]] = {
            "_load_from_socket": self._loader,
            "_local_iterator_from_socket": self._iterator,
        }
        originals = {name: getattr(pyspark.util, name) for name in wrappers}
        patched = 0
        for module in [m for name, m in sys.modules.items() if name.startswith("pyspark") and m is not None]:
            for name, wrap in wrappers.items():
                original = originals[name]
                if getattr(module, name, None) is original:
                    monkeypatch.setattr(module, name, wrap(original))
                    patched += 1
        assert patched >= 4, "pyspark no longer reads results where this test looks"

    def _counted(self, items: Iterable[Any]) -> Iterator[Any]:
        for item in items:
            self.rows += int(getattr(item, "num_rows", 1))
            yield item

    def _loader(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @contextlib.contextmanager
        def load(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with original(*args, **kwargs) as stream:
                yield self._counted(stream)

        return load

    def _iterator(self, original: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *args, **kwargs: self._counted(original(*args, **kwargs))


def test_spark_collected_counts_every_way_rows_reach_the_driver(
    spark: SparkSession,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The counter the next tests rely on sees each way of bringing rows to the driver."""
    collected = Collected(monkeypatch)
    frame = spark.range(40)
    assert len(frame.collect()) == 40 and collected.rows == 40
    assert len(list(frame.toLocalIterator())) == 40 and collected.rows == 80
    assert frame.first() is not None and len(frame.take(3)) == 3 and collected.rows == 84
    assert spark.sparkContext.parallelize(range(10), 2).collect() == list(range(10))
    assert spark.sparkContext.parallelize(range(10), 2).take(2) == [0, 1]
    assert len(list(frame.rdd.toLocalIterator())) == 40 and collected.rows == 136


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


def test_spark_all_short_corpus_same_files_as_local_with_no_rows_on_the_driver(
    spark: SparkSession,  # noqa: F811
    tmp_path: Path,
    default_fingerprinter: Fingerprinter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every record short: the distributed prefix search gives local's pairs and clusters, and
    the job (search, clusters, single-file outputs) collects a fixed few aggregate rows."""
    source = _short_corpus(tmp_path / "short.jsonl", default_fingerprinter)
    assert len(source.read_bytes().splitlines()) > 1000
    results = {}
    for kind in ("local", "spark"):
        outputs = [f"--pairs={tmp_path / f'{kind}.p.jsonl'}", f"--clusters={tmp_path / f'{kind}.c.jsonl'}"]
        args = ["dedup", str(source), *outputs]
        if kind == "spark":
            collected = Collected(monkeypatch)
        result = _run(_spark_args(*args[1:]) if kind == "spark" else args)
        assert result.exit_code == 0, result.output
        results[kind] = result.stderr.strip().splitlines()[-1]
    assert collected.rows <= DRIVER_ROWS, f"{collected.rows} rows collected to the driver"
    assert results["spark"] == results["local"]
    assert "by LSH" in results["local"] and ", 0 pairs" not in results["local"]
    for output in ("p", "c"):
        local = (tmp_path / f"local.{output}.jsonl").read_bytes()
        assert (tmp_path / f"spark.{output}.jsonl").read_bytes() == local, output


# -- single-file outputs, written by the executors ------------------------------------------------


def _lines(spark: SparkSession, count: int) -> Any:  # noqa: F811
    """A sorted ``line`` frame over several partitions, with non-ASCII text."""
    frame = spark.range(count, numPartitions=3).select(
        F.concat(F.lit('{"id":"'), F.col("id").cast("string"), F.lit('","t":"é中"}')).alias("line"), "id"
    )
    return frame.orderBy(F.col("id").desc()).select("line")


def _expected(count: int) -> bytes:
    return b"".join(f'{{"id":"{k}","t":"é中"}}\n'.encode() for k in reversed(range(count)))


@pytest.mark.parametrize("staging", ["local", "remote"])
def test_spark_single_file_is_joined_from_part_files_in_order(
    spark: SparkSession,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
    staging: str,
) -> None:
    """The executors write part files (beside the target, or in a folder every executor
    reaches, copied to the driver part by part); the driver joins their bytes without a row
    collected, and leaves no staged file behind."""
    remote = (tmp_path / "remote").as_uri() if staging == "remote" else None
    target = tmp_path / "out" / "lines.jsonl"
    target.parent.mkdir()
    collected = Collected(monkeypatch)
    write_single(_lines(spark, 2500), str(target), remote)
    write_single(_lines(spark, 0), str(tmp_path / "out" / "empty.jsonl"), remote)
    write_single(_lines(spark, 3), "-", remote)
    assert collected.rows == 0
    assert target.read_bytes() == _expected(2500)
    assert (tmp_path / "out" / "empty.jsonl").read_bytes() == b""
    assert capsysbinary.readouterr().out == _expected(3)
    assert sorted(p.name for p in target.parent.iterdir()) == ["empty.jsonl", "lines.jsonl"]
    assert not (tmp_path / "remote").exists()


def test_spark_a_failed_single_file_write_keeps_the_old_file(
    spark: SparkSession,  # noqa: F811
    tmp_path: Path,
) -> None:
    target = write_lines(tmp_path / "pairs.jsonl", "the previous run")
    line = F.when(F.col("id") == 77, F.raise_error(F.lit("boom"))).otherwise(F.col("id").cast("string"))
    failing = spark.range(100, numPartitions=2).select(line.alias("line"))
    with pytest.raises(OutputError, match="cannot write"):
        write_single(failing, str(target))
    assert target.read_bytes() == b"the previous run\n"
    assert [p.name for p in tmp_path.iterdir()] == ["pairs.jsonl"]


def test_part_names_sort_by_partition_number() -> None:
    names = ["_SUCCESS", "part-100000-x-c000.txt", "part-99999-x-c000.txt", ".part-00000-x.crc"]
    names.append("part-00002-x")
    assert part_names(names) == ["part-00002-x", "part-99999-x-c000.txt", "part-100000-x-c000.txt"]


# -- the session ---------------------------------------------------------------------------------


#: 127.0.0.1 in the kernel's socket tables, as IPv4 and as IPv4-mapped IPv6.
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}


def _listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp* show them) listening on ``port``."""
    tables = [Path(f"/proc/net/{name}") for name in ("tcp", "tcp6")]
    if not tables[0].exists():  # pragma: no cover - Linux is where the tests run
        pytest.skip("needs /proc/net/tcp")
    rows = [row.split() for table in tables if table.exists() for row in table.read_text().splitlines()[1:]]
    return [row[1].rsplit(":", 1)[0] for row in rows if row[3] == "0A" and row[1].endswith(f":{port:04X}")]


def test_spark_local_driver_binds_the_loopback_address(spark: SparkSession) -> None:  # noqa: F811
    """The tests' local[2] session (built by build_session): the driver's RPC port listens
    on 127.0.0.1 only."""
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    addresses = _listening(int(str(conf.get("spark.driver.port"))))
    assert addresses and set(addresses) <= LOOPBACK, addresses


#: A session of its own with the web UI on: prints the UI's and the driver's ports, then
#: waits for a line on stdin before it stops.
UI_PROBE = """
import sys
from urllib.parse import urlsplit
from neardup.spark.session import build_session
session = build_session("local[1]", 1, {"spark.ui.enabled": "true", "spark.driver.memory": "512m"})
context = session.sparkContext
print(urlsplit(context.uiWebUrl).port, context.getConf().get("spark.driver.port"), flush=True)
sys.stdin.readline()
session.stop()
"""


def test_spark_local_web_ui_listens_on_the_loopback_only(tmp_path: Path) -> None:
    """A JVM launched for a local master: its web UI, which binds by SPARK_LOCAL_IP alone,
    listens on 127.0.0.1 too."""
    environment = {key: value for key, value in os.environ.items() if key != "SPARK_LOCAL_IP"}
    with subprocess.Popen(
        [sys.executable, "-c", UI_PROBE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=environment,
        cwd=tmp_path,
    ) as probe:
        assert probe.stdin is not None and probe.stdout is not None
        ports = [int(port) for port in probe.stdout.readline().split()]
        try:
            assert len(ports) == 2, "the probe session did not start"
            for port in ports:
                addresses = _listening(port)
                assert addresses and set(addresses) <= LOOPBACK, (port, addresses)
        finally:
            probe.stdin.write("\n")
            probe.stdin.close()
            probe.wait(timeout=120)


def test_spark_session_settings_bind_loopback_in_local_mode_only(spark: SparkSession) -> None:  # noqa: F811
    from pyspark import SparkConf

    nothing = SparkConf(loadDefaults=False)
    for master in ("local[2]", "local", None):
        assert session_settings(master, None, None, nothing)["spark.driver.host"] == "127.0.0.1"
    for master in ("yarn", "spark://host:7077", "k8s://https://host"):
        assert "spark.driver.host" not in session_settings(master, None, None, nothing)
    yarn = SparkConf(loadDefaults=False).setMaster("yarn")
    assert "spark.driver.bindAddress" not in session_settings(None, None, None, yarn)
    mine = session_settings("local[2]", 4, {"spark.driver.host": "10.1.2.3"}, nothing)
    assert mine["spark.driver.host"] == "10.1.2.3" and mine["spark.sql.shuffle.partitions"] == "4"
    submitted = SparkConf(loadDefaults=False).set("spark.driver.bindAddress", "0.0.0.0")
    assert "spark.driver.bindAddress" not in session_settings("local[2]", None, None, submitted)
    # pyspark's own launch turns Spark's console bar on; the command's stage bars replace it.
    shell = SparkConf(loadDefaults=False).set("spark.ui.showConsoleProgress", "true")
    assert session_settings(None, None, None, shell)["spark.ui.showConsoleProgress"] == "false"
    wanted = {"spark.ui.showConsoleProgress": "true"}
    assert session_settings(None, None, wanted, shell)["spark.ui.showConsoleProgress"] == "true"


# -- progress per stage ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "stages"),
    [
        ("--progress", ["fingerprints", "buckets", "pairs", "clusters", "output"]),
        (None, ["fingerprints", "buckets", "pairs", "clusters", "output"]),
        ("--no-progress", []),
    ],
)
def test_spark_dedup_reports_each_stage_on_stderr(
    spark: SparkSession,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flag: str | None,
    stages: list[str],
) -> None:
    """A bar per stage (--progress, as on a terminal), plain lines off a terminal (every
    line, with the interval at 0: each stage's last says all its tasks are done), none with
    --no-progress; each with the stage's records/s."""
    monkeypatch.setattr("neardup.cli.common.PROGRESS_INTERVAL", 0.0)
    source = _default_fixture(tmp_path / "docs.jsonl")
    args = [str(source), f"--pairs={tmp_path / 'p.jsonl'}", *([flag] if flag else ["-k", "3"])]
    result = _run(_spark_args(*args))
    assert result.exit_code == 0, result.output
    text = result.stderr
    named = [
        name
        for name in ("fingerprints", "buckets", "pairs", "clusters", "output")
        if f"spark {name}:" in text
    ]
    assert named == stages and (not stages or "records/s" in text)
    positions = [text.index(f"spark {name}:") for name in stages]
    assert positions == sorted(positions)
    if flag is None:
        lines = [line for line in text.splitlines() if line.startswith("neardup: spark ")]
        for name in stages:
            last = [line for line in lines if line.startswith(f"neardup: spark {name}:")][-1]
            assert "tasks (100%)" in last, last
        assert any(
            line.startswith("neardup: spark fingerprints:") and " 0 records/s" not in line for line in lines
        )


def test_spark_run_dedup_reports_stages_with_records(spark: SparkSession, tmp_path: Path) -> None:  # noqa: F811
    """The library call's ``progress``: every stage ends with a finished report, in order; the
    fingerprint stage counts the records, which the later stages carry."""
    source = _default_fixture(tmp_path / "docs.jsonl")
    job = DedupJob(
        input=str(source), read=ReadSettings(format="jsonl"), config=FingerprintConfig(), max_distance=None
    )
    reports: list[StageProgress] = []
    result = run_dedup(spark, job, Outputs(pairs=str(tmp_path / "p.jsonl")), progress=reports.append)
    finished = [report for report in reports if report.finished]
    assert [report.stage for report in finished] == ["fingerprints", "buckets", "pairs", "clusters", "output"]
    assert list(result.seconds) == [report.stage for report in finished]
    assert all(report.done == report.tasks > 0 and report.records == result.records for report in finished)
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None

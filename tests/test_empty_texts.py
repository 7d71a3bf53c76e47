"""Issue 29's one rule for texts without letters or digits: they pair with nothing and are
counted as empty, on all four paths (batch, index, service, Spark), under both searches.

"Empty" is what each search has nothing to compare in. The LSH search (batch's default, the
band index ``Index.open`` creates) compares shingles: a text without shingles is empty. The
Simhash search (``-k K``, a Simhash index) compares fingerprints: a text without features
(fingerprint 0) is empty, and would otherwise sit within K bits of every other such text. The
stopword-only Chinese text "的 了 ！！" has letters, hence shingles: under LSH it is an
ordinary text (its two copies are a pair); its only words are stopwords, so it has no
features and under Simhash it is empty. Every path must follow its search's definition.

The Spark test is marked ``spark`` by its name (tests/conftest.py) and runs outside the fast
lane; the rest takes a few seconds."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import neardup
from neardup import DedupSettings, FingerprintConfig, Index, IndexConfig, Record
from neardup.cli.main import main

from .conftest import write_lines

#: The distance of the Simhash search: the real near-duplicates below are 3 and 4 bits apart.
K = 6
NEWS = (
    "The central bank raised interest rates by a quarter point on Tuesday, citing persistent "
    "inflation and strong wage growth across the economy."
)
ZH = (
    "近日，国家统计局发布了最新的经济数据，显示第三季度国内生产总值同比增长百分之四点九，消费和投资保持稳定。"
)
#: Texts without letters or digits: empty under both searches. Two are repeated, so a rule
#: that paired empty texts with each other would show.
NO_LETTERS = {
    "blank": "",
    "spaces": "   ",
    "dots": "...",
    "marks": "!!! ???",
    "dashes": "——",
    "emoji": "😀🎉👍",
    "dots-again": "...",
    "emoji-again": "😀🎉👍",
}
#: Letters, but only stopwords: empty under Simhash (no features), a pair under LSH.
STOPWORDS_ONLY = {"stopwords": "的 了 ！！", "stopwords-again": "的 了 ！！"}
DOCUMENTS: list[tuple[str, str]] = [
    ("news", NEWS),
    *list(NO_LETTERS.items())[:4],
    ("stopwords", STOPWORDS_ONLY["stopwords"]),
    ("zh", ZH),
    ("news-edited", NEWS.replace("Tuesday", "Wednesday")),
    *list(NO_LETTERS.items())[4:],
    ("zh-edited", ZH + "记者报道。"),
    ("stopwords-again", STOPWORDS_ONLY["stopwords-again"]),
]
REAL_PAIRS = {("news", "news-edited"), ("zh", "zh-edited")}


@dataclass(frozen=True)
class Expected:
    """What one search must give on DOCUMENTS: its pairs (ids, input order) and empty ids."""

    pairs: set[tuple[str, str]]
    empty: set[str]


EXPECTED = {
    "lsh": Expected(REAL_PAIRS | {("stopwords", "stopwords-again")}, set(NO_LETTERS)),
    "simhash": Expected(REAL_PAIRS, set(NO_LETTERS) | set(STOPWORDS_ONLY)),
}
SEARCHES = sorted(EXPECTED)


def _records() -> list[Record]:
    return [Record(key, text, None, f"line {n + 1}") for n, (key, text) in enumerate(DOCUMENTS)]


def _input(tmp_path: Path) -> Path:
    return write_lines(tmp_path / "in.jsonl", *[{"id": key, "text": text} for key, text in DOCUMENTS])


def _pairs_file(path: Path) -> set[tuple[str, str]]:
    return {(row["a"], row["b"]) for row in map(json.loads, path.read_text().splitlines())}


def _summary(output: str) -> str:
    return output.strip().splitlines()[-1]


def _index_config(search: str) -> IndexConfig | None:
    """None: the band index ``Index.open`` creates (LSH); else an explicit Simhash index."""
    return None if search == "lsh" else IndexConfig(max_distance=K, fingerprint=FingerprintConfig())


def _found_pairs(results: list[tuple[Any, list[Any]]]) -> set[tuple[str, str]]:
    """(earlier id, later id) of each (checked id, matched stored ids), in input order."""
    position = {key: n for n, (key, _) in enumerate(DOCUMENTS)}
    pairs = set()
    for key, matched in results:
        for other in matched:
            first, second = sorted((key, other), key=position.__getitem__)
            pairs.add((first, second))
    return pairs


# -- batch -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("search", SEARCHES)
def test_batch_library(search: str) -> None:
    settings = DedupSettings() if search == "lsh" else DedupSettings(max_distance=K)
    result = neardup.dedup_documents(_records(), settings=settings)
    assert result.search.method == search
    assert {(row["a"], row["b"]) for row in result.pair_rows()} == EXPECTED[search].pairs
    assert result.summary.empty == len(EXPECTED[search].empty)


@pytest.mark.parametrize("search", SEARCHES)
def test_batch_command(tmp_path: Path, search: str) -> None:
    pairs = tmp_path / "pairs.jsonl"
    args = [
        "dedup",
        str(_input(tmp_path)),
        "--pairs",
        str(pairs),
        *(["-k", str(K)] if search != "lsh" else []),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert f"; {len(EXPECTED[search].empty)} empty;" in _summary(result.stderr), result.stderr
    assert _pairs_file(pairs) == EXPECTED[search].pairs


# -- index -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("search", SEARCHES)
def test_index_library(tmp_path: Path, search: str) -> None:
    """check_and_add_texts: an empty text starts its own cluster and matches nothing, and
    nothing matches it; query_texts of an empty text finds nothing once all are stored."""
    expected = EXPECTED[search]
    with Index.open(f"sqlite:///{tmp_path}/x.db", _index_config(search)) as index:
        assert (index.index.bands is None) == (search == "simhash")
        prepared = index.prepare(_records())
        assert prepared.empty is not None
        assert {key for key, empty in zip(prepared.keys, prepared.empty.tolist(), strict=True) if empty} == (
            expected.empty
        )
        checked = index.check_and_add_texts(DOCUMENTS)
        for result in checked:
            if result.key in expected.empty:
                assert (result.cluster, result.duplicate, result.matches) == (result.key, False, [])
        assert _found_pairs([(r.key, [m.key for m in r.matches]) for r in checked]) == expected.pairs
        found = index.query_texts([text for _, text in DOCUMENTS])
        for (key, _), matches in zip(DOCUMENTS, found, strict=True):
            keys = [match.key for match in matches]
            assert (keys == []) if key in expected.empty else (key in keys), (key, keys)
            assert not expected.empty.intersection(keys), (key, keys)


@pytest.mark.parametrize("search", SEARCHES)
def test_dedup_against_an_index_command(tmp_path: Path, search: str) -> None:
    """``neardup dedup X --index PATH`` into a new band index, or a Simhash index made first."""
    url = str(tmp_path / "x.db")
    config = _index_config(search)
    if config is not None:
        Index.open(url, config).close()
    pairs = tmp_path / "pairs.jsonl"
    result = CliRunner().invoke(main, ["dedup", str(_input(tmp_path)), "--index", url, "--pairs", str(pairs)])
    assert result.exit_code == 0, result.output
    assert f"; {len(EXPECTED[search].empty)} empty;" in result.output, result.output
    assert _pairs_file(pairs) == EXPECTED[search].pairs


# -- service ---------------------------------------------------------------------------------------


@contextmanager
def _service(tmp_path: Path, search: str) -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    """A TestClient of the service over a new index of the search (the LSH band index or a
    Simhash one), holding DOCUMENTS, with their /v1/check results."""
    pytest.importorskip("fastapi", reason="the service tests need the 'service' extra (fastapi, httpx)")
    from fastapi.testclient import TestClient

    from neardup.service import ServiceSettings, create_app

    documents = [{"id": key, "text": text} for key, text in DOCUMENTS]
    with (
        Index.open(f"sqlite:///{tmp_path}/s.db", _index_config(search)) as index,
        TestClient(create_app(index, ServiceSettings())) as client,
    ):
        response = client.post("/v1/check", json={"documents": documents})
        assert response.status_code == 200, response.text
        yield client, response.json()["results"]


@pytest.mark.parametrize("search", SEARCHES)
def test_service_check(tmp_path: Path, search: str) -> None:
    expected = EXPECTED[search]
    with _service(tmp_path, search) as (_, results):
        for result in (r for r in results if r["id"] in expected.empty):
            assert result["cluster"] == result["id"] and not result["duplicate"] and not result["matches"]
        assert _found_pairs([(r["id"], [m["id"] for m in r["matches"]]) for r in results]) == expected.pairs


#: A text query of an index without a verifier (a Simhash index) once went through the bare
#: fingerprint search, so "..." found every stored empty text (fingerprint 0).
@pytest.mark.parametrize("search", ["lsh", "simhash"])
def test_service_query(tmp_path: Path, search: str) -> None:
    expected = EXPECTED[search]
    with _service(tmp_path, search) as (client, _):
        for key, text in DOCUMENTS:
            response = client.post("/v1/query", json={"text": text})
            assert response.status_code == 200, response.text
            keys = [match["id"] for match in response.json()["matches"]]
            assert (keys == []) if key in expected.empty else (key in keys), (key, keys)
            assert not expected.empty.intersection(keys), (key, keys)


# -- Spark -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_spark() -> Iterator[None]:
    """One local[2] session for this module's Spark runs (the command joins it), stopped after."""
    pytest.importorskip("pyspark", reason="needs pyspark: pip install 'neardup[spark]'")
    if shutil.which("java") is None:  # pragma: no cover - Java is on the development machines
        pytest.skip("needs a Java runtime for Spark (java not on PATH)")
    from neardup.spark.session import build_session

    conf = {"spark.ui.enabled": "false", "spark.driver.memory": "1g", "spark.default.parallelism": "2"}
    session = build_session("local[2]", 2, conf, app_name="neardup-tests")
    yield
    session.stop()


@pytest.mark.parametrize("search", SEARCHES)
def test_spark_job_same_as_local(local_spark: None, tmp_path: Path, search: str) -> None:
    """``neardup spark dedup`` prints the local summary and writes the local pairs, byte for byte."""
    source = str(_input(tmp_path))
    distance = ["-k", str(K)] if search != "lsh" else []
    local = CliRunner().invoke(main, ["dedup", source, "--pairs", str(tmp_path / "l.jsonl"), *distance])
    options = ["--pairs", str(tmp_path / "s.jsonl"), *distance, "--master", "local[2]", "--partitions", "2"]
    spark = CliRunner().invoke(main, ["spark", "dedup", source, *options])
    assert local.exit_code == spark.exit_code == 0, spark.output
    assert _summary(spark.stderr) == _summary(local.stderr)
    assert f"; {len(EXPECTED[search].empty)} empty;" in _summary(spark.stderr)
    assert (tmp_path / "s.jsonl").read_bytes() == (tmp_path / "l.jsonl").read_bytes()
    assert _pairs_file(tmp_path / "s.jsonl") == EXPECTED[search].pairs

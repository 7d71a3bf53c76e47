"""The batch pipeline as a library call (``neardup.dedup_documents``): the same pairs,
clusters, kept records and summary as ``neardup dedup``, stages that compose to the same
result, and one normalizer for fingerprints and their verification."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from neardup import DedupResult, DedupSettings, FingerprintConfig, Fingerprinter, dedup_documents
from neardup.cli.main import main
from neardup.dedup.pipeline import check_candidates, cluster, collect, measure_distances, search_candidates
from neardup.io.read import read_records
from neardup.io.record import record_row

from .conftest import read_jsonl, shared_file, write_lines

ARTICLE = (
    "Near-duplicate detection finds web pages that differ only in small edits, such as advertisements, "
    "timestamps or navigation bars. Charikar's simhash maps each document to a short fingerprint so that "
    "similar documents get fingerprints that differ in only a few bits, and a search engine can compare "
    "billions of pages by counting differing bits instead of reading their text."
)
NEWS = (
    "近似重复文档检测是信息检索中的重要问题。搜索引擎每天抓取数以亿计的网页，其中很多网页只是转载、"
    "镜像或者在原文上加了广告和时间戳。系统只要比较海明距离，就能快速找出这些重复的网页。"
)
CORPUS: list[dict[str, Any]] = [
    {"id": 1, "text": ARTICLE, "tags": ["simhash"]},
    {"id": "b", "text": "The weather in Beijing is fine today, and the parks are full of people."},
    {"id": 3, "text": ARTICLE.replace("billions", "millions").replace("short", "compact")},
    {"id": "d", "text": "来源：人民网  " + NEWS},
    {"id": 5, "text": NEWS, "title": "近似重复"},
    {"id": 6, "text": ARTICLE + " Reprinted with permission."},
    {"id": 7, "text": "   "},
]
# One sentence in simplified and in traditional characters (OpenCC s2t of the first).
SIMPLIFIED = "中国经济发展迅速，人民生活水平不断提高，国家对教育和医疗的投入逐年增加。"
TRADITIONAL = "中國經濟發展迅速，人民生活水平不斷提高，國家對教育和醫療的投入逐年增加。"


def run_cli(source: Path, tmp_path: Path, *options: str) -> tuple[Result, list[dict[str, Any]], list[Any]]:
    pairs, clusters = tmp_path / "pairs.jsonl", tmp_path / "clusters.jsonl"
    words = ["dedup", str(source), "--pairs", str(pairs), "--clusters", str(clusters), *options]
    result = CliRunner().invoke(main, words, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result, read_jsonl(pairs), read_jsonl(clusters)


def check_same_as_cli(result: DedupResult, cli: Result, pairs: list[Any], clusters: list[Any]) -> None:
    assert list(result.pair_rows()) == pairs
    assert list(result.cluster_rows()) == clusters
    assert result.summary.line() in cli.stderr.splitlines()


@pytest.mark.parametrize("options", [(), ("-k", "3"), ("--keep", "longest", "--explain")])
def test_library_call_matches_the_cli_on_a_fixture(tmp_path: Path, options: tuple[str, ...]) -> None:
    source = write_lines(tmp_path / "corpus.jsonl", *CORPUS)
    cli, pairs, clusters = run_cli(source, tmp_path, *options)
    settings = DedupSettings(
        max_distance=3 if "-k" in options else None,
        keep="longest" if "longest" in options else "first",
        explain="--explain" in options,
    )
    result = dedup_documents(read_records(source), settings=settings)
    check_same_as_cli(result, cli, pairs, clusters)
    assert result.seconds.keys() >= {"candidates", "verification", "clusters"}
    assert result.seconds.keys() & {"sketches", "fingerprints"}
    assert (result.explanations is not None) == settings.explain


def test_library_call_matches_the_cli_on_the_dev_set(tmp_path: Path) -> None:
    source = shared_file("dev/en_news.jsonl")
    cli, pairs, clusters = run_cli(source, tmp_path)
    result = dedup_documents(read_records(source))
    check_same_as_cli(result, cli, pairs, clusters)
    # The automatic search: shingle LSH, every candidate confirmed by the texts' Jaccard.
    assert (result.search.method, result.search.verify) == ("lsh", "jaccard")
    assert result.candidates - len(result.pairs) == result.summary.rejected > 0


def test_kept_records_match_emit_kept(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "corpus.jsonl", *CORPUS)
    words = ["dedup", str(source), "--emit", "kept", "--keep", "longest"]
    cli = CliRunner().invoke(main, words, catch_exceptions=False)
    settings = DedupSettings(keep="longest", keep_records=True)
    result = dedup_documents(read_records(source), settings=settings)
    emitted = [json.loads(line) for line in cli.stdout.splitlines()]
    assert [record_row(record) for record in result.selected_records()] == emitted
    dropped = [record.id for record in result.selected_records(kept=False)]
    assert len(dropped) == result.summary.dropped > 0


def test_stages_compose_to_the_same_result() -> None:
    source = shared_file("dev/zh_short.jsonl")
    settings = DedupSettings()
    fingerprinter = Fingerprinter()
    whole = dedup_documents(read_records(source), fingerprinter=fingerprinter, settings=settings)
    collected = collect(read_records(source), fingerprinter, settings)
    candidates = search_candidates(collected, settings)
    pairs = check_candidates(collected, candidates, fingerprinter, settings)
    pairs = measure_distances(collected, pairs, fingerprinter)
    clusters = cluster(collected, pairs, settings)
    assert collected.ids == whole.ids
    assert candidates.search == whole.search and candidates.size == whole.candidates
    for ours, theirs in zip(pairs, whole.pairs, strict=True):
        assert ours.tolist() == theirs.tolist()
    assert clusters.representative.tolist() == whole.clusters.representative.tolist()


# -- one normalizer for fingerprints and verification -------------------------------------------


def _traditional_pair(tmp_path: Path) -> Path:
    pytest.importorskip(
        "opencc", reason="--to-simplified needs the zh-convert extra: pip install 'neardup[zh-convert]'"
    )
    return write_lines(
        tmp_path / "scripts.jsonl", {"id": "s", "text": SIMPLIFIED}, {"id": "t", "text": TRADITIONAL}
    )


def test_to_simplified_verifies_with_the_same_normalizer_cli(tmp_path: Path) -> None:
    source = _traditional_pair(tmp_path)
    cli, pairs, clusters = run_cli(source, tmp_path, "--to-simplified")
    assert pairs == [{"a": "s", "b": "t", "distance": 0}]
    assert [row["cluster"] for row in clusters] == ["s", "s"]
    assert "(0 rejected by --verify jaccard)" in cli.stderr


@pytest.mark.parametrize("verify", ["auto", "jaccard", "minhash", "combined"])
def test_to_simplified_verifies_with_the_same_normalizer_library(tmp_path: Path, verify: str) -> None:
    source = _traditional_pair(tmp_path)
    fingerprinter = Fingerprinter(config=FingerprintConfig(to_simplified=True))
    settings = DedupSettings(max_distance=None if verify == "auto" else 16, verify=verify, explain=True)
    result = dedup_documents(read_records(source), fingerprinter=fingerprinter, settings=settings)
    assert [(row["a"], row["b"], row["jaccard"]) for row in result.pair_rows()] == [("s", "t", 1.0)]
    assert [row["cluster"] for row in result.cluster_rows()] == ["s", "s"]
    assert result.summary.rejected == 0


def test_progress_reports_every_stage_that_runs() -> None:
    """Each stage of the default search says when it starts, in the order the stages run."""
    seen: list[str] = []
    done: dict[str, int] = {}
    totals: dict[str, int | None] = {}

    def progress(stage: str, advance: int, total: int | None) -> None:
        if not seen or seen[-1] != stage:
            seen.append(stage)
        done[stage] = done.get(stage, 0) + advance
        totals[stage] = total

    result = dedup_documents(read_records(shared_file("dev/zh_short.jsonl")), progress=progress)
    assert seen == ["sketch", "bands", "check", "distances"]
    assert done["sketch"] == len(result.ids) and done["check"] == totals["check"] == result.candidates
    assert done["bands"] == totals["bands"] == DedupSettings().lsh_settings().band_count + 1
    assert set(result.seconds) == {"sketches", "candidates", "verification", "distances", "clusters"}

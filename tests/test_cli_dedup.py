"""``neardup dedup`` end to end: pairs, clusters and emitted records on a small planted corpus
(checked against the library's fingerprints and a brute-force scan), keep policies, widths,
input formats, usage and input errors, statistics, and precision on the labelled zh_news set."""

from __future__ import annotations

import csv
import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from neardup import Fingerprinter, hamming
from neardup.cli.main import main

from .conftest import read_jsonl, shared_file, write_lines

P1 = (
    "近似重复文档检测是信息检索中的重要问题。搜索引擎每天抓取数以亿计的网页，其中很多网页只是转载、"
    "镜像或者在原文上加了广告和时间戳。Simhash 指纹把每篇文档压缩成六十四位，两篇文档越相似，"
    "指纹不同的位就越少。系统只要比较海明距离，就能快速找出这些重复的网页，从而节省存储空间并提高检索质量。"
)
# The same text in full-width letters and other punctuation: identical after normalization.
P1_WIDTH = P1.replace("Simhash", "Ｓｉｍｈａｓｈ").replace("。", "．", 1).replace("，", ",")
# A reprint with a source line in front: a near-duplicate, a few bits away.
P1_REPRINT = "来源：人民网  " + P1
P2 = (
    "今年春节前后，北方大部分地区气温偏低，降雪天数明显多于往年。气象部门提醒公众注意出行安全，"
    "农业部门则要求各地做好大棚蔬菜和越冬作物的防寒保暖工作，确保节日期间市场供应稳定。"
)
E1 = (
    "Near-duplicate detection finds web pages that differ only in small edits, such as advertisements, "
    "timestamps or navigation bars. Charikar's simhash maps each document to a short fingerprint so that "
    "similar documents get fingerprints that differ in only a few bits, and a search engine can compare "
    "billions of pages by counting differing bits instead of reading their text."
)
E2 = "The weather in Beijing is fine today, and the parks are full of people walking in the sun."

CORPUS: list[dict[str, Any]] = [
    {"id": 1, "title": "近似重复检测", "text": P1, "tags": ["simhash"]},
    {"id": "b-2", "title": None, "text": E1, "source": "wire"},
    {"id": 3, "text": P2},
    {"id": "d-4", "text": P1_REPRINT},
    {"id": 5, "text": E1, "source": "copy"},  # an exact copy of b-2
    {"id": 6, "text": P1_WIDTH},
    {"id": "e-7", "text": "   "},  # no features: pairs with nothing
    {"id": 8, "title": "weather", "text": E2},
    {"id": "e-9", "text": "的 了 ！！"},  # only stopwords and punctuation: no features either
]
IDS = [record["id"] for record in CORPUS]
# What dedup finds in CORPUS at the default 64 bits and -k 3 (Simhash alone: `run` below gives
# `dedup` -k 3 unless a test chooses a distance; the automatic default has tests of its own).
PAIRS = [
    {"a": 1, "b": "d-4", "distance": 2},
    {"a": 1, "b": 6, "distance": 0},
    {"a": "b-2", "b": 5, "distance": 0},
    {"a": "d-4", "b": 6, "distance": 2},
]
FIRST = {1: 1, "b-2": "b-2", 3: 3, "d-4": 1, 5: "b-2", 6: 1, "e-7": "e-7", 8: 8, "e-9": "e-9"}

_FINGERPRINTERS: dict[int, Fingerprinter] = {}


def run(*args: str | Path, stdin: bytes | None = None, auto: bool = False) -> Result:
    words = [str(arg) for arg in args]
    if words[:1] == ["dedup"] and not auto and not {"-k", "--max-distance"} & set(words):
        words[1:1] = ["-k", "3"]
    return CliRunner().invoke(main, words, input=stdin, catch_exceptions=False)


def corpus(tmp_path: Path, records: list[dict[str, Any]] = CORPUS) -> Path:
    return write_lines(tmp_path / "corpus.jsonl", *records)


def library_pairs(records: list[dict[str, Any]], bits: int, max_distance: int) -> list[dict[str, Any]]:
    """The pairs a brute-force scan over the library's fingerprints finds."""
    if bits not in _FINGERPRINTERS:
        _FINGERPRINTERS[bits] = Fingerprinter(bits=bits)
    fingerprinter = _FINGERPRINTERS[bits]
    prints = [fingerprinter.fingerprint(r["text"], r.get("title")) for r in records]
    searched = [n for n, r in enumerate(records) if fingerprinter.features(r["text"], r.get("title"))]
    found = []
    for a, b in itertools.combinations(searched, 2):  # a text without features pairs with nothing
        distance = hamming(prints[a], prints[b])
        if distance <= max_distance:
            found.append({"a": records[a]["id"], "b": records[b]["id"], "distance": distance})
    return found


def clusters_of(path: Path) -> dict[Any, Any]:
    rows = read_jsonl(path)
    assert [row["id"] for row in rows] == IDS  # every record, in input order
    return {row["id"]: row["cluster"] for row in rows}


def ids_of(rows: list[dict[str, Any]]) -> list[Any]:
    return [row["id"] for row in rows]


def stdout_rows(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


# -- pairs and clusters --------------------------------------------------------------------------


def test_pairs_and_clusters_of_planted_duplicates(tmp_path: Path) -> None:
    pairs, clusters = tmp_path / "pairs.jsonl", tmp_path / "clusters.jsonl"
    result = run("dedup", corpus(tmp_path), "--pairs", pairs, "--clusters", clusters)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert read_jsonl(pairs) == PAIRS == library_pairs(CORPUS, 64, 3)
    assert clusters_of(clusters) == FIRST
    assert result.stderr == (
        "neardup: 9 records, 4 pairs within distance 3, 2 clusters of 2+ records, 3 dropped "
        "(--keep first); 2 empty; 0 skipped\n"
    )


def test_pairs_file_is_exact_for_a_tiny_input(tmp_path: Path) -> None:
    records = [{"id": "x", "text": E1}, {"id": "y", "text": P2}, {"id": "z", "text": E1}]
    pairs = tmp_path / "pairs.jsonl"
    assert run("dedup", corpus(tmp_path, records), "--pairs", pairs).exit_code == 0
    assert pairs.read_text(encoding="utf-8") == '{"a":"x","b":"z","distance":0}\n'


def test_max_distance_widens_and_narrows(tmp_path: Path) -> None:
    path = corpus(tmp_path)
    for distance in (0, 1, 2, 5):
        pairs = tmp_path / f"pairs{distance}.jsonl"
        assert run("dedup", path, "--pairs", pairs, "--max-distance", str(distance)).exit_code == 0
        assert read_jsonl(pairs) == library_pairs(CORPUS, 64, distance)
    assert read_jsonl(tmp_path / "pairs0.jsonl") == [p for p in PAIRS if p["distance"] == 0]


@pytest.mark.parametrize(("bits", "max_distance"), [(32, 3), (128, 10)])
def test_other_widths(tmp_path: Path, bits: int, max_distance: int) -> None:
    pairs, clusters = tmp_path / "pairs.jsonl", tmp_path / "clusters.jsonl"
    args = ["--bits", str(bits), "--max-distance", str(max_distance)]
    result = run("dedup", corpus(tmp_path), "--pairs", pairs, "--clusters", clusters, *args)
    assert result.exit_code == 0, result.stderr
    found = read_jsonl(pairs)
    assert found == library_pairs(CORPUS, bits, max_distance)
    planted = {(p["a"], p["b"]) for p in PAIRS}
    assert planted <= {(p["a"], p["b"]) for p in found}
    assert clusters_of(clusters)[6] == 1


def test_scheme_and_mu_do_not_change_the_answer(tmp_path: Path) -> None:
    path = corpus(tmp_path)
    for args in (
        ["--scheme", "6,3"],
        ["--scheme", " 8 , 2 "],
        ["--mu", "0"],
        ["--scheme", "4,1", "--mu", "9"],
    ):
        pairs = tmp_path / "pairs.jsonl"
        result = run("dedup", path, "--pairs", pairs, *args)
        assert result.exit_code == 0, (args, result.stderr)
        assert read_jsonl(pairs) == PAIRS


# -- keep policies and emitted records ----------------------------------------------------------


def test_emit_kept_and_dropped_with_keep_first(tmp_path: Path) -> None:
    path = corpus(tmp_path)
    kept = run("dedup", path, "--emit", "kept")
    assert kept.exit_code == 0, kept.stderr
    # The records as they were read: every field, original names, title null kept.
    assert stdout_rows(kept) == [CORPUS[0], CORPUS[1], CORPUS[2], CORPUS[6], CORPUS[7], CORPUS[8]]
    output = tmp_path / "dropped.jsonl"
    dropped = run("dedup", path, "--emit", "dropped", "-o", output)
    assert dropped.exit_code == 0 and dropped.stdout == ""
    assert read_jsonl(output) == [CORPUS[3], CORPUS[4], CORPUS[5]]


def test_keep_longest(tmp_path: Path) -> None:
    clusters = tmp_path / "clusters.jsonl"
    result = run("dedup", corpus(tmp_path), "--keep", "longest", "--clusters", clusters, "--emit", "kept")
    assert result.exit_code == 0, result.stderr
    # d-4 has the longest text of its cluster; b-2 and 5 tie (the earliest wins).
    assert clusters_of(clusters) == {**FIRST, 1: "d-4", "d-4": "d-4", 6: "d-4"}
    assert ids_of(stdout_rows(result)) == ["b-2", 3, "d-4", "e-7", 8, "e-9"]
    assert "3 dropped (--keep longest)" in result.stderr


def test_keep_drop_all(tmp_path: Path) -> None:
    path = corpus(tmp_path)
    clusters = tmp_path / "clusters.jsonl"
    result = run("dedup", path, "--keep", "drop-all", "--clusters", clusters, "--emit", "kept")
    assert result.exit_code == 0, result.stderr
    assert clusters_of(clusters) == FIRST  # the earliest record names the cluster
    assert ids_of(stdout_rows(result)) == [3, "e-7", 8, "e-9"]
    assert "5 dropped (--keep drop-all)" in result.stderr
    dropped = run("dedup", path, "--keep", "drop-all", "--emit", "dropped")
    assert ids_of(stdout_rows(dropped)) == [1, "b-2", "d-4", 5, 6]


# -- input formats ------------------------------------------------------------------------------


def test_csv_input(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["doc_id", "headline", "body", "extra"])
        writer.writerow(["r1", "检测", P1, "x"])
        writer.writerow(["r2", "", E1, "y"])
        writer.writerow(["r3", "", P1_REPRINT, "z"])
    pairs, clusters = tmp_path / "pairs.jsonl", tmp_path / "clusters.jsonl"
    fields = ["--id-field", "doc_id", "--text-field", "body", "--title-field", "headline"]
    result = run("dedup", path, *fields, "--pairs", pairs, "--clusters", clusters, "--emit", "dropped")
    assert result.exit_code == 0, result.stderr
    records = [{"id": "r1", "title": "检测", "text": P1}, {"id": "r2", "title": "", "text": E1}]
    records.append({"id": "r3", "title": "", "text": P1_REPRINT})
    assert read_jsonl(pairs) == library_pairs(records, 64, 3)
    assert [(p["a"], p["b"]) for p in read_jsonl(pairs)] == [("r1", "r3")]
    assert read_jsonl(clusters) == [
        {"id": "r1", "cluster": "r1"}, {"id": "r2", "cluster": "r2"}, {"id": "r3", "cluster": "r1"}
    ]  # fmt: skip
    # CSV records come out with their own column names, values as strings.
    assert stdout_rows(result) == [{"doc_id": "r3", "headline": "", "body": P1_REPRINT, "extra": "z"}]


def test_parquet_input_emits_the_columns_read(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": [7, 8, 9], "text": [E1, P2, E1], "other": [1.5, 2.5, 3.5]}), path)
    result = run("dedup", path, "--emit", "dropped", "--bits", "128")
    assert result.exit_code == 0, result.stderr
    assert stdout_rows(result) == [{"id": 9, "text": E1}]


def test_stdin(tmp_path: Path) -> None:
    path = corpus(tmp_path)
    pairs = tmp_path / "pairs.jsonl"
    result = run("dedup", "-", "--pairs", pairs, "--emit", "kept", stdin=path.read_bytes())
    assert result.exit_code == 0, result.stderr
    assert read_jsonl(pairs) == PAIRS
    assert stdout_rows(result) == stdout_rows(run("dedup", path, "--emit", "kept"))


@pytest.mark.parametrize("bits", ["32", "64", "128"])
def test_empty_input_writes_empty_outputs(tmp_path: Path, bits: str) -> None:
    path = write_lines(tmp_path / "empty.jsonl", "")
    pairs, clusters, kept = tmp_path / "pairs.jsonl", tmp_path / "clusters.jsonl", tmp_path / "kept.jsonl"
    result = run(
        "dedup", path, "--bits", bits, "--pairs", pairs, "--clusters", clusters, "--emit", "kept", "-o", kept,
        "--stats",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert pairs.read_bytes() == clusters.read_bytes() == kept.read_bytes() == b""
    assert "records: 0 (0 empty, 0 skipped)" in result.stderr


# -- bad records and errors ----------------------------------------------------------------------


def test_bad_record_is_skipped_and_reported(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "in.jsonl", CORPUS[1], b'{"id": 99, "text": ', CORPUS[4], {"text": "x"})
    clusters = tmp_path / "clusters.jsonl"
    result = run("dedup", path, "--clusters", clusters, "--on-error", "skip")
    assert result.exit_code == 0, result.stderr
    assert read_jsonl(clusters) == [{"id": "b-2", "cluster": "b-2"}, {"id": 5, "cluster": "b-2"}]
    assert "2 records, 1 pairs" in result.stderr and "2 skipped" in result.stderr
    assert f"neardup: skipped {path}:2: invalid JSON" in result.stderr
    assert f"neardup: skipped {path}:4: missing id field" in result.stderr
    failed = run("dedup", path, "--clusters", clusters)
    assert failed.exit_code == 1 and failed.stderr.startswith(f"neardup: error: {path}:2: invalid JSON")


def test_duplicate_ids_name_both_locations(tmp_path: Path) -> None:
    records = [
        {"id": "a", "text": E1},
        {"id": 1, "text": P2},
        {"id": "1", "text": E2},
        {"id": "a", "text": P1},
    ]
    path = write_lines(tmp_path / "in.jsonl", *records)
    result = run("dedup", path, "--pairs", tmp_path / "pairs.jsonl")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"neardup: error: {path}:4: duplicate id 'a', first seen at {path}:1;")
    assert "ids must be unique" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # 1 and "1" are different ids in JSON, so they may both appear.
    assert run("dedup", write_lines(path, *records[:3]), "--pairs", tmp_path / "p.jsonl").exit_code == 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--scheme", "4,2"], "scheme=(4, 2): num_blocks=4, key_blocks=2 cannot guarantee max_distance=3"),
        (["--scheme", "0,1"], "scheme=(0, 1): num_blocks must be from 1 to 64; got 0"),
        (["--scheme", "6,2", "--bits", "32", "-k", "5"], "scheme=(6, 2): num_blocks=6, key_blocks=2"),
        (["--scheme", "30,15"], "tables, each a sort of the whole input"),
    ],
)
def test_bad_scheme_is_a_clean_error(tmp_path: Path, args: list[str], fragment: str) -> None:
    pairs = tmp_path / "pairs.jsonl"
    result = run("dedup", corpus(tmp_path), "--pairs", pairs, *args)
    assert result.exit_code == 1
    assert result.stderr.startswith("neardup: error: ") and fragment in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not pairs.exists()  # refused before any work


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "nothing to write: give --pairs PATH, --clusters PATH or --emit kept|dropped"),
        (["-o", "out.jsonl"], "add --emit kept|dropped"),
        (["--pairs", "-", "--emit", "kept"], "--pairs and --output both write to stdout"),
        (["--pairs", "same.jsonl", "--clusters", "same.jsonl"], "--pairs and --clusters both write to same"),
        (["--pairs", "p.jsonl", "--scheme", "six"], "'six' is not M,T"),
        (["--pairs", "p.jsonl", "--keep", "last"], "'last' is not one of"),
        (["--pairs", "p.jsonl", "--mu", "-1"], "--mu"),
        (["--pairs", "p.jsonl", "--max-distance", "-1"], "--max-distance"),
        (["--pairs", "p.jsonl", "--max-distance", "64"], "64 is not a distance a 64-bit fingerprint"),
        (["--emit", "all"], "'all' is not one of"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], fragment: str) -> None:
    result = run("dedup", corpus(tmp_path), *args)
    assert result.exit_code == 2
    assert fragment in result.stderr


def test_missing_output_directory_fails_before_the_work(tmp_path: Path) -> None:
    result = run("dedup", corpus(tmp_path), "--pairs", tmp_path / "missing" / "pairs.jsonl")
    assert result.exit_code == 1 and "cannot open output file" in result.stderr
    assert "records" not in result.stderr  # no summary: nothing was fingerprinted


def test_fields_weighting_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "rows.toml"
    config.write_text('weighting = "fields"\n')
    result = run("dedup", corpus(tmp_path), "--pairs", tmp_path / "p.jsonl", "--config", config)
    assert result.exit_code == 1 and "'fields' weighting applies to database rows" in result.stderr


# -- statistics, progress, help ---------------------------------------------------------------------


def test_stats(tmp_path: Path) -> None:
    result = run("dedup", corpus(tmp_path), "--clusters", tmp_path / "clusters.jsonl", "--stats")
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == (
        "scheme: 4 blocks, tables keyed on 1: 4 tables, keys of 16+ bits, exact to distance 3 at 64 bits"
    )
    assert lines[2].split() == [
        "table",
        "key_bits",
        "buckets",
        "largest",
        "mean",
        "split",
        "candidates",
        "pairs",
    ]
    assert sum(int(line.split()[-1]) for line in lines[3:7]) == 4  # pairs per table add up
    assert lines[7:11] == [  # the two empty records pair with nothing
        "records: 9 (2 empty, 0 skipped)",
        "pairs: 4 within distance 3 (2 at distance 0)",
        "clusters of 2+ records: 2 (largest 3)",
        "dropped: 3 (--keep first), kept 6",
    ]
    assert lines[11].startswith("seconds: ") and "pairs " in lines[11]
    assert len(lines) == 12


def test_progress_bars_go_to_stderr(tmp_path: Path) -> None:
    result = run("dedup", corpus(tmp_path), "--emit", "kept", "--progress")
    assert result.exit_code == 0
    assert "fingerprint" in result.stderr and "4/4" in result.stderr and "tables" in result.stderr
    assert stdout_rows(result) == stdout_rows(run("dedup", corpus(tmp_path), "--emit", "kept"))


def test_help() -> None:
    result = run("dedup", "--help")
    assert result.exit_code == 0 and "Example:\n" in result.stdout
    assert "  neardup dedup docs.jsonl --pairs pairs.jsonl --clusters clusters.jsonl" in result.stdout
    assert "pairs with nothing" in " ".join(result.stdout.split()) and "--keep" in result.stdout
    assert "--weighting" in result.stdout and "--on-error" in result.stdout  # the fingerprint options
    assert "dedup" in run("--help").stdout


# -- the labelled Chinese news set -----------------------------------------------------------------


def test_zh_news_precision(tmp_path: Path) -> None:
    source = shared_file("dev/zh_news.jsonl")
    pairs_path = tmp_path / "pairs.jsonl"
    result = run("dedup", source, "--pairs", pairs_path, "--max-distance", "3")
    assert result.exit_code == 0, result.stderr
    records = read_jsonl(source)
    level = {r["id"]: r["level"] for r in records}
    members: dict[str, list[str]] = defaultdict(list)
    for record in records:
        if record["level"] in ("original", "light", "medium"):
            members[record["cluster"]].append(record["id"])
    gold = {frozenset(pair) for group in members.values() for pair in itertools.combinations(group, 2)}
    found = [
        frozenset((p["a"], p["b"]))
        for p in read_jsonl(pairs_path)
        if level[p["a"]] != "heavy" and level[p["b"]] != "heavy"  # heavy copies are left out of precision
    ]
    true = sum(pair in gold for pair in found)
    precision, recall = true / len(found), true / len(gold)
    assert len(gold) == 694  # the dataset README's count of gold positive pairs
    assert precision >= 0.9, (precision, recall)
    assert recall > 0.1, (precision, recall)


# -- verification (--verify, --explain) ----------------------------------------------------------

SHORT = [
    {
        "id": "s1",
        "text": "这家酒店的服务非常好，房间干净，早餐丰盛，下次还会再来。",
        "tags": ["酒店", "服务"],
    },
    {"id": "s2", "text": "这家酒店的服务非常好,房间干净,早餐丰盛,下次还会再来!（来自手机客户端）"},
    {"id": "s3", "text": "物流太慢了，等了一个星期才到，包装也破了，很失望。", "keywords": "物流, 包装"},
    {"id": "s4", "text": "这家酒店的服务非常好，房间干净，早餐丰盛，下次还会再来。", "tags": ["别的"]},
]


def test_verify_rejects_wide_candidates_and_keeps_copies(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "short.jsonl", *SHORT)
    wide, verified = tmp_path / "wide.jsonl", tmp_path / "verified.jsonl"
    assert run("dedup", path, "-k", "40", "--pairs", wide).exit_code == 0
    assert len(read_jsonl(wide)) == 6  # every pair is within 40 bits
    for mode in ("jaccard", "minhash"):
        result = run("dedup", path, "-k", "40", "--verify", mode, "--pairs", verified)
        assert result.exit_code == 0, result.stderr
        assert {(row["a"], row["b"]) for row in read_jsonl(verified)} == {
            ("s1", "s2"),
            ("s1", "s4"),
            ("s2", "s4"),
        }
        assert "(3 rejected by --verify " + mode + ")" in result.stderr


def test_verify_combined_keeps_identical_texts_with_other_tags(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "short.jsonl", *SHORT)
    pairs = tmp_path / "pairs.jsonl"
    result = run("dedup", path, "-k", "40", "--verify", "combined", "--threshold", "0.99", "--pairs", pairs)
    assert result.exit_code == 0, result.stderr
    assert {(row["a"], row["b"]) for row in read_jsonl(pairs)} == {("s1", "s4")}


def test_explain_adds_similarities_and_shared_features(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "short.jsonl", *SHORT)
    pairs = tmp_path / "pairs.jsonl"
    result = run("dedup", path, "-k", "40", "--verify", "jaccard", "--explain", "--pairs", pairs)
    assert result.exit_code == 0, result.stderr
    rows = {(row["a"], row["b"]): row for row in read_jsonl(pairs)}
    copy = rows[("s1", "s2")]
    assert set(copy) == {"a", "b", "distance", "jaccard", "metadata_jaccard", "score", "shared"}
    assert 0.5 <= copy["jaccard"] < 1.0 and rows[("s1", "s4")]["jaccard"] == 1.0
    assert copy["score"] == pytest.approx(
        0.9 / (copy["distance"] + 1) + 0.1 * copy["metadata_jaccard"], abs=1e-3
    )
    assert "酒店" in copy["shared"]
    assert rows[("s1", "s4")]["metadata_jaccard"] == 0.0  # tags 酒店/服务 against 别的


def test_meta_field_names_the_metadata(tmp_path: Path) -> None:
    records = [
        {"id": 1, "text": E1, "topics": ["simhash"]},
        {"id": 2, "text": E1 + " Reprinted.", "topics": ["simhash"]},
    ]
    pairs = tmp_path / "pairs.jsonl"
    path = write_lines(tmp_path / "meta.jsonl", *records)
    assert (
        run("dedup", path, "-k", "20", "--meta-field", "topics", "--explain", "--pairs", pairs).exit_code == 0
    )
    assert read_jsonl(pairs)[0]["metadata_jaccard"] == 1.0


def test_explain_needs_pairs(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["dedup", str(corpus(tmp_path)), "--clusters", "-", "--explain"])
    assert result.exit_code == 2
    assert "--explain adds fields to the --pairs lines" in result.stderr

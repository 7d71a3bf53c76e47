"""``neardup records`` on CSV and Parquet files, TOML settings, and the labelled record sets."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from neardup.cli.main import main
from neardup.records.dedup import Verification, find_duplicate_records
from neardup.records.run import SimhashSearch, dedup_records, group_rows, pair_rows
from neardup.records.schema import FieldSpec, RecordSchema
from neardup.records.sources import CsvSource, ParquetSource, open_source

from .conftest import shared_file

HEADER = ["id", "name", "city", "born", "notes"]
ROWS = [
    ["a1", "Zhang San", "广州", "1990-01-02", "投诉小区门口垃圾长期无人清理，气味难闻"],
    ["a2", "zhang  san", "广州", "1990/01/02", "投诉小区门口垃圾长期无人清理，气味很难闻"],
    ["b1", "Mary Jones", "Boston", "1985-07-30", "street light broken for two weeks"],
    ["c1", "Li Si", "", "", ""],
    ["b2", "MARY JONES", "Boston", "1985-07-30", "street light broken for two weeks!"],
]


def write_csv(path: Path, rows: list[list[str]] = ROWS, header: list[str] = HEADER) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def read_clusters(path: Path) -> dict[str, str]:
    return {
        row["id"]: row["cluster"] for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())
    }


def test_csv_every_row_gets_a_cluster_line(tmp_path: Path) -> None:
    source = write_csv(tmp_path / "people.csv")
    out = tmp_path / "groups.jsonl"
    pairs = tmp_path / "pairs.jsonl"
    for search in ([], ["-k", "auto"]):  # learned weights (the default), Simhash
        result = run(
            "records", str(source), "--key", "id", "--clusters", str(out), "--pairs", str(pairs), *search
        )
        assert result.exit_code == 0, result.output
        assert read_clusters(out) == {"a1": "a1", "a2": "a1", "b1": "b1", "c1": "c1", "b2": "b1"}
        assert [json.loads(line)["a"] for line in pairs.read_text().splitlines()] == ["a1", "b1"]
        if search:
            assert "name: short ×2 (auto)" in result.output and "notes: text" in result.output
            assert "5 rows, 2 pairs within distance 18" in result.output  # -k auto for a small input
        else:
            assert "5 rows, 2 pairs agreeing on 70% of their filled columns" in result.output


def test_the_library_calls_give_what_the_command_writes(tmp_path: Path) -> None:
    """``dedup_records`` (the call the command makes) on an opened source: the command's
    clusters and pairs by learned weights and by a Simhash search, reading only the columns
    the schema keeps."""
    source_path = write_csv(tmp_path / "people.csv")
    expected = {"a1": "a1", "a2": "a1", "b1": "b1", "c1": "c1", "b2": "b1"}
    for simhash in (None, SimhashSearch()):
        with open_source(str(source_path)) as source:
            result = dedup_records(source, RecordSchema(key="id", ignore=("notes",)), simhash=simhash)
            assert source.columns == ["id", "name", "city", "born"]
        keys = result.keys
        clusters = result.clusters.cluster.tolist()
        assert {key: keys[index] for key, index in zip(keys, clusters, strict=True)} == expected
        assert [(row["a"], row["b"]) for row in pair_rows(result)] == [("a1", "a2"), ("b1", "b2")]
        assert (result.model is None) == (simhash is not None)
        rows = group_rows(result)
        assert list(rows.groups) == [1, 1, 2, 3, 2] and list(rows.representatives) == [
            "a1",
            "a1",
            "b1",
            "c1",
            "b1",
        ]


def test_parquet_source(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({name: [row[i] or None for row in ROWS] for i, name in enumerate(HEADER)})
    path = tmp_path / "people.parquet"
    pq.write_table(table, path)
    source = open_source(str(path), chunk_size=2)
    assert isinstance(source, ParquetSource)
    result = find_duplicate_records(source.columns, source.chunks(), RecordSchema("id"))
    assert source.fetches == 3
    assert [row["cluster"] for row in result.cluster_rows()] == ["a1", "a1", "b1", "c1", "b1"]
    out = tmp_path / "g.jsonl"
    assert run("records", str(path), "--key", "id", "--clusters", str(out)).exit_code == 0
    assert read_clusters(out)["b2"] == "b1"


def test_flags_and_toml_settings(tmp_path: Path) -> None:
    source = write_csv(tmp_path / "people.csv")
    config = tmp_path / "records.toml"
    config.write_text(
        '[records]\nkey = "id"\nignore = ["notes"]\nmax_distance = 0\n'
        '[records.fields]\nname = 3\ncity = {kind = "short", weight = 1}\n'
        "[fingerprint]\nbits = 128\n",
        encoding="utf-8",
    )
    out = tmp_path / "g.jsonl"
    result = run("records", str(source), "--config", str(config), "--clusters", str(out))
    assert result.exit_code == 0, result.output
    assert "key id; name: short ×3 (auto); city: short ×1; born: date ×2 (auto)\n" in result.output
    assert read_clusters(out) == {"a1": "a1", "a2": "a1", "b1": "b1", "c1": "c1", "b2": "b1"}
    # a flag overrides the file
    only = run(
        "records", str(source), "--config", str(config), "--clusters", str(out), "--field", "born:ignore"
    )
    assert only.exit_code == 0, only.output
    assert "key id; name: short ×3 (auto); city: short ×1; ignored: born\n" in only.output


def test_usage_and_input_errors(tmp_path: Path) -> None:
    source = write_csv(tmp_path / "people.csv")
    nothing = run("records", str(source), "--key", "id")
    assert nothing.exit_code == 2 and "nothing to write" in nothing.output
    no_key = run("records", str(source), "--clusters", str(tmp_path / "g.jsonl"))
    assert no_key.exit_code == 1 and "--key COLUMN" in no_key.output
    table = run("records", str(source), "--key", "id", "--table", "t", "--clusters", str(tmp_path / "g"))
    assert table.exit_code == 1 and "is a file; give a URL" in table.output
    write = run("records", str(source), "--key", "id", "--write-table", "groups")
    assert write.exit_code == 2 and "SOURCE is a file" in write.output
    odd = write_csv(tmp_path / "odd.txt")
    assert "a .csv or .parquet file" in run("records", str(odd), "--key", "id", "--clusters", "-").output
    duplicate = write_csv(tmp_path / "dup.csv", [ROWS[0], ROWS[0]])
    dup = run("records", str(duplicate), "--key", "id", "--clusters", str(tmp_path / "g.jsonl"))
    assert dup.exit_code == 1 and "duplicate key 'a1', first seen at row 1" in dup.output
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("id,name\n1,a\n2,b,c\n", encoding="utf-8")
    bad = run("records", str(ragged), "--key", "id", "--clusters", str(tmp_path / "g.jsonl"))
    assert bad.exit_code == 1 and "data row 2 has 3 fields but the header has 2" in bad.output
    gbk = tmp_path / "gbk.csv"
    gbk.write_bytes("id,name\n1,张三\n".encode("gbk"))
    assert "iconv" in run("records", str(gbk), "--key", "id", "--clusters", str(tmp_path / "g.jsonl")).output
    dates = write_csv(tmp_path / "dates.csv", [["x1", "a", "b", "someday", ""], ROWS[0]])
    skipped = run(
        "records", str(dates), "--key", "id", "--field", "born:date", "--on-error", "skip",
        "--clusters", str(tmp_path / "g.jsonl"),
    )  # fmt: skip
    assert skipped.exit_code == 0 and "1 skipped" in skipped.output and "row 1 (key 'x1')" in skipped.output


def test_csv_source_reads_in_chunks_and_selects_columns(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "people.csv", ROWS * 1)
    source = CsvSource(str(path), chunk_size=2)
    source.select(["id", "notes"])
    chunks = list(source.chunks())
    assert [chunk.count for chunk in chunks] == [2, 2, 1] and source.fetches == 3
    assert chunks[0].columns[1][0].startswith("投诉") and chunks[2].first_row == 5


def pairwise_f1(predicted: list[object], gold: list[object]) -> tuple[float, float]:
    def pairs(counts: Counter[object]) -> int:
        return sum(n * (n - 1) // 2 for n in counts.values())

    both = pairs(Counter(zip(predicted, gold, strict=True)))
    return both / max(pairs(Counter(predicted)), 1), both / pairs(Counter(gold))


def test_febrl_planted_duplicates_are_found_with_verification() -> None:
    path = shared_file("dev/records/febrl_dataset1.csv")
    source = CsvSource(str(path))
    gold_index = source.columns.index("cluster")
    gold: list[object] = []

    def chunks():  # type: ignore[no-untyped-def]
        for chunk in source.chunks():
            gold.extend(chunk.columns[gold_index])
            yield chunk

    schema = RecordSchema("id", (FieldSpec("address_1", "text"),), ignore=("cluster",))
    result = find_duplicate_records(
        source.columns, chunks(), schema, max_distance=15, check=Verification("fields", 0.5)
    )
    precision, recall = pairwise_f1(result.clusters.cluster.tolist(), gold)
    assert precision > 0.95 and recall > 0.6

"""Issue 17, item 5: rough edges of the index commands found with the defaults on a fresh
SQLite index, run through the real ``neardup`` command group on real files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from neardup import SimhashIndex
from neardup.cli.main import main

from .conftest import write_lines

RAIN = "a long report on rainfall in the northern valley during the spring season of the year two thousand"
DOCS = [
    {"id": "new-1", "text": "the quick brown fox jumps over the lazy dog while the cat sleeps on the mat"},
    {"id": "new-2", "text": "an unrelated sentence about stock markets, bond yields and central bank rates"},
    {"id": "new-3", "text": RAIN},
    {"id": "new-4", "text": RAIN + "."},
]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def stored(url: str) -> set[Any]:
    with SimhashIndex.open(url, create=False) as index:
        return set(index)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/x.db"


@pytest.mark.parametrize("batch", ["1000", "1"])
def test_rerunning_dedup_index_lists_each_pair_once_earlier_record_first(
    tmp_path: Path, url: str, batch: str
) -> None:
    data = write_lines(tmp_path / "in.jsonl", *DOCS)
    for number in (1, 2):
        pairs = tmp_path / f"p{number}.jsonl"
        code, _, err = run("dedup", str(data), "--index", url, "--pairs", str(pairs), "--batch-size", batch)
        assert code == 0, err
        assert rows(pairs) == [{"a": "new-3", "b": "new-4", "distance": 0}], f"run {number}"
        assert ", 1 pairs;" in err, err


def test_a_repeated_id_and_a_stored_record_outside_the_input_give_each_pair_once(
    tmp_path: Path, url: str
) -> None:
    code, _, err = run("index", "add", url, str(write_lines(tmp_path / "old.jsonl", DOCS[2])))
    assert code == 0, err
    # new-4 repeated in one run; then new-4 alone again, new-3 (stored, not in the input) as a
    data = write_lines(tmp_path / "in.jsonl", DOCS[3], DOCS[0], DOCS[3])
    for number, path in ((1, data), (2, write_lines(tmp_path / "again.jsonl", DOCS[3]))):
        pairs = tmp_path / f"p{number}.jsonl"
        code, _, err = run("dedup", str(path), "--index", url, "--pairs", str(pairs))
        assert code == 0, err
        assert rows(pairs) == [{"a": "new-3", "b": "new-4", "distance": 0}], f"run {number}"


def test_query_never_matches_a_record_with_itself_and_prints_a_summary(tmp_path: Path, url: str) -> None:
    data = write_lines(tmp_path / "in.jsonl", *DOCS)
    assert run("index", "add", url, str(data))[0] == 0
    code, out, err = run("index", "query", url, str(data))
    assert code == 0, err
    found = {
        row["id"]: [match["id"] for match in row["matches"]] for row in map(json.loads, out.splitlines())
    }
    assert found == {"new-1": [], "new-2": [], "new-3": ["new-4"], "new-4": ["new-3"]}
    assert [json.loads(line)["duplicate"] for line in out.splitlines()] == [False, False, True, True]
    summary = err.strip().splitlines()
    assert summary == [
        "neardup: 4 records queried, 2 with a near-duplicate, 2 matches; 0 empty; 0 bad records skipped"
    ]


def test_removing_only_unknown_ids_says_so_without_quotes_or_hints(tmp_path: Path, url: str) -> None:
    assert run("index", "add", url, str(write_lines(tmp_path / "in.jsonl", *DOCS)))[0] == 0
    code, _, err = run("index", "remove", url, "x")
    assert code == 1
    assert err.strip() == "neardup: error: id x is not in the index; nothing was removed"
    code, _, err = run("index", "remove", url, "x", "y")
    assert code == 1
    assert (
        err.strip() == "neardup: error: none of the 2 ids is in the index (the first: x); nothing was removed"
    )
    assert stored(url) == {"new-1", "new-2", "new-3", "new-4"}


def test_removing_some_unknown_ids_names_the_ignore_option_and_the_count(tmp_path: Path, url: str) -> None:
    assert run("index", "add", url, str(write_lines(tmp_path / "in.jsonl", *DOCS)))[0] == 0
    code, _, err = run("index", "remove", url, "new-1", "x", "new-2")
    assert code == 1
    assert err.strip() == (
        "neardup: error: id x is not in the index (1 of the 3 ids given); nothing was removed: "
        "use --missing ignore to remove the 2 that are"
    )
    assert stored(url) == {"new-1", "new-2", "new-3", "new-4"}
    code, _, err = run("index", "remove", url, "new-1", "x", "new-2", "--missing", "ignore")
    assert code == 0, err
    assert stored(url) == {"new-3", "new-4"}


def test_stats_of_a_stored_index_say_it_has_no_second_hash(tmp_path: Path, url: str) -> None:
    assert run("index", "add", url, str(write_lines(tmp_path / "in.jsonl", *DOCS)))[0] == 0
    code, out, err = run("index", "stats", url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:3] == [f"url: {url}", "records: 4", "bits: 64"]
    assert lines[3] == (
        "search: 16 bands of 3 text-sketch bins; a candidate counts when its sketch Jaccard reaches 0.5"
    )
    assert "second hash: none (a stored index reads each bucket whole)" in lines
    assert not any("threshold" in line or "entries" in line for line in lines), out
    assert lines[-17].split() == ["table", "key_bits", "buckets", "largest", "mean", "split"]

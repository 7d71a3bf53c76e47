"""`neardup index rebuild OLD NEW TEXTS`: an index of store format 1 (Simhash blocks, refused on
open) rebuilt as a band index that keeps its ids and cluster ids, on SQLite stores."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup import FingerprintConfig, Fingerprinter, IncrementalDeduper, SimhashIndex
from neardup.cli.index import verification_settings
from neardup.cli.main import main
from neardup.dedup.rebuild import rebuild_index, sketch_verification
from neardup.errors import IndexConfigMismatchError, InputError
from neardup.index.config import IndexConfig
from neardup.io.record import Record

from .conftest import write_lines

A = "the quick brown fox jumps over the lazy dog near the river bank early this morning before breakfast"
D = (
    "city council members voted on tuesday to approve a new budget that raises spending on public "
    "parks libraries and road repairs while cutting administrative costs across several departments"
)
OLD = [
    {"id": "a", "text": A},
    {"id": "a2", "text": A + "!"},  # near-identical: check-and-add puts it in cluster "a"
    {"id": "b", "text": "a completely different sentence about databases and their many indexes"},
    {"id": 7, "text": "中华人民共和国国务院今天发布了关于加强环境保护工作的通知"},
    {"id": "d", "text": D},
]
PLAIN = {"id": "p", "text": "added without check-and-add, so the old store keeps no cluster id for it"}
#: The texts given to the rebuild: every old id but "b", and one the old index never held.
TEXTS = [*(doc for doc in OLD if doc["id"] != "b"), PLAIN, {"id": "zzz", "text": "not in the old index"}]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def make_old_store(path: Path, *, settled_only: bool = True) -> str:
    """An index as an earlier neardup left it: Simhash blocks at k = 3, clusters from
    check-and-add, meta version 1 and (``settled_only``) no ``neardup_recent`` table."""
    url = f"sqlite:///{path}"
    fingerprinter = Fingerprinter(config=FingerprintConfig())
    with SimhashIndex.open(f"{url}?layout=columns", IndexConfig(fingerprint=FingerprintConfig())) as index:
        values = fingerprinter.fingerprint_many([doc["text"] for doc in OLD])
        assignments = IncrementalDeduper(index).check_and_add_many([doc["id"] for doc in OLD], values)
        assert [a.cluster for a in assignments] == ["a", "a", "b", 7, "d"]
        index.add_many([PLAIN["id"]], fingerprinter.fingerprint_many([PLAIN["text"]]))
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        (value,) = db.execute("SELECT value FROM neardup_meta WHERE name = 'config'").fetchone()
        meta = {**json.loads(value), "version": 1}
        db.execute("UPDATE neardup_meta SET value = ? WHERE name = 'config'", (json.dumps(meta),))
        if settled_only:  # format 1 kept every record in neardup_records
            db.execute("INSERT INTO neardup_records SELECT * FROM neardup_recent")
            db.execute("DROP TABLE neardup_recent")
    return url


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_format_1_store_is_refused_with_the_rebuild_command(tmp_path: Path) -> None:
    url = make_old_store(tmp_path / "old.db")
    with pytest.raises(IndexConfigMismatchError, match="neardup index rebuild"):
        SimhashIndex.open(url)


@pytest.mark.parametrize("settled_only", [True, False], ids=["format-1 tables", "today's tables"])
def test_rebuild_keeps_ids_and_cluster_ids(tmp_path: Path, settled_only: bool) -> None:
    old = make_old_store(tmp_path / "old.db", settled_only=settled_only)
    new = f"sqlite:///{tmp_path}/new.db"
    texts = write_lines(tmp_path / "texts.jsonl", *TEXTS)
    code, _, err = run("index", "rebuild", old, new, str(texts))
    assert code == 0, err
    assert err.splitlines() == [
        f"neardup: rebuilt 5 records into {new} (cluster ids kept); 1 ids of the input are not in "
        f"{old} (skipped); 1 stored ids had no text in {texts} (not carried: e.g. 'b')"
    ]
    with SimhashIndex.open(new, create=False) as index:
        assert index.bands is not None and index.verification == verification_settings("sketch")
        assert len(index) == 5
        stored = index.get_many(["a", "a2", 7, "d", "p", "b", "zzz"])
        assert [record and record.cluster for record in stored] == ["a", "a", 7, "d", "p", None, None]
        fingerprinter = Fingerprinter(config=FingerprintConfig())
        assert stored[4] is not None and stored[4].fingerprint == fingerprinter.fingerprint(PLAIN["text"])

    near = write_lines(tmp_path / "near.jsonl", {"id": "q", "text": D.replace("tuesday", "monday")})
    code, out, err = run("index", "query", new, str(near))
    assert code == 0, err
    assert [match["id"] for match in json.loads(out)["matches"]] == ["d"]


def test_the_report_counts_unknown_repeated_and_missing_ids(tmp_path: Path) -> None:
    old = make_old_store(tmp_path / "old.db")
    given = [
        Record("a", A, None, "t:1"),
        Record("a", "another text for a: the first one is kept", None, "t:2"),
        Record("7", "the text '7' is not the number 7", None, "t:3"),
        Record(7, OLD[3]["text"], None, "t:4"),
    ]
    seen: list[int] = []
    report = rebuild_index(old, f"sqlite:///{tmp_path}/new.db", given, batch_size=1, on_batch=seen.append)
    assert (report.carried, report.skipped_unknown, report.repeated) == (2, 1, 1)
    assert report.missing == 4 and report.missing_examples == ["a2", "b", "d"]
    assert seen == [1, 1, 1, 1]
    with SimhashIndex.open(f"sqlite:///{tmp_path}/new.db", create=False) as index:
        first = Fingerprinter(config=FingerprintConfig()).fingerprint(A)
        assert index.get("a").fingerprint == first and sorted(map(str, index)) == ["7", "a"]


def test_the_old_store_is_never_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = make_old_store(path)
    texts = str(write_lines(tmp_path / "texts.jsonl", *TEXTS))
    before = digest(path)
    for new in (old, str(path), f"sqlite:///{tmp_path}/./old.db"):
        code, out, err = run("index", "rebuild", old, new, texts)
        assert code == 1 and out == ""
        assert len(err.splitlines()) == 1 and err.startswith("neardup: error: ")
        assert "never overwrites the one it reads" in err
    assert digest(path) == before


def test_a_new_store_that_holds_an_index_is_refused(tmp_path: Path) -> None:
    old_path, new_path = tmp_path / "old.db", tmp_path / "new.db"
    old = make_old_store(old_path)
    texts = str(write_lines(tmp_path / "texts.jsonl", *TEXTS))
    code, _, err = run("index", "add", str(new_path), str(write_lines(tmp_path / "x.jsonl", PLAIN)))
    assert code == 0, err
    before = (digest(old_path), digest(new_path))
    code, _, err = run("index", "rebuild", old, str(new_path), texts)
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith(f"neardup: error: {new_path} holds an index already")
    assert (digest(old_path), digest(new_path)) == before


def test_an_old_url_without_an_index_is_refused_and_left_absent(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.db"
    with pytest.raises(InputError, match=r"there is no neardup index at .*nothing\.db"):
        rebuild_index(str(missing), str(tmp_path / "new.db"), [])
    assert not missing.exists() and not (tmp_path / "new.db").exists()


def test_the_new_index_verifies_as_index_add_makes_it() -> None:
    assert sketch_verification() == verification_settings("sketch")
    assert sketch_verification()["threshold"] == 0.5

"""Issue 15, the index's meta and the SQLite store's manners: setting files are checked by
content, SQLite failures are one-line errors that lose nothing, passwords stay hidden,
another application's database is left alone, and a read-only index can be queried.

Real files, a real tmpfs and real read-only bind mounts (the tests run as root, which
ignores file permissions, so only a read-only mount makes a file unwritable)."""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup import SimhashIndex
from neardup.cli.main import main
from neardup.errors import IndexConfigMismatchError, IndexNotFoundError
from neardup.fingerprint.config import FingerprintConfig
from neardup.index.config import IndexConfig

from .conftest import write_lines

WORDS = [f"w{number}" for number in range(400)]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback instead of a message: {result.exception!r}")
    return result.exit_code, result.stdout, result.stderr


def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("neardup: error: "), err
    assert "Traceback" not in err
    return lines[0]


def docs(count: int, seed: int = 1, prefix: str = "d") -> list[dict[str, str]]:
    chooser = random.Random(seed)
    return [
        {"id": f"{prefix}{number}", "text": " ".join(chooser.choice(WORDS) for _ in range(30))}
        for number in range(count)
    ]


def found_themselves(url: str, path: Path) -> int:
    """How many records of ``path`` find their stored selves at distance 0: queried under other
    ids, since a query never lists the stored record of its own id."""
    copies = [{**row, "id": f"copy-{row['id']}"} for row in map(json.loads, path.read_text().splitlines())]
    code, out, err = run(
        "index", "query", url, str(write_lines(path.with_suffix(".copy.jsonl"), *copies)), "-k", "0"
    )
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    return sum(any(f"copy-{match['id']}" == row["id"] for match in row["matches"]) for row in rows)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


@pytest.fixture
def mounts() -> Iterator[list[Path]]:
    """Mount points to unmount after the test, even when it fails."""
    mounted: list[Path] = []
    yield mounted
    for point in reversed(mounted):
        subprocess.run(["umount", "-l", str(point)], check=False)


def mount(mounted: list[Path], *args: str) -> None:
    result = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"cannot mount here ({result.stderr.strip()}); the test needs root")
    mounted.append(Path(args[-1]))


# -- probe 4: setting files are recorded by content ------------------------------------------
def test_another_idf_file_under_the_same_name_is_refused_with_both_hashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    corpus = write_lines(tmp_path / "docs.jsonl", *docs(300))
    other = write_lines(tmp_path / "other.jsonl", *docs(300, seed=2, prefix="o"), *docs(50, seed=3))
    url = f"sqlite:///{tmp_path}/news.db"
    monkeypatch.chdir(first)
    assert run("idf", "fit", str(corpus), "-o", "idf.json", "--lang", "en")[0] == 0
    code, _, err = run("index", "add", url, str(corpus), "--idf", "idf.json", "--lang", "en")
    assert code == 0, err
    assert found_themselves(url, corpus) == 300

    monkeypatch.chdir(second)  # another folder, another idf.json: same path as typed
    assert run("idf", "fit", str(other), "-o", "idf.json", "--lang", "en")[0] == 0
    for command in (("query", str(corpus)), ("add", str(other))):
        code, _, err = run("index", command[0], url, command[1])
        line = one_line_error(err)
        assert code == 1
        assert sha(first / "idf.json") in line and sha(second / "idf.json") in line
        assert str(first / "idf.json") in line and "rebuild the index" in line
    with SimhashIndex.open(url, create=False, check_files=False) as index:
        assert len(index) == 300  # the refused add wrote nothing

    # The same content at another path is the same setting.
    code, _, err = run("index", "add", url, str(corpus), "--idf", str(first / "idf.json"), "--lang", "en")
    assert code == 0 and "skipped 300" in err, err
    monkeypatch.chdir(first)
    assert found_themselves(url, corpus) == 300

    # An index made before contents were recorded still opens (nothing to compare).
    with sqlite3.connect(tmp_path / "news.db") as connection:
        (value,) = connection.execute("SELECT value FROM neardup_meta WHERE name = 'config'").fetchone()
        meta = json.loads(value)
        del meta["files"]
        connection.execute("UPDATE neardup_meta SET value = ? WHERE name = 'config'", (json.dumps(meta),))
    connection.close()
    monkeypatch.chdir(second)
    assert run("index", "query", url, str(corpus))[0] == 0


def test_edited_stopword_and_dictionary_files_are_refused(tmp_path: Path) -> None:
    stopwords, dictionary = tmp_path / "stop.txt", tmp_path / "user.dict"
    stopwords.write_text("w1\nw2\n", encoding="utf-8")
    dictionary.write_text("云计算 5\n", encoding="utf-8")
    fingerprint = FingerprintConfig(stopword_files=(str(stopwords),), user_dictionary=str(dictionary))
    url = f"sqlite:///{tmp_path}/index.db"
    with SimhashIndex.open(url, IndexConfig(fingerprint=fingerprint)) as index:
        index.add("a", 1)
    SimhashIndex.open(url).close()  # unchanged files: fine

    stopwords.write_text("w1\nw2\nw3\n", encoding="utf-8")
    with pytest.raises(IndexConfigMismatchError, match=r"stopword_files file .*rebuild the index"):
        SimhashIndex.open(url)
    stopwords.write_text("w1\nw2\n", encoding="utf-8")
    dictionary.write_text("云计算 50\n", encoding="utf-8")
    with pytest.raises(IndexConfigMismatchError, match="user_dictionary file"):
        SimhashIndex.open(url, IndexConfig(fingerprint=fingerprint))


# -- probe 9: SQLite failures are one line, and lose nothing ----------------------------------
def test_a_full_disk_is_one_line_and_keeps_what_was_stored(tmp_path: Path, mounts: list[Path]) -> None:
    small = tmp_path / "small"
    small.mkdir()
    mount(mounts, "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small))
    few = write_lines(tmp_path / "few.jsonl", *docs(20))
    many = write_lines(tmp_path / "many.jsonl", *docs(5000, seed=5, prefix="m"))
    url = f"sqlite:///{small}/index.db"
    assert run("index", "add", url, str(few), "--lang", "en")[0] == 0
    code, _, err = run("index", "add", url, str(many))
    line = one_line_error(err)
    assert code == 1 and "disk is full" in line and str(small / "index.db") in line and "free" in line
    assert found_themselves(url, few) == 20


def test_a_lock_held_too_long_is_one_line_and_keeps_what_was_stored(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    stored = write_lines(tmp_path / "docs.jsonl", *docs(30))
    assert run("index", "add", str(path), str(stored), "--lang", "en")[0] == 0
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        new = write_lines(tmp_path / "new.jsonl", *docs(5, seed=9, prefix="n"))
        code, _, err = run("index", "add", f"sqlite:///{path}?timeout=0.5", str(new))
        line = one_line_error(err)
        assert code == 1 and "locked by another process for more than 0.5 s" in line
        assert str(path) in line and "timeout=SECONDS" in line
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert found_themselves(str(path), stored) == 30
    code, _, err = run("index", "add", f"sqlite:///{path}?timeout=nope", str(stored))
    assert code == 1 and "timeout='nope'" in one_line_error(err)


def test_corrupt_pages_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    stored = write_lines(tmp_path / "docs.jsonl", *docs(3000))
    assert run("index", "add", str(path), str(stored), "--lang", "en")[0] == 0
    data = bytearray(path.read_bytes())
    for start in (len(data) // 3, len(data) // 2, 2 * len(data) // 3):  # records and postings pages
        data[start : start + 20_000] = b"\xff" * 20_000
    path.write_bytes(bytes(data))
    for command in (("stats",), ("query", str(stored)), ("add", str(stored))):
        code, _, err = run("index", command[0], str(path), *command[1:])
        line = one_line_error(err)
        assert code == 1 and "is damaged" in line and str(path) in line and "backup" in line


def test_missing_meta_is_one_line_and_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    stored = write_lines(tmp_path / "docs.jsonl", *docs(10))
    assert run("index", "add", str(path), str(stored), "--lang", "en")[0] == 0
    with sqlite3.connect(path) as connection:
        (value,) = connection.execute("SELECT value FROM neardup_meta WHERE name = 'config'").fetchone()
        meta = json.loads(value)
        del meta["mu"]
        connection.execute("UPDATE neardup_meta SET value = ? WHERE name = 'config'", (json.dumps(meta),))
    connection.close()
    code, _, err = run("index", "stats", str(path))
    assert code == 1 and "lacks mu" in one_line_error(err)

    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM neardup_meta")
    connection.close()
    for command in (("stats",), ("query", str(stored)), ("add", str(stored))):
        code, _, err = run("index", command[0], str(path), *command[1:])
        line = one_line_error(err)
        assert code == 1 and "damaged" in line and str(path) in line
    with sqlite3.connect(path) as connection:
        records = connection.execute("SELECT COUNT(*) FROM neardup_records").fetchone()[0]
        postings = connection.execute("SELECT COUNT(*) FROM neardup_postings").fetchone()[0]
        assert records == 10 and postings > 0
    connection.close()


# -- probe 10: secrets, other applications' databases, read-only indexes ---------------------
def test_a_password_in_a_url_is_never_shown(fresh_postgres_url: str, tmp_path: Path) -> None:
    url = fresh_postgres_url.replace("postgres@", "postgres:s3cret@", 1)
    assert "s3cret" in url
    assert run("index", "add", url, str(write_lines(tmp_path / "d.jsonl", *docs(3))), "--lang", "en")[0] == 0
    for extra in ((), ("--json",)):
        code, out, err = run("index", "stats", url, *extra)
        assert code == 0, err
        assert "s3cret" not in out + err and "postgres:***@" in out


def test_a_password_in_a_memory_url_is_not_in_errors_or_repr() -> None:
    with pytest.raises(IndexNotFoundError) as raised:
        SimhashIndex.open("memory://admin:s3cret@host/", create=False)
    assert "s3cret" not in str(raised.value)
    with SimhashIndex.open("memory://admin:s3cret@host/") as index:
        assert "s3cret" not in repr(index) and "admin:***@host" in repr(index)
        assert index.url == "memory://admin:s3cret@host/"  # still usable to reopen


def application_database(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT)")
        connection.executemany("INSERT INTO people (name) VALUES (?)", [("ann",), ("bob",)])
    connection.close()


def database_state(path: Path) -> tuple[str, list[str]]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    finally:
        connection.close()
    return mode, sorted(tables)


def test_another_applications_database_is_left_alone_unless_asked(tmp_path: Path) -> None:
    path = tmp_path / "crm.db"
    application_database(path)
    before = path.read_bytes()
    new = write_lines(tmp_path / "d.jsonl", *docs(3))
    code, _, err = run("index", "stats", str(path))
    assert code == 1 and "no neardup index" in one_line_error(err)
    code, _, err = run("index", "add", str(path), str(new))
    line = one_line_error(err)
    assert code == 1 and "--create-in-existing" in line and "people" in line
    code, _, err = run("dedup", str(new), "--index", str(path), "--clusters", str(tmp_path / "c.jsonl"))
    assert code == 1 and "--create-in-existing" in one_line_error(err)
    assert path.read_bytes() == before and database_state(path) == ("delete", ["people"])
    assert not Path(f"{path}-wal").exists()

    code, _, err = run("index", "add", str(path), str(new), "--create-in-existing")
    assert code == 0, err
    assert database_state(path)[1] == [
        "neardup_filters",
        "neardup_meta",
        "neardup_postings",
        "neardup_records",
        "neardup_values",
        "people",
    ]
    with SimhashIndex.open(f"sqlite:///{tmp_path}/other.db?create_in_existing=1") as index:
        index.add("a", 1)  # the library's equivalent (here a new file, where it changes nothing)


def test_a_read_only_index_can_be_queried(tmp_path: Path, mounts: list[Path]) -> None:
    source, read_only = tmp_path / "data", tmp_path / "ro"
    source.mkdir()
    read_only.mkdir()
    stored = write_lines(tmp_path / "docs.jsonl", *docs(40))
    assert run("index", "add", str(source / "index.db"), str(stored), "--lang", "en")[0] == 0
    assert not Path(f"{source}/index.db-wal").exists()  # closed cleanly: no WAL left to read
    mount(mounts, "--bind", "-o", "ro", str(source), str(read_only))
    url = str(read_only / "index.db")
    assert found_themselves(url, stored) == 40
    code, out, err = run("index", "stats", url, "--json")
    assert code == 0 and json.loads(out)["records"] == 40, err
    code, _, err = run(
        "index", "add", url, str(write_lines(tmp_path / "n.jsonl", *docs(2, seed=4, prefix="n")))
    )
    line = one_line_error(err)
    assert code == 1 and "read-only" in line and str(read_only / "index.db") in line

"""`neardup index add|query|remove|stats` and `neardup dedup --index` on an SQLite store,
run through the real command group."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup import SimhashIndex
from neardup.cli.main import main
from neardup.errors import MissingDependencyError
from neardup.storage import open_storage

from .conftest import write_lines

DOCS = [
    {"id": "a", "text": "the quick brown fox jumps over the lazy dog near the river bank today"},
    {"id": "b", "text": "a completely different sentence about databases and their indexes"},
    {"id": 7, "text": "中华人民共和国国务院今天发布了关于加强环境保护工作的通知"},
]
NEW = [
    {"id": "c", "text": "the quick brown fox jumps over the lazy dog near the river bank today!"},
    {"id": "d", "text": "nothing like anything stored: spectral graph partitioning heuristics"},
]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/docs.db"
    code, _, err = run("index", "add", url, str(write_lines(tmp_path / "docs.jsonl", *DOCS)), "--lang", "en")
    assert code == 0, err
    assert "added 3" in err
    return url


def test_add_query_remove_stats_round_trip(store: str, tmp_path: Path) -> None:
    new = write_lines(tmp_path / "new.jsonl", *NEW)
    code, out, err = run("index", "query", store, str(new))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [row["id"] for row in rows] == ["c", "d"]
    assert rows[0]["duplicate"] and rows[0]["matches"][0]["id"] == "a"
    assert not rows[1]["duplicate"] and rows[1]["matches"] == []

    code, out, err = run("index", "stats", store, "--json")
    stats = json.loads(out)
    assert stats["records"] == 3 and stats["scheme"] == {"kind": "bands", "bits": 64, "bands": 16, "rows": 3}
    assert stats["verification"]["mode"] == "sketch" and stats["verification"]["threshold"] == 0.5
    assert stats["fingerprint_config"]["lang"] == "en" and len(stats["tables"]) == 16

    code, _, err = run("index", "remove", store, "a")
    assert code == 0, err
    code, _, err = run("index", "remove", store, "--int-ids", "7")  # the JSON id 7 is an integer
    assert code == 0, err
    with SimhashIndex.open(store, create=False) as index:
        assert sorted(map(str, index)) == ["b"]
    code, _, err = run("index", "remove", store, "zzz")
    assert code == 1 and "not in the index" in err


def test_rerunning_add_skips_what_is_stored(store: str, tmp_path: Path) -> None:
    both = write_lines(tmp_path / "both.jsonl", *DOCS, *NEW)
    code, out, err = run("index", "add", store, str(both), "--report-batches")
    assert code == 0, err
    assert "added 2, skipped 3" in err and json.loads(out.splitlines()[-1])["last_id"] == "d"
    code, _, err = run("index", "add", store, str(both), "--existing", "fail")
    assert code == 1 and "already in the index" in err


def test_other_settings_are_refused_with_both_shown(store: str, tmp_path: Path) -> None:
    new = write_lines(tmp_path / "new.jsonl", *NEW)
    code, _, err = run("index", "add", store, str(new), "--lang", "zh")
    assert code == 1
    assert "stored" in err and "requested" in err and '"lang": "en"' in err and '"lang": "zh"' in err
    code, _, err = run("index", "add", store, str(new), "--lang", "en", "-k", "5")
    assert code == 1 and "max_distance" in err


def test_a_missing_index_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    code, _, err = run("index", "stats", str(path))
    assert code == 1 and "no neardup index" in err
    assert not path.exists()


def test_dedup_into_an_index_assigns_clusters_across_runs(store: str, tmp_path: Path) -> None:
    new = write_lines(tmp_path / "new.jsonl", *NEW, {"id": "e", "text": NEW[1]["text"] + "."})
    pairs, clusters, kept = tmp_path / "pairs.jsonl", tmp_path / "clusters.jsonl", tmp_path / "kept.jsonl"
    code, _, err = run(
        "dedup", str(new), "--index", store, "--pairs", str(pairs), "--clusters", str(clusters),
        "--emit", "kept", "-o", str(kept),
    )  # fmt: skip
    assert code == 0, err
    assert [json.loads(line) for line in clusters.read_text().splitlines()] == [
        {"id": "c", "cluster": "a"},  # joins a stored record's cluster
        {"id": "d", "cluster": "d"},
        {"id": "e", "cluster": "d"},  # joins an earlier record of the same run
    ]
    assert {(p["a"], p["b"]) for p in map(json.loads, pairs.read_text().splitlines())} == {
        ("a", "c"),
        ("d", "e"),
    }
    assert [json.loads(line)["id"] for line in kept.read_text().splitlines()] == ["d"]
    # Running it again changes nothing and gives the same answers.
    code, _, err = run("dedup", str(new), "--index", store, "--clusters", str(clusters))
    assert code == 0 and "added 0" in err
    assert json.loads(clusters.read_text().splitlines()[2]) == {"id": "e", "cluster": "d"}
    code, _, err = run("dedup", str(new), "--index", store, "--clusters", str(clusters), "--keep", "longest")
    assert code == 1 and "--keep longest" in err


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now raises ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install 'neardup\[stores\]'"):
        open_storage("postgresql://postgres@127.0.0.1:1/db")


def test_a_verifying_index_keeps_signatures_and_checks_matches(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/verified.db"
    docs = write_lines(tmp_path / "docs.jsonl", *DOCS)
    code, _, err = run("index", "add", url, str(docs), "--lang", "en", "--verify", "minhash")
    assert code == 0, err
    with SimhashIndex.open(url, create=False) as index:
        assert index.verification is not None and index.verification["mode"] == "minhash"
        assert all(record and record.signature for record in index.get_many(["a", "b", 7]))
    code, out, err = run("index", "query", url, str(write_lines(tmp_path / "new.jsonl", *NEW)))
    assert code == 0, err
    assert [row["duplicate"] for row in map(json.loads, out.splitlines())] == [True, False]
    # The stored setting is part of the index: a plain index refuses it, and vice versa.
    code, _, err = run(
        "dedup", str(docs), "--index", url, "--clusters", str(tmp_path / "c.jsonl"), "--verify", "combined"
    )
    assert code == 1 and "verification" in err
    code, _, err = run(
        "dedup", str(docs), "--index", url, "--clusters", str(tmp_path / "c.jsonl"), "--verify", "jaccard"
    )
    assert code == 2 and "minhash or combined" in err


def test_a_bad_record_stops_the_add_and_keeps_what_was_committed(tmp_path: Path) -> None:
    """A bad line stops `index add` with its location; the batches before it stay stored, and
    a re-run that skips bad records completes the rest without adding anything twice."""
    lines: list[bytes | str | dict[str, object]] = [
        {"id": f"d{n}", "text": f"document number {n} about subject {n % 7} and more words"}
        for n in range(25)
    ]
    lines.insert(12, b'{"id": "bad", "text": "\xff\xfe broken utf-8"}')
    source = write_lines(tmp_path / "docs.jsonl", *lines)
    url = f"sqlite:///{tmp_path}/docs.db"
    code, _, err = run("index", "add", url, str(source), "--batch-size", "5", "--lang", "en")
    assert code == 1 and "docs.jsonl:13" in err and "UTF-8" in err
    with SimhashIndex.open(url, create=False) as index:
        assert sorted(index, key=str) == sorted((f"d{n}" for n in range(10)), key=str)  # two whole batches
    code, _, err = run("index", "add", url, str(source), "--batch-size", "5", "--on-error", "skip")
    assert code == 0, err
    assert "added 15, skipped 10" in err and "1 bad records skipped" in err
    with SimhashIndex.open(url, create=False) as index:
        assert len(index) == 25

"""Edge cases of ``neardup records`` found by probing a fresh install (issue 28): tables whose
rows all duplicate each other, and the record size limit named by its own error."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from neardup.cli.main import main
from neardup.fingerprint.config import FingerprintConfig
from neardup.records import candidates
from neardup.records.candidates import KeyColumn, identical_rows
from neardup.records.dedup import RecordsResult, find_duplicate_records
from neardup.records.learned import guarded_pairs, learned_duplicate_records
from neardup.records.schema import RecordSchema, RowChunk


@pytest.mark.parametrize("copies", [2, 5, 40])
def test_a_table_whose_rows_all_duplicate_each_other_is_one_group(copies: int) -> None:
    """Every column is constant, so every key is held by every row: still one group. With 40
    rows (780 pairs, enough to fit) every pair compares alike, so EM cannot tell m from u."""
    header = ["id", "name", "city"]
    rows = [[str(n), "John Smith", "Boston"] for n in range(1, copies + 1)]
    result = learned_duplicate_records(header, [RowChunk.from_rows(rows, len(header), 1)], RecordSchema("id"))
    assert len(set(result.clusters.cluster.tolist())) == 1
    assert int(result.clusters.size.max()) == copies


@pytest.mark.parametrize("copies", [2, 5])
def test_all_duplicate_csv_through_the_cli(tmp_path: Path, copies: int) -> None:
    source = tmp_path / "same.csv"
    source.write_text("id,name,city\n" + "".join(f"{n},John Smith,Boston\n" for n in range(copies)))
    clusters = tmp_path / "groups.jsonl"
    result = CliRunner().invoke(main, ["records", str(source), "--key", "id", "--clusters", str(clusters)])
    assert result.exit_code == 0, result.output
    assert {json.loads(line)["cluster"] for line in clusters.read_text().splitlines()} == {"0"}
    assert "1 groups of 2+ rows" in result.output


def test_one_value_and_nulls_is_still_a_key() -> None:
    """A column holding one value in a few rows and nulls elsewhere pairs those rows."""
    header = ["id", "name", "email", "phone"]
    given = [
        ["1", "Ann Lee", "ann@example.org", "555 0101"],
        ["2", "Ann Lees", "ann@example.org", "555 0101"],  # no other key in common with 1
        ["3", "Bob Ray", "", ""],
        ["4", "Cy Dunn", "", ""],
    ]
    rows = [[value or None for value in row] for row in given]
    result = learned_duplicate_records(header, [RowChunk.from_rows(rows, len(header), 1)], RecordSchema("id"))
    pairs = {(result.keys[a], result.keys[b]) for a, b in zip(result.pairs.i, result.pairs.j, strict=True)}
    assert pairs == {("1", "2")}


# -- the record size limit and the flags messages name (issue 28 item 16) ------------------------


def _long_row_csv(tmp_path: Path, size: int) -> Path:
    path = tmp_path / "long.csv"
    path.write_text(f"id,name,notes\n1,Ann Lee,{'a' * size}\n2,Ann Lee,short\n3,Bob Ray,other\n")
    return path


def test_records_names_and_honours_its_max_bytes_flag(tmp_path: Path) -> None:
    """The limit's error named ``max_bytes``, which ``records`` did not have: it names the
    flag now, and the flag raises the limit."""
    path = _long_row_csv(tmp_path, 3000)
    refused = CliRunner().invoke(
        main, ["records", str(path), "--key", "id", "--clusters", "-", "--max-bytes", "2K"]
    )
    assert refused.exit_code == 1
    message = refused.stderr.strip().splitlines()[-1]
    assert "over the limit of 2,048 bytes" in message and "--max-bytes" in message
    assert "max_bytes" not in message.replace("--max-bytes", "")
    allowed = CliRunner().invoke(
        main, ["records", str(path), "--key", "id", "--clusters", "-", "--max-bytes", "4K"]
    )
    assert allowed.exit_code == 0, allowed.output
    assert len(allowed.stdout.splitlines()) == 3


def test_an_existing_write_table_names_the_replace_table_flag(tmp_path: Path) -> None:
    """The refusal of an existing table named the Python keyword ``replace=True``."""
    import sqlite3

    database = tmp_path / "people.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, city TEXT)")
        connection.executemany(
            "INSERT INTO people VALUES (?, ?, ?)", [(1, "Ann Lee", "Leeds"), (2, "Ann Lee", "Leeds")]
        )
        connection.execute("CREATE TABLE groups (x INTEGER)")
    connection.close()
    args = ["records", f"sqlite:///{database}", "--table", "people", "--key", "id", "--write-table", "groups"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    message = result.stderr.strip().splitlines()[-1]
    assert "--replace-table" in message and "replace=True" not in message, message
    assert "key id;" not in result.stderr  # refused before any row was read or compared


def test_a_missing_text_column_names_the_flag_in_dedup(tmp_path: Path) -> None:
    path = tmp_path / "docs.csv"
    path.write_text("id,body\n1,hello\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["dedup", str(path), "--clusters", "-"])
    assert result.exit_code == 1
    message = result.stderr.strip().splitlines()[-1]
    assert "--text-field" in message and "text_field" not in message.replace("--text-field", ""), message


def test_a_missing_key_column_names_the_flag_in_records(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text("id,name\n1,Ann\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["records", str(path), "--clusters", "-"])
    assert result.exit_code == 1
    message = result.stderr.strip().splitlines()[-1]
    assert "--key COLUMN" in message and "key='COLUMN'" not in message, message


# -- exact copies beyond the block cap (issue 28 item 12, 50 or more copies) --------------------

_HEADER = ["id", "name", "city", "complaint"]
_COPY = ["John Smith", "Boston", "my parcel never arrived and nobody answers the phone"]
_GIVEN = ("ann", "bob", "cyril", "dora", "emil", "fay", "gus", "hana", "ivo", "jana")
_FAMILY = ("lee", "ray", "dunn", "fox", "moss", "hart", "vale", "quist", "orme", "pike")
_CITIES = ("paris", "rome", "oslo", "lima", "kyiv", "bern", "riga", "baku")
_WORDS = [
    "late",
    "wrong",
    "broken",
    "missing",
    "refund",
    "invoice",
    "courier",
    "damaged",
    "rude",
    "delayed",
    "lost",
    "charge",
]


def _table(copies: int, varied: int) -> list[list[str]]:
    """Seeded rows ``v0``, ``v1``, ... sharing no value with :data:`_COPY`, every fifth one the
    row before with a typo in the given name (groups of their own), and ``copies`` rows ``c0``, ...
    holding :data:`_COPY`, spread among them."""
    rng = random.Random(28)
    rows: list[list[str]] = []
    for n in range(varied):
        if n % 5 == 4:
            _, name, city, text = rows[-1]
            given, family = name.split(" ", 1)
            rows.append([f"v{n}", f"{given[:-1]}x {family}", city, text])
        else:
            name = f"{rng.choice(_GIVEN)} {rng.choice(_FAMILY)}{n}"
            text = " ".join(rng.choices(_WORDS, k=9)) + f" case {n}"
            rows.append([f"v{n}", name, rng.choice(_CITIES), text])
    for n in range(copies):
        rows.insert(rng.randrange(len(rows) + 1), [f"c{n}", *_COPY])
    return rows


def _run(rows: list[list[str]], mode: str) -> RecordsResult:
    """The rows through the learned default or the Simhash path (``-k 3``; ``-k auto``, which
    verifies by fields at this size)."""
    chunks = [RowChunk.from_rows(rows, len(_HEADER), 1)]
    if mode == "learned":
        return learned_duplicate_records(_HEADER, chunks, RecordSchema("id"))
    config = FingerprintConfig(weighting="fields")
    distance, check = (3, None) if mode == "k 3" else (None, "auto")
    return find_duplicate_records(
        _HEADER, chunks, RecordSchema("id"), config=config, max_distance=distance, check=check
    )


def _groups(result: RecordsResult) -> set[frozenset[object]]:
    """The groups of 2+ rows, as sets of keys."""
    members: dict[int, set[object]] = {}
    for key, cluster in zip(result.keys, result.clusters.cluster.tolist(), strict=True):
        members.setdefault(cluster, set()).add(key)
    return {frozenset(group) for group in members.values() if len(group) >= 2}


@pytest.mark.parametrize("copies", [60, 1000])
def test_copies_beyond_the_block_cap_are_one_group(copies: int) -> None:
    """Every key is held by more rows than the cap (50), so no key makes a pair; the copies
    are still one group, joined as a star to the first row (copies - 1 pairs, not all of them)."""
    result = _run(_table(copies, 0), "learned")
    assert _groups(result) == {frozenset(f"c{n}" for n in range(copies))}
    assert len(result.pairs) == copies - 1
    assert result.model.copies == copies - 1


@pytest.mark.parametrize("mode", ["learned", "k 3", "k auto"])
def test_copies_among_varied_rows_leave_the_other_groups_as_they_were(mode: str) -> None:
    """60 copies among 500 rows: one group of the copies, and the varied rows' groups are
    those of the table without the copies, in every mode."""
    copies = frozenset(f"c{n}" for n in range(60))
    before = _groups(_run(_table(0, 500), mode))
    after = _groups(_run(_table(60, 500), mode))
    assert copies in after
    assert after - {copies} == before
    if mode == "learned":
        assert len(before) >= 50  # most of the 100 edited rows pair with the row they copy


@pytest.mark.parametrize("mode", ["k 3", "k auto"])
def test_copies_are_one_group_on_the_simhash_path_too(mode: str) -> None:
    assert _groups(_run(_table(60, 0), mode)) == {frozenset(f"c{n}" for n in range(60))}


def test_two_hundred_copies_through_the_cli(tmp_path: Path) -> None:
    """The same complaint filed 200 times: one group, and --pairs holds 199 pairs (a star to
    the first row), not the 19,900 of all of them."""
    source = tmp_path / "complaints.csv"
    source.write_text("id,name,city,complaint\n" + "".join(f"{n},{','.join(_COPY)}\n" for n in range(200)))
    clusters, pairs = tmp_path / "groups.jsonl", tmp_path / "pairs.jsonl"
    result = CliRunner().invoke(
        main, ["records", str(source), "--key", "id", "--clusters", str(clusters), "--pairs", str(pairs)]
    )
    assert result.exit_code == 0, result.output
    assert {json.loads(line)["cluster"] for line in clusters.read_text().splitlines()} == {"0"}
    assert len(pairs.read_text().splitlines()) == 199
    assert "1 groups of 2+ rows, 199 duplicates" in result.output


def test_copies_are_the_same_after_the_records_normalisation() -> None:
    """Case, width and spacing are one value to the comparisons, so to the copies too."""
    rows = [[f"c{n}", *_COPY] for n in range(30)]
    rows += [[f"c{n}", "JOHN  SMITH", "ＢＯＳＴＯＮ", _COPY[2].upper()] for n in range(30, 60)]
    assert _groups(_run(rows, "learned")) == {frozenset(f"c{n}" for n in range(60))}


def test_rows_with_nothing_filled_are_not_copies() -> None:
    """A row of nulls says nothing about which record it is (as before: no keys, no pairs)."""
    rows: list[list[str | None]] = [[f"e{n}", None, None, None] for n in range(60)]
    chunks = [RowChunk.from_rows([*rows, ["x", *_COPY]], len(_HEADER), 1)]
    assert _groups(learned_duplicate_records(_HEADER, chunks, RecordSchema("id"))) == set()


@pytest.mark.parametrize("multiplier", [None, 0])
def test_identical_rows_is_exact_even_when_every_hash_collides(
    monkeypatch: pytest.MonkeyPatch, multiplier: int | None
) -> None:
    """Against brute force on small codes with nulls; a multiplier of 0 gives every row the
    same hash, so only the check of the codes keeps different rows apart."""
    if multiplier is not None:
        monkeypatch.setattr(candidates, "_ROW_HASH", np.uint64(multiplier))
    rng = np.random.default_rng(5)
    rows = 400
    columns = [
        KeyColumn(name, "name", rng.integers(-1, 3, rows).astype(np.int64), ["a", "b", "c"])
        for name in ("x", "y", "z")
    ]
    first = identical_rows(columns, rows)
    codes = [tuple(int(column.codes[row]) for column in columns) for row in range(rows)]
    for row, own in enumerate(codes):
        earliest = row if all(code < 0 for code in own) else codes.index(own)
        assert first[row] == earliest


def test_the_guard_starts_copies_as_one_group() -> None:
    """Rows 0-2 are copies: a pair of row 3 with one of them is weighed against all three."""
    i, j = np.array([0, 1, 2], dtype=np.int64), np.array([3, 3, 3], dtype=np.int64)
    probability = np.array([0.1, 0.1, 0.999])
    accepted = np.array([2], dtype=np.int64)
    assert guarded_pairs(i, j, probability, accepted).tolist() == [2]
    first = np.array([0, 0, 0, 3], dtype=np.int64)
    assert guarded_pairs(i, j, probability, accepted, first).tolist() == []

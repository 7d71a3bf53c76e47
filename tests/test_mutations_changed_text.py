"""``neardup index add`` refuses a stored id that comes again with another text (issue 28:
the stored record used to be kept with a warning, so the new text was lost), naming the
line and ``--existing replace``, which stores the new text instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup import SimhashIndex
from neardup.cli.main import main

from .conftest import write_lines

TEXT = "the quick brown fox jumps over the lazy dog near the river bank number {}"
OTHER = "an entirely different story about football in Spain, told once more: {}"
ERROR = "is already stored with another text"


def add(url: str, source: Path, *extra: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, ["index", "add", url, str(source), *extra])
    assert result.exit_code == code, result.stderr
    return result.stderr


def fill(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/changed.db"
    source = write_lines(tmp_path / "first.jsonl", *({"id": key, "text": TEXT.format(key)} for key in "abc"))
    assert "added 3, skipped 0" in add(url, source)
    return url


def again(tmp_path: Path) -> Path:
    return write_lines(
        tmp_path / "again.jsonl",
        {"id": "b", "text": TEXT.format("b")},  # the same text: not a change
        {"id": "a", "text": OTHER.format("a")},  # changed
        {"id": "c", "text": OTHER.format("c")},  # changed
        {"id": "d", "text": TEXT.format("d")},  # new
    )


@pytest.mark.parametrize("batch", [[], ["--batch-size", "1"], ["--batch-size", "2"]])
def test_re_adding_ids_with_other_text_is_an_error_naming_the_line(tmp_path: Path, batch: list[str]) -> None:
    url = fill(tmp_path)
    source = again(tmp_path)
    err = add(url, source, *batch, code=1)
    assert f"{source}:2: id 'a' {ERROR}" in err and "--existing replace" in err
    with SimhashIndex.open(url, create=False) as index:
        assert sorted(index) == ["a", "b", "c"]  # nothing of the failing batch


@pytest.mark.parametrize("batch", [[], ["--batch-size", "1"]])
def test_existing_replace_stores_the_new_texts(tmp_path: Path, batch: list[str]) -> None:
    url = fill(tmp_path)
    with SimhashIndex.open(url, create=False) as index:
        before = index.get("a")
    err = add(url, again(tmp_path), "--existing", "replace", *batch)
    assert "added 1, skipped 1 already stored, replaced 2 whose text changed" in err
    with SimhashIndex.open(url, create=False) as index:
        assert sorted(index) == ["a", "b", "c", "d"]
        after = index.get("a")
    assert before is not None and after is not None and before.fingerprint != after.fingerprint


def test_re_adding_ids_with_the_same_text_is_no_error(tmp_path: Path) -> None:
    url = fill(tmp_path)
    same = write_lines(tmp_path / "same.jsonl", *({"id": key, "text": TEXT.format(key)} for key in "abc"))
    err = add(url, same)
    assert "added 0, skipped 3 already stored" in err
    assert "other text" not in err

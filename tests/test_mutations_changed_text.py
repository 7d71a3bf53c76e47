"""``neardup index add`` warns when a stored id comes again with another text: the stored
record is kept (skipped), so the new text is silently lost unless the summary says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup import SimhashIndex
from neardup.cli.main import main

from .conftest import write_lines

TEXT = "the quick brown fox jumps over the lazy dog near the river bank number {}"
OTHER = "an entirely different story about football in Spain, told once more: {}"
WARNING = "of them with other text now: remove and add them to update"


def add(url: str, source: Path, *extra: str) -> str:
    result = CliRunner().invoke(main, ["index", "add", url, str(source), *extra])
    assert result.exit_code == 0, result.stderr
    return result.stderr


def fill(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/changed.db"
    source = write_lines(tmp_path / "first.jsonl", *({"id": key, "text": TEXT.format(key)} for key in "abc"))
    assert "added 3, skipped 0" in add(url, source)
    return url


@pytest.mark.parametrize("batch", [[], ["--batch-size", "1"], ["--batch-size", "2"]])
def test_re_adding_ids_with_other_text_warns_and_counts_them(tmp_path: Path, batch: list[str]) -> None:
    url = fill(tmp_path)
    again = write_lines(
        tmp_path / "again.jsonl",
        {"id": "a", "text": OTHER.format("a")},  # changed
        {"id": "b", "text": TEXT.format("b")},  # the same text: not a change
        {"id": "c", "text": OTHER.format("c")},  # changed
        {"id": "d", "text": TEXT.format("d")},  # new
    )
    err = add(url, again, *batch)
    assert "added 1, skipped 3 already stored" in err
    assert f"(2 {WARNING})" in err
    with SimhashIndex.open(url, create=False) as index:
        assert sorted(index) == ["a", "b", "c", "d"]  # the stored records were kept


def test_re_adding_ids_with_the_same_text_does_not_warn(tmp_path: Path) -> None:
    url = fill(tmp_path)
    same = write_lines(tmp_path / "same.jsonl", *({"id": key, "text": TEXT.format(key)} for key in "abc"))
    err = add(url, same)
    assert "added 0, skipped 3 already stored" in err
    assert "other text" not in err


def test_one_changed_id_is_warned_about(tmp_path: Path) -> None:
    url = fill(tmp_path)
    err = add(url, write_lines(tmp_path / "one.jsonl", {"id": "b", "text": OTHER.format("b")}))
    assert f"(1 {WARNING})" in err

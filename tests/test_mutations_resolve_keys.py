"""Ids typed on a command line name string keys; with ``--int-ids`` integer keys. When an index
holds both the string "7" and the int 7, the rule alone decides which one an id names: no
lookup order (int first, or str first with a fallback) may decide it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from neardup import SimhashIndex
from neardup.cli.main import main
from neardup.dedup.documents import resolve_keys

from .conftest import write_lines

TEXT = "the quick brown fox jumps over the lazy dog near the river bank number {}"


def both_kinds(tmp_path: Path) -> str:
    """An index holding "7" and 7, "-5" and -5, and the int 8 only (no "8")."""
    url = f"sqlite:///{tmp_path}/kinds.db"
    keys = ["7", 7, "-5", -5, 8]
    source = write_lines(
        tmp_path / "kinds.jsonl", *({"id": key, "text": TEXT.format(n)} for n, key in enumerate(keys))
    )
    result = CliRunner().invoke(main, ["index", "add", url, str(source)])
    assert result.exit_code == 0, result.stderr
    return url


def stored(url: str) -> set[object]:
    with SimhashIndex.open(url, create=False) as index:
        return set(index)


def test_a_string_id_names_the_string_key_even_when_the_int_is_stored(tmp_path: Path) -> None:
    url = both_kinds(tmp_path)
    with SimhashIndex.open(url, create=False) as index:
        assert resolve_keys(index, ["7", "-5", "8"]) == ["7", "-5", None]
        assert resolve_keys(index, ["7", "-5", "8"], int_ids=True) == [7, -5, 8]


def test_remove_takes_the_string_key_unless_int_ids(tmp_path: Path) -> None:
    url = both_kinds(tmp_path)
    result = CliRunner().invoke(main, ["index", "remove", url, "--", "8"])
    assert result.exit_code == 1 and "is not in the index" in result.stderr  # only the int 8 is stored
    assert stored(url) == {"7", 7, "-5", -5, 8}
    result = CliRunner().invoke(main, ["index", "remove", url, "--", "7", "-5"])
    assert result.exit_code == 0, result.stderr
    assert "removed 2; 0 not found" in result.stderr
    assert stored(url) == {7, -5, 8}
    result = CliRunner().invoke(main, ["index", "remove", url, "--int-ids", "--", "7", "-5"])
    assert result.exit_code == 0, result.stderr
    assert stored(url) == {8}

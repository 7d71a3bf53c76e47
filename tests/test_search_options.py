"""Every combination of ``--search``, ``-k``, ``--verify`` and ``--explain`` either runs the
search it names, with the check it names, or exits 2; the library refuses the same settings
(one rule, :meth:`DedupSettings.not_applicable`). Before, any ``--verify`` or ``--explain``
silently swapped the default LSH search for the Simhash search."""

from __future__ import annotations

import itertools
import json
import random
import string
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from neardup import ConfigError, DedupSettings, dedup_documents
from neardup.cli.main import main
from neardup.io.record import Record

from .conftest import write_lines

TOPICS = ("weather", "football", "markets", "elections", "science", "music")


def _article(topic: str) -> str:
    """Eighty pseudo-words of seeded random letters: unrelated to every other topic's."""
    rng = random.Random(topic)
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(80))


#: Pairs of copies (one word appended) of six unrelated articles, and one text with no
#: letters or digits.
CORPUS = [
    {"id": f"{topic}-{copy}", "text": _article(topic) + (" postscript" if copy == "b" else "")}
    for topic in TOPICS
    for copy in ("a", "b")
] + [{"id": "dots", "text": "... !!!"}]

SEARCHES = (None, "lsh", "simhash")
DISTANCES = (None, 3)
VERIFY = ("auto", "none", "jaccard", "minhash", "sketch", "combined")


def expected(search: str | None, k: int | None, verify: str) -> tuple[str, str] | None:
    """(search, check) that must run, or None for exit 2: restated here, not imported."""
    method = search or ("simhash" if k is not None else "lsh")
    if method == "lsh":
        if k is not None or verify in ("minhash", "combined"):
            return None
        return "lsh", "jaccard" if verify == "auto" else verify
    if verify == "auto":
        return "simhash", "none" if k is not None else "jaccard"
    return "simhash", verify


def auto_distance(check: str, explain: bool) -> int:
    """``-k auto`` on CORPUS: with the texts kept (a check or --explain reads them) the distance
    comes from the data, and six unrelated articles let it reach its widest (22 bits at 64);
    without them the input size decides (16 up to 20,000 records)."""
    return 22 if check != "none" or explain else 16


COMBINATIONS = list(itertools.product(SEARCHES, DISTANCES, VERIFY, (False, True)))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_lines(tmp_path_factory.mktemp("options") / "corpus.jsonl", *CORPUS)


@pytest.mark.parametrize(("search", "k", "verify", "explain"), COMBINATIONS)
def test_the_command_runs_the_search_it_names_or_exits_2(
    corpus: Path, tmp_path: Path, search: str | None, k: int | None, verify: str, explain: bool
) -> None:
    pairs = tmp_path / "pairs.jsonl"
    words = ["dedup", str(corpus), "--pairs", str(pairs), "--verify", verify]
    words += ["--search", search] if search else []
    words += ["-k", str(k)] if k is not None else []
    words += ["--explain"] if explain else []
    result = CliRunner().invoke(main, words)
    want = expected(search, k, verify)
    if want is None:
        assert result.exit_code == 2, result.output
        assert "Error:" in result.output and "--search simhash" in result.output
        assert not pairs.exists()
        return
    assert result.exit_code == 0, result.output
    method, check = want
    line = result.stderr.strip().splitlines()[-1]
    if method == "lsh":
        assert "by LSH" in line
    else:
        assert f"within distance {auto_distance(check, explain) if k is None else k}" in line
    if check == "none":
        assert "rejected" not in line
        assert ("unchecked (--verify none)" in line) == (method == "lsh")
    else:
        assert f"rejected by --verify {check})" in line
    rows = [json.loads(row) for row in pairs.read_text().splitlines()]
    found = {frozenset((row["a"], row["b"])) for row in rows}
    copies = {frozenset((f"{topic}-a", f"{topic}-b")) for topic in TOPICS}
    if check != "none":  # a checked run finds exactly the six edited copies
        assert found == copies
    else:
        assert copies <= found
    assert all("dots" not in pair for pair in found) or method == "simhash"
    if explain:
        assert rows and all("jaccard" in row and "shared" in row for row in rows)
        assert all(("estimate" in row) == (method == "lsh") for row in rows)
        assert all(("score" in row) == (method == "simhash") for row in rows)
    else:
        assert all(set(row) == {"a", "b", "distance"} for row in rows)


@pytest.mark.parametrize(("search", "k", "verify", "explain"), COMBINATIONS)
def test_the_library_refuses_what_the_command_refuses(
    search: str | None, k: int | None, verify: str, explain: bool
) -> None:
    settings = DedupSettings(search=search, max_distance=k, verify=verify, explain=explain)
    records = _rows(CORPUS)
    want = expected(search, k, verify)
    if want is None:
        with pytest.raises(ConfigError, match="does not apply to the lsh search"):
            dedup_documents(records, settings=settings)
        return
    result = dedup_documents(records, settings=settings)
    assert (result.search.method, result.search.verify) == want


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        (("--content-weight", "0.5"), "--content-weight"),
        (("--num-perm", "64"), "--num-perm"),
        (("--meta-field", "tags"), "--meta-field"),
        (("--mu", "0.5"), "--mu"),
        (("--scheme", "4,1"), "--scheme"),
        (("--search", "simhash", "-k", "3", "--content-weight", "0.5"), "--content-weight"),
        (("-k", "3", "--verify", "jaccard", "--num-perm", "64"), "--num-perm"),
        (("-k", "3", "--threshold", "0.4"), "--threshold"),
    ],
)
def test_options_of_another_search_or_check_exit_2(corpus: Path, options: tuple[str, ...], flag: str) -> None:
    result = CliRunner().invoke(main, ["dedup", str(corpus), "--pairs", "-", *options])
    assert result.exit_code == 2, result.output
    assert flag in result.output


def test_options_that_apply_are_taken(corpus: Path) -> None:
    """The same options where they belong run (and change what they set)."""
    for options in (
        ("-k", "3", "--verify", "combined", "--content-weight", "0.5", "--meta-field", "tags"),
        ("-k", "3", "--verify", "minhash", "--num-perm", "64", "--threshold", "0.4"),
        ("-k", "3", "--mu", "0.5", "--scheme", "4,1"),
        ("--threshold", "0.7"),
    ):
        result = CliRunner().invoke(main, ["dedup", str(corpus), "--pairs", "-", *options])
        assert result.exit_code == 0, (options, result.output)


def _rows(records: list[dict[str, Any]]) -> list[Record]:
    return [
        Record(id=row["id"], text=row["text"], title=None, location=str(n)) for n, row in enumerate(records)
    ]

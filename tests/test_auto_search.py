"""The default search of `neardup dedup` (-k auto, --verify auto): the size rule, how given
settings override it, and the quality it reaches on the dev sets with no options at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup.cli.main import main
from neardup.dedup.auto import AUTO_STEPS, AUTO_VERIFY, CLASSIC_DISTANCE, Search, auto_search, resolve_search

from .conftest import shared_file, write_lines


def run(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(arg) for arg in args])
    return result.exit_code, result.stderr


def test_the_distance_shrinks_as_the_input_grows() -> None:
    distances = [auto_search(size).max_distance for size in (1, 20_000, 20_001, 100_000, 1_000_000, 10**7)]
    assert distances == [16, 16, 12, 12, 6, CLASSIC_DISTANCE]
    assert all(auto_search(limit).verify == AUTO_VERIFY for limit, _ in AUTO_STEPS)
    assert auto_search(10**7) == Search(CLASSIC_DISTANCE, "none")
    assert auto_search(100, bits=128) == Search(CLASSIC_DISTANCE, "none")  # tuned for 64 bits only


def test_given_settings_win() -> None:
    assert resolve_search(100, 64, None, "auto") == Search(16, "jaccard")
    assert resolve_search(100, 64, 5, "auto") == Search(5, "none")  # a given k: Simhash alone
    assert resolve_search(100, 64, None, "minhash") == Search(16, "minhash")
    assert resolve_search(100, 64, 7, "jaccard") == Search(7, "jaccard")


def test_the_command_reports_the_search_it_chose(tmp_path: Path) -> None:
    text = "Charikar's simhash maps each document to a short fingerprint so similar ones differ in few bits."
    docs = write_lines(tmp_path / "docs.jsonl", {"id": 1, "text": text}, {"id": 2, "text": text + " Indeed."})
    code, err = run("dedup", docs, "--pairs", tmp_path / "pairs.jsonl")
    assert code == 0, err
    assert "1 pairs of shingle Jaccard >= 0.5 by LSH" in err and "--verify jaccard" in err
    code, err = run("dedup", docs, "--pairs", tmp_path / "pairs.jsonl", "--search", "simhash")
    assert code == 0, err
    # -k auto from the data: two texts leave the check nothing to fear, so the widest k.
    assert "within distance 22" in err and "--verify jaccard" in err
    code, err = run("dedup", docs, "--pairs", tmp_path / "pairs.jsonl", "-k", "auto", "--scheme", "4,1")
    assert code == 2 and "give it with -k" in err
    code, err = run("dedup", docs, "--pairs", tmp_path / "pairs.jsonl", "-k", "many")
    assert code == 2 and "'auto'" in err


@pytest.mark.parametrize("name", ["zh_news", "en_news"])
def test_no_options_score_f1_above_097_on_the_dev_sets(name: str, tmp_path: Path) -> None:
    gold = shared_file(f"dev/{name}.jsonl")
    pairs = tmp_path / "pairs.jsonl"
    code, err = run("dedup", gold, "--pairs", pairs)
    assert code == 0, err
    result = CliRunner().invoke(main, ["eval", str(gold), str(pairs), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    scores = json.loads(result.stdout)
    assert scores["f1"] >= 0.97, scores

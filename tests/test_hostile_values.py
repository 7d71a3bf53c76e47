"""Hostile values to the command line's numeric, URL and file options: each is one
``neardup: error:`` line (exit 1) or a usage error (exit 2) naming the value and the fix,
never a traceback; and a huge record is read and shingled in a small multiple of its size."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

import neardup.similarity.shingles as shingler
from neardup import ConfigError
from neardup.cli.main import main
from neardup.io.read import read_records
from neardup.text.normalize import Normalizer

from .conftest import write_lines

TWO = (
    {"id": 1, "text": "hello world, the quick brown fox"},
    {"id": 2, "text": "hello world, the quick brown fox"},
)


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _one_error_line(result: Result, *said: str) -> str:
    """The result is exit 1 with one ``neardup: error:`` line saying each of ``said``."""
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neardup: error: "), result.stderr
    for text in said:
        assert text in lines[0], lines[0]
    return lines[0]


def _usage_error(result: Result, *said: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    for text in said:
        assert text in result.stderr, result.stderr


# -- --max-bytes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", ["99999999999999999999", "1E", "1T", "99999999999G", "8EiB"])
def test_a_huge_max_bytes_means_no_limit(tmp_path: Path, size: str) -> None:
    source = write_lines(tmp_path / "in.jsonl", *TWO)
    pairs = tmp_path / "pairs.jsonl"
    result = _run("dedup", str(source), "--max-bytes", size, "--pairs", str(pairs))
    assert result.exit_code == 0, (result.output, result.exception)
    assert pairs.read_text(encoding="utf-8").count("\n") == 1


@pytest.mark.parametrize(
    "size",
    ["9" * 31, "9" * 5000, "0", "-1", "1Z", "١٢"],
    ids=["31 digits", "5000 digits", "0", "-1", "1Z", "arabic"],
)
def test_a_max_bytes_that_is_no_size_is_a_usage_error(tmp_path: Path, size: str) -> None:
    source = write_lines(tmp_path / "in.jsonl", *TWO)
    _usage_error(_run("dedup", str(source), "--max-bytes", size), "--max-bytes", "is not a size")


def test_the_library_reads_with_any_max_bytes(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", *TWO)
    assert len(list(read_records(source, max_bytes=10**30))) == 2


# -- files that are not UTF-8 ----------------------------------------------------------------------


def test_eval_names_a_gold_line_that_is_not_utf8(tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_bytes(b'{"id": 1, "cluster": 1}\n{"id": 2, "cluster": "\xff\xfe"}\n')
    pairs = write_lines(tmp_path / "pairs.jsonl", {"a": 1, "b": 2})
    _one_error_line(_run("eval", str(gold), str(pairs)), f"{gold}:2", "invalid UTF-8", "iconv")


def test_eval_names_a_prediction_line_that_is_not_utf8(tmp_path: Path) -> None:
    gold = write_lines(tmp_path / "gold.jsonl", {"id": 1, "cluster": 1}, {"id": 2, "cluster": 1})
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_bytes(b'{"a": 1, "b": 2}\n\xc3(\n')
    _one_error_line(_run("eval", str(gold), str(pairs)), f"{pairs}:2", "invalid UTF-8")


def test_eval_reads_a_gold_file_with_a_byte_order_mark(tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_bytes(b'\xef\xbb\xbf{"id": 1, "cluster": 1}\n{"id": 2, "cluster": 1}\n')
    pairs = write_lines(tmp_path / "pairs.jsonl", {"a": 1, "b": 2})
    result = _run("eval", str(gold), str(pairs), "--format", "json")
    assert result.exit_code == 0, result.output


def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", *TWO)
    config = tmp_path / "settings.toml"
    config.write_bytes(b'[fingerprint]\nlang = "\xff"\n')
    _one_error_line(_run("fingerprint", str(source), "--config", str(config)), str(config), "not UTF-8")
    table = tmp_path / "people.csv"
    table.write_text("id,name\n1,Ann\n2,Ann\n", encoding="utf-8")
    args = (
        "records",
        str(table),
        "--key",
        "id",
        "--config",
        str(config),
        "--clusters",
        str(tmp_path / "c.jsonl"),
    )
    _one_error_line(_run(*args), str(config), "not UTF-8")


# -- ids and numbers past Python's limits ------------------------------------------------------------


@pytest.mark.parametrize("digits", ["9" * 5000, "-" + "9" * 5000, "9" * 256], ids=["5000", "-5000", "256"])
def test_index_remove_int_ids_with_thousands_of_digits(tmp_path: Path, digits: str) -> None:
    source = write_lines(tmp_path / "in.jsonl", *TWO)
    store = str(tmp_path / "index.db")
    assert _run("index", "add", store, str(source)).exit_code == 0
    line = _one_error_line(
        _run("index", "remove", store, "--int-ids", "--", digits), "characters long", "255"
    )
    assert len(line) < 300
    assert _run("index", "remove", store, "--int-ids", "9" * 255).exit_code == 1  # an id, not stored


@pytest.mark.parametrize(
    ("option", "value"),
    [("--ngram", "99999999999999999999"), ("--ngram", "101"), ("--num-perm", "99999999999999999999")],
)
def test_sizes_past_what_can_be_built_are_usage_errors(tmp_path: Path, option: str, value: str) -> None:
    source = write_lines(tmp_path / "in.jsonl", *TWO)
    _usage_error(_run("dedup", str(source), option, value, "--pairs", str(tmp_path / "p.jsonl")), option)


def test_the_library_refuses_the_same_sizes() -> None:
    from neardup import FingerprintConfig
    from neardup.similarity.minhash import MinHasher

    with pytest.raises(ConfigError, match="ngram"):
        FingerprintConfig(ngram=10**20)
    with pytest.raises(ConfigError, match="num_perm"):
        MinHasher(num_perm=10**20)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_a_baseline_parameter_that_is_not_finite_is_one_line(tmp_path: Path, value: str) -> None:
    source = write_lines(tmp_path / "in.jsonl", *TWO)
    args = ("baseline", "classic", str(source), "--parameter", value, "--pairs", str(tmp_path / "p.jsonl"))
    _one_error_line(_run(*args), "max_distance of classic", "finite")


# -- database URLs of `neardup records` go through the store URL parser --------------------------


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("mysql://u:pw@[::1/db", "unclosed '['"),
        ("postgresql://u:pw@[::1/db", "unclosed '['"),
        ("mysql://u:pw@127.0.0.1:99999/db", "port '99999'"),
        ("postgresql://u:p@ss/w?rd#x@host/db", "percent-encode"),
        ("mongodb://u:pw@127.0.0.1:1/db", "cannot read rows"),
    ],
)
def test_records_database_urls_are_one_line_without_the_password(tmp_path: Path, url: str, said: str) -> None:
    pytest.importorskip("sqlalchemy")
    args = ("records", url, "--table", "t", "--key", "id", "--clusters", str(tmp_path / "c.jsonl"))
    line = _one_error_line(_run(*args), said, "***")
    for secret in ("pw", "p@ss", "ss/w", "rd#x"):
        assert secret not in line, line


# -- a long text is shingled in pieces ---------------------------------------------------------------

LONG_CASES = [
    ["hello world foo bar " * 50],
    ["!!! ab ... " + "." * 80 + " c"],  # fewer letters than a 5-gram, spread over pieces
    ["." * 120],
    ["", "short", "x" * 60 + "中", "abc def " * 30, "中文文本" * 20],
    ["English first " * 20 + "后面有中文"],  # a Chinese letter only in the last piece
    ["ＡＢＣ full width " * 30, "İstanbul ǅ ß" * 20],
]


@pytest.mark.parametrize("texts", LONG_CASES)
@pytest.mark.parametrize("piece", [7, 33, 1000])
def test_a_long_text_has_the_shingles_of_one_batch(
    monkeypatch: pytest.MonkeyPatch, texts: list[str], piece: int
) -> None:
    whole = shingler.shingles_of(texts, Normalizer())
    monkeypatch.setattr(shingler, "LONG_TEXT", piece)
    pieces = shingler.shingles_of(texts, Normalizer())
    assert np.array_equal(whole.hashes, pieces.hashes)
    assert np.array_equal(whole.documents, pieces.documents) and whole.count == pieces.count


def test_a_long_text_is_shingled_in_a_few_times_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """One batch held ~30 bytes per character (a 200 MB record peaked at 6.8 GB); the pieces
    hold a few times a piece and the text's distinct shingles."""
    rng = np.random.default_rng(7)
    words = ["".join(rng.choice(list("abcdefghij"), size=int(n))) for n in rng.integers(2, 8, size=500)]
    text = " ".join(rng.choice(words, size=600_000))  # ~2.9 M characters
    monkeypatch.setattr(shingler, "LONG_TEXT", 1 << 18)
    tracemalloc.start()
    try:
        shingles = shingler.shingles_of([text], Normalizer())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(shingles.hashes) > 10_000
    assert peak < 8 * len(text), f"{peak / len(text):.1f} bytes per character"

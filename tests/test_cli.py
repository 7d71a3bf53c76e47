"""The ``neardup`` command: ``fingerprint`` and ``idf fit`` end to end, checked against the
library (the CLI must print exactly what ``Fingerprinter`` computes), plus error policy,
exit codes and help texts. One test runs the installed console script through a pipe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from neardup import FingerprintConfig, Fingerprinter, IdfModel, to_hex
from neardup.cli.main import main

from .conftest import write_lines

FIXTURES = Path(__file__).parent / "fixtures"
DOCS = FIXTURES / "docs.jsonl"
GOOD = {"id": "good", "text": "a good record about simhash fingerprints"}

_FINGERPRINTERS: dict[tuple[tuple[str, Any], ...], Fingerprinter] = {}


def run(*args: str | Path, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(main, [str(arg) for arg in args], input=stdin, catch_exceptions=False)


def rows(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def expected(text: str, title: str | None = None, **options: Any) -> str:
    """What the library says the fingerprint of ``text`` is, as the CLI's hex."""
    key = tuple(sorted(options.items()))
    if key not in _FINGERPRINTERS:
        _FINGERPRINTERS[key] = Fingerprinter(**options)
    fingerprinter = _FINGERPRINTERS[key]
    return to_hex(fingerprinter.fingerprint(text, title), fingerprinter.bits)


def fixture_records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DOCS.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- happy paths -------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [32, 64, 128])
def test_fingerprints_equal_the_library_for_every_width(bits: int) -> None:
    result = run("fingerprint", DOCS, "--bits", str(bits))
    assert result.exit_code == 0, result.stderr
    records = fixture_records()
    output = rows(result)
    assert [row["id"] for row in output] == [1, "b-2", 3, "empty-4", 5]  # ids as given, input order
    for record, row in zip(records, output, strict=True):
        assert len(row["fingerprint"]) == bits // 4
        assert row["fingerprint"] == expected(record["text"], record.get("title"), bits=bits)
    assert output[0]["fingerprint"] != output[2]["fingerprint"]  # real fingerprints, not zeros
    assert "neardup: wrote 5 fingerprints; 1 empty" in result.stderr


def test_empty_text_is_flagged() -> None:
    output = {row["id"]: row for row in rows(run("fingerprint", DOCS))}
    assert output["empty-4"] == {"id": "empty-4", "fingerprint": "0" * 16, "empty": True}
    assert "empty" not in output[1]


def test_stopword_only_text_is_flagged(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", {"id": 1, "text": "the and of 的 了 ！！"})
    assert rows(run("fingerprint", path)) == [{"id": 1, "fingerprint": "0" * 16, "empty": True}]


def test_output_file_and_settings(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    args = ["--weighting", "composite", "--hash", "xxh3_64", "--lang", "zh", "--idf", "none"]
    result = run("fingerprint", DOCS, "-o", out, *args)
    assert result.exit_code == 0 and result.stdout == ""
    output = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    options = {"weighting": "composite", "hash": "xxh3_64", "lang": "zh", "idf": "none"}
    for record, row in zip(fixture_records(), output, strict=True):
        # composite weighting boosts title words, so the title must reach the fingerprinter
        assert row["fingerprint"] == expected(record["text"], record.get("title"), **options)


def test_ngram_and_batches_keep_order(tmp_path: Path) -> None:
    texts = [f"document number {i} 文档 {i}" for i in range(7)]
    path = write_lines(tmp_path / "a.jsonl", *({"id": i, "text": t} for i, t in enumerate(texts)))
    output = rows(run("fingerprint", path, "--ngram", "3", "--batch-size", "2"))
    assert [row["id"] for row in output] == list(range(7))
    assert [row["fingerprint"] for row in output] == [expected(t, ngram=3) for t in texts]


def test_csv_with_field_options() -> None:
    result = run(
        "fingerprint", FIXTURES / "docs.csv", "--id-field", "doc_id", "--text-field", "body",
        "--title-field", "headline", "--bits", "32",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    output = rows(result)
    assert [row["id"] for row in output] == ["a1", "a2", "a3"]
    assert output[0]["fingerprint"] == expected("今天北京的天气很好，适合出去散步。", "天气", bits=32)


def test_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": [7, 8], "text": ["并行计算的指纹", "parallel fingerprints"]}), path)
    output = rows(run("fingerprint", path, "--bits", "128"))
    assert output == [
        {"id": 7, "fingerprint": expected("并行计算的指纹", bits=128)},
        {"id": 8, "fingerprint": expected("parallel fingerprints", bits=128)},
    ]


def test_format_option_overrides_the_extension(tmp_path: Path) -> None:
    path = tmp_path / "docs.txt"
    path.write_text("id,text\n1,hello world\n")
    assert rows(run("fingerprint", path, "--format", "csv")) == [
        {"id": "1", "fingerprint": expected("hello world")}
    ]
    result = run("fingerprint", path)
    assert result.exit_code == 1 and "pass format=" in result.stderr


def test_stdin_to_stdout() -> None:
    result = run("fingerprint", "-", "-o", "-", stdin=DOCS.read_bytes())
    assert result.exit_code == 0
    assert rows(result) == rows(run("fingerprint", DOCS))


# -- bad input: fail and skip --------------------------------------------------------------------

BAD_LINES = [
    pytest.param(b'{"id": 2, "text": "' + "中文".encode("gbk") + b'"}', "invalid UTF-8 at byte 19", id="gbk"),
    pytest.param(b'{"id": 2, "text": ', "invalid JSON: Expecting value", id="malformed-json"),
    pytest.param(b"[1, 2]", "expected one JSON object per line, got an array", id="array"),
    pytest.param(b'{"text": "x"}', "missing id field 'id'; name the id field with --id-field", id="no-id"),
    pytest.param(
        b'{"id": 2}', "missing text field 'text'; name the text field with --text-field", id="no-text"
    ),
    pytest.param(b'{"id": 2, "text": null}', "missing text field 'text'", id="null-text"),
    pytest.param(b'{"id": 2, "text": 17}', "must be a string, not a number (17)", id="number-text"),
    pytest.param(b'{"id": 2, "text": ["a"]}', "must be a string, not an array", id="list-text"),
    pytest.param(b'{"id": 2.5, "text": "x"}', "must be a string or an integer", id="float-id"),
    pytest.param(b'{"id": false, "text": "x"}', "not a boolean", id="bool-id"),
    pytest.param(b'{"id": 2, "text": "a\\u0000b"}', "looks like binary data", id="nul"),
    pytest.param(b'{"id": 2, "text": "\\u0001\\u0002\\u0003"}', "looks like binary data", id="controls"),
    pytest.param(b'{"id": 2, "text": "' + b"x" * 3000 + b'"}', "over the limit of 2,048 bytes", id="too-big"),
]


@pytest.mark.parametrize(("line", "fragment"), BAD_LINES)
def test_bad_record_fails_with_its_line(tmp_path: Path, line: bytes, fragment: str) -> None:
    path = write_lines(tmp_path / "in.jsonl", GOOD, line, GOOD)
    result = run("fingerprint", path, "--max-bytes", "2K")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"neardup: error: {path}:2: ")
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("line", "fragment"), BAD_LINES)
def test_bad_record_is_skipped_and_counted(tmp_path: Path, line: bytes, fragment: str) -> None:
    path = write_lines(tmp_path / "in.jsonl", GOOD, line, {"id": 3, "text": "the third record"})
    result = run("fingerprint", path, "--on-error", "skip", "--max-bytes", "2K")
    assert result.exit_code == 0, result.stderr
    assert rows(result) == [
        {"id": "good", "fingerprint": expected(GOOD["text"])},
        {"id": 3, "fingerprint": expected("the third record")},
    ]
    assert "wrote 2 fingerprints; 0 empty" in result.stderr and "1 skipped" in result.stderr
    assert f"neardup: skipped {path}:2: " in result.stderr and fragment in result.stderr


def test_skip_summary_lists_only_the_first_few(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "in.jsonl", *([b"{oops"] * 9), GOOD)
    result = run("fingerprint", path, "--on-error", "skip")
    assert result.exit_code == 0 and len(rows(result)) == 1
    assert "9 skipped" in result.stderr and result.stderr.count("neardup: skipped ") == 5
    assert "... and 4 more skipped" in result.stderr


def test_csv_missing_column_is_an_error() -> None:
    result = run("fingerprint", FIXTURES / "docs.csv", "--on-error", "skip")
    assert result.exit_code == 1
    assert "no column 'id'" in result.stderr and "--id-field" in result.stderr


def test_50_mb_document_works(tmp_path: Path) -> None:
    unit = "Near-duplicate detection with Simhash fingerprints. 近似重复文档检测与海明距离。\n"
    text = unit * (50_000_000 // len(unit.encode()))
    path = write_lines(tmp_path / "big.jsonl", {"id": "big", "text": text})
    result = run("fingerprint", path, "--lang", "en")  # the Latin tokenizer keeps this test fast
    assert result.exit_code == 0, result.stderr
    assert rows(result) == [{"id": "big", "fingerprint": expected(text, lang="en")}]


# -- settings: --config, --idf, word lists ------------------------------------------------------


def test_config_file_and_flag_override() -> None:
    text = fixture_records()[0]["text"]
    from_file = FingerprintConfig.from_toml(FIXTURES / "config.toml")
    output = rows(run("fingerprint", DOCS, "--config", FIXTURES / "config.toml"))
    assert output[0]["fingerprint"] == expected(text, bits=32, weighting="tf", hash="murmur3_64")
    assert output[0]["fingerprint"] == to_hex(Fingerprinter(config=from_file).fingerprint(text), 32)
    overridden = rows(run("fingerprint", DOCS, "--config", FIXTURES / "config.toml", "--bits", "64"))
    assert overridden[0]["fingerprint"] == expected(text, bits=64, weighting="tf", hash="murmur3_64")


def test_bad_config_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[fingerprint]\nbits = 48\n")
    result = run("fingerprint", DOCS, "--config", path)
    assert result.exit_code == 1 and "bits must be one of 32, 64, 128; got 48" in result.stderr


def test_fields_weighting_from_a_config_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rows.toml"
    path.write_text('weighting = "fields"\n')  # top-level keys work too
    result = run("fingerprint", DOCS, "--config", path)
    assert result.exit_code == 1 and "'fields' weighting applies to database rows" in result.stderr
    assert run("fingerprint", DOCS, "--config", path, "--weighting", "tf").exit_code == 0


def test_empty_input(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "empty.jsonl", "")
    result = run("fingerprint", path)
    assert result.exit_code == 0 and result.stdout == "" and "wrote 0 fingerprints" in result.stderr
    result = run("idf", "fit", path, "-o", tmp_path / "idf.json")
    assert result.exit_code == 1 and "empty corpus" in result.stderr


def test_idf_fit_then_fingerprint_with_it(tmp_path: Path) -> None:
    idf_path = tmp_path / "idf.json"
    result = run("idf", "fit", DOCS, "-o", idf_path)
    assert result.exit_code == 0, result.stderr
    assert "fitted IDF on 5 documents" in result.stderr
    model = IdfModel.load(idf_path)
    assert model.documents == 5
    assert model["simhash"] < model["charikar's"] or model["simhash"] < model["charikar"]
    assert model["simhash"] < model.default  # seen in two documents: lower idf than an unseen token
    output = rows(run("fingerprint", DOCS, "--idf", idf_path, "--weighting", "tfidf"))
    for record, row in zip(fixture_records(), output, strict=True):
        assert row["fingerprint"] == expected(record["text"], weighting="tfidf", idf=str(idf_path))


def test_idf_fit_uses_the_tokenizer_options(tmp_path: Path) -> None:
    idf_path = tmp_path / "idf.json"
    assert run("idf", "fit", DOCS, "-o", idf_path, "--ngram", "2").exit_code == 0
    assert all(len(token) <= 2 for token in IdfModel.load(idf_path).idf)
    assert run("idf", "fit", DOCS, "-o", idf_path, "--user-dict", FIXTURES / "userdict.txt").exit_code == 0
    tokens = IdfModel.load(idf_path).idf
    assert "重复文档检测" in tokens and "信息检索" in tokens
    assert " " not in tokens and "，" not in tokens  # only tokens the fingerprinter can weigh


def test_idf_file_that_does_not_exist(tmp_path: Path) -> None:
    result = run("fingerprint", DOCS, "--idf", tmp_path / "missing.json")
    assert result.exit_code == 1 and "cannot read IDF file" in result.stderr


def test_stopword_lists_and_user_dictionary() -> None:
    text = fixture_records()[0]["text"]
    stopwords = str(FIXTURES / "stopwords.txt")
    output = rows(run("fingerprint", DOCS, "--stopwords", stopwords, "--no-stopwords"))
    assert output[0]["fingerprint"] == expected(text, stopword_files=(stopwords,), stopwords=False)
    assert output[0]["fingerprint"] != expected(text)
    user = str(FIXTURES / "userdict.txt")
    output = rows(run("fingerprint", DOCS, "--user-dict", user))
    assert output[0]["fingerprint"] == expected(text, user_dictionary=user)


def test_to_simplified() -> None:
    pytest.importorskip("opencc")
    traditional, simplified = "近似重複文檔檢測", "近似重复文档检测"
    output = rows(
        run("fingerprint", "-", "--to-simplified", stdin=json.dumps({"id": 1, "text": traditional}).encode())
    )
    assert output[0]["fingerprint"] == expected(simplified) == expected(traditional, to_simplified=True)


# -- usage, help, errors --------------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["fingerprint"], ["idf"], ["idf", "fit"]])
def test_help_has_examples(command: list[str]) -> None:
    result = run(*command, "--help")
    assert result.exit_code == 0 and "Example:\n" in result.stdout
    assert "  neardup " in result.stdout  # \b keeps the example lines as written


def test_main_help_lists_commands_and_version() -> None:
    help_text = run("--help").stdout
    assert "fingerprint" in help_text and "idf" in help_text
    assert run("--version").stdout.startswith("neardup, version ")


@pytest.mark.parametrize(
    "args",
    [
        ["fingerprint", str(DOCS), "--frobnicate"],
        ["fingerprint", str(DOCS), "--bits", "48"],
        ["fingerprint", str(DOCS), "--max-bytes", "lots"],
        ["fingerprint", "does-not-exist.jsonl"],
        ["idf", "fit", str(DOCS)],  # -o is required
        ["nonsense"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    assert run(*args).exit_code == 2


def test_max_bytes_accepts_units(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", {"id": 1, "text": "y" * 1500})
    assert run("fingerprint", path, "--max-bytes", "1K").exit_code == 1
    assert run("fingerprint", path, "--max-bytes", "2KiB").exit_code == 0


def test_verbose_shows_the_traceback(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", b"{broken")
    quiet = run("fingerprint", path)
    assert quiet.exit_code == 1 and "Traceback" not in quiet.stderr
    verbose = run("--verbose", "fingerprint", path)
    assert verbose.exit_code == 1
    assert "Traceback (most recent call last)" in verbose.stderr and "InputError" in verbose.stderr
    assert verbose.stderr.rstrip().endswith(quiet.stderr.rstrip())


def test_unwritable_output_is_an_error(tmp_path: Path) -> None:
    result = run("fingerprint", DOCS, "-o", tmp_path / "missing-dir" / "out.jsonl")
    assert result.exit_code == 1 and "cannot open output file" in result.stderr
    result = run("idf", "fit", DOCS, "-o", tmp_path / "missing-dir" / "idf.json")
    assert result.exit_code == 1 and "cannot write" in result.stderr


def test_progress_bar_goes_to_stderr() -> None:
    result = run("fingerprint", DOCS, "--progress")
    assert result.exit_code == 0 and "records" in result.stderr
    assert rows(result) == rows(run("fingerprint", DOCS, "--no-progress"))


# -- the installed console script ----------------------------------------------------------------


def test_console_script_pipes_stdin_to_stdout() -> None:
    script = Path(sys.executable).parent / "neardup"
    if not script.exists():
        pytest.skip("the neardup console script is not installed next to this Python")
    completed = subprocess.run(
        [str(script), "fingerprint", "-", "--bits", "32"],
        input=DOCS.read_bytes(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr.decode()
    lines = completed.stdout.decode("utf-8").splitlines()
    first = fixture_records()[0]
    assert json.loads(lines[0]) == {"id": 1, "fingerprint": expected(first["text"], first["title"], bits=32)}
    assert len(lines) == 5 and b"wrote 5 fingerprints" in completed.stderr


def test_hmm_flag_changes_tokens_and_is_recorded() -> None:
    text = "韩冰是一个好人"  # 韩冰 is not in jieba's dictionary; HMM discovers it as one word
    on = Fingerprinter(hmm=True).word_tokens_many([text])[0]
    off = Fingerprinter(hmm=False).word_tokens_many([text])[0]
    assert on != off
    stdin = json.dumps({"id": 1, "text": text}).encode()
    result = rows(run("fingerprint", "-", "--hmm", stdin=stdin))
    assert result[0]["fingerprint"] == to_hex(Fingerprinter(hmm=True).fingerprint(text))

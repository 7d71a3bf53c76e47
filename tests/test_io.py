"""Reading records (JSONL, CSV, Parquet, stdin) and writing JSON lines: happy paths and every
defined bad-input behaviour, in both ``fail`` and ``skip`` modes."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from neardup.errors import ConfigError, InputError, MissingDependencyError, NeardupError
from neardup.io.output import write_jsonl
from neardup.io.read import detect_format, read_records
from neardup.io.record import DEFAULT_MAX_BYTES, ErrorReport, Record

from .conftest import write_lines

FIXTURES = Path(__file__).parent / "fixtures"


def read_all(path: Path | str, **options: Any) -> list[Record]:
    return list(read_records(path, **options))


def read_skipping(path: Path | str, **options: Any) -> tuple[list[Record], ErrorReport]:
    report = ErrorReport()
    return list(read_records(path, on_error="skip", report=report, **options)), report


def fail_message(path: Path, **options: Any) -> InputError:
    with pytest.raises(InputError) as caught:
        read_all(path, **options)
    return caught.value


GOOD = {"id": "good", "text": "a good record"}


# -- JSONL happy paths --------------------------------------------------------------------------


def test_jsonl_fixture_keeps_ids_titles_and_order() -> None:
    records = read_all(FIXTURES / "docs.jsonl")
    assert [r.id for r in records] == [1, "b-2", 3, "empty-4", 5]
    assert records[0].title == "近似重复检测"
    assert records[1].title is None  # null
    assert records[2].title is None  # missing
    # The blank line 3 is skipped silently, and lines keep their physical numbers.
    assert records[2].location == f"{FIXTURES / 'docs.jsonl'}:4"
    assert records[3].text == "   "  # whitespace-only text is read normally


def test_blank_lines_are_not_errors(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", "", "   ", GOOD, "\t")
    records, report = read_skipping(path)
    assert [r.id for r in records] == ["good"] and report.count == 0


def test_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": 1, "text": "x"}\r\n{"id": 2, "text": "y"}\r\n')
    assert [(r.id, r.text) for r in read_all(path)] == [(1, "x"), (2, "y")]


def test_empty_text_is_read_normally(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", {"id": 1, "text": ""}, {"id": 2, "text": " \n\t "})
    assert [r.text for r in read_all(path)] == ["", " \n\t "]


def test_custom_field_names(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", {"key": 7, "body": "hello", "headline": "hi", "text": 1})
    (record,) = read_all(path, id_field="key", text_field="body", title_field="headline")
    assert (record.id, record.text, record.title) == (7, "hello", "hi")


# -- JSONL bad records ---------------------------------------------------------------------------


def test_invalid_utf8_names_line_and_byte_offset_and_iconv(tmp_path: Path) -> None:
    bad = b'{"id": 2, "text": "' + "中文".encode("gbk") + b'"}'
    path = write_lines(tmp_path / "gbk.jsonl", GOOD, bad, GOOD)
    error = fail_message(path)
    first_line = len(json.dumps(GOOD)) + 1
    assert error.location == f"{path}:2"
    assert "invalid UTF-8 at byte 19 of the line" in str(error)
    assert f"byte {first_line + 19} of the file" in str(error)
    assert "iconv -f GBK -t UTF-8" in str(error)
    records, report = read_skipping(path)
    assert len(records) == 2 and report.count == 1 and f"{path}:2" in report.messages[0]


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ('{"id": 1, "text": "x"', "invalid JSON: Expecting ',' delimiter"),
        ("{'id': 1}", "invalid JSON: Expecting property name"),
        ("[1, 2]", "expected one JSON object per line, got an array"),
        ("42", "expected one JSON object per line, got a number"),
        ('"text"', "expected one JSON object per line, got a string"),
        ('{"id": ' + "9" * 5000 + ', "text": "x"}', "unreadable JSON: Exceeds the limit"),
        ("[" * 100_000 + "]" * 100_000, "unreadable JSON: maximum recursion depth"),
    ],
)
def test_malformed_or_non_object_json(tmp_path: Path, line: str, fragment: str) -> None:
    path = write_lines(tmp_path / "a.jsonl", GOOD, GOOD, line)
    error = fail_message(path)
    assert error.location == f"{path}:3" and fragment in str(error)
    records, report = read_skipping(path)
    assert len(records) == 2 and report.count == 1


def test_json_array_file_gets_a_jq_hint(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('[\n  {"id": 1, "text": "x"}\n]\n')
    assert "jq -c '.[]'" in str(fail_message(path))


@pytest.mark.parametrize(
    ("record", "fragment"),
    [
        ({"text": "x"}, "missing id field 'id'; name the id field with id_field"),
        ({"id": None, "text": "x"}, "missing id field 'id'"),
        ({"id": "", "text": "x"}, "missing id field 'id'"),
        ({"id": 1}, "missing text field 'text'; name the text field with text_field"),
        ({"id": 1, "text": None}, "missing text field 'text'"),
        ({"id": 1, "text": 5}, "text field 'text' must be a string, not a number (5)"),
        ({"id": 1, "text": ["a", "b"]}, "text field 'text' must be a string, not an array"),
        ({"id": 1, "text": {"a": 1}}, "text field 'text' must be a string, not an object"),
        ({"id": 1, "text": True}, "text field 'text' must be a string, not a boolean"),
        ({"id": True, "text": "x"}, "id field 'id' must be a string or an integer, not a boolean"),
        ({"id": 1.5, "text": "x"}, "id field 'id' must be a string or an integer, not a number (1.5)"),
        ({"id": [1], "text": "x"}, "not an array"),
        ({"id": {"a": 1}, "text": "x"}, "not an object"),
        ({"id": 1, "text": "x", "title": 3}, "title field 'title' must be a string or null"),
    ],
)
def test_missing_fields_and_wrong_types(tmp_path: Path, record: dict[str, Any], fragment: str) -> None:
    path = write_lines(tmp_path / "a.jsonl", GOOD, record, GOOD)
    error = fail_message(path)
    assert error.location == f"{path}:2"
    assert fragment in str(error)
    records, report = read_skipping(path)
    assert [r.id for r in records] == ["good", "good"] and report.count == 1


def test_missing_field_message_names_the_configured_field(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", {"id": 1, "text": "x"})
    assert "missing text field 'body'; name the text field with text_field" in str(
        fail_message(path, text_field="body")
    )


def test_large_integer_and_unicode_ids_are_kept(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", {"id": 2**70, "text": "x"}, {"id": "文档-1", "text": "y"})
    assert [r.id for r in read_all(path)] == [2**70, "文档-1"]


def test_lone_surrogate_escape_is_an_error(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", '{"id": 1, "text": "bad \\udc80 escape"}')
    assert "unpaired surrogate \\udc80" in str(fail_message(path))


@pytest.mark.parametrize(
    "text",
    ["abc\x00def", "\x01\x02\x03\x04 binary-ish \x05\x06\x07\x08\x0b\x0c\x0e\x0f"],
)
def test_binary_looking_text_is_an_error(tmp_path: Path, text: str) -> None:
    path = write_lines(tmp_path / "a.jsonl", GOOD, {"id": 9, "text": text})
    error = fail_message(path)
    assert error.location == f"{path}:2" and "looks like binary data" in str(error)
    records, report = read_skipping(path)
    assert len(records) == 1 and report.count == 1


def test_few_control_characters_are_fine(tmp_path: Path) -> None:
    text = "page one\x0cpage two\ttabbed\r\nline " + "x" * 20  # one form feed in ~50 characters
    path = write_lines(tmp_path / "a.jsonl", {"id": 1, "text": text})
    assert read_all(path)[0].text == text


def test_record_over_max_bytes_names_limit_and_option(tmp_path: Path) -> None:
    big = {"id": 2, "text": "x" * 5000}
    path = write_lines(tmp_path / "a.jsonl", GOOD, big, {"id": 3, "text": "after"})
    error = fail_message(path, max_bytes=1000)
    assert error.location == f"{path}:2"
    assert "over the limit of 1,000 bytes" in str(error) and "max_bytes" in str(error)
    records, report = read_skipping(path, max_bytes=1000)
    assert [r.id for r in records] == ["good", 3] and report.count == 1
    assert [r.location for r in records] == [f"{path}:1", f"{path}:3"]


def test_max_bytes_boundary_counts_the_line_without_its_terminator(tmp_path: Path) -> None:
    line = json.dumps({"id": 1, "text": "y" * 80})
    path = tmp_path / "a.jsonl"
    path.write_bytes(line.encode() + b"\r\n" + line.encode())  # CRLF, then no final newline
    assert len(read_all(path, max_bytes=len(line))) == 2
    with pytest.raises(InputError, match="over the limit"):
        read_all(path, max_bytes=len(line) - 1)


def test_default_limit_is_64_mib() -> None:
    assert DEFAULT_MAX_BYTES == 64 * 1024 * 1024


def test_50_mb_mixed_document_below_the_limit_is_read(tmp_path: Path) -> None:
    unit = "Near-duplicate detection with Simhash. 近似重复文档检测，指纹与海明距离。\n"
    text = unit * (50_000_000 // len(unit.encode()))
    path = write_lines(tmp_path / "big.jsonl", {"id": "big", "text": text}, GOOD)
    records = read_all(path)
    assert len(records[0].text.encode()) > 49_000_000
    assert records[0].text == text and records[1].id == "good"


def test_fail_mode_is_the_default_and_on_error_is_checked(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", "{nope")
    with pytest.raises(InputError):
        read_all(path)
    with pytest.raises(ConfigError, match="on_error"):
        read_records(path, on_error="ignore")  # checked on the call, before any reading
    with pytest.raises(ConfigError, match="max_bytes"):
        read_records(path, max_bytes=0)


def test_error_report_counts_all_and_keeps_the_first_few(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", *(["{bad"] * 12), GOOD)
    records, report = read_skipping(path)
    assert len(records) == 1 and report.count == 12 and len(report.messages) == report.keep == 5
    assert report.messages[0].startswith(f"{path}:1: invalid JSON")


# -- formats, stdin -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [("a.jsonl", "jsonl"), ("a.JSON", "jsonl"), ("a.ndjson", "jsonl"), ("a.csv", "csv"),
     ("a.parquet", "parquet"), ("-", "jsonl")],
)  # fmt: skip
def test_detect_format(name: str, expected: str) -> None:
    assert detect_format(name) == expected


def test_unknown_extension_asks_for_format() -> None:
    with pytest.raises(ConfigError, match="format='jsonl'"):
        detect_format("data.txt")
    assert detect_format("data.txt", "csv") == "csv"


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot open input file"):
        read_all(tmp_path / "missing.jsonl")


def test_stdin_is_read_as_binary_jsonl(monkeypatch: pytest.MonkeyPatch) -> None:
    data = '{"id": 1, "text": "标准输入"}\n{"id": 2, "text": "stdin"}\n'.encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="ascii"))
    records = read_all("-")
    assert [(r.id, r.text, r.location) for r in records] == [
        (1, "标准输入", "<stdin>:1"),
        (2, "stdin", "<stdin>:2"),
    ]


# -- CSV -----------------------------------------------------------------------------------------


def test_csv_fixture_with_field_options() -> None:
    records = read_all(FIXTURES / "docs.csv", id_field="doc_id", text_field="body", title_field="headline")
    assert [r.id for r in records] == ["a1", "a2", "a3"]  # CSV ids stay strings, as given
    assert records[0].title == "天气" and records[0].text.startswith("今天北京")
    assert records[2].text == "A text with a quoted comma, and\na line break inside the field."
    assert records[2].location.endswith("docs.csv:row 4")


def test_csv_missing_column_fails_even_when_skipping() -> None:
    with pytest.raises(InputError, match=r"no column 'text'.*text_field"):
        read_skipping(FIXTURES / "docs.csv", id_field="doc_id")


def test_csv_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(
        b"id,text\n1,fine\n2," + "坏".encode("gbk") + b"\n\n3\n4,\n5," + b"z" * 300 + b"\n6,last\n"
    )
    error = fail_message(path)
    assert error.location == f"{path}:row 3"
    assert "line 3: invalid UTF-8 at byte 2 of the line" in str(error) and "iconv" in str(error)
    records, report = read_skipping(path, max_bytes=200)
    assert [(r.id, r.text) for r in records] == [("1", "fine"), ("4", ""), ("6", "last")]
    assert report.count == 3
    assert "row 5: row has 1 fields but the header has 2" in report.messages[1]
    assert "row 7: record is" in report.messages[2] and "max_bytes" in report.messages[2]


def test_csv_large_field_is_read(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("id,text\n1," + "w" * 300_000 + "\n")  # over csv's default 128 KiB field limit
    assert len(read_all(path)[0].text) == 300_000


def test_csv_binary_text_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(b"id,text\n1,a\x00b\n")
    assert "looks like binary data" in str(fail_message(path))


# -- Parquet -------------------------------------------------------------------------------------


def write_parquet(path: Path, columns: dict[str, list[Any]]) -> Path:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table(columns), path)
    return path


def test_parquet_happy_path(tmp_path: Path) -> None:
    path = write_parquet(
        tmp_path / "a.parquet", {"id": [10, 11, 12], "text": ["一", "two", ""], "title": ["t", None, "x"]}
    )
    records = read_all(path)
    assert [(r.id, r.text, r.title) for r in records] == [(10, "一", "t"), (11, "two", None), (12, "", "x")]
    assert records[2].location == f"{path}:row 3"


def test_parquet_without_title_column_and_with_bad_rows(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "a.parquet", {"key": ["a", "b", "c"], "body": ["x", None, "y"]})
    records, report = read_skipping(path, id_field="key", text_field="body")
    assert [r.id for r in records] == ["a", "c"] and all(r.title is None for r in records)
    assert report.count == 1 and "row 2: missing text field 'body'" in report.messages[0]


def test_parquet_missing_column(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "a.parquet", {"id": [1], "body": ["x"]})
    with pytest.raises(InputError, match=r"no column 'text'.*text_field"):
        read_all(path)


def test_parquet_text_over_max_bytes(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "a.parquet", {"id": [1, 2], "text": ["汉" * 100, "ok"]})
    records, report = read_skipping(path, max_bytes=200)  # 100 Han characters are 300 bytes
    assert [r.id for r in records] == [2] and "over the limit of 200 bytes" in report.messages[0]


def test_not_a_parquet_file(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    path.write_text("id,text\n")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        read_all(path)


def test_parquet_without_pyarrow_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'neardup\[parquet\]'"):
        read_all(tmp_path / "a.parquet")


# -- writing -------------------------------------------------------------------------------------


def test_write_jsonl_is_compact_utf8(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    count = write_jsonl(path, iter([{"id": 1, "fingerprint": "00ff"}, {"id": "文", "empty": True}]))
    assert count == 2
    assert path.read_bytes() == '{"id":1,"fingerprint":"00ff"}\n{"id":"文","empty":true}\n'.encode()


def test_write_jsonl_to_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(buffer, encoding="ascii"))
    write_jsonl("-", [{"id": "中"}])
    assert buffer.getvalue() == '{"id":"中"}\n'.encode()


def test_write_jsonl_unwritable_target(tmp_path: Path) -> None:
    with pytest.raises(NeardupError, match="cannot open output file"):
        write_jsonl(tmp_path / "no" / "such" / "dir.jsonl", [])


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_write_jsonl_full_disk_is_one_error() -> None:
    with pytest.raises(NeardupError, match="cannot write /dev/full: No space left on device"):
        write_jsonl("/dev/full", ({"id": i, "text": "x" * 100} for i in range(1000)))

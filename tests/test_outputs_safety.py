"""Issue 15, outputs and strict input: an output never replaces an input, a failed run never
leaves a half-written file, CSV stray quotes are errors (or counted skips), a damaged Parquet
page is a one-line error, -k beyond the width is bad usage (exit 2), and messages carry no
stray quotes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from neardup.cli.main import main
from neardup.errors import InputError
from neardup.io.output import OutputIsInputError, atomic_output, check_outputs_distinct, write_jsonl
from neardup.io.read import read_records
from neardup.io.record import ErrorReport

from .conftest import write_lines

DOCS = [
    {"id": 1, "text": "near duplicate detection with simhash fingerprints of documents"},
    {"id": 2, "text": "near duplicate detection with simhash fingerprints of the documents"},
    {"id": 3, "text": "an unrelated sentence about the weather in the mountains today"},
]
STRAY = b'id,text\n1,"a stray quote\n2,second row\n3,third row\n4,fourth "row"\n5,fifth\n'


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(arg) for arg in args], catch_exceptions=False)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return write_lines(tmp_path / "docs.jsonl", *DOCS)


def assert_refused(result: Result, path: Path, before: bytes, *names: str) -> None:
    """Bad usage (exit 2) naming the output and the input, with the input intact."""
    assert result.exit_code == 2, result.stderr
    message = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr and "write the output to another file" in message
    assert all(name in message for name in names), message
    assert path.read_bytes() == before


# -- probe 3: an output that is (or links to) an input is refused before anything is opened --


@pytest.mark.parametrize("how", ["same", "relative", "symlink", "hardlink"])
def test_fingerprint_output_that_is_the_input_is_refused(docs: Path, tmp_path: Path, how: str) -> None:
    before = docs.read_bytes()
    target = {"same": docs, "relative": tmp_path / "sub" / ".." / "docs.jsonl"}.get(
        how, tmp_path / "alias.jsonl"
    )
    (tmp_path / "sub").mkdir()
    if how == "symlink":
        target.symlink_to(docs)
    elif how == "hardlink":
        os.link(docs, target)
    assert_refused(run("fingerprint", docs, "-o", target), docs, before, str(target), str(docs), "INPUT")


def test_index_query_output_that_is_the_input_or_the_index_is_refused(docs: Path, tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    assert run("index", "add", db, docs).exit_code == 0
    before = docs.read_bytes()
    assert_refused(run("index", "query", db, docs, "-o", docs), docs, before, "INPUT")
    stored = db.read_bytes()
    assert_refused(run("index", "query", f"sqlite:///{db}", docs, "-o", db), db, stored, "URL")
    assert run("index", "query", db, docs).exit_code == 0  # the index still answers


@pytest.mark.parametrize(
    ("args", "victim"),
    [
        (["--pairs", "{input}"], "input"),
        (["--clusters", "{input}"], "input"),
        (["--emit", "kept", "-o", "{input}"], "input"),
        (["--index", "{db}", "--emit", "kept", "-o", "{input}"], "input"),
        (["--index", "{db}", "--clusters", "{input}"], "input"),
        (["--index", "{db}", "--pairs", "{db}"], "db"),
        (["--pairs", "{other}", "--idf", "{idf}", "--clusters", "{idf}"], "idf"),
    ],
)
def test_dedup_output_that_is_an_input_is_refused(
    docs: Path, tmp_path: Path, args: list[str], victim: str
) -> None:
    paths = {
        "input": docs,
        "db": tmp_path / "index.db",
        "idf": tmp_path / "idf.json",
        "other": tmp_path / "p.jsonl",
    }
    assert run("index", "add", paths["db"], docs).exit_code == 0
    assert run("idf", "fit", docs, "-o", paths["idf"]).exit_code == 0
    before = paths[victim].read_bytes()
    result = run("dedup", docs, *[word.format(**paths) for word in args])
    assert_refused(result, paths[victim], before, str(paths[victim]))
    assert not paths["other"].exists()


def test_baseline_and_report_outputs_that_are_inputs_are_refused(docs: Path) -> None:
    before = docs.read_bytes()
    assert_refused(run("baseline", "shingle", docs, "--clusters", docs), docs, before, "--clusters")
    assert_refused(run("report", docs, docs, "-o", docs), docs, before, "(INPUT)")


def test_the_library_check_compares_files_not_names(docs: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(docs)
    with pytest.raises(OutputIsInputError, match="--pairs") as caught:
        check_outputs_distinct([("INPUT", link)], {"--pairs": docs})
    assert caught.value.option == "--pairs"
    outputs: dict[str, str | Path | None] = {"--pairs": tmp_path / "other.jsonl", "--clusters": "-"}
    check_outputs_distinct([("INPUT", docs)], outputs)
    with pytest.raises(OutputIsInputError):
        write_jsonl(docs, [{"a": 1}], inputs=[("INPUT", docs)])
    assert docs.read_bytes().count(b"\n") == 3


# -- probe 3: outputs are written beside the target and renamed only on success ---------------


def test_a_failed_run_leaves_the_previous_output_untouched(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", *DOCS, b"{not json")
    out = tmp_path / "out.jsonl"
    out.write_text("previous results\n")
    result = run("fingerprint", source, "-o", out)
    assert result.exit_code == 1 and f"{source}:4" in result.stderr
    assert out.read_text() == "previous results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]  # no temp file left
    # A successful run replaces it; an output that is a symlink is written where it points.
    link = tmp_path / "link.jsonl"
    link.symlink_to(out)
    good = write_lines(tmp_path / "good.jsonl", *DOCS)
    assert run("fingerprint", good, "-o", link).exit_code == 0
    assert link.is_symlink() and [json.loads(line)["id"] for line in out.read_text().splitlines()] == [
        1,
        2,
        3,
    ]


def test_atomic_output_keeps_the_target_on_error_and_writes_devices_directly(tmp_path: Path) -> None:
    target = tmp_path / "kept.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    with pytest.raises(RuntimeError), atomic_output(target) as stream:
        stream.write(b"new, half written")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["kept.txt"]
    with atomic_output(target) as stream:
        stream.write(b"new")
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o640
    with atomic_output(os.devnull) as stream:  # not a regular file: never replaced
        stream.write(b"discarded")
    assert Path(os.devnull).is_char_device()


def test_spark_dedup_refuses_inputs_as_outputs_and_replaces_outputs_whole(docs: Path, tmp_path: Path) -> None:
    """``neardup spark dedup`` guards its outputs as ``neardup dedup`` does: an input as output
    is bad usage before Spark starts, and a single-file output is renamed into place, so a
    reader of the previous file still reads all of it (truncating in place would not)."""
    pytest.importorskip("pyspark", reason="needs pyspark: pip install 'neardup[spark]'")
    if shutil.which("java") is None:  # pragma: no cover - Java is on the development machines
        pytest.skip("needs a Java runtime for Spark (java not on PATH)")
    spark = ["--master", "local[2]", "--partitions", "2", "--conf", "spark.ui.enabled=false"]
    before = docs.read_bytes()
    refused: list[list[str | Path]] = [["--emit", "kept", "-o", docs], ["--pairs", docs]]
    for args in refused:
        assert_refused(run("spark", "dedup", docs, *args, *spark), docs, before, str(docs), "INPUT")
    clusters = tmp_path / "clusters.jsonl"
    clusters.write_bytes(b"previous\n")
    with clusters.open("rb") as previous:
        result = run("spark", "dedup", docs, "--clusters", clusters, *spark)
        assert result.exit_code == 0, result.stderr
        assert previous.read() == b"previous\n"
    assert [json.loads(line)["id"] for line in clusters.read_text().splitlines()] == [1, 2, 3]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["clusters.jsonl", "docs.jsonl"]


# -- probe 5: strict CSV ------------------------------------------------------------------------


def test_a_stray_quote_in_csv_is_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_bytes(STRAY)
    result = run("fingerprint", path, "-o", "-")
    assert result.exit_code == 1 and result.stdout == ""
    message = result.stderr.strip()
    assert message.startswith(f"neardup: error: {path}:2: stray quote") and len(message.splitlines()) == 1
    assert 'double each quote inside it ("")' in message


def test_stray_quotes_are_skipped_and_counted_without_losing_the_rows_after_them(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_bytes(STRAY)
    result = run("fingerprint", path, "-o", "-", "--on-error", "skip")
    assert result.exit_code == 0
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == ["2", "3", "5"]
    assert "2 skipped" in result.stderr
    assert (
        f"{path}:2: stray quote" in result.stderr
        and f"{path}:5: stray quote in an unquoted field" in result.stderr
    )
    dedup = run("dedup", path, "--clusters", tmp_path / "c.jsonl", "--on-error", "skip")
    assert dedup.exit_code == 0 and "2 skipped" in dedup.stderr


def test_an_unterminated_quote_is_reported_and_quoted_newlines_still_work(tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    path.write_bytes(b'id,text\n1,"multi\nline ""quoted"", text"\n2,"never closed\n3,swallowed\n4,lost\n')
    with pytest.raises(InputError, match="unterminated quote: the quoted field opened on line 4") as caught:
        list(read_records(path))
    assert caught.value.location == f"{path}:4"
    report = ErrorReport()
    records = list(read_records(path, on_error="skip", report=report))
    assert [(r.id, r.text) for r in records] == [
        ("1", 'multi\nline "quoted", text'),
        ("3", "swallowed"),
        ("4", "lost"),
    ]
    assert report.count == 1


# -- probe 9: one-line errors and exit codes ----------------------------------------------------


def test_a_damaged_parquet_page_is_a_one_line_error(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "d.parquet"
    texts = [f"document number {i} with a few words " * 10 for i in range(3000)]
    table = pa.table({"id": list(range(3000)), "text": texts})
    pq.write_table(table, path, compression="NONE", use_dictionary=False)
    data = bytearray(path.read_bytes())
    middle = len(data) // 3
    data[middle : middle + 2000] = b"\xab" * 2000  # inside the text column's data page
    path.write_bytes(bytes(data))
    result = run("fingerprint", path, "-o", tmp_path / "out.jsonl")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"neardup: error: {path}: damaged Parquet data")
    assert not (tmp_path / "out.jsonl").exists()


def test_a_distance_beyond_the_width_is_bad_usage(docs: Path, tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    cases: list[list[str | Path]] = [
        ["dedup", docs, "-k", "65", "--pairs", tmp_path / "p.jsonl"],
        ["dedup", docs, "--bits", "32", "-k", "32", "--pairs", tmp_path / "p.jsonl"],
        ["dedup", docs, "-k", "65", "--index", db, "--pairs", tmp_path / "p.jsonl"],
        ["index", "add", db, docs, "-k", "65"],
    ]
    for args in cases:
        result = run(*args)
        assert result.exit_code == 2, (args, result.stderr)
        assert "'-k' / '--max-distance'" in result.stderr and "a distance a" in result.stderr
    assert not db.exists() and not (tmp_path / "p.jsonl").exists()
    assert run("index", "add", db, docs).exit_code == 0
    result = run("index", "query", db, docs, "-k", "64")
    assert result.exit_code == 2 and "give 0 to 63" in result.stderr


def test_messages_carry_no_stray_quotes(docs: Path, tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    assert run("index", "add", db, docs).exit_code == 0
    result = run("index", "remove", db, "no-such-id")
    assert result.exit_code == 1
    assert "no-such-id" in result.stderr and not result.stderr.startswith('neardup: error: "')
    plain = tmp_path / "noext"
    plain.write_text("")
    result = run("fingerprint", plain)
    assert result.exit_code == 1 and "from its extension (none);" in result.stderr


# -- issue 28 item 8: two outputs that are one file ----------------------------------------------


def _people_csv(tmp_path: Path) -> Path:
    path = tmp_path / "people.csv"
    path.write_text("id,name,city\n1,Ann Lee,Leeds\n2,Ann Lee,Leeds\n3,Bob Ray,Perth\n", encoding="utf-8")
    return path


def _alias(tmp_path: Path, target: Path, how: str) -> Path:
    """The path the second output is given as: the same, through a symlink or a hard link."""
    if how == "same":
        return target
    alias = tmp_path / f"{how}.jsonl"
    if how == "symlink":
        alias.symlink_to(target)
    else:
        os.link(target, alias)
    return alias


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink"])
@pytest.mark.parametrize("command", ["records", "dedup"])
def test_two_outputs_that_are_one_file_are_refused(tmp_path: Path, how: str, command: str) -> None:
    """``--clusters F --pairs F`` (or a link to F) kept only the pairs with exit 0: now bad
    usage naming both flags, before anything is written."""
    target = tmp_path / "out.jsonl"
    target.write_text("previous\n", encoding="utf-8")
    alias = _alias(tmp_path, target, how)
    source: list[str | Path] = (
        ["records", _people_csv(tmp_path), "--key", "id"]
        if command == "records"
        else ["dedup", tmp_path / "d.jsonl"]
    )
    if command == "dedup":
        write_lines(tmp_path / "d.jsonl", *DOCS)
    result = run(*source, "--clusters", target, "--pairs", alias)
    assert result.exit_code == 2, result.output
    message = result.stderr.strip().splitlines()[-1]
    assert "both write to" in message and "give them different files" in message
    assert "--clusters" in message and "--pairs" in message
    assert target.read_text(encoding="utf-8") == "previous\n"


def test_two_outputs_on_stdout_are_refused_by_records(tmp_path: Path) -> None:
    result = run("records", _people_csv(tmp_path), "--key", "id", "--clusters", "-", "--pairs", "-")
    assert result.exit_code == 2
    assert "both write to stdout" in result.stderr


def test_the_library_check_refuses_two_outputs_that_are_one_file(tmp_path: Path) -> None:
    first = tmp_path / "a.jsonl"
    first.write_text("x\n", encoding="utf-8")
    os.link(first, tmp_path / "b.jsonl")
    with pytest.raises(OutputIsInputError, match="--x and --y both write to"):
        check_outputs_distinct([], {"--x": first, "--y": tmp_path / "b.jsonl"})
    check_outputs_distinct([], {"--x": first, "--y": tmp_path / "c.jsonl"})  # distinct: fine


# -- issue 28: temporaries of a killed run ------------------------------------------------------

KILLED_WRITER = """
import os, signal, sys
from neardup.io.output import atomic_output
with atomic_output(sys.argv[1]) as stream:
    stream.write(b"half of it")
    stream.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _temporaries(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.name.endswith(".tmp"))


def test_the_next_run_removes_the_temporary_a_killed_run_left(tmp_path: Path) -> None:
    """A run killed mid-write (SIGKILL: nothing of it runs again) leaves its hidden
    temporary; the next run writing the same output removes it, and only it: a live
    writer's temporary, another output's and a user's look-alike file stay."""
    import subprocess
    import sys

    target = tmp_path / "clusters.jsonl"
    target.write_text("previous\n", encoding="utf-8")
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(target)], check=False)
    assert killed.returncode == -9
    left = _temporaries(tmp_path)
    assert len(left) == 1 and left[0].startswith(".clusters.jsonl.")
    assert target.read_text(encoding="utf-8") == "previous\n"
    _, _, _, owner, token, _ = left[0].split(".")  # .clusters.jsonl.<host>-<pid>.<token>.tmp
    host = owner.split("-")[0]
    live = tmp_path / f".clusters.jsonl.{host}-{os.getpid()}.{token[::-1]}.tmp"
    live.write_bytes(b"a live writer's")
    others = [tmp_path / ".other.jsonl.00000000-1.0123abcd.tmp", tmp_path / ".clusters.jsonl.mine.tmp"]
    for path in others:
        path.write_bytes(b"keep")
    write_jsonl(target, [{"id": 1}])
    assert target.read_text(encoding="utf-8") == '{"id":1}\n'
    assert _temporaries(tmp_path) == sorted([live.name, *(path.name for path in others)])


KILLED_SPILLER = """
import os, signal, sys
from neardup.dedup.workspace import Workspace
workspace = Workspace(1 << 20, sys.argv[1])
workspace.file("texts").write_bytes(b"spilled")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_next_run_that_spills_removes_the_directory_a_killed_run_left(tmp_path: Path) -> None:
    """A batch run killed outright leaves its spill directory under --tmp-dir; the next run
    that spills there removes it, and keeps a live run's and anything else."""
    import subprocess
    import sys

    from neardup.dedup.workspace import Workspace
    from neardup.io.output import temporary_name

    killed = subprocess.run([sys.executable, "-c", KILLED_SPILLER, str(tmp_path)], check=False)
    assert killed.returncode == -9
    (left,) = list(tmp_path.iterdir())
    assert left.is_dir() and left.name.startswith("neardup.") and left.name.endswith(".spill")
    live = tmp_path / temporary_name("neardup", ".spill")  # this process's: alive
    live.mkdir()
    other = tmp_path / "neardup-notes"
    other.mkdir()
    with Workspace(1 << 20, tmp_path) as workspace:
        workspace.file("pairs").write_bytes(b"x")
        mine = next(path for path in tmp_path.iterdir() if path not in (live, other))
    assert not left.exists()
    assert live.is_dir() and other.is_dir() and not mine.exists()


def test_remove_stale_takes_folders_of_dead_processes_only(tmp_path: Path) -> None:
    """The Spark job's staging folder (``.NAME.HOST-PID.XXXXXXXX.parts``) of a killed driver
    goes when the next run stages the same output; a live one's and another output's stay."""
    import subprocess
    import sys

    from neardup.io.output import remove_stale, temporary_name

    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    dead = int(ended.stdout)
    live = tmp_path / temporary_name(".pairs.jsonl", ".parts")
    host = live.name.split(".")[3].split("-")[0]
    stale = tmp_path / f".pairs.jsonl.{host}-{dead}.0123abcd.parts"
    other = tmp_path / f".clusters.jsonl.{host}-{dead}.0123abcd.parts"
    for folder in (live, stale, other):
        folder.mkdir()
        (folder / "part-00000").write_bytes(b"x")
    remove_stale(str(tmp_path), ".pairs.jsonl", ".parts")
    assert not stale.exists() and live.is_dir() and other.is_dir()

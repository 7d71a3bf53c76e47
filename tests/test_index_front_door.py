"""neardup.Index, the one front door of the persistent index (issue 29): ``Index.open(url)``
with no settings is the index the command line creates, and texts without letters or digits
pair with nothing in it, as in batch dedup, on every store (the server stores through the
conformance suite's ``store_url``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import neardup
from neardup import Index, IndexConfig, SimhashIndex
from neardup.cli.main import main
from neardup.dedup.documents import EMPTY_TEXT_SKETCH, DocumentIndex, text_index_config
from neardup.errors import IndexConfigMismatchError, IndexNotFoundError, KeyExistsError
from neardup.fingerprint.config import FingerprintConfig
from neardup.similarity.verify import Verifier
from tests.conftest import write_lines
from tests.test_storage_conformance import backend, store_url  # noqa: F401 - fixtures

NEWS = "The central bank raised interest rates by a quarter point on Tuesday, citing inflation."
NEWS_EDITED = "The central bank raised its interest rates by a quarter point on Tuesday, citing inflation."
EMPTIES = ["...", "!!!", "—", "", "  ", "?!", "。。。"]


#: A text of one shingle whose sketch (version 2) is all 0xFF bins, as an empty text's is (1 in
#: 256 such).
LOOKALIKE = "q816"


def test_the_lookalike_has_the_sketch_of_an_empty_text() -> None:
    sketches = Verifier("sketch").signatures([LOOKALIKE, "..."])
    assert (sketches == np.uint64((1 << 64) - 1)).all()


@pytest.fixture
def index(store_url: str) -> Iterator[Index]:  # noqa: F811 - the imported fixture
    with Index.open(store_url) as opened:
        yield opened


def test_open_creates_the_command_lines_index_and_reopens_with_its_settings(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    with pytest.raises(IndexNotFoundError):
        Index.open(url, create=False)
    with Index.open(url) as index:
        assert index.index.bands is not None and index.verifier is not None
        assert index.verifier.mode == "sketch"
        assert index.describe()["fingerprint_config"] == FingerprintConfig().to_dict()
    assert IndexConfig.band_index() == text_index_config(FingerprintConfig())
    # The CLI's index is this one: `index add` into another file, the same settings.
    data = write_lines(tmp_path / "in.jsonl", {"id": "a", "text": NEWS})
    assert CliRunner().invoke(main, ["index", "add", str(tmp_path / "cli.db"), str(data)]).exit_code == 0
    with Index.open(str(tmp_path / "cli.db")) as by_cli, Index.open(url) as by_python:
        assert by_cli.index.config() == by_python.index.config()
    with Index.open(url, create=False) as reopened, pytest.raises(IndexConfigMismatchError):
        assert reopened.index.bands is not None
        Index.open(url, IndexConfig(max_distance=3, fingerprint=FingerprintConfig()))


def test_a_simhash_index_stays_an_explicit_choice(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/k.db"
    config = IndexConfig(max_distance=3, fingerprint=FingerprintConfig())
    with Index.open(url, config) as created:
        created.add_texts([("a", NEWS)])
    with Index.open(url) as reopened, SimhashIndex.open(url) as low_level:
        assert reopened.index.bands is None and reopened.index.max_distance == 3
        assert [match.key for match in reopened.query_texts([NEWS])[0]] == ["a"]
        assert len(low_level) == 1


def test_the_text_calls_take_pairs_mappings_and_records(tmp_path: Path) -> None:
    with Index.open("memory://") as index:
        assert index.add_texts([("a", NEWS)]) == [True]
        assert index.add_texts({"b": "Heavy rain flooded the city centre overnight."}) == [True]
        record = neardup.Record("c", NEWS_EDITED, None, "here")
        (result,) = index.check_and_add_texts([record])
        assert (result.cluster, result.duplicate, result.added) == ("a", True, True)
        assert [m.key for m in index.query_texts([NEWS_EDITED])[0]] == ["a", "c"]
        assert "c" in index and len(index) == 3
        assert index.remove_many(["c"]) == 1 and len(index) == 2
    assert DocumentIndex is Index and neardup.Index is Index and "Index" in neardup.__all__


def test_texts_without_letters_or_digits_pair_with_nothing(index: Index) -> None:
    """Stored "..." records are no match of a query of "..." (nor of anything), a check of one
    starts its own cluster, and the in-batch search skips them too."""
    index.add_texts([(f"dots-{n}", "...") for n in range(300)] + [("news", NEWS)])
    assert index.query_texts(["...", "", "—"]) == [[], [], []]
    checked = index.check_and_add_texts([(f"e{n}", text) for n, text in enumerate(EMPTIES)])
    assert [(r.cluster, r.duplicate, r.added) for r in checked] == [
        (f"e{n}", False, True) for n in range(len(EMPTIES))
    ]
    again = index.check_and_add_texts([("e0", "...")])[0]  # a retry: the same answer
    assert (again.cluster, again.duplicate, again.added, again.matches) == ("e0", False, False, [])
    # A text's query never finds a stored empty record, however short the text.
    found = index.query_texts([NEWS_EDITED, LOOKALIKE, "a", "7"])
    assert [[match.key for match in matches] for matches in found] == [["news"], [], [], []]
    (short,) = index.check_and_add_texts([("short", LOOKALIKE)])
    assert (short.cluster, short.duplicate) == ("short", False)
    stored = index.index.get_many(["dots-0", "short"])
    assert stored[0] is not None and stored[0].signature == EMPTY_TEXT_SKETCH.tobytes()
    assert stored[1] is not None and stored[1].signature != EMPTY_TEXT_SKETCH.tobytes()


def test_empty_texts_pair_with_nothing_in_a_simhash_index(tmp_path: Path) -> None:
    """Their fingerprint is 0 (no features); they still match nothing, as in the band index."""
    config = IndexConfig(max_distance=3, fingerprint=FingerprintConfig())
    with Index.open(f"sqlite:///{tmp_path}/k.db", config) as index:
        prepared = index.prepare([neardup.Record("x", "...", None, "-")])
        assert prepared.empty is not None and prepared.empty.tolist() == [True]
        index.add_texts([("a", "..."), ("b", "!!!")])
        assert index.query_texts(["..."]) == [[]]
        checked = index.check_and_add_texts([("c", "..."), ("d", "—")])
        assert [(r.cluster, r.duplicate) for r in checked] == [("c", False), ("d", False)]


def test_the_command_line_counts_empty_texts(tmp_path: Path) -> None:
    rows = [{"id": f"d{n}", "text": "..."} for n in range(5)] + [{"id": "a", "text": NEWS}]
    data = write_lines(tmp_path / "in.jsonl", *rows)
    url = str(tmp_path / "x.db")
    runner = CliRunner()
    added = runner.invoke(main, ["index", "add", url, str(data)])
    assert added.exit_code == 0 and "; 5 empty;" in added.output, added.output
    queried = runner.invoke(main, ["index", "query", url, str(data)])
    assert "0 with a near-duplicate" in queried.output and "5 empty" in queried.output, queried.output
    more = write_lines(tmp_path / "more.jsonl", {"id": "e", "text": "!!!"}, {"id": "b", "text": NEWS_EDITED})
    pairs = tmp_path / "pairs.jsonl"
    deduped = runner.invoke(main, ["dedup", str(more), "--index", url, "--pairs", str(pairs)])
    assert deduped.exit_code == 0 and "2 records, 1 with a near-duplicate, 1 pairs" in deduped.output
    assert "; 1 empty;" in deduped.output, deduped.output
    assert [(row["a"], row["b"]) for row in map(json.loads, pairs.read_text().splitlines())] == [("a", "b")]


def test_the_service_answers_empty_texts_with_no_match(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from neardup.service import create_app

    with Index.open(f"sqlite:///{tmp_path}/s.db") as index, TestClient(create_app(index)) as client:
        batch = {"documents": [{"id": f"d{n}", "text": "..."} for n in range(20)]}
        assert client.post("/v1/documents", json=batch).status_code == 201
        assert client.post("/v1/query", json={"text": "..."}).json()["matches"] == []
        checked = client.post("/v1/check", json={"id": "x", "text": "..."}).json()
        assert checked["cluster"] == "x" and checked["duplicate"] is False
        both = {"documents": [{"id": "y", "text": "!!!"}, {"id": "z", "text": "..."}]}
        results = client.post("/v1/check", json=both).json()["results"]
        assert [(r["cluster"], r["duplicate"]) for r in results] == [("y", False), ("z", False)]


def test_dedup_against_an_index_is_a_library_call(tmp_path: Path) -> None:
    """``Index.dedup`` is ``neardup dedup --index``: the same pairs, clusters and store."""
    rows = [{"id": "a", "text": NEWS}, {"id": "b", "text": NEWS_EDITED}, {"id": "c", "text": "..."}]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    url = str(tmp_path / "cli.db")
    ran = CliRunner().invoke(
        main,
        [
            "dedup",
            str(source),
            "--index",
            url,
            "--pairs",
            str(tmp_path / "p.jsonl"),
            "--clusters",
            str(tmp_path / "c.jsonl"),
        ],
    )
    assert ran.exit_code == 0, ran.output
    cli_pairs = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    cli_clusters = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    with Index.open(str(tmp_path / "lib.db")) as index:
        run = list(index.dedup([(row["id"], row["text"]) for row in rows], batch_size=2))
        assert [len(batch.records) for batch in run] == [2, 1] and sum(batch.empty for batch in run) == 1
        assert (
            [row for batch in run for row in batch.pairs]
            == cli_pairs
            == [{"a": "a", "b": "b", "distance": cli_pairs[0]["distance"]}]
        )
        clusters = [{"id": a.key, "cluster": a.cluster} for batch in run for a in batch.assignments]
        assert clusters == cli_clusters and len(index) == 3
        # a re-run over stored records repeats no pair reversed: "b" lists "a" as before
        again = [row for batch in index.dedup([("b", NEWS_EDITED)]) for row in batch.pairs]
        assert again == [{"a": "a", "b": "b", "distance": cli_pairs[0]["distance"]}]


def test_an_add_of_a_stored_id_names_the_parameter_that_skips_it(tmp_path: Path) -> None:
    with Index.open(str(tmp_path / "names.db")) as index:
        index.add_texts([("a", NEWS)])
        with pytest.raises(KeyExistsError, match='give existing="skip" to add only the new ones'):
            index.add_texts([("a", NEWS), ("b", NEWS_EDITED)])
        assert "b" not in index

"""Identity by text, not by fingerprint (issue 28, item 4): a stored id sent again with other
text is a conflict on every path even when the two texts happen to have the same Simhash
fingerprint (15 % of one-word edits in en_news), the same text stays an idempotent retry, and
``existing="replace"`` (``--existing replace``) updates a stored record deliberately.

Every test uses two texts of equal fingerprint and different text, found by
:func:`equal_fingerprint_pair`, so that a comparison of fingerprints cannot tell them apart.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from neardup import Fingerprinter, IncrementalDeduper, SimhashIndex
from neardup.cli.main import main
from neardup.dedup.documents import DocumentIndex, text_index_config
from neardup.errors import KeyExistsError
from neardup.fingerprint.config import FingerprintConfig
from neardup.io.record import Record
from neardup.similarity.verify import Verifier

from .conftest import write_lines

BASE = (
    "The city council met on Tuesday evening to discuss the new library budget, which the mayor "
    "said would open next spring after two years of delays and rising costs that frustrated "
    "residents across the northern district. Officials said the project, first proposed in 2019, "
    "had been slowed by supply shortages, a dispute with the contractor and a lawsuit filed by "
    "neighbours who objected to the height of the building. The council voted seven to two to "
    "approve an extra {amount} million dollars, and construction crews are expected to return to "
    "the site within weeks, according to a statement released after the meeting. Critics argued "
    "the money should go to schools and road repairs instead."
)


def text_digest(text: str) -> bytes:
    """The digest a stored record keeps: 16-byte BLAKE2b of the text's UTF-8 (docs/storage.md)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


@functools.cache
def equal_fingerprint_pair() -> tuple[str, str]:
    """Two different texts (one changed number) whose default fingerprints are equal."""
    fingerprinter = Fingerprinter(config=FingerprintConfig())
    first = BASE.format(amount="4.5")
    value = fingerprinter.fingerprint(first)
    for amount in range(2, 1000):
        second = BASE.format(amount=amount)
        if fingerprinter.fingerprint(second) == value:
            return first, second
    raise AssertionError("no one-number edit with an equal fingerprint; change BASE")


def test_the_pair_differs_in_text_only() -> None:
    first, second = equal_fingerprint_pair()
    fingerprinter = Fingerprinter(config=FingerprintConfig())
    assert first != second and fingerprinter.fingerprint(first) == fingerprinter.fingerprint(second)
    assert text_digest(first) != text_digest(second) and len(text_digest(first)) == 16


# -- library ---------------------------------------------------------------------------------------


@pytest.fixture
def documents(tmp_path: Path) -> Iterator[DocumentIndex]:
    with SimhashIndex.open(f"sqlite:///{tmp_path}/lib.db", text_index_config(FingerprintConfig())) as index:
        yield DocumentIndex(index)


def records(*pairs: tuple[Any, str]) -> list[Record]:
    return [Record(key, text, None, f"input:{line}") for line, (key, text) in enumerate(pairs, 1)]


def test_document_check_and_add_refuses_an_id_with_other_text(documents: DocumentIndex) -> None:
    first, second = equal_fingerprint_pair()
    assert documents.check_and_add(documents.prepare(records(("a", first))))[0].added
    again = documents.check_and_add(documents.prepare(records(("a", first))))[0]
    assert (again.added, again.cluster) == (False, "a")  # the same text: a retry
    with pytest.raises(KeyExistsError, match="'a' is already stored with another text"):
        documents.check_and_add(documents.prepare(records(("b", "a new one"), ("a", second))))
    assert "b" not in documents.index  # nothing of the batch


def test_document_add_skip_refuses_and_replace_updates(documents: DocumentIndex) -> None:
    first, second = equal_fingerprint_pair()
    documents.add(documents.prepare(records(("a", first))))
    assert documents.add(documents.prepare(records(("a", first))), existing="skip") == [False]
    with pytest.raises(KeyExistsError, match="another text"):
        documents.add(documents.prepare(records(("a", second))), existing="skip")
    old = documents.index.get("a")
    assert documents.add(documents.prepare(records(("a", second))), existing="replace") == [True]
    new = documents.index.get("a")
    assert old is not None and new is not None
    assert (old.digest, new.digest) == (text_digest(first), text_digest(second))
    assert new.signature != old.signature  # the sketch is the new text's
    assert len(documents.index) == 1


def test_incremental_deduper_compares_digests_and_replaces(tmp_path: Path) -> None:
    first, second = equal_fingerprint_pair()
    fingerprinter = Fingerprinter(config=FingerprintConfig())
    verifier = Verifier("sketch")
    with SimhashIndex.open(f"sqlite:///{tmp_path}/d.db", text_index_config(FingerprintConfig())) as index:
        deduper = IncrementalDeduper(index, verifier)

        def check(key: str, text: str, **options: Any) -> Any:
            values = fingerprinter.fingerprint_many([text])
            sketches = verifier.signatures([text], normalizer=fingerprinter.normalizer)
            digests = [text_digest(text)]
            return deduper.check_and_add_many([key], values, signatures=sketches, digests=digests, **options)[
                0
            ]

        assert check("a", first).added and check("b", first + " More.").cluster == "a"
        assert not check("a", first).added
        with pytest.raises(KeyExistsError, match="another text"):
            check("a", second)
        replaced = check("a", second, existing="replace")
        assert (replaced.cluster, replaced.replaced) == ("a", True)  # keeps its cluster id
        stored = index.get("a")
        assert stored is not None and stored.digest == text_digest(second)
        assert not check("a", second).added  # the new text is now the retry


def test_simhash_index_add_many_skip_and_replace(tmp_path: Path) -> None:
    with SimhashIndex.open(f"sqlite:///{tmp_path}/s.db") as index:
        index.add_many(["a"], [0xFF], digests=[text_digest("one")])
        assert index.add_many(["a"], [0xFF], digests=[text_digest("one")], existing="skip") == [False]
        with pytest.raises(KeyExistsError, match="another text"):
            index.add_many(["a"], [0xFF], digests=[text_digest("two")], existing="skip")
        assert index.add_many(["a", "b"], [0xF0, 0x0F], digests=[text_digest("two")] * 2, existing="replace")
        stored = index.get("a")
        assert stored is not None and (stored.fingerprint, stored.digest) == (0xF0, text_digest("two"))
        assert [match.key for match in index.query(0xF0)] == ["a"]  # postings are the new ones
        assert index.query(0xFF) == [] or all(
            match.key != "a" or match.distance for match in index.query(0xFF)
        )


@pytest.mark.parametrize("keys", [["a", "b", 7], [1, 2, 3]], ids=["mixed-keys", "int-keys"])
def test_a_saved_memory_index_keeps_its_digests(tmp_path: Path, keys: list[Any]) -> None:
    """An ``.npz`` file keeps each record's digest, so after a reload another text under a
    stored id is still a conflict (the file held only fingerprints and keys before)."""
    index = SimhashIndex()
    index.add_many(keys, [0xFF, 0xF0, 0x0F], digests=[text_digest("one"), None, text_digest("three")])
    index.save(tmp_path / "saved.npz")
    loaded = SimhashIndex.load(tmp_path / "saved.npz")
    assert [loaded.get(key).digest for key in keys] == [text_digest("one"), None, text_digest("three")]  # type: ignore[union-attr]
    assert loaded.add_many(keys[:1], [0xFF], digests=[text_digest("one")], existing="skip") == [False]
    with pytest.raises(KeyExistsError, match="another text"):
        loaded.add_many(keys[:1], [0xFF], digests=[text_digest("two")], existing="skip")


# -- command line ----------------------------------------------------------------------------------


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_index_add_skip_refuses_other_text_naming_the_line(tmp_path: Path) -> None:
    first, second = equal_fingerprint_pair()
    url = f"sqlite:///{tmp_path}/cli.db"
    code, _, err = run(
        "index", "add", url, str(write_lines(tmp_path / "one.jsonl", {"id": "a", "text": first}))
    )
    assert code == 0, err
    same = write_lines(tmp_path / "same.jsonl", {"id": "a", "text": first}, {"id": "n", "text": "new"})
    code, _, err = run("index", "add", url, str(same))
    assert code == 0 and "added 1, skipped 1" in err
    changed = write_lines(tmp_path / "changed.jsonl", {"id": "z", "text": "zzz"}, {"id": "a", "text": second})
    code, _, err = run("index", "add", url, str(changed))
    assert code == 1 and f"{changed}:2" in err and "--existing replace" in err, err
    code, _, err = run("index", "add", url, str(changed), "--existing", "replace")
    assert code == 0 and "replaced 1" in err, err
    with SimhashIndex.open(url, create=False) as index:
        stored = index.get("a")
        assert stored is not None and stored.digest == text_digest(second)


def test_dedup_index_refuses_other_text_and_replaces(tmp_path: Path) -> None:
    first, second = equal_fingerprint_pair()
    url = f"sqlite:///{tmp_path}/dedup.db"
    one = write_lines(tmp_path / "one.jsonl", {"id": "a", "text": first})
    code, _, err = run("dedup", str(one), "--index", url, "--clusters", str(tmp_path / "c1.jsonl"))
    assert code == 0, err
    code, _, err = run("dedup", str(one), "--index", url, "--clusters", str(tmp_path / "c2.jsonl"))
    assert code == 0, err  # the same text: a retry
    two = write_lines(tmp_path / "two.jsonl", {"id": "b", "text": "other"}, {"id": "a", "text": second})
    code, _, err = run("dedup", str(two), "--index", url, "--clusters", str(tmp_path / "c3.jsonl"))
    assert code == 1 and f"{two}:2" in err and "--existing replace" in err, err
    code, _, err = run(
        "dedup", str(two), "--index", url, "--clusters", str(tmp_path / "c4.jsonl"), "--existing", "replace"
    )
    assert code == 0, err
    clusters = [json.loads(line) for line in (tmp_path / "c4.jsonl").read_text().splitlines()]
    assert {"id": "a", "cluster": "a"} in clusters
    with SimhashIndex.open(url, create=False) as index:
        stored = index.get("a")
        assert stored is not None and stored.digest == text_digest(second)


# -- service ---------------------------------------------------------------------------------------


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Any]:
    pytest.importorskip("fastapi", reason="the service tests need the 'service' extra")
    from fastapi.testclient import TestClient

    from neardup.service import ServiceSettings, create_app

    with SimhashIndex.open(f"sqlite:///{tmp_path}/svc.db", text_index_config(FingerprintConfig())) as index:
        app = create_app(index, ServiceSettings())
        with TestClient(app, raise_server_exceptions=False) as test_client:
            yield test_client


def test_service_check_answers_409_for_other_text(client: Any) -> None:
    first, second = equal_fingerprint_pair()
    assert client.post("/v1/check", json={"id": "a", "text": first}).json()["added"] is True
    retry = client.post("/v1/check", json={"id": "a", "text": first})
    assert retry.status_code == 200 and retry.json()["added"] is False
    changed = client.post("/v1/check", json={"id": "a", "text": second})
    assert changed.status_code == 409 and changed.json()["error"]["code"] == "key_exists", changed.text
    batch = client.post(
        "/v1/check", json={"documents": [{"id": "x", "text": "x"}, {"id": "a", "text": second}]}
    )
    assert batch.status_code == 409
    assert client.get("/v1/documents/x").status_code == 404


def test_service_documents_skip_answers_409_and_replace_updates(client: Any) -> None:
    first, second = equal_fingerprint_pair()
    assert client.post("/v1/documents", json={"id": "a", "text": first}).status_code == 201
    same = client.post("/v1/documents", json={"documents": [{"id": "a", "text": first}], "existing": "skip"})
    assert same.status_code == 201 and same.json()["skipped"] == 1
    changed = client.post(
        "/v1/documents", json={"documents": [{"id": "a", "text": second}], "existing": "skip"}
    )
    assert changed.status_code == 409 and changed.json()["error"]["code"] == "key_exists", changed.text
    replaced = client.post(
        "/v1/documents", json={"documents": [{"id": "a", "text": second}], "existing": "replace"}
    )
    assert replaced.status_code == 201 and replaced.json()["added"] == 1, replaced.text
    retry = client.post("/v1/check", json={"id": "a", "text": second})
    assert retry.status_code == 200 and retry.json()["added"] is False


def test_digests_are_what_the_fingerprint_was_computed_from() -> None:
    """The digest is of the exact text (no normalising: a changed space or case is a change)."""
    from neardup.index.digests import text_digest as library_digest

    assert library_digest("a b") == text_digest("a b")
    assert text_digest("a b") != text_digest("a  b") != text_digest("A b")
    assert np.frombuffer(text_digest("x"), dtype=np.uint8).size == 16


def test_a_rebuilt_index_keeps_each_texts_digest(tmp_path: Path) -> None:
    """``neardup index rebuild`` knows the texts, so the new store can tell a retry from another
    text; a repeated id of the input keeps its first text, as before."""
    from neardup.dedup.rebuild import rebuild_index

    first, second = equal_fingerprint_pair()
    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"
    with SimhashIndex.open(old, text_index_config(FingerprintConfig())) as index:
        prepared = DocumentIndex(index).prepare(records(("a", first), ("b", "other")))
        index.add_many(prepared.keys, prepared.fingerprints, signatures=prepared.signatures)  # no digests
        assert index.get("a").digest is None  # type: ignore[union-attr]
    given = records(("a", first), ("b", "other"), ("a", second))
    report = rebuild_index(old, new, given, batch_size=1)
    assert (report.carried, report.repeated) == (2, 1)
    with SimhashIndex.open(new, create=False) as index:
        assert index.get("a").digest == text_digest(first)  # type: ignore[union-attr]
        assert index.get("b").digest == text_digest("other")  # type: ignore[union-attr]

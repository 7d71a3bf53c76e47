"""The HTTP service in process (no port): every route, every error, one error shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the service tests need the 'service' extra (fastapi, httpx)")
from fastapi.testclient import TestClient

from neardup import Fingerprinter, SimhashIndex
from neardup.distance import to_hex
from neardup.errors import InputError
from neardup.fingerprint.config import FingerprintConfig
from neardup.index.config import IndexConfig
from neardup.service import ServiceSettings, create_app

BASE = (
    "The city council approved the new budget on Tuesday after a long debate about "
    "schools, roads and the public library, which will open on Sundays from next year"
)
# Case, spacing and full-width forms are folded by the normalizer: the same fingerprint.
VARIANT = BASE.upper().replace(" ", "  ")
OTHER = "Scientists in Norway found a new species of deep sea fish with transparent fins and three eyes"
CHINESE = "今天上午，市政府召开新闻发布会，宣布将在明年春天开放新的图书馆，并延长周末的开放时间。"
TOKEN = "s3cret-token"


def open_index(path: Path, **config: Any) -> SimhashIndex:
    return SimhashIndex.open(f"sqlite:///{path}", IndexConfig(fingerprint=FingerprintConfig(), **config))


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SimhashIndex]:
    opened = open_index(tmp_path / "service.db")
    yield opened
    opened.close()


def client_for(index: SimhashIndex, **settings: Any) -> TestClient:
    return TestClient(create_app(index, ServiceSettings(**settings)), raise_server_exceptions=False)


@pytest.fixture
def client(index: SimhashIndex) -> Iterator[TestClient]:
    with client_for(index) as test_client:
        yield test_client


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The one error shape: {"error": {"status", "code", "message", "details"}} and nothing else."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"status", "code", "message", "details"}
    assert error["status"] == status and error["code"] == code
    assert isinstance(error["message"], str) and len(error["message"]) > 10
    assert isinstance(error["details"], list)
    for detail in error["details"]:
        assert set(detail) == {"field", "problem"}
    return dict(error)


def stored_count(client: TestClient) -> int:
    count: int = client.get("/v1/stats").json()["documents"]
    return count


# -- fingerprint -------------------------------------------------------------------------------


def test_fingerprint_matches_the_library(client: TestClient) -> None:
    expected = Fingerprinter(config=FingerprintConfig()).fingerprint_many([BASE, CHINESE])
    one = client.post("/v1/fingerprint", json={"text": BASE})
    assert one.status_code == 200
    assert one.json() == {"id": None, "fingerprint": to_hex(int(expected[0]))}
    batch = client.post("/v1/fingerprint", json={"documents": [{"id": "a", "text": BASE}, {"text": CHINESE}]})
    assert batch.json() == {
        "results": [
            {"id": "a", "fingerprint": to_hex(int(expected[0]))},
            {"id": None, "fingerprint": to_hex(int(expected[1]))},
        ]
    }
    assert stored_count(client) == 0


# -- check-and-add -----------------------------------------------------------------------------


def test_check_gives_stable_clusters_and_matches(client: TestClient) -> None:
    first = client.post("/v1/check", json={"id": "a", "text": BASE}).json()
    assert first == {"id": "a", "cluster": "a", "duplicate": False, "added": True, "matches": []}
    second = client.post("/v1/check", json={"id": "b", "text": VARIANT}).json()
    assert second["cluster"] == "a" and second["duplicate"] and second["added"]
    assert [(m["id"], m["distance"]) for m in second["matches"]] == [("a", 0)]
    other = client.post("/v1/check", json={"id": 7, "text": OTHER}).json()
    assert other["cluster"] == 7 and not other["duplicate"]
    batch = client.post(
        "/v1/check",
        json={"documents": [{"id": "c", "text": CHINESE}, {"id": "d", "text": CHINESE + " "}]},
    ).json()["results"]
    assert [(r["id"], r["cluster"], r["duplicate"]) for r in batch] == [("c", "c", False), ("d", "c", True)]
    assert stored_count(client) == 5


def test_check_retry_is_idempotent_and_changed_text_is_refused(client: TestClient) -> None:
    first = client.post("/v1/check", json={"id": "a", "text": BASE}).json()
    again = client.post("/v1/check", json={"id": "a", "text": BASE}).json()
    assert again == {**first, "added": False}
    error = assert_error(client.post("/v1/check", json={"id": "a", "text": OTHER}), 409, "key_exists")
    assert "'a'" in error["message"]
    # All or nothing: a batch holding the refused record stores none of its records.
    batch = {"documents": [{"id": "new", "text": CHINESE}, {"id": "a", "text": OTHER}]}
    assert_error(client.post("/v1/check", json=batch), 409, "key_exists")
    assert stored_count(client) == 1


def test_check_accepts_metadata_and_extra_fields(client: TestClient) -> None:
    body = {"id": "x", "text": BASE, "title": "Budget", "tags": ["city", "budget"], "source": "wire"}
    assert client.post("/v1/check", json=body).json()["added"]


# -- query -------------------------------------------------------------------------------------


def test_query_by_text_and_fingerprint_without_adding(client: TestClient) -> None:
    client.post("/v1/check", json={"documents": [{"id": "a", "text": BASE}, {"id": "o", "text": OTHER}]})
    by_text = client.post("/v1/query", json={"text": VARIANT}).json()
    assert by_text["duplicate"] and not by_text["verified"]
    assert [m["id"] for m in by_text["matches"]] == ["a"]
    fingerprint = by_text["matches"][0]["fingerprint"]
    near = int(fingerprint, 16) ^ 0b101  # two bits away
    batch = client.post(
        "/v1/query",
        json={
            "documents": [
                {"id": "q1", "fingerprint": to_hex(near).upper()},
                {"id": "q2", "text": "nothing like anything stored here at all, really nothing"},
            ],
            "max_distance": 2,
        },
    ).json()["results"]
    assert batch[0] == {
        "id": "q1",
        "duplicate": True,
        "verified": False,
        "matches": [{"id": "a", "distance": 2, "fingerprint": fingerprint}],
    }
    assert batch[1]["id"] == "q2" and not batch[1]["duplicate"] and batch[1]["matches"] == []
    strict = client.post("/v1/query", json={"fingerprint": to_hex(near), "max_distance": 1}).json()
    assert strict["matches"] == []
    assert stored_count(client) == 2


def test_query_explains_each_match(client: TestClient, index: SimhashIndex) -> None:
    client.post("/v1/check", json={"id": "a", "text": BASE})
    stored = index.get("a").fingerprint
    query = stored ^ (1 << 3) ^ (1 << 60)
    match = client.post("/v1/query", json={"fingerprint": to_hex(query), "explain": True}).json()["matches"][
        0
    ]
    explanation = match["explanation"]
    assert explanation["differing_bits"] == [3, 60]
    assert explanation["similarity"] == round(1 - 2 / 64, 4)
    # Bits 3 and 60 lie in the first and last 16-bit blocks: the middle two tables agree.
    assert explanation["tables"] == [1, 2]


def test_query_refuses_a_distance_beyond_the_index(client: TestClient) -> None:
    error = assert_error(
        client.post("/v1/query", json={"text": BASE, "max_distance": 9}), 422, "invalid_setting"
    )
    assert "max_distance=9" in error["message"]


# -- documents ---------------------------------------------------------------------------------


def test_documents_add_get_remove(client: TestClient) -> None:
    added = client.post(
        "/v1/documents", json={"documents": [{"id": "a", "text": BASE}, {"id": 5, "text": OTHER}]}
    )
    assert added.status_code == 201 and added.json() == {"added": 2, "skipped": 0, "ids": ["a", 5]}
    one = client.post("/v1/documents", json={"id": "c", "text": CHINESE})
    assert one.status_code == 201 and one.json()["ids"] == ["c"]
    got = client.get("/v1/documents/a").json()
    assert got["id"] == "a" and got["cluster"] == "a" and len(got["fingerprint"]) == 16
    assert_error(client.get("/v1/documents/5"), 404, "key_not_found")  # a path id is a string
    assert client.get("/v1/documents/5", params={"type": "int"}).json()["id"] == 5
    overlap = {"documents": [{"id": "new", "text": VARIANT}, {"id": "a", "text": BASE}]}
    refused = assert_error(client.post("/v1/documents", json=overlap), 409, "key_exists")
    assert 'give "existing": "skip"' in str(refused)  # the request's own field, not the library's
    assert stored_count(client) == 3  # nothing of the refused batch
    skipped = client.post("/v1/documents", json={**overlap, "existing": "skip"}).json()
    assert skipped == {"added": 1, "skipped": 1, "ids": ["new"]}
    assert client.delete("/v1/documents/5?type=int").json() == {"id": 5, "removed": True}
    assert_error(client.delete("/v1/documents/5?type=int"), 404, "key_not_found")
    assert_error(client.get("/v1/documents/5?type=int"), 404, "key_not_found")
    assert stored_count(client) == 3


def test_stats_and_health(client: TestClient) -> None:
    client.post("/v1/check", json={"documents": [{"id": i, "text": f"{OTHER} {i}"} for i in range(4)]})
    stats = client.get("/v1/stats").json()
    assert stats["documents"] == 4 and stats["bits"] == 64 and stats["max_distance"] == 3
    assert stats["url"].startswith("sqlite:///")
    assert stats["fingerprint_config"]["weighting"] == "tfidf-len"
    assert stats["service"]["store_requests"] >= stats["service"]["store_calls"] >= 1
    with_buckets = client.get("/v1/stats", params={"buckets": "true"}).json()
    assert len(with_buckets["tables"]) == 4
    assert client.get("/healthz").json() == {"status": "ok", "documents": 4}


# -- errors: one shape for all -----------------------------------------------------------------

BAD_REQUESTS: list[tuple[str, str, dict[str, Any], int, str, str]] = [
    # (method, path, request kwargs, status, code, a word the message must contain)
    ("GET", "/v2/check", {}, 404, "not_found", "/docs"),
    ("PUT", "/v1/check", {}, 405, "method_not_allowed", "PUT"),
    ("POST", "/v1/check", {"content": b"{not json"}, 422, "invalid_json", "not JSON"),
    ("POST", "/v1/check", {"content": b'{"id": "a", "text": "\xff\xfe"}'}, 422, "invalid_json", "UTF-8"),
    ("POST", "/v1/check", {"content": b""}, 422, "invalid_json", "empty"),
    ("POST", "/v1/check", {"json": ["a", "b"]}, 422, "invalid_request", "JSON object"),
    ("POST", "/v1/check", {"json": {"id": "a"}}, 422, "invalid_request", "text"),
    ("POST", "/v1/check", {"json": {"text": BASE}}, 422, "invalid_request", "id"),
    ("POST", "/v1/check", {"json": {"id": True, "text": BASE}}, 422, "invalid_request", "boolean"),
    ("POST", "/v1/check", {"json": {"id": 1.5, "text": BASE}}, 422, "invalid_request", "float"),
    ("POST", "/v1/check", {"json": {"id": "a", "text": 12}}, 422, "invalid_request", "text"),
    ("POST", "/v1/check", {"json": {"id": "a", "text": "x\x00y"}}, 422, "invalid_input", "binary"),
    ("POST", "/v1/check", {"content": b'{"id": "a", "text": "\\ud800"}'}, 422, "invalid_input", "surrogate"),
    ("POST", "/v1/check", {"json": {"documents": "a"}}, 422, "invalid_request", "documents"),
    (
        "POST",
        "/v1/check",
        {"json": {"documents": [{"id": "a"}]}},
        422,
        "invalid_request",
        "documents[0].text",
    ),
    (
        "POST",
        "/v1/documents",
        {"json": {"documents": [], "existing": "maybe"}},
        422,
        "invalid_request",
        "existing",
    ),
    (
        "POST",
        "/v1/query",
        {"json": {"documents": [], "max_distnce": 2}},
        422,
        "invalid_request",
        "max_distnce",
    ),
    (
        "POST",
        "/v1/query",
        {"json": {"text": BASE, "fingerprint": "00"}},
        422,
        "invalid_request",
        "exactly one",
    ),
    ("POST", "/v1/query", {"json": {"fingerprint": "xyz"}}, 422, "invalid_input", "hex"),
    ("POST", "/v1/query", {"json": {"fingerprint": "g" * 16}}, 422, "invalid_input", "hexadecimal"),
    (
        "POST",
        "/v1/query",
        {"json": {"text": BASE, "max_distance": -1}},
        422,
        "invalid_request",
        "max_distance",
    ),
    ("POST", "/v1/query", {"json": {"text": BASE, "explain": "yes"}}, 422, "invalid_request", "explain"),
    ("DELETE", "/v1/documents/absent", {}, 404, "key_not_found", "absent"),
]


@pytest.mark.parametrize(("method", "path", "kwargs", "status", "code", "word"), BAD_REQUESTS)
def test_every_error_has_the_one_shape(
    client: TestClient, method: str, path: str, kwargs: dict[str, Any], status: int, code: str, word: str
) -> None:
    client.post("/v1/check", json={"id": "stored", "text": OTHER})
    error = assert_error(client.request(method, path, **kwargs), status, code)
    assert word in error["message"] + json.dumps(error["details"])
    assert stored_count(client) == 1  # a bad request loses nothing stored


def test_limits_give_413_and_422(index: SimhashIndex) -> None:
    with client_for(index, max_body_bytes=2000, max_documents=3, max_text_bytes=300) as client:
        big = {"id": "a", "text": "word " * 500}
        error = assert_error(client.post("/v1/check", json=big), 413, "payload_too_large")
        assert "2,000 bytes" in error["message"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is counted as it streams
            yield b'{"id": "a", "text": "'
            for _ in range(50):
                yield b"word " * 20
            yield b'"}'

        assert_error(client.post("/v1/check", content=chunks()), 413, "payload_too_large")
        many = {"documents": [{"id": i, "text": "x"} for i in range(4)]}
        error = assert_error(client.post("/v1/check", json=many), 413, "payload_too_large")
        assert "smaller batches" in error["message"]
        long_text = {"documents": [{"id": "ok", "text": "fine"}, {"id": "b", "text": "é" * 200}]}
        error = assert_error(client.post("/v1/check", json=long_text), 422, "invalid_input")
        assert error["message"].startswith("documents[1]:") and "400 bytes" in error["message"]
        assert stored_count(client) == 0


def test_token_guards_v1_routes_only(index: SimhashIndex) -> None:
    with client_for(index, token=TOKEN) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
            response = client.post("/v1/check", json={"id": "a", "text": BASE}, headers=headers)
            assert_error(response, 401, "unauthorized")
            assert response.headers["www-authenticate"] == "Bearer"
        assert_error(client.get("/v1/stats"), 401, "unauthorized")
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert client.post("/v1/check", json={"id": "a", "text": BASE}, headers=good).json()["added"]
        assert client.get("/healthz").status_code == 200
        assert client.get("/docs").status_code == 200


def test_unexpected_errors_are_500_without_internals(
    index: SimhashIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    with client_for(index) as client:

        def broken() -> int:
            raise RuntimeError("secret internal detail")

        monkeypatch.setattr(index.storage, "size", broken)
        error = assert_error(client.get("/healthz"), 500, "internal_error")
        assert "secret" not in error["message"]


def test_openapi_page_documents_every_route_and_body(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    assert {
        "/v1/fingerprint",
        "/v1/query",
        "/v1/documents",
        "/v1/documents/{key}",
        "/v1/check",
        "/v1/stats",
        "/healthz",
    } <= set(paths)
    components = schema["components"]["schemas"]
    for path in ("/v1/fingerprint", "/v1/query", "/v1/documents", "/v1/check"):
        body = paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        references = [option["$ref"].rsplit("/", 1)[1] for option in body["anyOf"]]
        assert len(references) == 2 and all(name in components for name in references)
    assert "x-neardup-body" not in json.dumps(schema)
    page = client.get("/docs")
    assert page.status_code == 200 and "swagger" in page.text.lower()


# -- settings that change answers --------------------------------------------------------------


def test_verifying_index_verifies_and_explains(tmp_path: Path) -> None:
    verification = {"mode": "minhash", "threshold": 0.5, "content_weight": 0.9, "num_perm": 64, "seed": 1}
    with (
        open_index(tmp_path / "verified.db", verification=verification) as index,
        client_for(index) as client,
    ):
        client.post("/v1/check", json={"id": "a", "text": BASE})
        answer = client.post("/v1/query", json={"text": VARIANT, "explain": True}).json()
        assert answer["verified"] and [m["id"] for m in answer["matches"]] == ["a"]
        explanation = answer["matches"][0]["explanation"]
        assert explanation["signature_jaccard"] == 1.0 and explanation["score"] == 1.0
        stored = index.get("a").fingerprint
        by_fingerprint = client.post("/v1/query", json={"fingerprint": to_hex(stored)}).json()
        assert not by_fingerprint["verified"] and by_fingerprint["duplicate"]


def test_wide_fingerprints(tmp_path: Path) -> None:
    config = IndexConfig(bits=128, fingerprint=FingerprintConfig(bits=128))
    with SimhashIndex.open(f"sqlite:///{tmp_path}/wide.db", config) as index, client_for(index) as client:
        fingerprint = client.post("/v1/fingerprint", json={"text": BASE}).json()["fingerprint"]
        assert len(fingerprint) == 32
        client.post("/v1/check", json={"id": "a", "text": BASE})
        near = to_hex(int(fingerprint, 16) ^ (1 << 100), 128)
        assert client.post("/v1/query", json={"fingerprint": near}).json()["matches"][0]["distance"] == 1
        explained = client.post("/v1/query", json={"fingerprint": near, "explain": True}).json()
        assert explained["matches"][0]["explanation"]["differing_bits"] == [100]


def test_index_without_fingerprint_settings_is_refused(tmp_path: Path) -> None:
    bare = SimhashIndex.open(f"sqlite:///{tmp_path}/bare.db", IndexConfig())
    with bare as index, pytest.raises(InputError, match="no fingerprint settings"):
        create_app(index)


def test_serve_refuses_a_bad_token_file(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from neardup.cli.main import main

    token_file = tmp_path / "token"
    token_file.write_text("two words\n")
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "x.db"), "--token-file", str(token_file)])
    assert result.exit_code == 1 and "must hold one token" in result.output
    assert not (tmp_path / "x.db").exists()  # refused before the index was created

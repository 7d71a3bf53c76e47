"""``create_app(index, settings)``: the HTTP service over one stored index (FastAPI).

Routes (all ``/v1`` routes need the bearer token when one is set):

- ``POST /v1/fingerprint``: text → fingerprint.
- ``POST /v1/query``: text or fingerprint → stored near-duplicates, without adding.
- ``POST /v1/documents``: add; ``GET`` / ``DELETE /v1/documents/{id}``: read, remove.
- ``POST /v1/check``: check-and-add (seed 002's incremental mode): the stable cluster id and
  the matches, in one step.
- ``POST /v1/records/check``: rows against a records index, when the app serves one
  (:mod:`.records_routes`).
- ``GET /v1/stats``, ``GET /healthz``, and the OpenAPI page at ``/docs``.

Every POST takes one document, or ``{"documents": [...]}`` with the request's options, and
answers in kind (one object, or ``{"results": [...]}`` in input order). Nothing lives at module
level: the index, the settings and the two worker threads (:mod:`.engine`) belong to the app.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool

from .. import __version__
from ..dedup.documents import Assignment, Index, parse_ids
from ..distance import from_hex, hex_many, to_hex
from ..errors import InputError, KeyNotFoundError
from ..index.simhash_index import Match, SimhashIndex
from ..io.record import Record, record_from_mapping
from ..records.incremental import RecordsIndex
from ..storage.base import MAX_KEY_BYTES, Key, check_key
from .engine import Engine, Found, QueryOption
from .errors import ServiceError, install_error_handlers, validation_error
from .health import Health
from .models import (
    AddBatch,
    AddOut,
    CheckBatch,
    CheckDocument,
    CheckOut,
    Document,
    ErrorOut,
    FingerprintOut,
    QueryBatch,
    QueryOut,
    SingleQuery,
    TextBatch,
    TextDocument,
)
from .records_routes import RecordRow, RecordRows, records_routes
from .settings import ServiceSettings

IdType = Literal["string", "int"]
Single = TypeVar("Single", bound=BaseModel)
Batch = TypeVar("Batch", bound=BaseModel)
T = TypeVar("T")
log = logging.getLogger("neardup.service")

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": description}
    for status, description in (
        (401, "Missing or wrong bearer token."),
        (413, "Body or batch too large: split it."),
        (422, "Malformed body or unusable document; the message names it."),
        (503, "The store cannot be reached."),
    )
}


def create_app(
    index: Index | SimhashIndex,
    settings: ServiceSettings | None = None,
    *,
    owns_index: bool = False,
    records: RecordsIndex | None = None,
) -> FastAPI:
    """The ASGI app serving ``index`` (an :class:`~neardup.Index`; a :class:`SimhashIndex`
    opened from a store is served through one), and ``records`` (a records index) at
    ``/v1/records/check`` when given. The app's worker threads stop with its lifespan; the
    indexes are closed then too if ``owns_index``, else the caller closes them."""
    settings = settings or ServiceSettings()
    documents = index if isinstance(index, Index) else Index(index)
    engine = Engine(documents, settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        engine.close()
        if owns_index:
            index.close()
            if records is not None:
                records.close()

    app = FastAPI(
        title="neardup",
        version=__version__,
        summary="Near-duplicate detection: check, add and query documents.",
        lifespan=lifespan,
    )
    app.state.engine = engine
    app.state.settings = settings
    install_error_handlers(app)
    bodies: dict[str, Any] = {}
    app.include_router(_routes(engine, settings, bodies))
    if records is not None:
        reader = functools.partial(_read_body, settings=settings)
        app.include_router(records_routes(engine, settings, records, _guards(settings), reader))
        bodies["RecordRow | RecordRows"] = (RecordRow, RecordRows)
    _document_bodies(app, bodies)

    health = Health(engine, documents.index.storage)

    @app.get("/healthz", tags=["service"], responses={503: _ERRORS[503]})
    async def healthz() -> JSONResponse:
        """Is the service up and its store reachable? Answered within about 1.5 s whatever
        the store thread is doing (:mod:`.health`)."""
        return await health.answer()

    return app


def _guards(settings: ServiceSettings) -> list[Any]:
    """The dependencies of every ``/v1`` route: the bearer token, when one is set."""
    bearer = HTTPBearer(auto_error=False, description="The token of `neardup serve --token-file`.")

    async def authorize(request: Request) -> None:  # async: FastAPI runs a plain def on a thread
        if settings.token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), settings.token.encode()
        ):
            raise ServiceError(
                401,
                "unauthorized",
                "this service needs 'Authorization: Bearer <token>' with the server's token",
                headers={"WWW-Authenticate": "Bearer"},
            )

    # The bearer scheme only documents the token on the OpenAPI page; authorize checks it.
    return [Depends(bearer), Depends(authorize)]


def _routes(engine: Engine, settings: ServiceSettings, bodies: dict[str, Any]) -> APIRouter:
    """The service's routes, one short handler per endpoint.

    Long: it is the route table, kept whole so the API reads in one place.
    """
    router = APIRouter(prefix="/v1", dependencies=_guards(settings), responses=_ERRORS)
    bits = engine.bits

    def body_of(single: type[BaseModel], batch: type[BaseModel]) -> dict[str, Any]:
        bodies[f"{single.__name__} | {batch.__name__}"] = (single, batch)
        return {"x-neardup-body": [single.__name__, batch.__name__]}

    @router.post(
        "/fingerprint",
        tags=["documents"],
        openapi_extra=body_of(TextDocument, TextBatch),
        responses={200: {"model": FingerprintOut, "description": "One object, or {'results': [...]}."}},
    )
    async def fingerprint(request: Request) -> JSONResponse:
        """The fingerprint of each text, under the index's fingerprint settings."""
        single, documents, _ = await _parse(request, settings, TextDocument, TextBatch)
        records = await _records_of(documents, settings, id_required=False)
        prepared = await engine.prepare(records)
        rows = [
            {"id": given.id, "fingerprint": text}
            for given, text in zip(documents, hex_many(prepared.fingerprints, bits), strict=True)
        ]
        return _answer(single, rows)

    @router.post(
        "/query",
        tags=["documents"],
        openapi_extra=body_of(SingleQuery, QueryBatch),
        responses={200: {"model": QueryOut, "description": "One object, or {'results': [...]}."}},
    )
    async def query(request: Request) -> JSONResponse:
        """The stored near-duplicates of each text or fingerprint, by (distance, id), at most
        ``max_matches`` of each (the nearest); the index is not changed. Text queries are
        verified if the index verifies."""
        single, documents, options = await _parse(request, settings, SingleQuery, QueryBatch)
        max_distance, explain = options["max_distance"], options["explain"]
        max_matches = _max_matches(options, settings)

        async def work() -> JSONResponse:
            texts = [row for row, doc in enumerate(documents) if doc.text is not None]
            given = [row for row, doc in enumerate(documents) if doc.text is None]
            results: dict[int, Found] = {}
            if texts:
                records = await _records_of([documents[row] for row in texts], settings, id_required=False)
                prepared = await engine.prepare(records)
                option = QueryOption(max_distance, explain, True, max_matches)
                results.update(zip(texts, await engine.query(prepared, option), strict=True))
            if given:
                values = [_fingerprint(documents[row].fingerprint, row, single, bits) for row in given]
                prepared = engine.fingerprints(values, list(given))
                option = QueryOption(max_distance, explain, False, max_matches)
                results.update(zip(given, await engine.query(prepared, option), strict=True))
            verifying = engine.documents.verifier is not None

            def rows() -> list[dict[str, Any]]:
                return [
                    _truncated(
                        {
                            "id": doc.id,
                            "duplicate": bool(results[row].matches),
                            "verified": verifying and doc.text is not None,
                            "matches": _matches(results[row].matches, bits, results[row].explanations),
                        },
                        results[row].truncated,
                    )
                    for row, doc in enumerate(documents)
                ]

            weight = sum(1 + len(found.matches) for found in results.values()) * _ANSWER_ROW_BYTES
            return await _off_loop(weight, lambda: _answer(single, rows()))

        return await _unless_gone(request, work())

    @router.post(
        "/documents",
        tags=["documents"],
        status_code=201,
        openapi_extra=body_of(Document, AddBatch),
        responses={
            201: {"model": AddOut},
            409: {"model": ErrorOut, "description": "An id is stored already; nothing was added."},
        },
    )
    async def add(request: Request) -> JSONResponse:
        """Store documents without deciding clusters, all or nothing."""
        single, documents, options = await _parse(request, settings, Document, AddBatch)
        existing = "fail" if single else options["existing"]  # a single document: added or refused
        records = await _records_of(documents, settings, id_required=True)
        prepared = await engine.prepare(records)
        added = await engine.add(prepared, existing)
        ids = [key for key, new in zip(prepared.keys, added, strict=True) if new]
        body = {"added": len(ids), "skipped": len(added) - len(ids), "ids": ids}
        return JSONResponse(body, status_code=201)

    @router.get(
        "/documents/{key:path}",
        tags=["documents"],
        responses={404: {"model": ErrorOut, "description": "No document has this id."}},
    )
    async def get(key: str, type: IdType = "string") -> dict[str, Any]:
        """A stored document's fingerprint and cluster id. The id in the path is a string
        (it may hold ``/``); ``?type=int`` names an integer id (JSON ``3``, not ``"3"``)."""
        wanted = _path_key(key, type)

        def read() -> dict[str, Any]:
            record = engine.documents.index.get_many([wanted])[0]
            if record is None:
                raise KeyNotFoundError(f"id {wanted!r} is not in the index")
            return {
                "id": record.key,
                "fingerprint": to_hex(record.fingerprint, bits),
                "cluster": record.cluster if record.cluster is not None else record.key,
            }

        return await engine.call(read)

    @router.delete(
        "/documents/{key:path}",
        tags=["documents"],
        responses={404: {"model": ErrorOut, "description": "No document has this id."}},
    )
    async def remove(key: str, type: IdType = "string") -> dict[str, Any]:
        """Forget a document (the id as for ``GET``). Its cluster id stays the id of the
        others in its cluster."""
        removed = await engine.remove(_path_key(key, type))
        return {"id": removed, "removed": True}

    @router.post(
        "/check",
        tags=["documents"],
        openapi_extra=body_of(CheckDocument, CheckBatch),
        responses={200: {"model": CheckOut, "description": "One object, or {'results': [...]}."}},
    )
    async def check(request: Request) -> JSONResponse:
        """Check-and-add: whether each document duplicates a stored one (or an earlier one of
        the batch), the stable cluster id it joins, and its matches; stored in one step, so
        near-duplicates sent at once by different clients still share one cluster. Sending
        a stored id again with the same text returns its first answer (``added: false``)."""
        single, documents, options = await _parse(request, settings, CheckDocument, CheckBatch)
        max_matches = _max_matches(options, settings)

        async def work() -> JSONResponse:
            records = await _records_of(documents, settings, id_required=True)
            prepared = await engine.prepare(records)
            assignments = await engine.check_and_add(prepared, max_matches)
            weight = sum(1 + len(assignment.matches) for assignment in assignments) * _ANSWER_ROW_BYTES
            return await _off_loop(
                weight, lambda: _answer(single, [_assignment(assignment, bits) for assignment in assignments])
            )

        return await _unless_gone(request, work())

    @router.get("/stats", tags=["service"])
    async def stats(buckets: bool = False) -> dict[str, Any]:
        """How many documents the index holds, its settings, and the service's batching (how
        many documents each store call carried); ``?buckets=true`` adds bucket statistics,
        which may scan the store."""

        def read() -> dict[str, Any]:
            facts = engine.documents.describe()
            if buckets:
                facts["tables"] = [vars(table) for table in engine.documents.index.stats().tables]
            return facts

        facts = await engine.call(read)
        store = engine.store_worker
        facts["service"] = {
            "store_calls": store.calls,
            "store_requests": store.payloads,
            "isolated_requests": store.isolated,
            "retried_requests": store.retried,
            "max_batch": settings.max_batch,
            "max_documents": settings.max_documents,
            "max_matches": settings.max_matches,
            "max_body_bytes": settings.max_body_bytes,
            "token": settings.token is not None,
        }
        return facts

    return router


# -- bodies ------------------------------------------------------------------------------------


async def _parse(
    request: Request, settings: ServiceSettings, single: type[Single], batch: type[Batch]
) -> tuple[bool, list[Any], dict[str, Any]]:
    """(is it one document, the documents, the request's options) of a body that is one
    document (its options are its own fields) or a batch (the fields beside the documents)."""
    body = await _read_body(request, settings)
    return await _off_loop(len(body), _decoded, body, settings, single, batch)


def _decoded(
    body: bytes, settings: ServiceSettings, single: type[Single], batch: type[Batch]
) -> tuple[bool, list[Any], dict[str, Any]]:
    """:func:`_parse` after the body is read: JSON parsing and validation, on a worker
    thread when the body is large, so it never stalls the event loop (:func:`_off_loop`)."""
    data = _json_of(body)
    if not isinstance(data, dict):
        raise ServiceError(
            422, "invalid_request", 'the body must be a JSON object: one document, or {"documents": [...]}'
        )
    is_batch = "documents" in data
    listed = data.get("documents")
    if isinstance(listed, list) and len(listed) > settings.max_documents:  # before validating them
        raise ServiceError(
            413,
            "payload_too_large",
            f"the batch holds {len(listed):,} documents, over this service's limit of "
            f"{settings.max_documents:,}; send them in smaller batches",
        )
    model: type[BaseModel] = batch if is_batch else single
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc.errors()) from None
    except RecursionError:
        raise _too_deep() from None
    if not is_batch:
        return True, [parsed], parsed.model_dump()
    return False, list(parsed.documents), parsed.model_dump(exclude={"documents"})  # type: ignore[attr-defined]


async def _read_body(request: Request, settings: ServiceSettings) -> bytes:
    """The body, refused (413) as soon as it is known to be over the limit: from its
    Content-Length before a byte is read, else as it streams."""
    limit = settings.max_body_bytes
    declared = request.headers.get("content-length")
    too_large = ServiceError(
        413,
        "payload_too_large",
        f"the body is over this service's limit of {limit:,} bytes; send fewer or shorter documents",
    )
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _json_of(body: bytes) -> Any:
    """The body as JSON, whatever the content type, so ``curl -d '{...}'`` (form-encoded by
    default) just works. Every malformed body is a 422: too deep a nesting or too long an
    integer too (Python raises RecursionError and ValueError for those)."""
    if not body:
        raise ServiceError(
            422, "invalid_json", 'the body is empty; send one document or {"documents": [...]}'
        )
    # A Python-level hook lets the event loop's thread take the GIL during a long parse.
    hook = _yielding_object if len(body) > _YIELDING_PARSE_BYTES else None
    try:
        return json.loads(body.decode("utf-8"), object_pairs_hook=hook)
    except UnicodeDecodeError as exc:
        raise ServiceError(
            422, "invalid_json", f"the body is not UTF-8 (byte {exc.start} is invalid); send JSON as UTF-8"
        ) from None
    except json.JSONDecodeError as exc:
        raise ServiceError(
            422,
            "invalid_json",
            f"the body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
        ) from None
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:  # an integer of more digits than int() converts
        raise ServiceError(
            422, "invalid_json", f"the body holds an unusable number: {str(exc).split(';')[0]}"
        ) from None


_YIELDING_PARSE_BYTES = 1 << 20


def _yielding_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return dict(pairs)


def _too_deep() -> ServiceError:
    return ServiceError(
        422, "invalid_json", "the body nests arrays or objects too deeply; send flat documents"
    )


def _path_key(text: str, kind: str) -> Key:
    """The id a URL path names, by the rule of the command line (:func:`parse_ids`): the
    string as given (no digit folding: ``٣`` is not 3), or with ``?type=int`` a canonical
    decimal integer; refused (422) if it is not one, or if no store can hold it. Digits past
    an id's length limit are refused before Python converts them (it refuses over 4,300)."""
    if kind == "int" and len(text) > MAX_KEY_BYTES:
        raise ServiceError(
            422,
            "invalid_request",
            f"the id in the URL is {len(text):,} characters long; ids are at most {MAX_KEY_BYTES}, "
            "so no document has it",
        )
    try:
        key = parse_ids([text], int_ids=kind == "int")[0]
    except InputError as exc:
        raise ServiceError(422, "invalid_request", f"{exc}; drop ?type=int for a string id") from None
    check_key(key, "the URL")
    return key


def _max_matches(options: dict[str, Any], settings: ServiceSettings) -> int:
    """The request's ``max_matches``: the service's cap unless it asks for fewer."""
    asked = options.get("max_matches")
    if asked is None:
        return settings.max_matches
    if asked > settings.max_matches:
        raise ServiceError(
            422,
            "invalid_setting",
            f"max_matches={asked} is over this service's limit of {settings.max_matches}; ask for "
            f"at most {settings.max_matches} (the nearest come first)",
        )
    return int(asked)


async def _unless_gone(request: Request, work: Awaitable[T]) -> T:
    """``work``, cancelled as soon as the client disconnects: its store jobs still queued are
    then dropped before they run (:class:`.engine.Batcher`) and a query stops between chunks, so a
    client that leaves does not leave its work behind to hold the server."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
    if task.done() and not task.cancelled():
        return task.result()
    where = f"{request.method} {request.url.path}"
    log.info("%s: the client left before its answer; its work was stopped", where)
    raise ServiceError(499, "client_closed_request", "the client closed the connection before its answer")


async def _disconnected(request: Request) -> None:
    """Return when the client disconnects (the body has been read: nothing else comes)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


_INLINE_BYTES = 64 << 10
_ANSWER_ROW_BYTES = 128  # about what one match or one document adds to an answer


async def _off_loop(weight: int, function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on a worker thread when its input is large (``weight`` bytes), so a
    large body never stalls the event loop; small work runs in place, where it costs less
    than the hop to a thread and back."""
    if weight <= _INLINE_BYTES:
        return function(*args)
    return await run_in_threadpool(function, *args)


async def _records_of(documents: list[Any], settings: ServiceSettings, *, id_required: bool) -> list[Record]:
    """:func:`_records`, off the event loop when the texts are large."""
    weight = sum(len(getattr(document, "text", None) or "") for document in documents)
    return await _off_loop(weight, functools.partial(_records, id_required=id_required), documents, settings)


def _records(documents: list[Any], settings: ServiceSettings, *, id_required: bool) -> list[Record]:
    """Records checked as JSONL input is (binary text, lone surrogates, size). Documents
    without an id (fingerprint and query) get their position, used only inside the batch."""
    records = []
    for position, document in enumerate(documents):
        data = document.model_dump()
        if not id_required and data.get("id") is None:
            data["id"] = position
        location = f"documents[{position}]" if len(documents) > 1 else "the document"
        records.append(record_from_mapping(data, location, max_bytes=settings.max_text_bytes))
    return records


def _fingerprint(text: str | None, row: int, single: bool, bits: int) -> int:
    try:
        return from_hex((text or "").lower(), bits)
    except InputError as exc:
        where = "fingerprint" if single else f"documents[{row}].fingerprint"
        raise InputError(exc.reason, where) from None


# -- answers -----------------------------------------------------------------------------------


def _answer(single: bool, rows: list[dict[str, Any]]) -> JSONResponse:
    return JSONResponse(rows[0] if single else {"results": rows})


def _matches(
    matches: list[Match], bits: int, explanations: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"id": m.key, "distance": m.distance, "fingerprint": to_hex(m.fingerprint, bits)} for m in matches
    ]
    if explanations is not None:
        for row, explanation in zip(rows, explanations, strict=True):
            row["explanation"] = explanation
    return rows


def _assignment(assignment: Assignment, bits: int) -> dict[str, Any]:
    row = {
        "id": assignment.key,
        "cluster": assignment.cluster,
        "duplicate": assignment.duplicate,
        "added": assignment.added,
        "matches": _matches(assignment.matches, bits, None),
    }
    return _truncated(row, assignment.truncated)


def _truncated(row: dict[str, Any], truncated: bool) -> dict[str, Any]:
    """The answer's ``matches_truncated: true`` when max_matches cut its matches (absent
    otherwise, so answers that were never cut keep their shape)."""
    if truncated:
        row["matches_truncated"] = True
    return row


def _document_bodies(app: FastAPI, bodies: dict[str, Any]) -> None:
    """Bodies are parsed by hand (one document or a batch, with neardup's own errors), so
    the OpenAPI page is told their schemas here: ``oneOf`` the single and the batch model."""
    openapi: Callable[[], dict[str, Any]] = app.openapi

    def with_bodies() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = openapi()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                names = operation.pop("x-neardup-body", None)
                if not names:
                    continue
                single, batch = bodies[" | ".join(names)]
                adapter: TypeAdapter[Any] = TypeAdapter(single | batch)
                body = adapter.json_schema(ref_template="#/components/schemas/{model}")
                components.update(body.pop("$defs", {}))
                operation["requestBody"] = {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                }
        app.openapi_schema = schema
        return schema

    app.openapi = with_bodies  # type: ignore[method-assign]

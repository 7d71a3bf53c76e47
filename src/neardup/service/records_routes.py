"""``POST /v1/records/check``: rows checked against a records index (seed 002's two
incremental modes, and check-and-add), on the service's store thread beside ``/v1/check``.

The body is one row, ``{"row": {column: value, ...}, "mode": "any"}``, or a batch, ``{"rows":
[...], "mode": "all"}``; the answer is one object or ``{"results": [...]}`` in input order,
each ``{"id", "duplicate", "status", "group", "matches": [{"id", "group", "probability"}]}``.
``any`` and ``all`` add nothing (``any`` gives the best match, ``all`` every one); ``add``
stores new rows with their groups (a stored key is answered with its group, ``status:
"stored"``). The index's stored model decides (:class:`~neardup.records.incremental.RecordsIndex`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.params import Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from ..records.incremental import CheckedRow, RecordsIndex
from .engine import Engine
from .errors import ServiceError, validation_error
from .settings import ServiceSettings

Mode = Literal["any", "all", "add"]


class RecordRow(BaseModel):
    """One row to check: its columns by name (the index's key column among them)."""

    row: dict[str, Any]
    mode: Mode = Field("any", description="any, all (nothing added) or add.")


class RecordRows(BaseModel):
    """Rows to check, in one store call."""

    rows: list[dict[str, Any]]
    mode: Mode = Field("any", description="any, all (nothing added) or add.")


class RecordMatchOut(BaseModel):
    id: str | int
    group: str | int
    probability: float


class RecordCheckOut(BaseModel):
    id: str | int
    duplicate: bool
    status: str = Field(description="checked (a query), added, or stored (the key was stored already).")
    group: str | int | None = Field(description="The row's group (add mode), else null.")
    matches: list[RecordMatchOut]


def records_routes(
    engine: Engine,
    settings: ServiceSettings,
    records: RecordsIndex,
    dependencies: Sequence[Depends],
    read_body: Callable[[Request], Awaitable[bytes]],
) -> APIRouter:
    """The records route, guarded (``dependencies``) and its body read (``read_body``: refused
    past the size limit as it streams) as the document routes are."""
    router = APIRouter(prefix="/v1", dependencies=list(dependencies))

    @router.post(
        "/records/check",
        tags=["records"],
        openapi_extra={"x-neardup-body": ["RecordRow", "RecordRows"]},
        responses={200: {"model": RecordCheckOut, "description": "One object, or {'results': [...]}."}},
    )
    async def check(request: Request) -> JSONResponse:
        """Check rows against the records index: whether each has a stored duplicate
        (``any``), every stored duplicate with its match probability (``all``), or check and
        add (``add``), with the index's stored model."""
        body = await read_body(request)
        single, rows, mode = await run_in_threadpool(_parsed, body, settings)
        checked = await engine.call(lambda: records.check_many(rows, mode=mode))
        answers = [_answer(row) for row in checked]
        return JSONResponse(answers[0] if single else {"results": answers})

    return router


def _parsed(body: bytes, settings: ServiceSettings) -> tuple[bool, list[dict[str, Any]], str]:
    """(is it one row, the rows, the mode) of a body, or a 413/422 naming the problem."""
    try:
        data = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ServiceError(422, "invalid_json", "the body is not UTF-8 JSON") from None
    if not isinstance(data, dict):
        raise ServiceError(422, "invalid_request", 'the body must be {"row": {...}} or {"rows": [...]}')
    listed = data.get("rows")
    if isinstance(listed, list) and len(listed) > settings.max_documents:
        raise ServiceError(
            413,
            "payload_too_large",
            f"the batch holds {len(listed):,} rows, over this service's limit of {settings.max_documents:,}; "
            "send them in smaller batches",
        )
    try:
        if "rows" in data:
            batch = RecordRows.model_validate(data)
            return False, batch.rows, batch.mode
        one = RecordRow.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc.errors()) from None
    return True, [one.row], one.mode


def _answer(row: CheckedRow) -> dict[str, Any]:
    return {
        "id": row.key,
        "duplicate": row.duplicate,
        "status": row.status,
        "group": row.group,
        "matches": [{"id": m.key, "group": m.group, "probability": m.probability} for m in row.matches],
    }

"""One JSON error shape for every failure the service reports.

``{"error": {"status": 409, "code": "key_exists", "message": "...", "details": [...]}}``:
``message`` is one sentence naming the value at fault and the fix (neardup's own messages),
``code`` a stable word clients can branch on, ``details`` the fields at fault for malformed
requests. Every path that can fail ends here: neardup errors, request validation, unknown
routes and methods, oversized bodies, a missing token, a database driver's own errors (503)
and unexpected exceptions (500, with the exception kept out of the answer and in the
server's log). Each is answered on a connection that stays open for the client's next request.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import (
    ConfigError,
    IndexConfigMismatchError,
    InputError,
    KeyExistsError,
    KeyNotFoundError,
    NeardupError,
    StorageError,
    StorageUnavailableError,
)
from ..storage.urls import redacted

log = logging.getLogger("neardup.service")

# Most specific first: the first class an error is an instance of gives its status and code.
_NEARDUP_STATUS: tuple[tuple[type[NeardupError], int, str], ...] = (
    (KeyExistsError, 409, "key_exists"),
    (KeyNotFoundError, 404, "key_not_found"),
    (IndexConfigMismatchError, 409, "config_mismatch"),
    (InputError, 422, "invalid_input"),
    (ConfigError, 422, "invalid_setting"),
    (StorageUnavailableError, 503, "storage_unavailable"),
    (StorageError, 503, "storage_error"),
)
#: Packages whose exceptions are the store failing (a driver error neardup did not wrap).
_DRIVERS = frozenset({"sqlite3", "redis", "psycopg", "psycopg2", "psycopg_pool", "pymysql", "MySQLdb"})
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    422: "invalid_request",
}


class ServiceError(Exception):
    """An error answer the service decides itself (size limits, auth, malformed JSON)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []
        self.headers = headers


def error_response(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"status": status, "code": code, "message": message, "details": details or []}}
    return JSONResponse(body, status_code=status, headers=headers)


def validation_details(errors: Any, prefix: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """pydantic's errors as ``{"field": "documents[3].text", "problem": "..."}``."""
    details = []
    for error in errors:
        location = [*prefix, *(part for part in error["loc"] if part != "body")]
        field = ""
        for part in location:
            field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
        problem = str(error["msg"]).removeprefix("Value error, ")
        details.append({"field": field or "body", "problem": problem})
    return details


def validation_error(errors: Any, prefix: tuple[Any, ...] = ()) -> ServiceError:
    details = validation_details(errors, prefix)
    first = details[0] if details else {"field": "body", "problem": "invalid"}
    others = len(details) - 1
    more = f" (and {others} more problem{'s' if others > 1 else ''})" if others else ""
    return ServiceError(
        422,
        "invalid_request",
        f"{first['field']}: {first['problem']}{more}; see the OpenAPI page at /docs for the body's shape",
        details,
    )


def install_error_handlers(app: FastAPI) -> None:
    """Route every error through :func:`error_response`."""

    async def service_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ServiceError)
        return error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)

    async def neardup_error(_: Request, exc: Exception) -> JSONResponse:
        for kind, status, code in _NEARDUP_STATUS:
            if isinstance(exc, kind):
                return error_response(status, code, _message(exc))
        return error_response(422, "invalid_request", _message(exc))

    async def request_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError | ValidationError)
        error = validation_error(exc.errors())
        return error_response(error.status, error.code, error.message, error.details)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        headers = dict(exc.headers) if exc.headers else None
        message = str(exc.detail)
        if exc.status_code in (404, 405) and message in ("Not Found", "Method Not Allowed"):
            what = "no route" if exc.status_code == 404 else "the route does not take"
            message = f"{what} {request.method} {request.url.path}; the routes are listed at /docs"
        return error_response(exc.status_code, code, message, headers=headers)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return unexpected_response(exc, request.method, request.url.path)

    disconnects = DisconnectLog()

    async def client_left(request: Request, exc: Exception) -> Response:
        disconnects.record(request.client.host if request.client else "?", request.method, request.url.path)
        return Response(status_code=400)  # nobody reads it: uvicorn drops it, the client is gone

    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(NeardupError, neardup_error)
    app.add_exception_handler(RequestValidationError, request_validation)
    app.add_exception_handler(ValidationError, request_validation)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(ClientDisconnect, client_left)
    app.add_exception_handler(Exception, unexpected)
    app.add_middleware(KeepConnection)


def unexpected_response(exc: BaseException, method: str, path: str) -> JSONResponse:
    """503 for a database driver's own error (the store failed), else 500; logged either way."""
    if type(exc).__module__.partition(".")[0] in _DRIVERS:
        log.warning("the store failed serving %s %s: %r", method, path, exc)
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        message = f"the store failed: {type(exc).__name__}: {redacted(first)}; retry, or see the server's log"
        return error_response(503, "storage_error", message)
    log.error("unexpected error serving %s %s", method, path, exc_info=exc)
    return error_response(500, "internal_error", "the server failed unexpectedly; the details are in its log")


class DisconnectLog:
    """A client that leaves before its whole body arrived is one log line, and a flood of them
    one line per ``interval`` seconds with their count: they used to log a traceback each
    (4,096 of them, 14 MB of log, in one probe), and the connection guards cut slow bodies
    the same way."""

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self.quiet_until = float("-inf")
        self.unreported = 0
        self.report: asyncio.TimerHandle | None = None

    def record(self, client: str, method: str, path: str) -> None:
        loop = asyncio.get_running_loop()
        if loop.time() >= self.quiet_until and self.report is None:
            log.warning("client %s disconnected before sending its whole body (%s %s)", client, method, path)
            self.quiet_until = loop.time() + self.interval
            return
        self.unreported += 1
        if self.report is None:
            self.report = loop.call_at(self.quiet_until, self._report, loop)

    def _report(self, loop: asyncio.AbstractEventLoop) -> None:
        log.warning(
            "%d more clients disconnected before sending their whole body in the last %g s",
            self.unreported,
            self.interval,
        )
        self.unreported, self.report = 0, None
        self.quiet_until = loop.time() + self.interval


class KeepConnection:
    """Answer an exception no handler took with the error shape *here*, inside Starlette's
    ServerErrorMiddleware, which would answer and then re-raise it, making uvicorn close the
    client's keep-alive connection."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if started:
                raise
            response = unexpected_response(exc, scope.get("method", ""), scope.get("path", ""))
            await response(scope, receive, send)


def _message(exc: Exception) -> str:
    # KeyError subclasses repr their message in str(); the first argument is the text.
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)

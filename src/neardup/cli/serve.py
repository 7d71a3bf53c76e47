"""``neardup serve URL``: the HTTP service over a stored index (FastAPI + uvicorn).

The command opens (or creates) the index, builds the app with :func:`neardup.service.create_app`
and runs uvicorn in this process: one event loop, one thread for fingerprinting and one for
the store (:mod:`neardup.service.engine`). It binds 127.0.0.1 unless told otherwise, so a
service is never exposed by accident; to listen on a network, pass ``--host`` and a
``--token-file``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import ipaddress
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from ..errors import ConfigError, MissingDependencyError
from ..service.settings import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_HOST,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CLIENT_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_DOCUMENTS,
    DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_MAX_MATCHES,
    DEFAULT_MAX_TEXT_BYTES,
    DEFAULT_MIN_BODY_RATE,
    DEFAULT_PORT,
    ServiceSettings,
    token_is_sendable,
)
from ..storage.urls import redacted
from .common import fingerprint_options, tokenizer_options
from .index import INDEX_VERIFY_HELP, INDEX_VERIFY_MODES, create_option, open_index, requested_config

#: Worker processes one ``serve`` starts: each holds an interpreter and store connections, and
#: more than a few per core only adds memory, so an unbounded count is a fork bomb.
MAX_WORKERS = 64


@click.command(short_help="Serve an index over HTTP: check, add and query documents.")
@click.argument("url", metavar="URL")
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port to listen on; 0 takes a free one, named in the start-up line.",
)
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False),
    help="File holding a bearer token every /v1 request must send (Authorization: Bearer ...).",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_BODY_BYTES,
    show_default=True,
    help="Size of one request body; a larger one gets 413 (from its Content-Length before a byte "
    "is read, else as it streams).",
)
@click.option(
    "--max-documents",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_DOCUMENTS,
    show_default=True,
    help="Documents one request may carry.",
)
@click.option(
    "--max-text-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_TEXT_BYTES,
    show_default=True,
    help="UTF-8 size of one document's text.",
)
@click.option(
    "--max-batch",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_BATCH,
    show_default=True,
    help="Documents of concurrent requests the store receives in one call.",
)
@click.option(
    "--max-matches",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_MATCHES,
    show_default=True,
    help="Matches listed per document, the nearest first (a request may ask for fewer).",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0, min_open=True, max=1e6),
    default=DEFAULT_HEADER_TIMEOUT,
    show_default=True,
    help="Seconds a client has to send its request headers before it is disconnected.",
)
@click.option(
    "--min-body-rate",
    type=click.IntRange(min=1),
    default=DEFAULT_MIN_BODY_RATE,
    show_default=True,
    help="Bytes per second a request body must average (after --header-timeout seconds).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_CONNECTIONS,
    show_default=True,
    help="Open connections per process; the slowest idle ones are dropped first.",
)
@click.option(
    "--max-client-connections",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_CLIENT_CONNECTIONS,
    show_default=True,
    help="Open connections of one client address per process; its slowest ones are dropped first.",
)
@click.option(
    "--max-header-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_HEADER_BYTES,
    show_default=True,
    help="Size of a request line and headers together; larger heads get 431.",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(min=0, min_open=True, max=1e6),
    default=DEFAULT_BODY_TIMEOUT,
    show_default=True,
    help="Seconds a whole request body has to arrive, at any rate.",
)
@click.option(
    "--verify",
    type=click.Choice(INDEX_VERIFY_MODES),
    default=None,
    help=INDEX_VERIFY_HELP,
)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=MAX_WORKERS),
    default=1,
    show_default=True,
    help=f"Server processes sharing the port and the store (one interpreter uses about one core; "
    f"at most {MAX_WORKERS}).",
)
@click.option(
    "--records",
    "records_url",
    metavar="URL",
    help="Also serve this records index (made by `neardup records SOURCE --index URL`) at "
    "POST /v1/records/check; one worker process.",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
    help="Least severe server log message printed on stderr; debug also logs every request.",
)
@create_option
@fingerprint_options
@tokenizer_options
@click.pass_context
def serve(
    ctx: click.Context,
    /,
    url: str,
    host: str,
    port: int,
    token_file: str | None,
    log_level: str,
    workers: int,
    max_distance: int | None,
    **options: Any,
) -> None:
    """Serve the index at URL (created with the given settings if absent) over HTTP.

    \b
    Routes: POST /v1/check (check-and-add), /v1/query, /v1/documents, /v1/fingerprint;
    GET|DELETE /v1/documents/{id}; GET /v1/stats, /healthz; the API page at /docs; with
    --records URL, POST /v1/records/check.

    \b
    Example:
      neardup serve news.db --port 8000
      curl -s localhost:8000/v1/check -d '{"id": "n1", "text": "..."}'
    """
    try:
        import uvicorn  # noqa: F401  (the helpers below run it)
    except ImportError as exc:
        raise MissingDependencyError("uvicorn", "service", "neardup serve") from exc
    try:
        from ..service.guard import GuardedProtocol, configure
    except ImportError as exc:  # an older uvicorn
        raise ConfigError(str(exc)) from exc

    records_url = options.pop("records_url")
    if records_url and workers > 1:
        raise ConfigError("--records is served by one process; use --workers 1 with it")
    settings = _service_settings(_read_token(token_file), host, options)
    configure(settings)
    server: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "access_log": log_level == "debug",
        "http": GuardedProtocol,
    }
    with contextlib.closing(_bind(host, port)) as listening:
        server["port"] = listening.getsockname()[1]  # --port 0: the one the system gave
        if workers > 1:
            _serve_workers(ctx, url, max_distance, settings, token_file, workers, server, listening)
        else:
            _serve_one(ctx, url, max_distance, settings, server, listening, records_url)
    click.echo("neardup: stopped", err=True)


def _service_settings(token: str | None, host: str, options: dict[str, Any]) -> ServiceSettings:
    """The service's settings from the command's limit flags, which are named as the
    :class:`ServiceSettings` fields (warning when a non-loopback host is served without a
    token; the connection cap lowered to what the open-file limit allows)."""
    if token is None and not _is_loopback(host):
        click.echo(
            f"neardup: warning: serving on {host} without --token-file; anyone who can reach it "
            "can read and change the index",
            err=True,
        )
    limits = {
        field.name: options[field.name]
        for field in dataclasses.fields(ServiceSettings)
        if field.name in options
    }
    limits["max_connections"] = _connection_cap(limits["max_connections"])
    return ServiceSettings(token, **limits)


def _serve_workers(
    ctx: click.Context,
    url: str,
    max_distance: int | None,
    settings: ServiceSettings,
    token_file: str | None,
    workers: int,
    options: dict[str, Any],
    listening: socket.socket,
) -> None:
    """Serve with several worker processes, each opening the store itself, on the socket
    bound here (what ``uvicorn.run`` does, given our socket instead of binding its own)."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    if url.startswith("memory:"):
        raise ConfigError(
            "a memory:// index lives in one process; use --workers 1, or a store (a file path, "
            "redis://, postgresql://) that several worker processes can share"
        )
    with open_index(url, requested_config(ctx, max_distance)) as opened:  # create, check
        described = _described(opened)
    from ..service.factory import IMPORT_STRING, worker_environment

    os.environ.update(worker_environment(url, settings, token_file))
    host, port = options["host"], options["port"]
    click.echo(f"neardup: serving {described} on http://{host}:{port} with {workers} workers", err=True)
    config = uvicorn.Config(IMPORT_STRING, factory=True, workers=workers, **options)
    with _stopped_by_sigterm():
        Multiprocess(config, sockets=[listening]).run()


def _serve_one(
    ctx: click.Context,
    url: str,
    max_distance: int | None,
    settings: ServiceSettings,
    options: dict[str, Any],
    listening: socket.socket,
    records_url: str | None = None,
) -> None:
    """Serve in this process, on the socket bound here (and the records index, if given)."""
    import uvicorn

    from ..records.incremental import RecordsIndex
    from ..service import create_app

    records = RecordsIndex.open(records_url) if records_url else None
    with (
        contextlib.closing(records) if records else contextlib.nullcontext(),
        open_index(url, requested_config(ctx, max_distance)) as opened,
        _stopped_by_sigterm(),
    ):
        app = create_app(opened, settings, records=records)
        served = f"{_described(opened)} on http://{options['host']}:{options['port']}"
        click.echo(f"neardup: serving {served} (API page: /docs)", err=True)
        server = uvicorn.Server(uvicorn.Config(app, **options))
        server.run(sockets=[listening])
        if not server.started:
            raise ConfigError("the server did not start; the lines above say why")


def _described(opened: Any) -> str:
    """The index for the start-up line, its store password masked."""
    return repr(opened).replace(opened.url, redacted(opened.url))


def _connection_cap(max_connections: int) -> int:
    """--max-connections within the open-file limit (raised to its hard limit first): each
    connection is a file descriptor, and the store and the process need some too."""
    from ..service.guard import raise_open_file_limit

    spare = raise_open_file_limit() - 64
    if max_connections > spare:
        click.echo(
            f"neardup: warning: --max-connections {max_connections} is over what the open-file "
            f"limit allows; using {max(spare, 1)} (raise `ulimit -n` for more)",
            err=True,
        )
        return max(spare, 1)
    return max_connections


class _Terminated(Exception):
    """SIGTERM arrived (after uvicorn's graceful shutdown, which re-raises it)."""


@contextlib.contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """Make SIGTERM a clean exit (status 0, the index closed): uvicorn finishes the requests in
    flight and stops the app, then re-raises the signal, which would otherwise kill the
    process before the store is closed."""

    def terminate(signum: int, frame: object) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def _bind(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, bound here rather than by uvicorn so that a port
    in use (or a host not on this machine) is one error line, and ``--port 0`` can announce
    the port the system chose."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
    except OSError as exc:
        listening.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is in use by another program; stop it, or pick another "
                "--port (--port 0 takes a free one)"
            ) from None
        if exc.errno == errno.EACCES:
            raise ConfigError(
                f"port {port} on {host} needs privileges this user lacks; use a --port above 1023"
            ) from None
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"cannot listen on {host} port {port}: {reason}; give a --host address of this machine "
            "(127.0.0.1, 0.0.0.0 for every interface)"
        ) from None
    listening.set_inheritable(True)  # --workers: the worker processes serve this socket
    return listening


def _read_token(path: str | None) -> str | None:
    """The bearer token in ``path``, refused unless a client can send it: one word of
    printable ASCII (a header is not UTF-8, so any other token would lock everyone out)."""
    if path is None:
        return None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"--token-file {path!r} is not UTF-8 text (byte {exc.start} is invalid); write the token "
            "as plain ASCII text"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read --token-file {path!r}: {exc.strerror or exc}") from None
    if not token or any(char.isspace() for char in token):
        raise ConfigError(f"--token-file {path!r} must hold one token, without spaces; write just the token")
    if not token_is_sendable(token):
        raise ConfigError(
            f"--token-file {path!r} holds a token with characters other than printable ASCII, which "
            "no client can send in an Authorization header (every request would get 401); use "
            "letters, digits and - . _ ~ + / = (e.g. from `openssl rand -hex 32`)"
        )
    return token


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

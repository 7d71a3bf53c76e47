"""Connection guards for ``neardup serve``: head size, header and body timeouts, connection caps.

uvicorn alone holds a client that sends half a request line forever, reads an endless header
into memory (httptools joins a header's pieces by copying, so the event loop stalls too), and
accepts connections until the process runs out of file descriptors, so a few hundred slow
clients (no token needed) lock everyone out. :class:`GuardedProtocol` is uvicorn's httptools
protocol with these guards:

- a request line and headers together hold at most ``max_header_bytes``; past that the client
  gets 431 and the connection closes, so no callback ever copies more than that much;
- a client must finish its request headers within ``header_timeout`` seconds of connecting
  (or of sending the first byte of a next request on a keep-alive connection), else it is
  disconnected;
- a request body must arrive at ``min_body_rate`` bytes per second on average, after a grace
  of ``header_timeout`` seconds, and whole within ``body_timeout`` seconds (time the server
  itself stops reading does not count);
- one client address holds at most ``max_client_connections`` connections: a new one closes
  that client's connection stalled longest, waiting for its headers or receiving its body;
- at most ``max_connections`` connections are open; a new one evicts the connection that has
  waited longest without finishing its headers (slow or idle clients lose first), else the
  oldest body in progress of the client with the most connections, and is refused with 503
  only when every open connection is a request whose body is complete.

uvicorn's own ``limit_concurrency`` answers 503 to *requests* once the connections are full, so
a slowloris holding every slot would still lock everyone out; eviction is what prevents that.
A request whose body has arrived is never evicted, so clients that send whole requests always
get in, even from the attacker's address.
"""

from __future__ import annotations

import asyncio
import json
import resource
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

if not hasattr(HttpToolsProtocol, "_start_asgi_task"):  # the hook deferring slow bodies
    raise ImportError("neardup serve needs uvicorn 0.45 or newer: pip install 'uvicorn[standard]>=0.45'")

from .settings import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CLIENT_CONNECTIONS,
    DEFAULT_MAX_HEADER_BYTES,
    ServiceSettings,
)

#: How often a request body's arrival rate is checked, in seconds (at most).
_BODY_CHECK_SECONDS = 1.0


@dataclass(frozen=True)
class Limits:
    header_timeout: float
    min_body_rate: int
    max_connections: int
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    max_client_connections: int = DEFAULT_MAX_CLIENT_CONNECTIONS
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    @staticmethod
    def of(settings: ServiceSettings) -> Limits:
        return Limits(
            settings.header_timeout,
            settings.min_body_rate,
            settings.max_connections,
            settings.max_header_bytes,
            settings.max_client_connections,
            settings.body_timeout,
            settings.max_body_bytes,
        )


def _error_answer(status: str, code: str, message: str, extra: str = "") -> bytes:
    """A whole HTTP/1.1 answer in the service's error shape, written by the guard itself
    (these are refused before any request reaches the app); the connection closes after it."""
    body = json.dumps(
        {"error": {"status": int(status.split()[0]), "code": code, "message": message, "details": []}}
    ).encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n"
    )
    return head.encode() + body


_REFUSAL = _error_answer(
    "503 Service Unavailable",
    "too_many_connections",
    "the server holds its maximum of open connections with requests in progress; retry shortly",
    "retry-after: 1\r\n",
)


class _Client:
    """The open connections of one client address, and which of them may be evicted: those
    waiting for request headers and those receiving a body, each oldest first."""

    __slots__ = ("bodies", "connections", "waiting")

    def __init__(self) -> None:
        self.connections: set[GuardedProtocol] = set()
        self.waiting: dict[GuardedProtocol, None] = {}
        self.bodies: dict[GuardedProtocol, None] = {}

    def stalled_longest(self) -> GuardedProtocol | None:
        """The connection whose wait for headers or body began first; a request whose body
        has arrived is never chosen."""
        first = [next(iter(queue)) for queue in (self.waiting, self.bodies) if queue]
        return min(first, key=lambda protocol: protocol._phase_since, default=None)


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol with the guards of this module (one instance a connection)."""

    limits: ClassVar[Limits] = Limits.of(ServiceSettings())
    #: Connections waiting for their request headers, oldest first (the eviction order).
    _waiting: ClassVar[dict[GuardedProtocol, None]] = {}
    #: The connections of each client address, by (server, address).
    _clients: ClassVar[dict[tuple[object, str], _Client]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_since = 0.0
        self._body_bytes = 0
        self._body_tick = 0.0
        self._body_active = 0.0
        self._refused = False
        #: Bytes of the request head being read; None while a body is read.
        self._head_bytes: int | None = 0
        #: When this connection began waiting for headers or receiving its body.
        self._phase_since = 0.0
        self._client: _Client | None = None
        self._client_key: tuple[object, str] = (None, "")
        #: A request whose app is not started yet: its body is still arriving.
        self._deferred: tuple[RequestResponseCycle, Any] | None = None

    # -- connection life ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = transport.get_extra_info("peername")
        self._client_key = (self.server_state, str(peer[0]) if isinstance(peer, tuple) and peer else "")
        client = GuardedProtocol._clients.get(self._client_key)
        if (
            client is not None
            and len(client.connections) >= self.limits.max_client_connections
            and not self._evict(client.stalled_longest())
        ) or (len(self.connections) >= self.limits.max_connections and not self._evict_one()):
            self._refused = True
            self.transport = transport  # connection_lost closes it
            transport.write(_REFUSAL)
            transport.close()
            return
        super().connection_made(transport)
        self._client = GuardedProtocol._clients.setdefault(self._client_key, _Client())
        self._client.connections.add(self)
        self._wait_for_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        if self._refused:
            return
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed the parser, counting each request's head against ``max_header_bytes``: the
        parser only sees what fits, so an endless header or request line costs that much."""
        if self._refused:
            return
        if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._wait_for_headers()  # the first bytes of a next request on a kept-alive connection
        if self._body_timer is not None:
            self._body_bytes += len(data)
        while self._head_bytes is not None and data:
            room = self.limits.max_header_bytes - self._head_bytes
            if room <= 0:
                self._head_too_large()
                return
            part, data = data[:room], data[room:]
            self._head_bytes += len(part)
            super().data_received(part)  # may finish the head, a body, and start the next head
            if self.transport.is_closing():
                return
        if data:
            super().data_received(data)

    def on_headers_complete(self) -> None:
        self._stop_waiting()
        super().on_headers_complete()
        self._head_bytes = None
        now = self.loop.time()
        self._body_since, self._body_bytes, self._body_tick, self._body_active = now, 0, now, 0.0
        self._phase_since = now
        if self._client is not None:
            self._client.bodies[self] = None
        self._body_timer = self.loop.call_later(self._body_check_delay(), self._check_body)

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        if self._deferred is not None and len(self._deferred[0].body) >= HIGH_WATER_LIMIT:
            self._start_deferred()  # a large body streams to the app (413 as soon as it is known)

    def on_message_complete(self) -> None:
        self._stop_body_watch()
        self._head_bytes = 0  # what follows is the next request's head
        super().on_message_complete()
        self._start_deferred()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        """Start the app once the request's body has arrived, or its first 64 KiB, or when the
        client waits for ``100 Continue`` or declares a body over ``max_body_bytes`` (the app
        answers 413 at once): until then a slow body costs a buffer and no task, and cutting
        it (or evicting it) costs the event loop next to nothing, however fast an attacker
        reconnects."""
        if (
            cycle.more_body
            and not cycle.waiting_for_100_continue
            and len(cycle.body) < HIGH_WATER_LIMIT
            and not self._declares_too_much(cycle)
        ):
            self._deferred = (cycle, app)
            return
        super()._start_asgi_task(cycle, app)

    def _declares_too_much(self, cycle: RequestResponseCycle) -> bool:
        for name, value in cycle.scope["headers"]:
            if name == b"content-length":
                digits = value.lstrip(b"0")
                return value.isdigit() and (
                    len(digits) > 18 or int(digits or b"0") > self.limits.max_body_bytes
                )
        return False

    def _start_deferred(self) -> None:
        if self._deferred is not None:
            cycle, app = self._deferred
            self._deferred = None
            super()._start_asgi_task(cycle, app)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            # Idle now: uvicorn's keep-alive timeout closes it; it may be evicted meanwhile.
            self._phase_since = self.loop.time()
            GuardedProtocol._waiting[self] = None
            if self._client is not None:
                self._client.waiting[self] = None

    # -- guards ---------------------------------------------------------------------------
    def _wait_for_headers(self) -> None:
        self._stop_waiting()
        self._phase_since = self.loop.time()
        GuardedProtocol._waiting[self] = None
        if self._client is not None:
            self._client.waiting[self] = None
        self._header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_too_slow)

    def _stop_waiting(self) -> None:
        GuardedProtocol._waiting.pop(self, None)
        if self._client is not None:
            self._client.waiting.pop(self, None)
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _stop_body_watch(self) -> None:
        if self._client is not None:
            self._client.bodies.pop(self, None)
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _forget(self) -> None:
        """Leave every registry (the connection is closing): no timer, no eviction queue, and
        a request whose body never arrived is dropped without starting the app."""
        self._deferred = None
        self._stop_waiting()
        self._stop_body_watch()
        client = self._client
        if client is not None:
            client.connections.discard(self)
            if not client.connections:
                GuardedProtocol._clients.pop(self._client_key, None)
            self._client = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        self._disconnect()

    def _head_too_large(self) -> None:
        """431 and close (or just close, if an earlier request's answer is still being
        written on this connection, so the two never interleave)."""
        self._forget()
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.abort()
            return
        limit = self.limits.max_header_bytes
        self.transport.write(
            _error_answer(
                "431 Request Header Fields Too Large",
                "header_too_large",
                f"the request line and headers are over this service's limit of {limit:,} bytes",
            )
        )
        self.transport.close()

    def _body_check_delay(self) -> float:
        return min(_BODY_CHECK_SECONDS, self.limits.header_timeout, self.limits.body_timeout)

    def _check_body(self) -> None:
        """Cut a body arriving slower than the floor, or not whole within ``body_timeout``;
        reading paused by the server is not the client's fault, so the rate window restarts
        then and the paused time does not count against the deadline."""
        self._body_timer = None
        now = self.loop.time()
        if self.flow is not None and self.flow.read_paused:
            self._body_since, self._body_bytes = now, 0
        else:
            self._body_active += now - self._body_tick
            allowed = self.limits.header_timeout + self._body_bytes / self.limits.min_body_rate
            if now - self._body_since > allowed or self._body_active > self.limits.body_timeout:
                self._disconnect()
                return
        self._body_tick = now
        self._body_timer = self.loop.call_later(self._body_check_delay(), self._check_body)

    def _disconnect(self) -> None:
        self._forget()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    def _evict(self, protocol: GuardedProtocol | None) -> bool:
        """Close ``protocol`` to make room; False if there is none."""
        if protocol is None:
            return False
        protocol._disconnect()
        self.connections.discard(protocol)
        return True

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest for its headers, else the oldest body
        in progress of the client with the most connections; False if none may go."""
        for protocol in GuardedProtocol._waiting:
            if protocol.server_state is self.server_state:
                return self._evict(protocol)
        clients = [
            client
            for (server, _), client in GuardedProtocol._clients.items()
            if server is self.server_state and client.bodies
        ]
        heaviest = max(clients, key=lambda client: len(client.connections), default=None)
        return heaviest is not None and self._evict(next(iter(heaviest.bodies)))


def configure(settings: ServiceSettings) -> None:
    """Set the guards' limits for the connections this process accepts from now on."""
    GuardedProtocol.limits = Limits.of(settings)


def raise_open_file_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (connections are file
    descriptors); the soft limit in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft

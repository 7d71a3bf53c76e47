"""Connection guards for ``neardup serve``: header and body timeouts, and a connection cap.

uvicorn alone holds a client that sends half a request line forever, and accepts connections
until the process runs out of file descriptors, so ~1,500 slow clients (no token needed) lock
everyone out. :class:`GuardedProtocol` is uvicorn's httptools protocol with three guards:

- a client must finish its request headers within ``header_timeout`` seconds of connecting
  (or of sending the first byte of a next request on a keep-alive connection), else it is
  disconnected;
- a request body must arrive at ``min_body_rate`` bytes per second on average, after a grace
  of ``header_timeout`` seconds (time the server itself stops reading does not count);
- at most ``max_connections`` connections are open; a new one evicts the connection that has
  waited longest without finishing its headers (slow or idle clients lose first), and is
  refused with 503 only when every open connection is a request in progress.

uvicorn's own ``limit_concurrency`` answers 503 to *requests* once the connections are full, so
a slowloris holding every slot would still lock everyone out; eviction is what prevents that.
"""

from __future__ import annotations

import asyncio
import json
import resource
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .settings import ServiceSettings

#: How often a request body's arrival rate is checked, in seconds (at most).
_BODY_CHECK_SECONDS = 1.0


@dataclass(frozen=True)
class Limits:
    header_timeout: float
    min_body_rate: int
    max_connections: int

    @staticmethod
    def of(settings: ServiceSettings) -> Limits:
        return Limits(settings.header_timeout, settings.min_body_rate, settings.max_connections)


def _refusal() -> bytes:
    body = json.dumps(
        {
            "error": {
                "status": 503,
                "code": "too_many_connections",
                "message": "the server holds its maximum of open connections with requests in "
                "progress; retry shortly",
                "details": [],
            }
        }
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\nretry-after: 1\r\n\r\n"
    )
    return head.encode() + body


_REFUSAL = _refusal()


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol with the guards of this module (one instance a connection)."""

    limits: ClassVar[Limits] = Limits.of(ServiceSettings())
    #: Connections waiting for their request headers, oldest first (the eviction order).
    _waiting: ClassVar[dict[GuardedProtocol, None]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_since = 0.0
        self._body_bytes = 0
        self._refused = False

    # -- connection life ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.max_connections and not self._evict_one():
            self._refused = True
            self.transport = transport  # connection_lost closes it
            transport.write(_REFUSAL)
            transport.close()
            return
        super().connection_made(transport)
        self._wait_for_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        self._stop_body_watch()
        if self._refused:
            return
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._wait_for_headers()  # the first bytes of a next request on a kept-alive connection
        if self._body_timer is not None:
            self._body_bytes += len(data)
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._stop_waiting()
        super().on_headers_complete()
        self._body_since, self._body_bytes = self.loop.time(), 0
        self._body_timer = self.loop.call_later(self._body_check_delay(), self._check_body)

    def on_message_complete(self) -> None:
        self._stop_body_watch()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            # Idle now: uvicorn's keep-alive timeout closes it; it may be evicted meanwhile.
            GuardedProtocol._waiting[self] = None

    # -- guards ---------------------------------------------------------------------------
    def _wait_for_headers(self) -> None:
        self._stop_waiting()
        GuardedProtocol._waiting[self] = None
        self._header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_too_slow)

    def _stop_waiting(self) -> None:
        GuardedProtocol._waiting.pop(self, None)
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _stop_body_watch(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        self._disconnect()

    def _body_check_delay(self) -> float:
        return min(_BODY_CHECK_SECONDS, self.limits.header_timeout)

    def _check_body(self) -> None:
        """Cut a body arriving slower than the floor; reading paused by the server is not the
        client's fault, so the window restarts then."""
        self._body_timer = None
        now = self.loop.time()
        if self.flow is not None and self.flow.read_paused:
            self._body_since, self._body_bytes = now, 0
        else:
            allowed = self.limits.header_timeout + self._body_bytes / self.limits.min_body_rate
            if now - self._body_since > allowed:
                self._disconnect()
                return
        self._body_timer = self.loop.call_later(self._body_check_delay(), self._check_body)

    def _disconnect(self) -> None:
        self._stop_waiting()
        self._stop_body_watch()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest for its headers; False if none waits."""
        for protocol in GuardedProtocol._waiting:
            if protocol.server_state is self.server_state:
                protocol._disconnect()
                self.connections.discard(protocol)
                return True
        return False


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

"""The service's settings: one frozen value passed to :func:`create_app`, never a global."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_DOCUMENTS = 1000
DEFAULT_MAX_TEXT_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_BATCH = 1000
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_MIN_BODY_RATE = 1024
DEFAULT_MAX_CONNECTIONS = 2048
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
DEFAULT_MAX_CLIENT_CONNECTIONS = 256
DEFAULT_BODY_TIMEOUT = 60.0
DEFAULT_MAX_MATCHES = 100


def token_is_sendable(token: str) -> bool:
    """Can a client send ``token`` in an ``Authorization`` header as the server reads it?
    Only printable ASCII: servers read header bytes as Latin-1, so a UTF-8 token never
    compares equal, and every request would get 401."""
    return all("!" <= char <= "~" for char in token)


@dataclass(frozen=True)
class ServiceSettings:
    """How the service guards itself.

    ``token``: when set, every ``/v1`` request needs ``Authorization: Bearer <token>``.
    ``max_body_bytes``: larger request bodies get 413 before they are read whole.
    ``max_documents``: documents one request may carry (413 above, so clients split).
    ``max_text_bytes``: UTF-8 size of one document's text (422 above).
    ``max_batch``: documents the store receives in one call when concurrent requests are
    served together (bigger batches mean fewer commits, longer waits for the first request).
    ``header_timeout``: seconds a client has to send its request headers (slow clients are
    disconnected), also the grace before ``min_body_rate`` (bytes/s) applies to a body.
    ``max_connections``: open connections per server process (see :mod:`.guard`).
    ``max_header_bytes``: a request's line and headers together (431 above), so an endless
    header costs the server this much, not its memory.
    ``max_client_connections``: open connections of one client address per process; one host
    cannot take every slot.
    ``body_timeout``: seconds a whole request body has to arrive, at any rate.
    ``max_matches``: matches listed per document (the nearest; the answer says when it cut),
    so stored near-identical documents by the thousand cannot make an answer, and the work
    behind it, grow without bound. A request may ask for fewer.
    """

    token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_documents: int = DEFAULT_MAX_DOCUMENTS
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    max_batch: int = DEFAULT_MAX_BATCH
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    min_body_rate: int = DEFAULT_MIN_BODY_RATE
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    max_client_connections: int = DEFAULT_MAX_CLIENT_CONNECTIONS
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_matches: int = DEFAULT_MAX_MATCHES

    def __post_init__(self) -> None:
        integers = ("max_body_bytes", "max_documents", "max_text_bytes", "max_batch", "max_matches")
        guards = ("min_body_rate", "max_connections", "max_header_bytes", "max_client_connections")
        for name in (*integers, *guards):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer; got {value!r}")
        for name in ("header_timeout", "body_timeout"):
            timeout = getattr(self, name)
            if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < 1e6:
                raise ConfigError(f"{name} must be a positive number of seconds; got {timeout!r}")
        if self.token is not None and (not self.token or self.token != self.token.strip()):
            raise ConfigError("the bearer token must be non-empty text without surrounding whitespace")
        if self.token is not None and not token_is_sendable(self.token):
            raise ConfigError(
                "the bearer token must be printable ASCII (letters, digits, - . _ ~ + / = and "
                "the like): a client's header is not UTF-8, so any other token never matches"
            )

"""A writer lock kept as a renewable lease in a server (a Redis key, a MongoDB document).

Servers without a transaction-scoped lock (PostgreSQL's advisory locks, MariaDB's GET_LOCK)
need one that cannot outlive a crashed holder: the lease is taken with a random token and an
expiry, renewed by a thread every third of its lifetime while held, and given back only by
its holder. A crashed writer's lease runs out after ``ttl_ms``. Holds nest within the holding
thread; the backend supplies the three server operations.

A lease whose server went away while it was held (a restart) may come back with the server
(Redis keeps the key in its AOF with its expiry): its give-back failed, so it is given back
before the next attempt to take it, once the server answers again, instead of locking every
writer out, this process included, until it expires.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Iterator

from ..errors import StorageBusyError

LEASE_TTL_MS = 30_000
LEASE_WAIT_S = 60.0
#: Longest pause between attempts to take a held lease. Batches hold it for milliseconds, so a
#: longer pause leaves it idle while writers sleep (docs/service.md measures two `neardup
#: serve` workers on one Redis); an attempt is one SET NX.
MAX_PAUSE_S = 0.005


class Lease:
    """``take(token) -> bool`` claims the lease if free (or expired), ``renew(token) -> bool``
    extends it if still ours, ``give_back(token)`` releases it if still ours."""

    def __init__(
        self,
        where: str,
        *,
        take: Callable[[str], bool],
        renew: Callable[[str], bool],
        give_back: Callable[[str], None],
        ttl_ms: int = LEASE_TTL_MS,
        wait_s: float = LEASE_WAIT_S,
    ) -> None:
        self.where = where
        self._take, self._renew, self._give_back = take, renew, give_back
        self.ttl_ms = ttl_ms
        self.wait_s = wait_s
        self._token = ""
        self._owner: int | None = None
        self._depth = 0
        self._released = threading.Event()
        self._renewer: threading.Thread | None = None
        #: Tokens whose give-back failed (the server was unreachable), given back later.
        self._unreturned: list[str] = []

    @property
    def token(self) -> str:
        """The token the calling thread holds, or '' (writes pass it to the server to refuse
        themselves once the lease has expired: fencing)."""
        return self._token if self._owner == threading.get_ident() else ""

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lease for the block (the caller serialises its own threads)."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._acquire()
        self._depth = 1
        try:
            yield
        finally:
            self._depth = 0
            self._release()

    def _acquire(self) -> None:
        while self._unreturned:  # raises, like the take below, while the server is unreachable
            self._give_back(self._unreturned[-1])
            self._unreturned.pop()
        token = secrets.token_hex(16)
        deadline = time.monotonic() + self.wait_s
        pause = 0.001
        while not self._take(token):
            if time.monotonic() > deadline:
                raise StorageBusyError(
                    f"could not take the writer lock of {self.where} within {self.wait_s:.0f} s: another "
                    f"writer holds it (a crashed writer's lock expires {self.ttl_ms // 1000} s after it "
                    "stopped renewing it)"
                )
            time.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_S)
        self._token, self._owner = token, threading.get_ident()
        self._released = threading.Event()
        self._renewer = threading.Thread(
            target=self._keep, args=(token, self._released), name="neardup-lease", daemon=True
        )
        self._renewer.start()

    def _keep(self, token: str, released: threading.Event) -> None:
        """Renew every third of the lifetime until released, so a long batch keeps the lease."""
        while not released.wait(self.ttl_ms / 3000):
            try:
                if not self._renew(token):
                    return  # lost: the next fenced write under it is refused by the server
            except Exception:
                return

    def _release(self) -> None:
        self._released.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        token, self._token, self._owner = self._token, "", None
        try:
            self._give_back(token)
        except Exception:
            # The block's outcome stands (a write that committed is not failed for this); the
            # lease is given back before the next take, or expires.
            self._unreturned.append(token)

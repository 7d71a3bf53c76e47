"""Index storage backends, chosen by URL.

=================================  ===========================================  ===========
URL                                backend                                      extra
=================================  ===========================================  ===========
``memory://``                      numpy arrays in this process                 (core)
``sqlite:///path.db``, ``path.db`` SQLite file, WAL (the embedded default)      (core)
``postgresql://user@host/db``      PostgreSQL (psycopg 3)                       ``stores``
``mysql://user@host/db``           MariaDB / MySQL (PyMySQL)                    ``stores``
``redis://host:port/0``            Redis, one hash per (table, block key)       ``stores``
``mongodb://host:port/db``         MongoDB                                      ``stores``
=================================  ===========================================  ===========

Query options: ``?table=NAME`` (SQL table prefix, Mongo collection prefix), ``?prefix=NAME``
(Redis key prefix), ``?layout=records|buckets`` (MongoDB). A backend's module, and its driver,
is imported only when its URL is opened; a missing driver raises
:class:`~neardup.errors.MissingDependencyError` with the pip line.
"""

from __future__ import annotations

import importlib
from urllib.parse import parse_qsl

from ..errors import ConfigError, InputError, NeardupError
from .base import Candidates, RecordBatch, Storage, StoredRecord
from .urls import parse_store_url, redacted, scrubbed

#: URL scheme → backend module (imported lazily).
BACKENDS = {
    "memory": "memory",
    "sqlite": "sqlite",
    "postgresql": "postgres",
    "postgres": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "redis": "redis",
    "rediss": "redis",
    "mongodb": "mongo",
    "mongodb+srv": "mongo",
}
DEFAULT_URL = "sqlite:///neardup.db"


def open_storage(url: str) -> Storage:
    """The store a URL names (not yet attached to an index; see ``SimhashIndex.open``).
    A bare path (no ``scheme://``) is an SQLite file."""
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"a store URL must be a non-empty string; got {url!r} (e.g. {DEFAULT_URL})")
    if "://" not in url:
        scheme = url.partition(":")[0].lower()
        if scheme in BACKENDS and scheme != "sqlite":  # "postgresql:/h/db" is no file name
            raise ConfigError(
                f"store URL {scheme}:... lacks the '//' after '{scheme}:'; write {scheme}://HOST/..."
            )
        url = f"sqlite:///{url}"
    parts = parse_store_url(url)
    scheme = parts.scheme.lower().split("+")[0] if parts.scheme != "mongodb+srv" else parts.scheme
    module_name = BACKENDS.get(scheme)
    if module_name is None:
        raise ConfigError(
            f"unknown store URL scheme {parts.scheme!r} in {redacted(url)!r}; use one of "
            + ", ".join(sorted({f"{name}://" for name in BACKENDS}))
        )
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    module = importlib.import_module(f"{__name__}.{module_name}")
    try:
        storage: Storage = module.from_url(url, parts, options)
    except NeardupError as exc:  # some drivers quote the password they could not use
        # (and some end their message with a second line of advice: one line is shown)
        exc.args = tuple(
            " ".join(scrubbed(arg, url).split()) if isinstance(arg, str) else arg for arg in exc.args
        )
        if isinstance(exc, InputError):
            exc.reason = " ".join(scrubbed(exc.reason, url).split())
        raise
    return storage


def check_options(options: dict[str, str], known: set[str], url: str) -> None:
    """Refuse URL options a backend does not know (a typo must not silently do nothing)."""
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(
            f"unknown option(s) {', '.join(unknown)} in store URL {redacted(url)!r}; "
            f"this backend knows: {', '.join(sorted(known)) or 'none'}"
        )


__all__ = ["BACKENDS", "DEFAULT_URL", "Candidates", "RecordBatch", "Storage", "StoredRecord", "open_storage"]

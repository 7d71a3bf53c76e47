"""Connecting to MongoDB (pymongo) for :mod:`.mongo`: the client's timeouts and journaled writes,
the collection name check, and what the server's errors mean."""

from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlencode, urlunsplit

from ..errors import (
    ConfigError,
    MissingDependencyError,
    StorageUnavailableError,
)
from . import check_options
from .urls import redacted

if TYPE_CHECKING:
    from pymongo import MongoClient

DEFAULT_COLLECTION = "neardup"
_NAME_PATTERN = re.compile(r"[A-Za-z0-9_\-]{1,64}")
CONNECT_TIMEOUT_MS = 5_000
SOCKET_TIMEOUT_MS = 120_000
#: Server answers that mean "no multi-document transactions here" (standalone mongod).
_NO_TRANSACTIONS = (20, 263)


def check_collection(name: str) -> str:
    if not _NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"MongoDB collection name {name!r} must be 1-64 letters, digits, '_' or '-'")
    return name


def first_line(exc: BaseException) -> str:
    return str(exc).split(", full error:")[0].strip()


def no_transactions(exc: Any) -> bool:
    message = str(exc)
    return (
        exc.code in _NO_TRANSACTIONS or "Transaction numbers" in message or "transactions" in message.lower()
    )


def duplicate_key(exc: Any) -> bool:
    if getattr(exc, "code", None) == 11000:
        return True
    details = getattr(exc, "details", None) or {}
    return any(error.get("code") == 11000 for error in details.get("writeErrors", ()))


def connect(
    url: str, parts: SplitResult, options: dict[str, str]
) -> tuple[MongoClient[dict[str, Any]], str, str, str | None, str]:
    """A connected client for ``url`` and the database, collection, layout and shown URL it names."""
    try:
        import pymongo
        from pymongo.common import URI_OPTIONS_VALIDATOR_MAP
    except ImportError as exc:
        raise MissingDependencyError("pymongo", "stores", "a MongoDB store") from exc
    driver_options = {name for name in options if name.lower() in URI_OPTIONS_VALIDATOR_MAP}
    check_options(options, {"collection", "layout", *driver_options}, url)
    where = redacted(parts)
    database = parts.path.lstrip("/") or "neardup"
    collection = check_collection(options.get("collection", DEFAULT_COLLECTION))
    layout = options.get("layout")
    passed = {name: value for name, value in options.items() if name in driver_options}
    lowered = {name.lower() for name in passed}
    settings: dict[str, Any] = {}
    for name, value in (
        ("serverSelectionTimeoutMS", CONNECT_TIMEOUT_MS),
        ("connectTimeoutMS", CONNECT_TIMEOUT_MS),
        ("socketTimeoutMS", SOCKET_TIMEOUT_MS),
        # An add is acknowledged once it is in the server's journal, so a server crash
        # cannot lose it (mongod's default acknowledges before the next journal flush).
        ("journal", True),
    ):
        if name.lower() not in lowered and not (name == "journal" and "w" in lowered):
            settings[name] = value
    client_url = urlunsplit((parts.scheme, parts.netloc, "/" + database, urlencode(passed), ""))
    try:
        with warnings.catch_warnings(record=True) as warned:
            # pymongo only warns of an option value it cannot read and drops it; a store
            # URL's option must do what it says or be refused.
            warnings.simplefilter("always", UserWarning)
            client: MongoClient[dict[str, Any]] = pymongo.MongoClient(client_url, **settings)
    except (pymongo.errors.ConfigurationError, ValueError, TypeError) as exc:
        raise ConfigError(f"bad MongoDB URL {where}: {exc}") from exc
    bad = [str(warning.message) for warning in warned if issubclass(warning.category, UserWarning)]
    if bad:
        client.close()
        raise ConfigError(f"bad MongoDB URL {where}: {'; '.join(bad)}; fix the option or leave it out")
    try:
        client.admin.command("ping")
    except pymongo.errors.ConfigurationError as exc:
        client.close()
        raise ConfigError(f"bad MongoDB URL {where}: {exc}") from exc
    except pymongo.errors.OperationFailure as exc:
        client.close()
        raise StorageUnavailableError(
            f"MongoDB at {where} refused the connection ({first_line(exc)}); check the user and password"
        ) from exc
    except pymongo.errors.PyMongoError as exc:
        client.close()
        raise StorageUnavailableError(
            f"cannot connect to MongoDB at {where} ({first_line(exc)}); is the server running and the "
            "URL right?"
        ) from exc
    return client, database, collection, layout, where


def ping(client: MongoClient[dict[str, Any]], where: str, timeout_s: float) -> str | None:
    """None if the server answers a ping within ``timeout_s`` (pymongo's client-side timeout,
    which bounds server selection too: the client's own waits 5 s), else why not in one line.
    pymongo reconnects by itself; this only asks whether it can now."""
    import pymongo

    try:
        with pymongo.timeout(timeout_s):
            client.admin.command("ping")
    except pymongo.errors.PyMongoError as exc:
        return f"MongoDB at {where}: {first_line(exc)}"
    return None

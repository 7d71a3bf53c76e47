"""The neardup error tree.

Every error neardup raises on purpose is a :class:`NeardupError`, so callers can catch one
base class; each subclass also derives from the matching built-in (``ValueError``,
``KeyError``, ``ImportError``) so generic handlers keep working. Messages name the value at
fault and the fix, because the CLI prints them as they are.
"""

from __future__ import annotations


class NeardupError(Exception):
    """Base class of every error raised by neardup."""

    def __str__(self) -> str:
        # The message as written: KeyError's own __str__ is the repr, which would wrap the
        # message of KeyExistsError/KeyNotFoundError in stray quotes wherever it is shown.
        return BaseException.__str__(self)


class ConfigError(NeardupError, ValueError):
    """A setting is invalid (unknown name, out of range, inconsistent with another)."""


class IndexConfigMismatchError(ConfigError):
    """An index was opened with a configuration that differs from the stored one."""


class KeyExistsError(NeardupError, KeyError):
    """A key is already stored and the operation would overwrite it."""


class KeyNotFoundError(NeardupError, KeyError):
    """A key is not stored."""


class StorageError(NeardupError):
    """A storage backend failed."""


class StorageUnavailableError(StorageError):
    """A storage backend cannot be reached (server down, wrong URL)."""


class IndexNotFoundError(StorageError):
    """The store holds no neardup index (opened with ``create=False``)."""


class StorageBusyError(StorageUnavailableError):
    """Another process held the store's lock longer than the busy timeout."""


class StorageFullError(StorageError):
    """The disk (or size limit) of the store is full; nothing of the failed batch was written."""


class StorageDamagedError(StorageError):
    """The store's file or meta is damaged (corrupt pages, missing meta keys)."""


class StorageReadOnlyError(StorageError):
    """A write was asked of a store that can only be read (read-only file or file system)."""


class ForeignStoreError(StorageError):
    """The store is another application's database; neardup adds no tables to it unasked."""


class MissingDependencyError(NeardupError, ImportError):
    """An optional dependency is not installed; the message gives the pip line."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the Python package {package!r}, which is not installed; "
            f"install it with: pip install 'neardup[{extra}]'"
        )


class InputError(NeardupError, ValueError):
    """A record of the input is unusable; ``location`` names it (file:line or record key)."""

    def __init__(self, message: str, location: str | None = None) -> None:
        self.location = location
        self.reason = message
        super().__init__(f"{location}: {message}" if location else message)

"""The neardup error tree.

Every error neardup raises on purpose is a :class:`NeardupError`, so callers can catch one
base class; each subclass also derives from the matching built-in (``ValueError``,
``KeyError``, ``ImportError``) so generic handlers keep working. Messages name the value at
fault and the fix, because the CLI prints them as they are. Library messages name the
parameter at fault (``max_distance``), never a command-line flag. The tree (built-in bases in
parentheses), kept in step with the classes by ``tests/test_errors_tree.py``::

    NeardupError                        base class; never raised bare by a library call
    ├── ConfigError (ValueError)        a setting is invalid, unknown or inconsistent
    │   └── IndexConfigMismatchError    an index opened with settings other than its stored ones
    ├── InputError (ValueError)         a record or argument of the input is unusable
    ├── KeyExistsError (KeyError)       a key is stored already and would be overwritten
    ├── KeyNotFoundError (KeyError)     a key to remove (or a required key) is not stored
    ├── MissingDependencyError (ImportError)  an optional package is missing; gives the pip line
    ├── OutputError                     an output file cannot be opened or written
    └── StorageError                    a store failed (base class; never raised bare)
        ├── ForeignStoreError           the store is another application's database
        ├── IndexNotFoundError          the store holds no index (opened with create=False)
        ├── StorageBackendError         the server reported an error while reading or writing
        ├── StorageConflictError        another writer changed the store meanwhile; retry
        ├── StorageDamagedError         the store's records or meta do not parse
        ├── StorageFullError            the disk or a size limit is full; nothing was written
        ├── StorageReadOnlyError        a write was asked of a read-only store
        ├── StorageUnsupportedError     the store cannot do what was asked (e.g. drop)
        └── StorageUnavailableError     the store cannot be reached (server down, wrong URL)
            └── StorageBusyError        another process held the writer lock too long

See docs/errors.md for the same tree with what to do about each.
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


class StorageBackendError(StorageError):
    """The store's server (or driver) reported an error while neardup read or wrote."""


class StorageConflictError(StorageError):
    """Another writer changed the store while this call ran (created the same index, changed
    the batch's records, outlived the writer lock); nothing was written: retry."""


class StorageUnsupportedError(StorageError):
    """The store cannot do what was asked (dropping a store neardup does not own)."""


class OutputError(NeardupError):
    """An output file cannot be opened or written (missing directory, no permission, full
    disk); the message names the file."""


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

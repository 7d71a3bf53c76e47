"""Writing outputs without ever losing data: JSON Lines writers and the atomic file they use.

Every output file is written to a temporary file beside it (``.NAME.HOST-PID.XXXXXXXX.tmp``
in the same directory, so the rename cannot cross file systems) and renamed onto the target
with :func:`os.replace` only once all of it is written: a run that fails half-way (bad
record, full disk, Ctrl-C) leaves the previous file untouched and no partial one. ``-`` is
stdout and streams as before; so does a target that is not a regular file (``/dev/null``, a
FIFO).

A run killed outright (SIGKILL, a power cut) cannot remove its temporary file; the next run
writing the same output does (:func:`remove_stale`): the temporaries of that output, in
exactly that form, made on this host (HOST is a hash of the host name, so a directory shared
over the network is left to each host) by a process that no longer exists. Nothing else is
touched: not another output's, not a live writer's, not a file merely named alike.

An output that is, or links to, one of the run's inputs would replace that input, so
:func:`check_outputs_distinct` refuses it before anything is opened, comparing files as the
file system does (``st_dev``/``st_ino``: symlinks and hard links) and, for a target that does
not exist yet, by resolved path. Two outputs that are one file (the same path, a link to it,
or ``-`` twice) are refused the same way: the second rename would silently replace the first
output, and the run would still report success.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigError, OutputError

PathLike = str | Path
#: (what the user calls it, e.g. ``--pairs`` or ``INPUT``; the path) pairs.
Named = Mapping[str, PathLike | None] | Iterable[tuple[str, PathLike | None]]


class OutputIsInputError(ConfigError):
    """An output file is (or links to) an input file; ``option`` names the output's flag."""

    def __init__(self, message: str, option: str) -> None:
        self.option = option
        super().__init__(message)


class OutputGivenTwiceError(OutputIsInputError):
    """Two outputs are one file (or both stdout); ``option`` names the second one's flag."""


def check_outputs_distinct(inputs: Named, outputs: Named) -> None:
    """Refuse an output that is, or links to, an input, and two outputs that are one file,
    naming both and the fix. Call it before opening anything: afterwards the input may
    already be gone."""
    input_items = _items(inputs)
    output_items = _items(outputs)
    for index, (option, target) in enumerate(output_items):
        for earlier, other in output_items[:index]:
            how = _same_output(other, target)
            if how is not None:
                raise OutputGivenTwiceError(
                    f"{earlier} and {option} both write to {how}; give them different files", option
                )
        for role, source in input_items:
            how = _overlap(source, target)
            if how:
                output = "- (stdout)" if target == "-" else target
                read = "- (stdin)" if source == "-" else source
                raise OutputIsInputError(
                    f"{option} {output} {how} the input {read} ({role}); writing it would replace "
                    f"that input: write the output to another file",
                    option,
                )


def _items(named: Named) -> list[tuple[str, str]]:
    pairs = named.items() if isinstance(named, Mapping) else named
    return [(label, str(path)) for label, path in pairs if path is not None and str(path) != ""]


def _overlap(source: str, target: str) -> str | None:
    """How writing ``target`` would overwrite ``source`` ("is", "is the same file as"), or None."""
    if source == "-" and target == "-":
        return None
    if "-" not in (source, target) and os.path.realpath(source) == os.path.realpath(target):
        return "is" if os.path.abspath(source) == os.path.abspath(target) else "is the same file as"
    source_id = _identity(source, "stdin")
    if source_id is not None and source_id == _identity(target, "stdout"):
        return "is the same file as"  # a hard link, or stdin/stdout redirected to the input
    return None


def _same_output(first: str, second: str) -> str | None:
    """Where two outputs both write (for the message), or None when they are two files."""
    if first == "-" and second == "-":
        return "stdout ('-')"
    if "-" not in (first, second) and os.path.realpath(first) == os.path.realpath(second):
        return first if first == second else f"{first} ({second} is the same file)"
    first_id = _identity(first, "stdout")
    if first_id is not None and first_id == _identity(second, "stdout"):
        shown = "- (stdout)" if first == "-" else first
        return f"{shown} ({'- (stdout)' if second == '-' else second} is the same file)"
    return None


def _identity(path: str, stream: str) -> tuple[int, int] | None:
    """(device, inode) of a regular file, following links; ``-`` is ``stream`` (stdin or
    stdout) when it is a redirected file (``< docs.jsonl``). None for anything else."""
    try:
        if path == "-":
            status = os.fstat((sys.stdin if stream == "stdin" else sys.stdout).fileno())
        else:
            status = os.stat(path)
    except (OSError, ValueError, AttributeError):  # pytest/CliRunner streams have no fileno
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


# -- the atomic output file --------------------------------------------------------------------


@contextmanager
def atomic_output(target: PathLike, *, inputs: Named = ()) -> Iterator[IO[bytes]]:
    """A binary stream whose data replaces ``target`` only when the block ends without error;
    ``-`` is stdout (not ours to close). ``inputs`` are checked first (see above)."""
    check_outputs_distinct(inputs, [("output", target)])
    if str(target) == "-":
        yield sys.stdout.buffer
        return
    path = os.path.realpath(target)  # a symlinked output is written where it points
    existing = _stat(path)
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        with _plain(target, path) as stream:  # /dev/null, a FIFO: nothing to replace
            yield stream
        return
    temporary, stream = _temporary(target, path, existing)
    try:
        yield stream
        write_bytes(stream, b"", target)
        with suppress(OSError):  # not every file system can sync (e.g. some FUSE mounts)
            os.fsync(stream.fileno())
        stream.close()
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            stream.close()
        with suppress(OSError):
            os.unlink(temporary)
        raise


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


#: This host in temporary names: the first 8 hex digits of a hash of its name.
_HOST = hashlib.blake2b(socket.gethostname().encode("utf-8", "replace"), digest_size=4).hexdigest()


def temporary_name(stem: str, suffix: str) -> str:
    """A new name ``STEM.HOST-PID.XXXXXXXX.SUFFIX`` for a file or folder this process writes
    and removes when it ends: the form :func:`remove_stale` recognises once the process is
    gone."""
    return f"{stem}.{_HOST}-{os.getpid()}.{secrets.token_hex(4)}{suffix}"


def remove_stale(directory: str, stem: str, suffix: str) -> None:
    """Remove the files and folders named by :func:`temporary_name` with ``stem`` and
    ``suffix`` that killed runs on this host left in ``directory`` (module docstring): a PID
    that no longer exists cannot be writing. A PID reused since is taken for alive and its
    file kept, the safe side."""
    pattern = re.compile(rf"{re.escape(stem)}\.{_HOST}-([0-9]{{1,10}})\.[0-9a-f]{{8}}{re.escape(suffix)}")
    try:
        entries = os.listdir(directory or ".")
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry)
        if match is not None and not _alive(int(match.group(1))):
            path = os.path.join(directory, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with suppress(OSError):
                    os.unlink(path)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # PermissionError: another user's live process
        return True
    return True


def _temporary(target: PathLike, path: str, existing: os.stat_result | None) -> tuple[str, IO[bytes]]:
    """A new file beside ``path`` (the umask applies, as to a plain open; an existing target's
    permissions are kept), after removing what killed runs left there."""
    directory, name = os.path.split(path)
    remove_stale(directory, f".{name}", ".tmp")
    while True:
        temporary = os.path.join(directory, temporary_name(f".{name}", ".tmp"))
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            raise OutputError(f"cannot open output file {target}: {exc.strerror or exc}") from exc
        break
    if existing is not None:
        with suppress(OSError):
            os.chmod(temporary, stat.S_IMODE(existing.st_mode))
    return temporary, os.fdopen(descriptor, "wb")


@contextmanager
def _plain(target: PathLike, path: str) -> Iterator[IO[bytes]]:
    try:
        stream = open(path, "wb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise OutputError(f"cannot open output file {target}: {exc.strerror or exc}") from exc
    try:
        yield stream
        write_bytes(stream, b"", target)
    finally:
        with suppress(OSError):
            stream.close()


def write_bytes(stream: IO[bytes], data: bytes, target: PathLike) -> None:
    """Write (or, for no data, flush); a full disk becomes a one-line error, while a closed
    pipe (``| head``) stays a BrokenPipeError so a CLI can stop quietly."""
    try:
        if data:
            stream.write(data)
        else:
            stream.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        name = "<stdout>" if str(target) == "-" else str(target)
        raise OutputError(f"cannot write {name}: {exc.strerror or exc}") from exc


def write_text(target: PathLike, text: str, *, inputs: Named = ()) -> None:
    """Write a whole UTF-8 text file atomically (reports, IDF tables)."""
    with atomic_output(target, inputs=inputs) as stream:
        write_bytes(stream, text.encode("utf-8"), target)


# -- JSON Lines --------------------------------------------------------------------------------


class JsonlWriter:
    """Writes one JSON line per call, for outputs fed from several places side by side."""

    def __init__(self, stream: IO[bytes], target: PathLike) -> None:
        self.stream = stream
        self.target = target
        self.count = 0

    def write(self, row: Mapping[str, Any]) -> None:
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
        write_bytes(self.stream, line.encode("utf-8") + b"\n", self.target)
        self.count += 1


@contextmanager
def jsonl_writer(target: PathLike, *, inputs: Named = ()) -> Iterator[JsonlWriter]:
    """A :class:`JsonlWriter` on ``target`` (``-`` is stdout), written atomically."""
    with atomic_output(target, inputs=inputs) as stream:
        writer = JsonlWriter(stream, target)
        yield writer
        write_bytes(stream, b"", target)


def write_jsonl(target: PathLike, rows: Iterable[Mapping[str, Any]], *, inputs: Named = ()) -> int:
    """Write rows as compact UTF-8 JSON lines (``-`` for stdout); returns the row count.

    Rows are written as they come, so a generator of rows streams without being held in
    memory; non-ASCII text stays readable (``ensure_ascii=False``).
    """
    with jsonl_writer(target, inputs=inputs) as writer:
        for row in rows:
            writer.write(row)
    return writer.count

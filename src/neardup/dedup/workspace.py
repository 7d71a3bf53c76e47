"""Where a batch run puts what does not fit its memory budget.

A run's large parts (band keys, check bins, texts, the short texts' shingle sets, candidate
pairs) each hold their share of the ``--memory`` budget in memory and move the rest to files
in one private directory under
``--tmp-dir``, made when the first part spills and removed when the run ends, however it ends
(success, an error, Ctrl-C). Below the budget nothing is written: the parts stay as fast as
they are in memory. Whether a part spills never changes what it gives back, so the output
does not depend on the budget.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import tempfile
from contextlib import suppress
from pathlib import Path

from ..errors import ConfigError, OutputError
from ..io.output import remove_stale, temporary_name

#: The default budget: a laptop's share for one run.
DEFAULT_MEMORY = 4 << 30
#: Below this a budget cannot hold one batch's working set; refused as a typo.
MIN_MEMORY = 1 << 20
#: The spill directory's name, ``neardup.HOST-PID.XXXXXXXX.spill``: a run killed outright
#: (SIGKILL) cannot remove it, so the next run that spills into the same place removes those
#: of processes gone (:func:`~neardup.io.output.remove_stale`).
SPILL_STEM, SPILL_SUFFIX = "neardup", ".spill"
#: The share of the budget each part holds in memory before it spills.
#: errno values of a full disk or quota (a spill that cannot be written).
_FULL = (errno.ENOSPC, errno.EDQUOT)
SHARES = {"band_keys": 0.25, "check_bins": 0.2, "texts": 0.15, "pairs": 0.2, "short_texts": 0.1}


class Workspace:
    """A run's memory budget and its spill directory (made on first use, removed by
    :meth:`close`); use it as a context manager around the run."""

    def __init__(self, memory: int = DEFAULT_MEMORY, tmp_dir: str | os.PathLike[str] | None = None) -> None:
        if memory < MIN_MEMORY:
            raise ConfigError(
                f"a memory budget of {memory} bytes is below the {MIN_MEMORY >> 20} MB a run needs"
            )
        if tmp_dir is not None and not Path(tmp_dir).is_dir():
            raise ConfigError(
                f"the temporary directory {os.fspath(tmp_dir)!r} does not exist; create it first"
            )
        self.memory = memory
        self.tmp_dir = None if tmp_dir is None else os.fspath(tmp_dir)
        self._directory: Path | None = None
        self._names = 0

    def share(self, part: str) -> int:
        """Bytes ``part`` (a :data:`SHARES` name) may hold in memory."""
        return int(self.memory * SHARES[part])

    @property
    def spilled(self) -> bool:
        """Whether any part has written to disk."""
        return self._directory is not None

    def file(self, stem: str) -> Path:
        """A new file name in the spill directory (the directory is made on first use)."""
        if self._directory is None:
            base = os.fspath(self.tmp_dir or tempfile.gettempdir())
            remove_stale(base, SPILL_STEM, SPILL_SUFFIX)  # what killed runs left
            # Named before it is made: an interrupt between the two leaves nothing unnamed.
            self._directory = Path(base, temporary_name(SPILL_STEM, SPILL_SUFFIX))
            self._directory.mkdir(mode=0o700)
        self._names += 1
        return self._directory / f"{stem}-{self._names}"

    def close(self) -> None:
        """Remove the spill directory and everything in it."""
        if self._directory is not None:
            try:
                shutil.rmtree(self._directory, ignore_errors=True)
            finally:  # a second Ctrl-C during the removal: finish it
                shutil.rmtree(self._directory, ignore_errors=True)
                self._directory = None

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        self.close()
        if isinstance(error, OSError) and error.errno in _FULL and self._names:
            base = os.fspath(self.tmp_dir or tempfile.gettempdir())
            raise OutputError(
                f"the run's spill files in {base} filled its disk ({error.strerror}); nothing was "
                f"written and the spill files are removed: give tmp_dir a folder on a disk with "
                f"more room, or a larger memory budget"
            ) from error


def give_back_freed_memory() -> None:
    """Return the heap pages freed since the last call to the system (glibc's
    ``malloc_trim``). glibc keeps freed blocks of up to 32 MB in the heap for reuse, so a
    stage that frees its share (band keys, a tile of pairs) keeps its pages resident, and
    the forked workers of the next stage inherit them: called where a stage ends or a share
    is freed, so the resident size is what the run holds. Elsewhere, nothing."""
    if sys.platform.startswith("linux"):
        with suppress(OSError, AttributeError):
            ctypes.CDLL(None).malloc_trim(0)


def unbounded() -> Workspace:
    """A budget so large nothing spills: for the stages called one by one without a workspace."""
    return Workspace(1 << 62)

"""The cyclic garbage collector paused for the length of a batch's work.

A batch of a check (records or documents) builds hundreds of thousands of lists, tuples and
dicts that live until the batch ends and form no reference cycles. As they accumulate, the
collector's generational passes walk them again and again and free nothing; reference
counting frees them all when the batch ends. :func:`collector_paused` stops the collector
for that span and starts it again when the last overlapping pause ends (threads of one
process share it), and only if it was running when the first began: a caller that turned
it off keeps it off.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_pauses = 0
_resume = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block (nested and concurrent pauses allowed)."""
    global _pauses, _resume
    with _lock:
        if not _pauses:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if not _pauses and _resume:
                gc.enable()

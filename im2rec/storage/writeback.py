"""Starting an output's writeback while it is written: a large output is
on the disk soon after its last write, instead of every page of it
waiting for a later ``sync`` (or the kernel's flusher, 30 s on) and being
written only then (docs/measured.md).

:class:`Writeback` asks the kernel to start writing each
:data:`WRITEBACK_BYTES` the output has grown by (Linux's
``sync_file_range(SYNC_FILE_RANGE_WRITE)``: it starts the writes, it does
not wait for them), on a daemon thread with a descriptor of its own, so
the writer never waits for a slow disk's queue and never has to wait for
the thread. It is advice: nothing is raised, and where there is no such
call (not Linux, not glibc or musl) nothing is done."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

__all__ = ["WRITEBACK_BYTES", "Writeback", "start_writeback"]

#: the output grows by this much between two requests
WRITEBACK_BYTES = 8 << 20
_WRITE = 2  # SYNC_FILE_RANGE_WRITE, from <fcntl.h>

_call: Any = None  # (looked up on first use; False where there is none)


def start_writeback(fd: int, offset: int, length: int) -> bool:
    """Ask the kernel to start writing ``length`` bytes of ``fd`` from
    ``offset`` to the disk, without waiting for them; False where it
    cannot be asked (no such call, or a file that takes none: a pipe)."""
    if not _available() or length <= 0:
        return False
    return bool(_call(fd, offset, length, _WRITE) == 0)


def _available() -> bool:
    global _call
    if _call is None:
        _call = _lookup()
    return _call is not False


def _lookup() -> Any:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return False
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


class Writeback:
    """The writeback of one output file, from offset ``start``: tell it how
    far the file is written (:meth:`written`); once that is
    :data:`WRITEBACK_BYTES` past what was last asked for, a daemon thread
    (started then: small outputs never start one) asks the kernel to start
    writing the rest. :meth:`close` ends it without waiting: the thread
    holds a duplicate of the descriptor and closes it itself."""

    def __init__(self, fd: int, start: int = 0) -> None:
        self._fd = fd
        self._asked = self._end = start  # (_asked: the writer's thread only)
        self._closed = False
        self._lock = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None

    def written(self, end: int) -> None:
        """The file is written up to ``end`` (the output's offset)."""
        if end - self._asked < WRITEBACK_BYTES or self._closed:
            return
        if self._thread is None:
            if not _available():
                self._closed = True
                return
            self._thread = threading.Thread(target=self._run, args=(os.dup(self._fd), self._asked),
                                            name="im2rec-writeback", daemon=True)  # fmt: skip
            self._thread.start()
        with self._lock:
            self._end = end
            self._lock.notify()
        self._asked = end

    def _run(self, fd: int, start: int) -> None:
        try:
            while True:
                with self._lock:
                    while self._end == start and not self._closed:
                        self._lock.wait()
                    if self._closed:
                        return
                    end = self._end
                if not start_writeback(fd, start, end - start):
                    return  # (a file that takes no writeback: asking again would not help)
                start = end
        finally:
            os.close(fd)

    def close(self) -> None:
        """No more requests (the output is being closed); not waited for."""
        with self._lock:
            self._closed = True
            self._lock.notify()

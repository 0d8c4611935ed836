"""Starting the disk on a command's input while Python is still starting:
a command that reads whole files in order (``rec export``, ``rec import``)
names them before it loads its modules (pyarrow and numpy take a quarter
of a second), and the kernel reads their first bytes into the page cache
meanwhile, so the command's first reads find them there
(docs/measured.md).

:func:`prefetch` asks for at most :data:`PREFETCH_BYTES` in all (the
kernel's ``POSIX_FADV_WILLNEED``: it starts the reads, the reader does not
wait for them), on a daemon thread, so the command never waits for the
disk's queue. It is advice: a file that is not there, not local, or not a
regular file is left alone, nothing is raised, and where there is no such
call nothing is done."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable

from . import is_url

__all__ = ["PREFETCH_BYTES", "prefetch"]

#: read ahead of a command's start, in all: what the disk reads while
#: its modules load, and small beside any machine's page cache
PREFETCH_BYTES = 256 << 20


def prefetch(paths: Iterable[str | os.PathLike[str]], limit: int = PREFETCH_BYTES) -> None:
    """Start reading the first ``limit`` bytes of ``paths`` (in that order:
    the files a command reads first, first) into the page cache, and
    return at once. URLs and what is not a regular file are skipped."""
    names = [name for name in (os.fspath(p) for p in paths) if not is_url(name)]
    if names and limit > 0 and hasattr(os, "posix_fadvise"):
        threading.Thread(target=_advise, args=(names, limit), daemon=True,
                         name="im2rec-prefetch").start()  # fmt: skip


def _advise(names: list[str], limit: int) -> None:
    left = limit
    for name in names:
        if left <= 0:
            return
        try:  # (no O_NOFOLLOW: an input named through a link is the user's)
            fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):  # (a FIFO is never read ahead)
                continue
            n = min(left, info.st_size)
            os.posix_fadvise(fd, 0, n, os.POSIX_FADV_WILLNEED)
            left -= n
        except OSError:
            continue
        finally:
            os.close(fd)

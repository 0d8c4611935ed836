"""Reading ahead of what a command will read: its inputs while Python is
still starting, and a file ahead of a walk of its frame heads.

A command that reads whole files in order (``rec export``, ``rec import``)
names them before it loads its modules (pyarrow and numpy take a quarter
of a second), and the kernel reads their first bytes into the page cache
meanwhile, so the command's first reads find them there
(docs/measured.md).

A walk of a file's frame heads over large records reads a few bytes every
hundred KB: the kernel sees no order in that and reads each head from the
disk alone, one wait at a time. :func:`follow` reads the file in order
ahead of such a walk, as ``cat`` would, so the heads are cached when the
walk reaches them.

:func:`prefetch` asks for at most :data:`PREFETCH_BYTES` in all (the
kernel's ``POSIX_FADV_WILLNEED``: it starts the reads, the reader does not
wait for them), on a daemon thread, so the command never waits for the
disk's queue. It is advice: a file that is not there, not local, or not a
regular file is left alone, nothing is raised, and where there is no such
call nothing is done."""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Iterable

from . import is_url

__all__ = [
    "FOLLOW_AHEAD",
    "FOLLOW_STEP",
    "PREFETCH_BYTES",
    "STOP_WAIT",
    "Follower",
    "follow",
    "prefetch",
]

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


#: how far a :class:`Follower` reads ahead of the walk it follows, and the
#: bytes it asks for at a time (docs/measured.md)
FOLLOW_AHEAD, FOLLOW_STEP = 64 << 20, 1 << 20
#: seconds :meth:`Follower.stop` waits for the read under way (one step)
STOP_WAIT = 5.0


class Follower:
    """Reads a file in order into the page cache, on a daemon thread, from
    where the walk it follows is up to :data:`FOLLOW_AHEAD` bytes past it:
    the kernel reads ahead of in-order reads, and the walk, told to the
    follower with :meth:`tell`, then finds its bytes cached. Where the walk
    is faster (a cached file), the follower skips to it and reads nothing
    twice. Made by :func:`follow`; :meth:`stop` ends it (it ends on its own
    at the file's end or on any error: it is advice). A walk that goes on
    in a forked child has no follower there: both calls do nothing."""

    def __init__(self, own: int, size: int, start: int):
        self._own, self._size = own, size  # (its own open file: its own read-ahead state)
        self._pid = os.getpid()  # (a lock copied by a fork may be held for ever)
        self._moved = threading.Condition()
        self._at, self._stopped = start, False
        self._thread = threading.Thread(target=self._run, name="im2rec-follow", daemon=True)
        self._thread.start()

    def tell(self, at: int) -> None:
        """The walk is at byte ``at``."""
        if os.getpid() != self._pid:
            return
        with self._moved:
            self._at = at
            self._moved.notify()

    def stop(self) -> None:
        """End the reads ahead: returns when the thread has closed its file
        and ended (after the read under way, at most :data:`STOP_WAIT`
        seconds), so that no thread is left behind the walk (a fork then
        copies none)."""
        if os.getpid() != self._pid:
            return
        with self._moved:
            self._stopped = True
            self._moved.notify()
        self._thread.join(STOP_WAIT)

    def _run(self) -> None:
        try:
            null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            os.close(self._own)
            return
        try:
            self._follow(null)
        except OSError:  # (advice: a read that fails is the walk's to report)
            pass
        finally:
            os.close(null)
            os.close(self._own)

    def _follow(self, null: int) -> None:
        off = self._at
        while off < self._size:
            with self._moved:
                while not self._stopped and off >= self._at + FOLLOW_AHEAD:
                    self._moved.wait()
                if self._stopped:
                    return
                off = max(off, self._at)
            if off >= self._size:
                return
            # to /dev/null in the kernel: pages read into the cache, none copied
            sent = os.sendfile(null, self._own, off, min(FOLLOW_STEP, self._size - off))
            if sent <= 0:  # (the file is shorter now: the walk will say so)
                return
            off += sent


def follow(fd: int, size: int, start: int) -> Follower | None:
    """A :class:`Follower` reading the first ``size`` bytes of the open
    regular file ``fd`` ahead of a walk now at ``start``, or None where
    this cannot be done (only Linux reads a file into /dev/null in the
    kernel). It reads through a description of its own, opened through
    ``/proc/self/fd`` (the open file itself, no name looked up again)."""
    if not sys.platform.startswith("linux") or size - start <= FOLLOW_STEP:
        return None
    try:
        own = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    return Follower(own, size, start)

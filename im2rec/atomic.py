"""Write several output files so that they appear together or not at all.

Each output is written under a hidden temporary name beside its target; the
group renames them all into place only when its ``with`` block succeeds. On
an exception (including Ctrl-C) the temporary files are removed and existing
outputs stay as they were.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from .errors import Im2RecError

__all__ = ["AtomicGroup", "BusyError", "exclusive"]


class BusyError(Im2RecError):
    """Another process is working on the same outputs."""


@contextmanager
def exclusive(path: Path, doing: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (an input, opened read-only) for the
    block: two runs writing the same temporary files would interleave them.
    Where the file system has no locks, or there is no file to lock (the
    block's own read of it then says what is wrong), go on without one."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    try:
        # non-blocking: a FIFO must not make us wait (no such flag, no FIFOs)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BusyError(
                f"{path}: another process is {doing} it right now; wait for it to finish "
                "(or stop it), then run again"
            ) from None
        except OSError:  # no locking here (some network file systems)
            yield
            return
        try:
            yield
        finally:
            # Unlock explicitly: worker processes forked meanwhile share this
            # open file, and closing our copy alone would leave it locked.
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class AtomicGroup:
    """``with AtomicGroup() as group: group.write_text(path, text)``."""

    def __init__(self) -> None:
        self._pending: list[tuple[Path, Path]] = []

    def temp_path(self, target: str | os.PathLike[str]) -> Path:
        """A temporary path to write ``target``'s content to; it is moved
        into place when the group commits."""
        final = Path(target)
        tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        self._pending.append((tmp, final))
        return tmp

    def write_text(self, target: str | os.PathLike[str], text: str) -> None:
        tmp = self.temp_path(target)
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

    def commit(self) -> None:
        for tmp, final in self._pending:
            os.replace(tmp, final)
        self._pending.clear()

    def discard(self) -> None:
        """Remove the temporary files, as far as possible: this runs while
        an error propagates, and a failing clean-up must not replace it."""
        for tmp, _ in self._pending:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        self._pending.clear()

    def __enter__(self) -> AtomicGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()

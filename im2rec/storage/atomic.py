"""How im2rec creates the files it writes, and writes several so that they
appear together or not at all.

:func:`create_output` is the one function that creates an output file
(docs/security.md, "Outputs"): it never follows a symlink and never writes
into a file that is already there (which may be a hard link to a file
elsewhere), whoever put it there and when. A name that is in the way is
removed first (unlink acts on the link, not on what it points to), then the
file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``; a name planted again
in between makes the create fail instead of being followed. The only file
opened that exists already is one a command continues (``--resume``): it
must be a regular file with one link, opened with ``O_NOFOLLOW``.

:class:`AtomicGroup`: each output is written under a hidden temporary name
beside its target; the group renames them all into place only when its
``with`` block succeeds. On an exception (including Ctrl-C) the temporary
files are removed and existing outputs stay as they were.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from ..errors import Im2RecError, OutputError

__all__ = [
    "AtomicGroup",
    "BusyError",
    "OutputError",
    "create_output",
    "exclusive",
    "fresh_folder",
    "own_folder",
    "open_output",
    "write_file",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class BusyError(Im2RecError):
    """Another process is working on the same outputs."""


def create_output(
    path: str | os.PathLike[str],
    *,
    append: bool = False,
    readable: bool = False,
    mode: int = 0o666,
    dir_fd: int | None = None,
) -> int:
    """Open ``path`` for writing as a new file and return its descriptor
    (see the module doc). ``append``: continue the file if it is there (a
    regular file with one link, not a symlink), positioned at its end;
    create it otherwise. ``readable``: open it for reading too. ``dir_fd``:
    ``path`` is relative to that folder (as in :func:`os.open`)."""
    access = os.O_RDWR if readable else os.O_WRONLY
    if append:
        try:
            fd = os.open(path, access | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _refused(path, exc) from None
        else:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                os.close(fd)
                raise OutputError(
                    f"{os.fspath(path)}: is not a plain file of its own (a device, a FIFO or "
                    "a file with other hard links); im2rec does not continue it: remove it "
                    "and start again"
                )
            os.lseek(fd, 0, os.SEEK_END)
            return fd
    flags = access | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    made = _open_new(path, flags, mode, dir_fd)  # the usual case, nothing in the way: one call
    if made is None:
        try:  # a file or link in the way: replaced, not written through
            os.unlink(path, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _refused(path, exc) from None
        made = _open_new(path, flags, mode, dir_fd)
    if made is None:
        raise OutputError(
            f"{os.fspath(path)}: something else created this name while im2rec was creating "
            "it; is another program writing here? Run again once it has finished"
        )
    return made


def _open_new(
    path: str | os.PathLike[str], flags: int, mode: int, dir_fd: int | None
) -> int | None:
    """``os.open`` with ``O_EXCL``; None where the name is taken."""
    try:
        return os.open(path, flags, mode, dir_fd=dir_fd)
    except FileExistsError:
        return None
    except OSError as exc:  # (a file where a folder should be: ENOTDIR)
        raise _refused(path, exc) from None


def _refused(path: str | os.PathLike[str], exc: OSError) -> OSError:
    if exc.errno in (errno.ELOOP, errno.EISDIR, errno.EPERM, errno.ENOTDIR):
        return OutputError(
            f"{os.fspath(path)}: a folder or a symlink is in the way of this output "
            f"({exc.strerror}); im2rec does not write through links: remove it, or choose "
            "another output name"
        )
    return exc


def open_output(
    path: str | os.PathLike[str], binary: bool = False, *, append: bool = False
) -> IO[Any]:
    """:func:`create_output` as a Python file (text: UTF-8 with ``\n``
    line ends, line-buffered, as the reports are written)."""
    fd = create_output(path, append=append)
    if binary:
        return os.fdopen(fd, "ab" if append else "wb")
    return os.fdopen(fd, "a" if append else "w", encoding="utf-8", newline="\n", buffering=1)


def fresh_folder(path: str | os.PathLike[str]) -> None:
    """Make ``path`` a new empty folder: whatever is there goes first (a
    folder with what is in it, or a file or link, itself: what a link
    points to is never touched)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISDIR(info.st_mode):
            import shutil

            shutil.rmtree(path)  # (lstat said a folder: rmtree does not follow links inside)
        else:
            os.unlink(path)
    os.makedirs(path)


def own_folder(path: str | os.PathLike[str]) -> None:
    """Make the folder ``path`` (and its parents) unless it is there; one
    that is there must be a folder itself, not a link to one (what a run
    continues, ``--resume``, is never reached through a planted link)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        os.makedirs(path, exist_ok=True)
        info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise OutputError(
            f"{os.fspath(path)}: is a {'symlink' if stat.S_ISLNK(info.st_mode) else 'file'} "
            "where im2rec keeps a folder of its own; it does not write through links: remove "
            "it, then run again"
        )


def write_file(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write a whole small file atomically (a temporary file, then renamed
    over ``path``: a link there is replaced, not followed)."""
    with AtomicGroup() as group:
        group.write_bytes(path, data.encode("utf-8") if isinstance(data, str) else data)


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

    def create(self, target: str | os.PathLike[str]) -> int:
        """A descriptor of a new temporary file for ``target``'s content
        (:func:`create_output`); moved into place when the group commits."""
        return create_output(self.temp_path(target))

    def open(self, target: str | os.PathLike[str]) -> IO[bytes]:
        """:meth:`create` as a binary Python file."""
        return os.fdopen(self.create(target), "wb")

    def write_bytes(self, target: str | os.PathLike[str], data: bytes) -> None:
        with self.open(target) as f:
            f.write(data)

    def write_text(self, target: str | os.PathLike[str], text: str) -> None:
        self.write_bytes(target, text.encode("utf-8"))

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

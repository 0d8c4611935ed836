"""Opening input files: only regular files, and never waiting.

A path can name a FIFO (opening it for reading waits for a writer), a
device (``/dev/zero`` never ends) or a folder. Inputs are opened with
``O_NONBLOCK`` and refused at once unless they are regular files.
"""

from __future__ import annotations

import os
import stat

from ..errors import Im2RecError

__all__ = ["NOT_REGULAR", "open_regular", "read_regular_file"]

NOT_REGULAR = "not a regular file (a FIFO, device or socket)"


def open_regular(path: str | os.PathLike[str], folder: str = "is a folder") -> tuple[int, int]:
    """``(fd, size)`` of a regular file, opened read-only without waiting;
    :class:`Im2RecError` naming the path otherwise (``folder`` says what a
    folder is not). ``FileNotFoundError`` passes through."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode):
        return fd, info.st_size
    os.close(fd)
    raise Im2RecError(f"{os.fspath(path)}: {folder if stat.S_ISDIR(info.st_mode) else NOT_REGULAR}")


def read_regular_file(path: str | os.PathLike[str]) -> bytes:
    """A regular file's bytes (see :func:`open_regular`)."""
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as f:
        return f.read()

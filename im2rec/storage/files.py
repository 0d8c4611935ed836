"""Opening input files: only regular files, never waiting, never mapped.

A path can name a FIFO (opening it for reading waits for a writer), a
device (``/dev/zero`` never ends) or a folder. Inputs are opened with
``O_NONBLOCK`` and refused at once unless they are regular files.

Files are read with ``pread`` through a :class:`FileView`, not memory-mapped:
a mapped file that another process truncates kills the reader with SIGBUS
at the next touch of a page past the new end, and no Python code can catch
that. ``pread`` returns short instead, which becomes a
:class:`~im2rec.errors.TruncatedRecordError` naming the file. Large
reads go into memory placed for the kernel's copy (:func:`placed`).
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import stat
import threading
import weakref
from dataclasses import dataclass
from typing import Any, overload

from ..errors import Im2RecError, TruncatedRecordError

__all__ = [
    "NOT_REGULAR",
    "READ_ALIGN",
    "FileRange",
    "FileView",
    "HeldFile",
    "open_regular",
    "placed",
    "pread",
    "pread_at_least",
    "pread_into",
    "read_room",
    "read_json",
    "read_regular_file",
    "split_lines",
]

NOT_REGULAR = "not a regular file (a FIFO, device or socket)"
# POSIX: open() of a FIFO waits for a writer unless non-blocking. Where the
# flag does not exist (Windows) there are no FIFOs to wait on.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

if hasattr(os, "pread"):
    pread = os.pread
else:  # Windows: no pread; a seek and a read under one lock (there is no fork to share it)
    _SEEK = threading.Lock()

    def pread(fd: int, n: int, offset: int, /) -> bytes:
        """``os.pread`` where the platform has none."""
        with _SEEK:
            os.lseek(fd, offset, os.SEEK_SET)
            return os.read(fd, n)


def pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Read into ``view`` from ``offset``: the bytes read (0 at the end)."""
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view], offset)
    data = pread(fd, len(view), offset)  # (Windows)
    view[: len(data)] = data
    return len(data)


#: a read is copied fastest into memory whose address agrees with its file
#: offset modulo this many bytes (:func:`read_room`; docs/measured.md)
READ_ALIGN = 64


def read_room(size: int, *, reused: bool = True) -> Any:
    """Memory for reads of up to ``size`` bytes (:func:`placed` says where a
    read goes in it). Reused read after read: anonymous pages of its own,
    resident as far as reads fill them and off the heap, where numpy's huge
    pages would stay behind it. Made for one read: a numpy array from the
    heap, whose allocator hands back the last one's pages (fresh pages
    would be faulted in for every read)."""
    if reused:
        return mmap.mmap(-1, size + READ_ALIGN)
    import numpy as np  # (its readers have it imported already)

    return np.empty(size + READ_ALIGN, np.uint8)


def placed(room: Any, offset: int, n: int) -> memoryview:
    """The ``n`` bytes of ``room`` (:func:`read_room`) that a read from file
    ``offset`` goes into: where their address agrees with ``offset``
    modulo :data:`READ_ALIGN`, so the kernel copies at full speed."""
    start = room.ctypes.data if hasattr(room, "ctypes") else 0  # (a mapping starts at a page)
    shift = (offset - start) % READ_ALIGN
    return memoryview(room)[shift : shift + n]


def pread_at_least(fd: int, n: int, start: int, need: int) -> bytes:
    """Up to ``n`` bytes of ``fd`` from ``start``, at least ``need`` of them
    unless the file ends first: ``pread`` may return less than asked, and
    only an empty read means the end."""
    data = pread(fd, n, start)
    while len(data) < need and (more := pread(fd, n - len(data), start + len(data))):
        data += more
    return data


def open_regular(path: str | os.PathLike[str], folder: str = "is a folder") -> tuple[int, int]:
    """``(fd, size)`` of a regular file, opened read-only without waiting;
    :class:`Im2RecError` naming the path otherwise (``folder`` says what a
    folder is not). ``FileNotFoundError`` passes through."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_BINARY", 0))
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


class FileView:
    """The first ``size`` bytes of an open file, read on demand with ``pread``.

    Slicing (``view[a:b]``) returns ``bytes``, as slicing a ``bytes`` object
    or an ``mmap`` does, so the framing code reads files and in-memory
    buffers alike. Small reads are served from a cached block (header walks
    touch 8 bytes per record); large ones go straight to the kernel. Safe to
    share between threads and, because ``pread`` has no file position,
    between forked processes.
    """

    #: Bytes read ahead for a small read: a little for a jump (random access
    #: by key, a header walk over large records), more when the read starts
    #: where the cached block ends (a sequential walk over small records).
    BLOCK, STREAM = 256, 64 << 10

    def __init__(self, fd: int, size: int, name: str):
        self.fd, self.size, self.name = fd, size, name
        self._block: tuple[int, bytes] = (0, b"")  # (start, bytes): replaced whole, never mutated
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, where: int) -> int: ...
    @overload
    def __getitem__(self, where: slice) -> bytes: ...
    def __getitem__(self, where: int | slice) -> int | bytes:
        if isinstance(where, int):
            return self[where : where + 1][0]
        start, stop, step = where.indices(self.size)
        if step != 1:
            raise ValueError("a FileView slice cannot have a step")
        return self.read(start, max(0, stop - start))

    def read(self, start: int, n: int) -> bytes:
        """``n`` bytes from ``start`` (fewer only past ``size``)."""
        base, block = self._block
        off = start - base
        if off >= 0 and off + n <= len(block):
            return block[off : off + n]
        n = max(0, min(n, self.size - start))
        if n <= self.BLOCK // 2:
            block, off = self.window(start, max(n, 1))
            return block[off : off + n]
        return self._pread(start, n, n)

    def window(self, start: int, need: int = 8) -> tuple[bytes, int]:
        """``(buffer, offset)`` with the file's bytes from ``start`` at
        ``buffer[offset:]``, at least ``need`` of them (fewer only past
        ``size``): the cached block when it holds them, else a new block read
        from ``start``. The framing code parses headers in place with it."""
        base, block = self._block
        off = start - base
        if off >= 0 and off + need <= len(block):
            return block, off
        ahead = self.STREAM if 0 <= off <= len(block) + 64 else self.BLOCK
        block = pread(self.fd, ahead, start)
        if len(block) < need and start + len(block) < self.size:
            block = self._pread(start, min(max(need, ahead), self.size - start), need)
        self._block = (start, block)
        return block, 0

    def _pread(self, start: int, n: int, need: int) -> bytes:
        data = pread_at_least(self.fd, n, start, need)
        if len(data) < need:
            raise self._shrunk(start + len(data))
        return data

    def fill(self, view: memoryview, start: int) -> None:
        """Fill ``view`` with the file's bytes from ``start``
        (:class:`TruncatedRecordError` if the file now ends first)."""
        got = 0
        while got < len(view):
            more = pread_into(self.fd, view[got:], start + got)
            if not more:
                raise self._shrunk(start + got)
            got += more

    def read_placed(self, start: int, n: int) -> memoryview:
        """``n`` bytes from ``start`` (fewer only past ``size``) in new
        memory placed for the kernel's copy (:func:`placed`): for large
        reads, at up to twice the speed of :meth:`read`."""
        n = max(0, min(n, self.size - start))
        view = placed(read_room(n, reused=False), start, n)
        self.fill(view, start)
        return view

    def _shrunk(self, at: int) -> TruncatedRecordError:
        try:
            now = f"{os.fstat(self.fd).st_size:,} bytes now"
        except OSError:
            now = "closed"
        return TruncatedRecordError(
            f"{self.name}: the file ends at byte {at:,}, but it had {self.size:,} bytes when it "
            f"was opened ({now}): another program truncated or rewrote it while it was being "
            "read; open it again once that program has finished"
        )

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        """The first position of ``sub`` in ``[start, end)``, or -1 (as ``bytes.find``)."""
        end = self.size if end is None else min(end, self.size)
        step = 1 << 20
        pos = max(start, 0)
        while pos + len(sub) <= end:
            chunk = self.read(pos, min(step + len(sub) - 1, end - pos))
            hit = chunk.find(sub)
            if hit != -1:
                return pos + hit
            pos += step
        return -1

    #: os.close, held by the class: at interpreter exit the os module may be
    #: cleared before the last view is collected
    _os_close = staticmethod(os.close)

    def close(self) -> None:
        with self._lock:
            fd, self.fd = self.fd, -1
        if fd >= 0:
            self._os_close(fd)
        self._block = (0, b"")

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


class HeldFile:
    """An open descriptor that closes when the last object holding it is
    gone: ranges of a file handed to another thread keep it open after its
    reader has moved on (its number cannot be reused for another file
    while a range still names it)."""

    def __init__(self, fd: int):
        self.fd = fd
        weakref.finalize(self, os.close, fd)


@dataclass(frozen=True, slots=True)
class FileRange:
    """``length`` bytes of the open file ``fd`` from ``offset``: copied to
    another file by the kernel (:meth:`copy_to`), or read when they are
    needed here (``bytes(range)``); ``len(range)`` is ``length``. A reader
    that has just read the bytes (to scan them) gives them too, as
    ``data``: they are written from there, which costs one copy where the
    kernel's file-to-file copy of a range that starts anywhere in a page
    costs two (it runs at half the speed of a ``write``)."""

    fd: int
    offset: int
    length: int
    name: str
    #: whether MXNet's magic word is in the bytes at a multiple of 4 from
    #: their start (a record holding them after a header must be split),
    #: when whoever read them scanned them; None when not known
    magic: bool | None = None
    #: what must stay alive while the range is used (a :class:`HeldFile`,
    #: and whatever owns ``data``)
    keep: object = None
    #: the bytes themselves, when the reader holds them in memory (read-only
    #: to whoever gets the range, and kept only as long as the range is)
    data: memoryview | None = None

    def __len__(self) -> int:
        return self.length

    def __bytes__(self) -> bytes:
        if self.data is not None:
            return bytes(self.data)
        data = pread_at_least(self.fd, self.length, self.offset, self.length)
        if len(data) < self.length:
            raise self._shrunk(self.offset + len(data))
        return data

    def copy_to(self, out: int) -> None:
        """Append the bytes to ``out`` (at its position): written from
        ``data`` when given, else copied by the kernel: ``sendfile``, else
        ``copy_file_range``, else read and written here. ``sendfile``
        first: ranges that start and end anywhere in a page copy at half the
        speed with ``copy_file_range`` (Linux 6.18, ext4; the blocks could be
        shared only for whole aligned blocks)."""
        if self.data is not None:
            view = self.data
            while view:
                view = view[os.write(out, view) :]
            return
        offset, left = self.offset, self.length
        for copy in (_sendfile, _copy_file_range, _read_write):
            try:
                while left:
                    done = copy(self.fd, out, offset, left)
                    if not done:
                        raise self._shrunk(offset)
                    offset, left = offset + done, left - done
                return
            except OSError as exc:
                if exc.errno not in _NOT_HERE or copy is _read_write:
                    raise  # (the last way failing is an error, whatever its errno)

    def _shrunk(self, at: int) -> TruncatedRecordError:
        return TruncatedRecordError(
            f"{self.name}: ends at byte {at:,}, before the {self.length:,} bytes from "
            f"{self.offset:,} it held when it was read: another program truncated or rewrote "
            "it meanwhile; run again once that program has finished"
        )


#: errors meaning "this way of copying does not work here": try the next
#: (ENOTSOCK: sendfile into a file is Linux's; EBADF: copy_file_range into a
#: file opened for appending)
_NOT_HERE = {errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOTSUP,
             errno.ENOTSOCK, errno.EBADF}  # fmt: skip


def _copy_file_range(src: int, dst: int, offset: int, n: int) -> int:
    if not hasattr(os, "copy_file_range"):
        raise OSError(errno.ENOSYS, "no copy_file_range")
    return os.copy_file_range(src, dst, min(n, 1 << 30), offset)


def _sendfile(src: int, dst: int, offset: int, n: int) -> int:
    if not hasattr(os, "sendfile"):
        raise OSError(errno.ENOSYS, "no sendfile")
    return os.sendfile(dst, src, offset, min(n, 1 << 30))


def _read_write(src: int, dst: int, offset: int, n: int) -> int:
    data = memoryview(pread(src, min(n, 1 << 24), offset))
    done = len(data)
    while data:
        data = data[os.write(dst, data) :]
    return done


def split_lines(text: str) -> list[str]:
    """``text`` cut at ``\\n``, ``\\r\\n`` and ``\\r`` only, as Python's text
    files (MXNet's ``read_list``) and MXNet's C++ list readers cut it.

    Not ``str.splitlines``, which also cuts at ``\\x0b``, ``\\x0c``,
    ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028`` and ``\\u2029``: characters a
    file name may hold, so a name written on one line would come back as two.
    A last line without a newline counts; the empty piece after a final
    newline does not.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


#: Sidecar JSON files (pack manifests, resume states, *.lists.json) are
#: kilobytes; parsed JSON takes many times its size in memory.
MAX_JSON = 64 << 20


def read_json(path: str | os.PathLike[str]) -> Any:
    """A JSON sidecar file im2rec wrote (or someone else did): a regular file
    of at most MAX_JSON bytes. Anything else raises ``ValueError`` (or
    ``OSError``), which callers take as "no usable sidecar"."""
    try:
        fd, size = open_regular(path)
    except Im2RecError as exc:
        raise ValueError(str(exc)) from None
    with os.fdopen(fd, "rb") as f:
        if size > MAX_JSON:
            raise ValueError(
                f"{os.fspath(path)}: {size:,} bytes, more than a sidecar file holds "
                f"({MAX_JSON >> 20} MiB)"
            )
        return parse_json(f.read(), os.fspath(path))


def parse_json(data: bytes | str, where: str) -> Any:
    """``json.loads``, with JSON nested past the parser's depth (which
    raises ``RecursionError``, no ``ValueError``) a ``ValueError`` too:
    nobody's sidecar is nested a thousand levels deep."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply") from None

"""Reading a file front to back through reused chunks, handing on views of
them that stay valid while they are alive.

A reader that must see every byte (``rec import`` scans images for MXNet's
magic word) and a writer that then writes them out do best when the bytes
are still in the CPU's cache for the write, as ``cat`` keeps them (a 1 MiB
buffer no longer fits a core's cache; 256 KiB does). So the file is read a
chunk at a time, a record's bytes are handed on as the chunk's view with a lease (the chunk is not
filled again while the lease lives) and written at once, and the chunks go
round a small pool: no fresh memory is faulted in per read.
"""

from __future__ import annotations

import os
import weakref

from ..storage.files import FileRange, placed, pread_at_least, pread_into, read_room
from .framing import has_aligned_magic

__all__ = ["Chunks", "Lease"]


class Lease:
    """Stands for one filling of a chunk: views of the chunk handed on hold
    it, and the chunk is filled again only once none is alive."""

    __slots__ = ("__weakref__",)


class Chunks:
    """Reads of a file through chunks of ``SIZE`` bytes, reused: :meth:`get`
    gives a view of the chunk valid until the next read (who keeps it
    copies it); :meth:`hold` gives one with a :class:`Lease` that keeps the
    chunk from being filled again while it is alive, so a writer can write
    the bytes from there. The file is opened for sequential reading, so the
    kernel reads it from the disk ahead of the reads."""

    #: (bytes up to this size can be held; see the module doc for why not more)
    SIZE = 256 << 10
    #: chunks held by views at once, at most (a writer writes them at once);
    #: past that, :meth:`hold` gives unleased views, so a caller keeping
    #: views keeps no more chunks
    CHUNKS = 8

    def __init__(self, fd: int, size: int):
        self.fd, self.size = fd, size  # no read past size: a size in a header is not trusted
        self.room = read_room(self.SIZE)  # (each filling placed for the kernel's copy)
        self.buf = placed(self.room, 0, self.SIZE)
        self.lease: Lease | None = Lease()
        self.chunks = [(self.room, weakref.ref(self.lease))]
        self.leased = False  # whether a view of the current filling was handed on
        self.base = self.end = 0  # the chunk holds the file's bytes [base, end)
        if hasattr(os, "posix_fadvise"):
            # doubles the kernel's read-ahead; asking for more explicitly
            # (POSIX_FADV_WILLNEED) slows a cold read (docs/measured.md)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)

    def get(self, start: int, n: int) -> memoryview:
        """The ``n`` bytes from ``start`` (fewer only where the file ends)."""
        if self.base <= start and start + n <= self.end:
            return self.buf[start - self.base : start + n - self.base]
        if n > self.SIZE:  # larger than a chunk: read on its own
            want = max(0, min(n, self.size - start))
            return memoryview(pread_at_least(self.fd, want, start, want))
        self._next_chunk()
        self.buf = placed(self.room, start, self.SIZE)
        want, got = max(0, min(self.SIZE, self.size - start)), 0
        while got < want and (done := pread_into(self.fd, self.buf[got:want], start + got)):
            got += done
        self.base, self.end = start, start + got
        return self.buf[: min(n, got)]

    def hold(self, start: int, n: int) -> tuple[memoryview, Lease | None]:
        """:meth:`get`, and the lease that keeps the view's bytes as they
        are while it is alive (None: the view is valid until the next read
        only)."""
        view = self.get(start, n)
        if self.lease is None or view.obj is not self.room:
            return view, None
        self.leased = True
        return view, self.lease

    def take(
        self, start: int, n: int, name: str, keep: object = None, *, scan: bool = False
    ) -> FileRange | None:
        """The ``n`` bytes from ``start`` (at most ``SIZE``) as a range of the
        file, with the chunk's view as its ``data`` when leased (a writer
        writes them from there); with ``scan``, whether MXNet's magic word
        is in them. None if the file ends first."""
        view, lease = self.hold(start, n)
        if len(view) < n:
            return None
        magic = has_aligned_magic(view) if scan else None
        if lease is None:
            return FileRange(self.fd, start, n, name, magic, keep)
        return FileRange(self.fd, start, n, name, magic, (keep, lease), view)

    def _next_chunk(self) -> None:
        """Make ``room`` a chunk no leased view is using, with a new lease."""
        if not self.leased and self.lease is not None:
            return  # no view of this filling was handed on: filled again
        free = next((room for room, lease in self.chunks if lease() is None), None)
        if free is None:
            free = read_room(self.SIZE)
            if len(self.chunks) >= self.CHUNKS:  # (see CHUNKS)
                self.room, self.lease = free, None
                return
        self.lease, self.leased = Lease(), False
        self.chunks = [c for c in self.chunks if c[0] is not free]
        self.chunks.append((free, weakref.ref(self.lease)))
        self.room = free

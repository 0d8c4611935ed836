"""One output file of a writer (:mod:`.writer`): written in place or
through a temporary name renamed into place when finished, buffered in a
plain list, optionally hashed (SHA-256 on a thread, in write order), with
bodies still in other files copied by the kernel on a copying thread."""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _hashlib import HASH
    from concurrent.futures import Future, ThreadPoolExecutor

from ..storage.atomic import create_output
from ..storage.copying import IOV_MAX, Copier, batches, send_batch, write_all
from ..storage.files import FileRange, pread
from ..storage.writeback import Writeback

__all__ = ["Output"]

_HASH_BACKLOG = 4  # flushes (of ~1 MiB) waiting for the SHA-256 thread


def _sha256() -> HASH:
    import hashlib  # loads OpenSSL: only writers that hash pay for it

    return hashlib.sha256()


def _hash_thread() -> ThreadPoolExecutor:
    # imported here: only writers that hash need concurrent.futures.
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(1, "im2rec-sha256")


def _update(hasher: Any, parts: list[Any]) -> None:
    for part in parts:
        hasher.update(part)


def _position(fd: int) -> int:
    """The file offset of ``fd``; -1 for a pipe or a device."""
    try:
        return os.lseek(fd, 0, os.SEEK_CUR)
    except OSError:
        return -1


class Output:
    """One output file, written in place or through a temporary name.

    Buffers in a plain list and writes with ``os.write``: unlike a Python file
    object, nothing here flushes on garbage collection, so a copy inherited by
    a forked child can never write the parent's pending bytes a second time.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        atomic: bool,
        text: bool = False,
        *,
        temp: str | os.PathLike[str] | None = None,
        append: bool = False,
        hashing: bool = False,
    ):
        self.path = Path(os.fsdecode(path))
        self.atomic = atomic or temp is not None
        self.text = text
        if temp is not None:
            self.tmp = Path(temp)
        elif atomic:
            self.tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        else:
            self.tmp = self.path
        # a new file (a link or file in the way is replaced, never written
        # through), or, resuming, the one there if it is a plain file
        self.fd: int | None = create_output(self.tmp, append=append, readable=hashing and append)
        self.size = os.lseek(self.fd, 0, os.SEEK_END)
        self.pending: list[Any] = []  # bytes, or str lines for a text output
        # (file offset, buffers) of a flush under way; see suspend()
        self._inflight: tuple[int, tuple[Any, ...]] | None = None
        self.hasher = _sha256() if hashing else None
        # SHA-256 runs in one background thread (hashlib releases the GIL), in
        # write order, so hashing a large .rec overlaps the reading and writing.
        self._hashing = _hash_thread() if hashing else None
        self._hashed: deque[Future[None]] = deque()
        # bodies still in other files are copied on a thread (see flush)
        self._copier: Copier | None = None
        self._unpublished = False  # settled under the temporary name, not yet moved
        # the disk writes what is written as it goes (docs/measured.md)
        self._writeback = Writeback(self.fd, self.size)
        if self.hasher is not None and self.size:  # resuming: the digest covers what is there
            for start in range(0, self.size, 1 << 20):
                self.hasher.update(pread(self.fd, min(1 << 20, self.size - start), start))

    @property
    def closed(self) -> bool:
        return self.fd is None

    def flush(self) -> None:
        if self._copier is not None:
            self._copier.wait()
        if not self.pending or self.fd is None:
            return
        if not self.text and any(type(p) is FileRange for p in self.pending):
            # Records with bodies in other files (never on a hashing output):
            # written here from memory, or copied on a thread while the
            # caller goes on making the next records.
            items = batches(self.pending)
            self.pending.clear()
            self._writeback.written(_position(self.fd))  # (the copies so far are done)
            self._copier = send_batch(self.fd, items, self._copier)
            return
        if self.text:
            parts: list[Any] = ["".join(self.pending).encode()]
        elif len(self.pending) > IOV_MAX:  # many small records: one copy beats many iovecs
            parts = [b"".join(self.pending)]
        else:
            parts = self.pending[:]  # large records' buffers as they are: no copy
        # Ctrl-C may land anywhere in here: recorded before pending is cleared
        # (no signal is handled between a store and the call after it), so
        # suspend() can write what this flush did not.
        self._inflight = (_position(self.fd), tuple(parts))
        self.pending.clear()
        if self._hashing is not None and self.hasher is not None:
            while len(self._hashed) >= _HASH_BACKLOG:  # bounded: memory must not grow with the file
                self._hashed.popleft().result()
            self._hashed.append(self._hashing.submit(_update, self.hasher, parts))
        write_all(self.fd, parts)
        self._inflight = None
        self._writeback.written(_position(self.fd))

    def write_now(self, parts: list[Any]) -> None:
        """Write ``parts`` at once, after the copies under way (nothing may
        be pending: they would land after these)."""
        if self._copier is not None:
            self._copier.wait()
        assert self.fd is not None and not self.pending
        write_all(self.fd, parts)
        self._writeback.written(_position(self.fd))

    def _stop_copying(self, quiet: bool = False) -> None:
        """Wait for the copies under way (their error raised unless
        ``quiet``) and end the copying thread, before the file is closed."""
        copier, self._copier = self._copier, None
        if copier is not None:
            copier.stop(quiet)

    def _stop_hashing(self) -> None:
        if self._hashing is not None:
            self._hashing.shutdown(wait=True)  # every queued update is applied
            self._hashing = None
            self._hashed.clear()

    def settle(self) -> None:
        """Write everything and close the file, still under its temporary
        name; a failing write (disk full) is raised with the file open, for
        :meth:`suspend` or :meth:`discard` to end."""
        if self.fd is None:
            return
        self.flush()
        self._stop_copying()
        self._stop_hashing()
        self._writeback.close()
        os.close(self.fd)
        self.fd = None
        self._unpublished = self.atomic

    def publish(self) -> None:
        """Move a settled atomic output into place (once)."""
        if self._unpublished:
            os.replace(self.tmp, self.path)
            self._unpublished = False

    def suspend(self) -> None:
        """Write what can be written and close, keeping the temporary file
        (for a later resume); a failing write (disk full) is not retried."""
        try:
            self._finish_inflight()
            self.flush()
            self._stop_copying()
        except OSError:
            self.pending.clear()
        finally:
            self._stop_copying(quiet=True)
            self._stop_hashing()
            self._writeback.close()
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None

    def _finish_inflight(self) -> None:
        """Write the rest of a flush that an exception (Ctrl-C) cut short:
        its buffers were already taken from ``pending``, and the file offset
        says how much of them reached the file."""
        if self._inflight is None or self.fd is None:
            return
        start, parts = self._inflight
        self._inflight = None
        if start < 0:  # not a seekable file: how much was written is unknown
            return
        done = _position(self.fd) - start
        data = b"".join(parts)
        if 0 <= done < len(data):
            write_all(self.fd, [memoryview(data)[done:]])

    def discard(self) -> None:
        self._inflight = None
        self.pending.clear()
        self._stop_copying(quiet=True)
        self._stop_hashing()
        self._writeback.close()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.atomic:
            try:
                os.unlink(self.tmp)
            except OSError:  # gone, or not removable: the error that led here matters more
                pass

    def release(self) -> None:
        """Garbage-collected while open: an atomic output never finished, so
        drop it; in place (MXNet's way) keep what was written."""
        if self.fd is not None:
            if self.atomic:
                self.discard()
            else:
                self.settle()

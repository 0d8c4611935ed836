"""Writing bytes and copying ranges of other files into an output: the
system-call side of the writers.

:func:`write_all` writes a list of buffers with as few ``writev`` calls as
the kernel allows. Records whose bodies are still in other files (a
:class:`~im2rec.storage.files.FileRange`, from ``rec import``) are written
in batches by :class:`Copier`, on a thread: each record's header bytes, then
its body, written from memory when the reader still holds it (``writev``)
or else copied by the kernel (``sendfile``, without the GIL), so the caller
parses the next records meanwhile.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .files import FileRange

__all__ = ["IOV_MAX", "Copier", "batches", "copy_batch", "send_batch", "write_all"]

IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 16

_writev: Callable[[int, Any], int]
if hasattr(os, "writev"):
    _writev = os.writev
else:  # Windows: one write for the first buffer; write_all goes on with the rest

    def _writev(fd: int, buffers: Any, /) -> int:  # noqa: ANN401 - os.writev's own signature
        return os.write(fd, buffers[0])


def write_all(fd: int, parts: list[Any]) -> None:
    """Write every buffer of ``parts`` in order, with as few system calls as
    the kernel allows (``writev``, at most IOV_MAX buffers each), resuming
    after a partial write."""
    parts, i = list(parts), 0  # the caller's list stays whole (the hash thread reads it)
    while i < len(parts):
        batch = parts[i : i + IOV_MAX]
        done = _writev(fd, batch)
        for part in batch:
            if done < len(part):
                parts[i] = memoryview(part)[done:]  # the rest of a partly written buffer
                break
            done -= len(part)
            i += 1


def copy_batch(fd: int, items: list[tuple[bytes, FileRange | None]]) -> None:
    """Write each item's bytes, then its range after them: a run of ranges
    whose bytes are in memory (``data``) in as few ``writev`` calls as the
    kernel allows, a run of ranges in files copied by the kernel."""
    start = 0
    while start < len(items):
        end, in_memory = start, _in_memory(items[start][1])
        while end < len(items) and _in_memory(items[end][1]) == in_memory:
            end += 1
        if in_memory:
            parts: list[Any] = []
            for glue, body in items[start:end]:
                parts.append(glue)
                if body is not None:
                    parts.append(body.data)
            write_all(fd, parts)
        else:
            _copy_files(fd, items[start:end])
        start = end


def _in_memory(body: FileRange | None) -> bool:
    return body is None or body.data is not None


def _copy_files(fd: int, items: list[tuple[bytes, FileRange | None]]) -> None:
    for glue, body in items:
        write_all(fd, [glue])
        if body is not None:
            body.copy_to(fd)


class Copier:
    """One thread making an output's copies, a batch at a time, while the
    caller goes on (the copies run without the GIL): at most one batch is
    under way, and its error is raised by the next call here."""

    def __init__(self, fd: int):
        import queue
        import threading

        self.jobs: queue.SimpleQueue[list[tuple[bytes, FileRange | None]] | None]
        self.jobs = queue.SimpleQueue()
        self.done: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()
        self.busy = False
        self.thread = threading.Thread(
            target=self._run, args=(fd,), name="im2rec-copy", daemon=True
        )
        self.thread.start()

    def _run(self, fd: int) -> None:
        while (items := self.jobs.get()) is not None:
            try:
                copy_batch(fd, items)
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                self.done.put(exc)
            else:
                self.done.put(None)

    def submit(self, items: list[tuple[bytes, FileRange | None]]) -> None:
        self.wait()
        self.jobs.put(items)
        self.busy = True

    def wait(self) -> None:
        """Until the batch under way is written; its error, if any."""
        if self.busy:
            self.busy = False
            exc = self.done.get()
            if exc is not None:
                raise exc

    def stop(self, quiet: bool = False) -> None:
        """Wait for the batch under way and end the thread; the batch's error
        is raised, unless ``quiet`` (stopping because of another error,
        which matters more)."""
        try:
            self.wait()
        except Exception:
            if not quiet:
                raise
        finally:
            self.jobs.put(None)
            self.thread.join()


def send_batch(
    fd: int, items: list[tuple[bytes, FileRange | None]], copier: Copier | None
) -> Copier | None:
    """Write a batch here when every body's bytes are in memory (after the
    copying thread's batch, if one is under way: from this CPU's cache, a
    thread on another CPU ran up to twice as long), else hand it to the
    copying thread, started on first need; returns the copier."""
    if all(_in_memory(body) for _, body in items):
        if copier is not None:
            copier.wait()
        copy_batch(fd, items)
        return copier
    if copier is None:
        copier = Copier(fd)
    copier.submit(items)
    return copier


def batches(pending: list[Any]) -> list[tuple[bytes, FileRange | None]]:
    """Pending buffers as (bytes, range after them) items: the bytes between
    two ranges joined (record headers and padding, a few dozen bytes)."""
    items: list[tuple[bytes, FileRange | None]] = []
    glue: list[Any] = []
    for part in pending:
        if type(part) is FileRange:
            items.append((b"".join(glue), part))
            glue = []
        else:
            glue.append(part)
    if glue:
        items.append((b"".join(glue), None))
    return items

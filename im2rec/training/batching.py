"""Batches assembled in shared memory, and the workers that fill them.

The parent owns a block of shared memory cut into slots, one batch each
(pixels, labels, record ids). A :class:`BatchJob` names a slot and the byte
offsets of the batch's records; the worker reads each record from the
``.rec`` and fills the slot with the iterator's :data:`Fill` (for
``ImageRecordIter``, the :class:`~im2rec.training.augment.Augmenter` run by
:func:`~im2rec.training.filling.fill_batch`) and returns only counts. No
pixel array crosses a pipe.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import os
import sys
import warnings
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any, Literal, NamedTuple

import numpy as np

from ..errors import ConfigError
from ..executors import LocalExecutor, Outcome, check_workers, default_workers, fork_is_safe
from ..executors.processes import Processes, available
from ..recordio import RecordReader
from ..storage.blockcache import BlockCache
from .filling import BatchJob, BatchResult, fill_batch
from .loading import take_memory

__all__ = [
    "BatchBuffers",
    "BatchJob",
    "BatchResult",
    "Fill",
    "Pending",
    "Ring",
    "SlotLayout",
    "SlotPool",
    "Workers",
    "attach",
    "check_memory",
    "fill_batch",
    "release",
    "run_job",
]

#: what a worker runs for one batch: ``fill(job, reader, (data, labels, ids))``
#: (picklable, so worker processes started any way can take it)
Fill = Callable[[BatchJob, RecordReader, tuple[np.ndarray, np.ndarray, np.ndarray]], BatchResult]

CRASHED = (
    "an ImageRecordIter worker process died (killed, out of memory, or a crash "
    "while decoding); create the iterator again"
)


@dataclass(frozen=True)
class SlotLayout:
    """Where one batch lives inside a slot: data, then labels, then ids."""

    batch_size: int
    data_shape: tuple[int, int, int]
    dtype: str
    label_width: int

    @property
    def data_bytes(self) -> int:
        return self.batch_size * math.prod(self.data_shape) * np.dtype(self.dtype).itemsize

    @property
    def slot_bytes(self) -> int:
        label_bytes = self.batch_size * self.label_width * 4
        return -(-(self.data_bytes + label_bytes + self.batch_size * 8) // 64) * 64

    def views(self, buf: Any, slot: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(data, labels, ids)`` arrays over slot ``slot`` of ``buf``."""
        b, base = self.batch_size, slot * self.slot_bytes
        # frombuffer holds the buffer exported while a view lives, so the
        # memory cannot be unmapped under it (closing the block refuses)
        data = np.frombuffer(buf, self.dtype, b * math.prod(self.data_shape), base)
        base += self.data_bytes
        labels = np.frombuffer(buf, np.float32, b * self.label_width, base)
        ids = np.frombuffer(buf, np.uint64, b, base + b * self.label_width * 4)
        return data.reshape(b, *self.data_shape), labels.reshape(b, self.label_width), ids


class SlotPool:
    """The slots of the ring: free ones, and ones lent to the caller.

    A batch handed out as a view of its slot (no copy of its pixels) keeps
    the slot until its array is garbage-collected, whoever holds it (a
    training step, a torch tensor made from it). At most ``lendable`` slots
    are lent at once, so the workers always have slots to fill; past that,
    batches are copies (a caller keeping many batches in a list), made into
    buffers that come back the same way (:meth:`copy`)."""

    #: copy buffers kept for reuse once their batches are collected
    SPARE = 2

    def __init__(self, slots: int, lendable: int) -> None:
        self.free: deque[int] = deque(range(slots))
        self.lendable = max(0, lendable)
        self._lent: set[int] = set()
        self._spare: list[bytearray] = []
        self._keep = [self.SPARE]  # (0 once closed: copies collected later are let go)
        #: copy buffers allocated so far (the rest were reused)
        self.copy_buffers = 0

    def close(self) -> None:
        """Let the spare copy buffers go (the iterator is closed)."""
        self._keep[0] = 0
        self._spare.clear()

    def copy(self, data: np.ndarray) -> np.ndarray:
        """``data`` copied into a buffer of its own. A loop that still holds
        as many batches as the pool lends when it asks for the next (a
        prefetcher keeping two) gets every other batch as a copy: into fresh
        memory, each batch's pages (38 MB for 64 224-px float32 samples)
        would be zeroed and mapped by the kernel in the training process;
        into a buffer given back when its copy is collected, it is only the
        copy."""
        spare = self._spare
        try:  # (every batch has one size; a finaliser may append from another thread)
            buf = spare.pop()
        except IndexError:
            buf = bytearray(data.nbytes)
            self.copy_buffers += 1
        flat = np.frombuffer(buf, data.dtype)
        out = flat.reshape(data.shape)
        np.copyto(out, data)
        # (views of out point at flat, which holds buf: see lend)
        weakref.finalize(flat, _keep_spare, spare, buf, self._keep)
        return out

    def lend(self, data: np.ndarray, slot: int) -> bool:
        """Lend ``slot`` to ``data`` (a view of it) if the pool allows."""
        if len(self._lent) >= self.lendable:
            return False
        self._lent.add(slot)
        # numpy points every view of a view at the first array that owns or
        # exports its memory (here the frombuffer array over the ring), not
        # at the arrays between: that one lives as long as any view does.
        root = data
        while isinstance(root.base, np.ndarray):
            root = root.base
        # the callback holds the pool's containers, not the iterator
        weakref.finalize(root, _give_back, self.free, self._lent, slot)
        return True


def _give_back(free: deque[int], lent: set[int], slot: int) -> None:
    lent.discard(slot)
    free.append(slot)


def _keep_spare(spare: list[bytearray], buf: bytearray, keep: list[int]) -> None:
    if len(spare) < keep[0]:
        spare.append(buf)


# -- the worker process side ---------------------------------------------------

_ATTACHED: dict[str, shared_memory.SharedMemory] = {}
_READERS: dict[str, RecordReader] = {}


def attach(name: str) -> shared_memory.SharedMemory:
    """The parent's shared memory block, opened once per process."""
    shm = _ATTACHED.get(name)
    if shm is None:
        if sys.version_info >= (3, 13):
            # The parent owns (and unlinks) the block; the worker only maps it.
            shm = shared_memory.SharedMemory(name, track=False)
        else:
            shm = shared_memory.SharedMemory(name)
        _ATTACHED[name] = shm
    return shm


def run_job(job: BatchJob, layout: SlotLayout, fill: Fill, shm_name: str) -> BatchResult:
    """Worker entry point: fill ``job``'s slot of the shared block."""
    reader = _READERS.get(job.rec)
    if reader is None:
        reader = _READERS[job.rec] = RecordReader(
            job.rec, storage_options=job.storage_options, cache=job.cache
        )
    views = layout.views(attach(shm_name).buf, job.slot)
    try:
        return fill(job, reader, views)
    finally:
        del views  # release the exported buffer before the block may close


# -- the parent's ring of slots ----------------------------------------------------


class Ring(shared_memory.SharedMemory):
    """The parent's block of slots. A batch lent to the caller views it, and
    its memory must stay mapped while that view lives: closing the block
    (the iterator closed or collected first) then leaves the mapping to the
    last view instead of failing."""

    def close(self) -> None:
        with contextlib.suppress(BufferError):
            super().close()

    @classmethod
    def taken(cls, size: int) -> Ring | None:
        """A new block of ``size`` bytes whose memory is taken now
        (:func:`~im2rec.training.loading.take_memory`), or None where
        ``/dev/shm`` has no room for it."""
        ring = cls(create=True, size=size)
        # the block's file, opened by its name (POSIX shared memory lives in
        # /dev/shm on Linux): SharedMemory keeps its own descriptor private.
        # The name was just created by this process, 0600, and /dev/shm's
        # sticky bit keeps others from replacing it; no link is followed.
        try:
            fd = os.open(os.path.join("/dev/shm", ring.name.lstrip("/")),
                         os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)  # fmt: skip
        except (OSError, AttributeError):  # not Linux: taken as it is written
            return ring
        try:
            if os.fstat(fd).st_size != ring.size:
                return ring
            take_memory(fd, size)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.ENOMEM, errno.EFBIG):
                return ring  # no fallocate here: its memory is taken as it is written
            ring.close()
            ring.unlink()
            return None
        finally:
            os.close(fd)
        return ring


def check_memory(size: int, slots: int) -> None:
    """Refuse a batch ring larger than half of this machine's memory before
    allocating it: batch_size, data_shape and label_width are options, and a
    typo must not make the machine swap or the kernel kill the process."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not POSIX: no bound to compare with
        return
    if size > memory // 2:
        raise ConfigError(
            f"{slots} batches in flight need {size / 2**30:,.1f} GiB, more than half of this "
            f"machine's {memory / 2**30:,.1f} GiB; use a smaller batch_size or data_shape, or "
            "fewer preprocess_threads / prefetch_buffer"
        )


def release(owner: int, executor: LocalExecutor | Processes | None, shm: Ring | None) -> None:
    # A process forked while this iterator was alive (another iterator's
    # worker, a DataLoader worker) holds a copy of it, and its garbage
    # collector may run this finaliser: only the creator may stop the
    # workers and unlink the memory, which other processes still use.
    if os.getpid() != owner:
        return
    if executor is not None:
        executor.close()
    if shm is not None:
        shm.close()  # (a Ring: a lent batch's view keeps the memory mapped)
        with contextlib.suppress(FileNotFoundError):
            shm.unlink()


# -- who builds the batches ------------------------------------------------------


class Pending(NamedTuple):
    """A batch under way: its job, and the future of a worker building it
    (None: this process builds it when it is wanted)."""

    job: BatchJob
    result: Outcome[BatchResult] | None


class BatchBuffers(NamedTuple):
    result: BatchResult
    views: tuple[np.ndarray, np.ndarray, np.ndarray]
    slot: int


class Workers:
    """Who builds an iterator's batches, and where: worker processes filling
    a shared-memory ring when they can be forked (they inherit everything
    loaded and need no ``if __name__ == "__main__"`` guard, which MXNet
    scripts lack); threads otherwise (Pillow and numpy release the GIL while
    they decode and convert, so threads still overlap most of the work); or
    this process, for one worker. Released when closed or collected."""

    def __init__(
        self,
        threads: int | None,
        prefetch: int,
        layout: SlotLayout,
        fill: Fill,
        rec: str,
        storage_options: dict[str, Any] | None,
        cache: BlockCache | None = None,
    ) -> None:
        count = min(4, default_workers()) if threads is None else threads
        if count < 0:
            raise ConfigError(f"preprocess_threads must be 0 or more, not {count:,}")
        if count > 1:
            check_workers(count, "preprocess_threads")
        self.count = count
        kind: Literal["inline", "processes", "threads"] = (
            "inline" if count <= 1 else "processes" if available() and fork_is_safe()
            else "threads"
        )  # fmt: skip
        slots = max(1, prefetch, count) if count > 1 else 1
        size = slots * layout.slot_bytes
        check_memory(size, slots)
        self.shm = Ring.taken(size) if kind == "processes" else None
        if kind == "processes" and self.shm is None:
            kind = "threads"
            warnings.warn(
                f"ImageRecordIter: the shared memory (/dev/shm) has no room for {slots} batches "
                f"in flight ({size / 2**20:,.0f} MiB), so its workers are threads of this "
                "process, which is slower; give it more room (Docker: --shm-size), or use a "
                "smaller batch_size, data_shape or prefetch_buffer",
                RuntimeWarning,
                stacklevel=3,
            )
        self.kind = kind
        self.layout, self.fill_batch = layout, fill
        self.executor = (
            LocalExecutor(count, option="preprocess_threads") if self.kind == "threads" else None
        )
        # Threads and the inline path share one reader (pread needs no lock);
        # worker processes open the file themselves.
        self.reader = (
            None
            if self.kind == "processes"
            else RecordReader(rec, storage_options=storage_options, cache=cache)
        )
        # a batch can be a view of its slot while the workers keep a slot each
        self.slots = SlotPool(slots, slots - count if count > 1 else 0)
        self.buf: Any = self.shm.buf if self.shm is not None else bytearray(size)
        self.processes: Processes | None = None
        if self.shm is not None:  # forked now: they inherit the layout and the fill
            run = functools.partial(run_job, layout=layout, fill=fill, shm_name=self.shm.name)
            try:
                self.processes = Processes(count, run, crashed=CRASHED)
            except BaseException:
                release(os.getpid(), None, self.shm)
                raise
        self.finalizer = weakref.finalize(
            self, release, os.getpid(), self.executor or self.processes, self.shm
        )

    @property
    def parallel(self) -> bool:
        """Whether batches are built beside this process (not in it)."""
        return self.kind != "inline"

    def submit(self, job: BatchJob) -> Pending:
        result: Outcome[BatchResult] | None = None
        if self.processes is not None:
            result = self.processes.submit(job)
        elif self.executor is not None:
            result = self.executor.submit(self.fill, job, io_bound=True)
        return Pending(job, result)

    def fill(self, job: BatchJob) -> BatchResult:
        """Build ``job`` in this process (inline, or on a worker thread)."""
        assert self.reader is not None
        return self.fill_batch(job, self.reader, self.layout.views(self.buf, job.slot))

    def collect(self, pending: Pending) -> BatchBuffers:
        job = pending.job
        result = self.fill(job) if pending.result is None else pending.result.result()
        return BatchBuffers(result, self.layout.views(self.buf, job.slot), job.slot)

    def drain(self, jobs: deque[Pending]) -> None:
        """Give back the slots of batches no longer wanted: a running job
        still writes into its slot, so it is waited for; queued ones are
        cancelled."""
        while jobs:
            pending = jobs.popleft()
            if pending.result is not None and not pending.result.cancel():
                try:
                    pending.result.result()
                except Exception:  # noqa: BLE001 - the batch is being thrown away
                    pass
            self.slots.free.append(pending.job.slot)

"""Whole batches for torch's ``DataLoader``, decoded where they are used.

torch's ``DataLoader`` calls ``dataset.__getitems__(indices)`` with a whole
batch when the dataset has that method, then its ``collate_fn`` on what
comes back, in a worker process; the result reaches the training process
through shared memory. On the default path every sample is a fresh array,
``default_collate`` copies them into a fresh shared block, and the kernel
zeroes and maps that block's pages again for every batch: moving float32
batches of 224-px images that way costs more CPU an image than decoding it.

So :class:`~im2rec.training.dataset.RecordDataset` with an
:class:`~im2rec.training.augment.Augmenter` decodes a batch straight into a
slot of a block of shared memory its process keeps (:class:`Slots`), and
:func:`collate` sends only the block's name and the slot's number. The
training process maps the block once and hands out tensors over the slot;
when the last of them (views included) is collected, a finaliser marks the
slot free in the block's first page, and the worker fills it again: the
pages are touched once a worker instead of once a batch. A worker that finds every slot still held
(a caller keeping batches in a list) decodes into fresh memory, as the
default path does: correct, only slower.

The blocks are files in ``/dev/shm``, made with their whole size reserved
(a full tmpfs means fresh memory instead, not a ``SIGBUS`` while writing
pixels). The training process removes a block's name as soon as it maps it,
and lets the block go once its worker has exited and no tensor over it is
left; a block whose process died before that is removed by the next one
made. Where there is no ``/dev/shm`` (not
Linux) the batch is still decoded in one pass into one array, and torch
moves it as it moves any tensor.
"""

from __future__ import annotations

import errno
import fcntl
import math
import mmap
import multiprocessing
import multiprocessing.util
import os
import stat
import tempfile
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, overload

import numpy as np

from ..executors import tune_malloc

__all__ = ["SHM_DIR", "SLOTS", "Batch", "Lease", "Slots", "collate", "new_batch", "take_memory"]

#: where the blocks live (None: no pooled blocks on this system)
SHM_DIR: str | None = "/dev/shm" if os.path.isdir("/dev/shm") else None
#: slots per worker: DataLoader's default prefetch_factor (2) batches queued,
#: one in the training step's hands and one being filled
SLOTS = 4
_FREE, _HELD = 0, 1
_HEADER = mmap.PAGESIZE  # the slots' flags, one byte each
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def take_memory(fd: int, size: int) -> None:
    """Take the memory of the first ``size`` bytes of the shared-memory file
    ``fd`` now, so that a process writing to its map later cannot die of
    SIGBUS when ``/dev/shm`` (64 MB in a Docker container unless
    ``--shm-size`` says more) has no room left: OSError (ENOSPC) where it
    has not, found from the file system's free space first, so that nothing
    is taken to find out. Where the system has no ``posix_fallocate`` the
    memory is still taken as it is written."""
    room = os.fstatvfs(fd)
    if room.f_frsize and size > room.f_bavail * room.f_frsize:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, 0, size)


class Slots:
    """One process's block of :data:`SLOTS` batch slots of ``slot_bytes``.

    The block is locked (``flock``, shared) from before its name exists
    until this process drops it or ends: the lock, not a pid, is what tells
    a live block from one left by a process that died, in any PID
    namespace (containers started with ``--ipc=host`` share ``/dev/shm``
    and reuse each other's pids)."""

    def __init__(self, slot_bytes: int) -> None:
        assert SHM_DIR is not None
        _sweep(SHM_DIR)
        self.slot_bytes = -(-slot_bytes // 64) * 64
        size = _HEADER + SLOTS * self.slot_bytes
        self.owner = (os.getpid(), _started(os.getpid()))
        # made and locked under a name the sweep does not look at, then
        # linked under its own: no sweep can see it unlocked (not filelock:
        # a block is alive while any holder has a shared flock, which it lacks)
        fd, new = tempfile.mkstemp(prefix=_NEW, dir=SHM_DIR)
        self.path = os.path.join(
            SHM_DIR, f"{_PREFIX}{os.getpid()}-{os.path.basename(new)[len(_NEW) :]}"
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            os.ftruncate(fd, size)
            take_memory(fd, size)  # ENOSPC now rather than SIGBUS later
            self.map = mmap.mmap(fd, size)
            os.link(new, self.path)
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.unlink(new)
        self._lock = fd  # (closed, and the lock with it, when the block goes)
        # The training process removes the name when it maps the block; if
        # it never does, at this process's exit (a DataLoader worker's too:
        # multiprocessing runs these, and not in a forked child that
        # inherited them), or when this block is dropped.
        multiprocessing.util.Finalize(self, _let_go, (self.path, fd), exitpriority=0)

    def take(self, nbytes: int) -> int | None:
        """A free slot for ``nbytes``, or None (too large, or all held)."""
        if nbytes > self.slot_bytes:
            return None
        return next((s for s in range(SLOTS) if self.map[s] == _FREE), None)

    def lend(self, slot: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Lease:
        """An array over ``slot``, which stays held until every view of it
        is gone or :meth:`Lease.hand_over` passes it on."""
        count = math.prod(shape)
        offset = _HEADER + slot * self.slot_bytes
        root = np.frombuffer(self.map, dtype, count, offset)
        self.map[slot] = _HELD
        return Lease(self, slot, root.reshape(shape), weakref.finalize(root, _release, self, slot))


class Lease(NamedTuple):
    """A batch's slot while this process fills or holds it."""

    slots: Slots
    slot: int
    images: np.ndarray
    finalizer: weakref.finalize[Any, Any]

    def hand_over(self) -> None:
        """The slot stays held after this process drops the batch: whoever
        the batch goes to releases it."""
        self.finalizer.detach()


_PREFIX = "im2rec-batches-"
_NEW = ".im2rec-new-"


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _let_go(path: str, lock: int) -> None:
    _unlink(path)
    try:
        os.close(lock)
    except OSError:
        pass


def _started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), which tells it
    from a later process given the same pid; None if it is not running."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except OSError:
            pass
        return -1  # running (no /proc to say since when)
    # the command name may hold spaces and parentheses: fields follow the last ")"
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


def _sweep(folder: str) -> None:
    """Remove blocks left by processes that died before removing them
    (SIGKILL, or a worker terminated before its first batch was taken): a
    block of this user's that nobody holds locked. A live block is locked
    by its maker whatever PID namespace looks at it, so the pid in its
    name decides nothing."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith(_PREFIX)]
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                continue  # (another user's: theirs to remove)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # held: its process is alive
            after = os.lstat(path)  # still the file that was found unheld
            if (after.st_dev, after.st_ino) == (info.st_dev, info.st_ino):
                _unlink(path)
        except OSError:
            continue
        finally:
            os.close(fd)


# This process's own blocks, newest last (a forked child starts without its
# parent's: the pid is checked, since fork copies this list).
_OWN: tuple[int, list[Slots]] = (os.getpid(), [])


def _free_slot(nbytes: int) -> tuple[Slots, int] | None:
    """A free slot of this process's blocks that holds ``nbytes`` (a new
    block if none is that large), or None: every such slot is held, or
    there is no ``/dev/shm`` to make one in."""
    global _OWN
    if SHM_DIR is None:
        return None
    if _OWN[0] != os.getpid():
        _OWN = (os.getpid(), [])
    blocks = _OWN[1]
    fits = [slots for slots in blocks if slots.slot_bytes >= nbytes]
    for slots in fits:
        slot = slots.take(nbytes)
        if slot is not None:
            return slots, slot
    if fits:
        return None  # all held (batches kept by the caller): fresh memory
    if len(blocks) >= 2:  # a third, larger batch size: the oldest block goes
        del blocks[0]
    try:
        slots = Slots(nbytes)
    except OSError:  # /dev/shm full or not writable: fresh memory instead
        return None
    blocks.append(slots)
    return slots, 0


class Batch(Sequence[tuple[Any, Any]]):
    """What :meth:`RecordDataset.__getitems__
    <im2rec.training.dataset.RecordDataset.__getitems__>` returns: the
    batch's images in one ``(N, *data_shape)`` array and their labels. It is
    a sequence of ``(image, label)`` pairs, so ``default_collate`` takes it
    (copying, as for any list of samples); :func:`collate` does not copy."""

    def __init__(self, images: np.ndarray, labels: list[Any], home: Lease | None):
        self.images, self.labels, self.home = images, labels, home

    def __len__(self) -> int:
        return len(self.labels)

    @overload
    def __getitem__(self, j: int) -> tuple[Any, Any]: ...
    @overload
    def __getitem__(self, j: slice) -> list[tuple[Any, Any]]: ...
    def __getitem__(self, j: int | slice) -> tuple[Any, Any] | list[tuple[Any, Any]]:
        if isinstance(j, slice):
            return [self[k] for k in range(len(self))[j]]
        return self.images[j], self.labels[j]


def new_batch(count: int, shape: tuple[int, ...], dtype: str) -> tuple[np.ndarray, Lease | None]:
    """``(images, home)``: an uninitialised ``(count, *shape)`` array in a
    free slot of this process's block (``home``, held while the array or a
    view of it lives), or in fresh memory (``home`` None). In a worker
    process, malloc is first told to keep image-sized buffers
    (:func:`~im2rec.executors.tune_malloc`)."""
    if multiprocessing.parent_process() is not None:  # a DataLoader worker
        tune_malloc()
    kind = np.dtype(dtype)
    full = (count, *shape)
    nbytes = math.prod(full) * kind.itemsize
    free = _free_slot(nbytes)
    if free is None:
        return np.empty(full, kind), None
    lease = free[0].lend(free[1], full, kind)
    return lease.images, lease


def _ragged(labels: Sequence[Any]) -> bool:
    """Whether multi-label records of a batch hold different numbers of labels."""
    shapes = {np.shape(label) for label in labels}
    return len(shapes) > 1 and any(len(shape) == 1 for shape in shapes)


def collate_labels(labels: Sequence[Any]) -> Any:
    """A batch's labels: one tensor (``default_collate``), or, where
    multi-label records hold different numbers of labels, a list of
    1-D float32 tensors, one a sample, each as long as its record's label
    (a single label: one value)."""
    from torch.utils.data import default_collate

    if _ragged(labels):
        import torch

        return [torch.from_numpy(np.array(label, np.float32, ndmin=1)) for label in labels]
    return default_collate(list(labels))


def collate(batch: Any, *, labels: Callable[[list[Any]], Any] | None = None) -> Any:
    """``collate_fn`` for a ``DataLoader`` over a
    :class:`~im2rec.training.dataset.RecordDataset`: ``(images, labels)``
    tensors, the images over the memory they were decoded into (no copy,
    none made by torch to move them to the training process); anything but
    a :class:`Batch` goes to torch's ``default_collate``. Labels of
    different lengths (multi-label records with more labels in some) come
    as a list of tensors (:func:`collate_labels`), unless ``labels`` (a
    module-level function, pickled by name) collates them instead (detection
    targets: :func:`~im2rec.training.targets.collate_targets`)."""
    from torch.utils.data import default_collate, get_worker_info

    if not isinstance(batch, Batch):
        pairs = isinstance(batch, Sequence) and all(
            isinstance(s, tuple) and len(s) == 2 for s in batch
        )
        if pairs and _ragged([label for _, label in batch]):
            images = default_collate([image for image, _ in batch])
            return images, collate_labels([label for _, label in batch])
        return default_collate(batch)
    if batch.home is None:
        import torch

        return torch.from_numpy(batch.images), (labels or collate_labels)(batch.labels)
    lease = batch.home
    lease.hand_over()  # held until the training process drops every view
    parcel = _Parcel(lease.slots, lease.slot, batch.images.shape, batch.images.dtype.str,
                     batch.labels, labels)  # fmt: skip
    if get_worker_info() is not None:
        return parcel  # pickled as a reference to the slot
    return parcel.receive()  # this process: the tensors at once


class _Mapped:
    """A worker's block mapped in the training process."""

    __slots__ = ("map", "__weakref__")

    def __init__(self, m: mmap.mmap) -> None:
        self.map = m


# Workers' blocks mapped here, with their owners: held while the owner runs
# (its name is gone once mapped), then only by the tensors over them.
_MAPPED: dict[str, tuple[_Mapped, tuple[int, int | None]]] = {}


def _mapped(path: str, owner: tuple[int, int | None]) -> _Mapped:
    if owner[0] == os.getpid():  # this process's own block (num_workers=0)
        for slots in _OWN[1] if _OWN[0] == owner[0] else ():
            if slots.path == path:
                return _Mapped(slots.map)
    got = _MAPPED.get(path)
    if got is not None:
        return got[0]
    # A new worker: those that have exited (last epoch's) are let go.
    for old, (_, (pid, started)) in list(_MAPPED.items()):
        if _started(pid) != started:
            del _MAPPED[old]
    fd = os.open(path, os.O_RDWR | _NOFOLLOW)
    try:
        block = _Mapped(mmap.mmap(fd, 0))
    finally:
        os.close(fd)
    os.unlink(path)  # both ends have it mapped: the name is no longer needed
    _MAPPED[path] = (block, owner)
    return block


class _Parcel:
    """A batch in a slot, on its way to the training process."""

    def __init__(
        self,
        slots: Slots,
        slot: int,
        shape: tuple[int, ...],
        dtype: str,
        labels: list[Any],
        collate_fn: Callable[[list[Any]], Any] | None = None,
    ) -> None:
        self.args = (slots.path, slots.owner, slot, slots.slot_bytes, shape, dtype, labels,
                     collate_fn)  # fmt: skip

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return _receive, self.args

    def receive(self) -> tuple[Any, Any]:
        return _receive(*self.args)


def _receive(
    path: str,
    owner: tuple[int, int | None],
    slot: int,
    slot_bytes: int,
    shape: tuple[int, ...],
    dtype: str,
    labels: list[Any],
    collate_fn: Callable[[list[Any]], Any] | None = None,
) -> tuple[Any, Any]:
    import torch

    block = _mapped(path, owner)
    count = math.prod(shape)
    images = np.frombuffer(block.map, np.dtype(dtype), count, _HEADER + slot * slot_bytes)
    # Every tensor and view made from this one keeps it alive: the slot is
    # free again only when the last of them is collected.
    weakref.finalize(images, _release, block, slot)
    # (detection targets arrive as numpy arrays, pickled whole: a few kB a batch)
    return torch.from_numpy(images.reshape(shape)), (collate_fn or collate_labels)(labels)


def _release(block: _Mapped | Slots, slot: int) -> None:
    try:
        block.map[slot] = _FREE
    except ValueError:  # pragma: no cover - the map closed at interpreter exit
        pass

"""``ImageRecordIter``: MXNet's batch iterator over a ``.rec``, without MXNet.

It takes MXNet's keyword names (spec §5.1) and yields batches with
``.data[0]`` ``(B, C, H, W)`` RGB, ``.label[0]`` and ``.pad``. Worker
processes decode straight into shared memory (:mod:`im2rec.batching`); the
parent only orders the work and copies each finished batch out, so the
arrays it returns belong to the caller.

Where MXNet has a bug, this does the sane thing (spec §7 P14): the last
batch's ``pad`` is right with ``round_batch=False`` and its empty slots are
zeros; ``pad`` is never stale; ``reset()`` always starts the next epoch at
its first record; unknown keyword arguments raise.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import math
import os
import sys
import weakref
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import shared_memory
from typing import Any, Literal, NamedTuple

import numpy as np

from .augment import Augmenter
from .batching import BatchJob, BatchResult, SlotLayout, fill_batch, run_job
from .errors import ConfigError, Im2RecError, UnknownOptionError
from .executors import LocalExecutor, WorkerCrashed, default_workers, fork_is_safe
from .lstfile import read_lst
from .recordio import RecordReader, build_index, load_index

__all__ = ["DataBatch", "DataDesc", "ImageRecordIter"]

#: Accepted for MXNet compatibility and ignored: they only choose MXNet's
#: device or logging, which have no counterpart here.
_IGNORED = frozenset({"ctx", "device_id", "dev_id"})

#: MXNet options not implemented; accepted only at MXNet's default value.
_UNSUPPORTED: dict[str, Any] = {
    "mean_img": "",
    "max_random_contrast": 0,
    "max_random_illumination": 0,
    "max_rotate_angle": 0,
    "rotate": -1,
    "max_shear_ratio": 0,
    "max_crop_size": -1,
    "min_crop_size": -1,
    "max_random_scale": 1,
    "min_random_scale": 1,
    "max_img_size": 1e10,
    "min_img_size": 0,
    "brightness": 0,
    "contrast": 0,
    "saturation": 0,
    "pca_noise": 0,
    "random_h": 0,
    "random_s": 0,
    "random_l": 0,
    "pad": 0,
    "fill_value": 255,
    "aug_seq": "aug_default",
    "shuffle_chunk_size": 0,
    "shuffle_chunk_seed": 0,
}


class DataDesc(NamedTuple):
    """Name, shape and dtype of an output, as MXNet's ``provide_data``."""

    name: str
    shape: tuple[int, ...]
    dtype: Any = np.float32
    layout: str = "NCHW"


@dataclass
class DataBatch:
    """One batch. ``pad`` counts the trailing samples that are not this
    epoch's own (wrapped-around repeats, zeros, or skipped records);
    ``index`` holds each sample's record id (its ``.lst`` index)."""

    data: list[np.ndarray]
    label: list[np.ndarray]
    pad: int = 0
    index: np.ndarray | None = None
    provide_data: list[DataDesc] = field(default_factory=list)
    provide_label: list[DataDesc] = field(default_factory=list)


class _Pending(NamedTuple):
    job: BatchJob
    result: Future[BatchResult] | None


class ImageRecordIter:
    """Batches of decoded, augmented images from a ``.rec`` file.

    MXNet's keyword arguments (see the README for the full table); beyond
    them: ``random_resized_crop`` with torchvision's semantics (``min/
    max_random_area`` default 0.08/1, ``min/max_aspect_ratio`` 3/4 and 4/3),
    and ``on_corrupt="skip"`` to drop undecodable records (counted in
    ``skipped``) instead of raising.
    """

    def __init__(
        self,
        *,
        path_imgrec: str | os.PathLike[str],
        data_shape: tuple[int, int, int],
        batch_size: int,
        path_imgidx: str | os.PathLike[str] = "",
        path_imglist: str | os.PathLike[str] = "",
        label_width: int = 1,
        shuffle: bool = False,
        seed: int = 0,
        round_batch: bool = True,
        num_parts: int = 1,
        part_index: int = 0,
        preprocess_threads: int | None = None,
        prefetch_buffer: int = 4,
        dtype: str | None = None,
        resize: int = -1,
        rand_crop: bool = False,
        rand_mirror: bool = False,
        mirror: bool = False,
        random_resized_crop: bool = False,
        min_random_area: float = 0.08,
        max_random_area: float = 1.0,
        min_aspect_ratio: float = 3 / 4,
        max_aspect_ratio: float = 4 / 3,
        mean_r: float = 0.0,
        mean_g: float = 0.0,
        mean_b: float = 0.0,
        mean_a: float = 0.0,
        std_r: float = 1.0,
        std_g: float = 1.0,
        std_b: float = 1.0,
        std_a: float = 1.0,
        scale: float = 1.0,
        inter_method: int = 1,
        seed_aug: int | None = None,
        verbose: bool = True,
        data_name: str = "data",
        label_name: str = "softmax_label",
        on_corrupt: Literal["raise", "skip"] = "raise",
        **mxnet_only: Any,
    ):
        _check_extra(mxnet_only)
        if on_corrupt not in ("raise", "skip"):
            raise ConfigError(f"on_corrupt must be 'raise' or 'skip', not {on_corrupt!r}")
        if batch_size < 1 or label_width < 1:
            raise ConfigError("batch_size and label_width must be at least 1")
        self.augmenter = Augmenter(
            tuple(data_shape),  # type: ignore[arg-type]
            resize=resize,
            rand_crop=rand_crop,
            random_resized_crop=random_resized_crop,
            area=(min_random_area, max_random_area),
            ratio=(min_aspect_ratio, max_aspect_ratio),
            rand_mirror=rand_mirror,
            mirror=mirror,
            inter_method=inter_method,
            mean=(mean_r, mean_g, mean_b, mean_a),
            std=(std_r, std_g, std_b, std_a),
            scale=scale,
            dtype=dtype or "float32",
        )
        self.batch_size = batch_size
        self.shuffle, self.seed, self.round_batch = shuffle, seed, round_batch
        self.seed_aug = seed if seed_aug is None else seed_aug
        self.skip_corrupt = on_corrupt == "skip"
        path_imgrec, path_imgidx = os.fspath(path_imgrec), os.fspath(path_imgidx)
        self.path_imgrec = path_imgrec
        self._offsets = _part(
            _record_offsets(path_imgrec, path_imgidx, verbose), num_parts, part_index
        )
        if round_batch and batch_size > len(self._offsets):
            raise ConfigError(
                f"batch_size {batch_size} is larger than the {len(self._offsets)} records of "
                f"part {part_index} of {num_parts}; use a smaller batch_size, or "
                "round_batch=False for one padded batch"
            )
        self._labels = _lst_labels(os.fspath(path_imglist), label_width) if path_imglist else None
        self.layout = SlotLayout(
            batch_size, self.augmenter.data_shape, self.augmenter.dtype, label_width
        )
        label_shape = (batch_size,) if label_width == 1 else (batch_size, label_width)
        self.provide_data = [
            DataDesc(
                data_name, (batch_size, *self.augmenter.data_shape), np.dtype(self.augmenter.dtype)
            )
        ]
        self.provide_label = [DataDesc(label_name, label_shape, np.dtype(np.float32), "N")]
        self.skipped: list[tuple[int, str]] = []
        self.epoch = 0
        self._setup_workers(preprocess_threads, prefetch_buffer)
        self._start_epoch()

    # -- setup -------------------------------------------------------------

    def _setup_workers(self, threads: int | None, prefetch: int) -> None:
        workers = min(4, default_workers()) if threads is None else max(0, threads)
        self.workers = workers
        # Processes when they can be forked (they inherit everything loaded
        # and need no `if __name__ == "__main__"` guard, which MXNet scripts
        # lack); threads otherwise: Pillow and numpy release the GIL while
        # they decode and convert, so threads still overlap most of the work.
        self.worker_kind: Literal["inline", "processes", "threads"] = (
            "inline" if workers <= 1 else "processes" if fork_is_safe() else "threads"
        )
        self._executor = None if workers <= 1 else LocalExecutor(workers)
        # Threads and the inline path share one mapping of the file (mmap
        # reads need no lock); worker processes map it themselves.
        self._reader = None if self.worker_kind == "processes" else RecordReader(self.path_imgrec)
        slots = max(1, prefetch, workers) if workers > 1 else 1
        self._free = deque(range(slots))
        size = slots * self.layout.slot_bytes
        self._shm = None
        if self.worker_kind == "processes":
            self._shm = shared_memory.SharedMemory(create=True, size=size)
        self._buf: Any = self._shm.buf if self._shm is not None else bytearray(size)
        self._finalizer = weakref.finalize(self, _release, os.getpid(), self._executor, self._shm)

    def _start_epoch(self) -> None:
        n = len(self._offsets)
        if self.shuffle:
            order = np.random.default_rng([self.seed & 0xFFFFFFFF, self.epoch]).permutation(n)
        else:
            order = np.arange(n)
        self._order = order
        self._num_batches = -(-n // self.batch_size)
        self._next_submit = self._next_out = 0
        self._pending: deque[_Pending] = deque()
        self._current: DataBatch | None = None
        self._top_up()

    # -- the work queue ----------------------------------------------------

    def _job(self, batch: int, slot: int) -> BatchJob:
        b = self.batch_size
        positions = self._order[batch * b : (batch + 1) * b]
        real = len(positions)
        if real < b and self.round_batch:  # wrap to the start of this epoch's order
            positions = np.concatenate([positions, self._order[: b - real]])
        return BatchJob(
            rec=str(self.path_imgrec),
            offsets=self._offsets[positions],
            real=real,
            slot=slot,
            seed=(self.seed_aug & 0xFFFFFFFF, self.epoch, batch),
            labels_from_header=self._labels is None,
            skip_corrupt=self.skip_corrupt,
        )

    def _top_up(self) -> None:
        while self._free and self._next_submit < self._num_batches:
            job = self._job(self._next_submit, self._free.popleft())
            future: Future[BatchResult] | None = None
            if self._shm is not None and self._executor is not None:
                args = (job, self.layout, self.augmenter, self._shm.name)
                future = self._executor.submit(run_job, *args)
            elif self._executor is not None:
                future = self._executor.submit(self._fill, job, io_bound=True)
            self._pending.append(_Pending(job, future))
            self._next_submit += 1

    def _fill(self, job: BatchJob) -> BatchResult:
        """Build ``job`` in this process (inline, or on a worker thread)."""
        assert self._reader is not None
        return fill_batch(job, self._reader, self.augmenter, self.layout.views(self._buf, job.slot))

    def _collect(self, pending: _Pending) -> BatchBuffers:
        job = pending.job
        try:
            result = self._fill(job) if pending.result is None else pending.result.result()
        except BrokenProcessPool as exc:
            raise WorkerCrashed(
                "an ImageRecordIter worker process died (killed, out of memory, or a crash "
                "while decoding); create the iterator again"
            ) from exc
        return BatchBuffers(result, self.layout.views(self._buf, job.slot))

    # -- MXNet's DataIter API ----------------------------------------------

    def iter_next(self) -> bool:
        """Advance to the next batch; False at the end of the epoch."""
        if self._next_out >= self._num_batches:
            self._current = None
            return False
        pending = self._pending.popleft()
        self._next_out += 1
        try:
            got = self._collect(pending)
            self._current = self._make_batch(got)
        finally:
            self._free.append(pending.job.slot)
        self._top_up()
        return True

    def _make_batch(self, got: BatchBuffers) -> DataBatch:
        result = got.result
        data, labels, ids = (a.copy() for a in got.views)
        del got
        self.skipped.extend(result.skipped)
        if self._labels is not None:
            labels[: result.filled] = self._lookup(ids[: result.filled])
        label = labels[:, 0] if labels.shape[1] == 1 else labels
        return DataBatch(
            data=[data],
            label=[label],
            pad=self.batch_size - result.filled_real,
            index=ids,
            provide_data=self.provide_data,
            provide_label=self.provide_label,
        )

    def _lookup(self, ids: np.ndarray) -> np.ndarray:
        assert self._labels is not None
        try:
            return np.stack([self._labels[i] for i in ids.tolist()])
        except KeyError as exc:
            raise Im2RecError(
                f"record id {exc.args[0]} of {self.path_imgrec} has no line in path_imglist; "
                "regenerate the list or drop path_imglist to use the packed labels"
            ) from None

    def next(self) -> DataBatch:
        """The next batch; ``StopIteration`` at the end of the epoch."""
        if not self.iter_next():
            raise StopIteration
        assert self._current is not None
        return self._current

    __next__ = next

    def __iter__(self) -> Iterator[DataBatch]:
        # An exhausted iterator starts the next epoch, so a plain
        # `for epoch ...: for batch in it:` loop needs no reset().
        if self._next_out >= self._num_batches:
            self.reset()
        return self

    def reset(self) -> None:
        """Start the next epoch (a new permutation with ``shuffle``). A reset
        before any batch of the current epoch was taken changes nothing."""
        if self._next_out == 0:
            return
        self._drain()
        self.epoch += 1
        self._start_epoch()

    def getdata(self) -> list[np.ndarray]:
        return self._batch().data

    def getlabel(self) -> list[np.ndarray]:
        return self._batch().label

    def getpad(self) -> int:
        return self._batch().pad

    def getindex(self) -> np.ndarray | None:
        return self._batch().index

    def _batch(self) -> DataBatch:
        if self._current is None:
            raise Im2RecError("no current batch: call iter_next() first")
        return self._current

    def __len__(self) -> int:
        """Batches per epoch."""
        return self._num_batches

    @property
    def num_records(self) -> int:
        """Records in this part (one epoch, before padding)."""
        return len(self._offsets)

    # -- shutting down -----------------------------------------------------

    def _drain(self) -> None:
        # A running job still writes into its slot: wait for it before the
        # slot is reused; queued ones are cancelled.
        while self._pending:
            pending = self._pending.popleft()
            if pending.result is not None and not pending.result.cancel():
                try:
                    pending.result.result()
                except Exception:  # noqa: BLE001 - the batch is being thrown away
                    pass
            self._free.append(pending.job.slot)

    def close(self) -> None:
        """Stop the workers and free the shared memory (also done when the
        iterator is garbage-collected)."""
        self._pending.clear()
        self._finalizer()

    def __enter__(self) -> ImageRecordIter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"ImageRecordIter({self.path_imgrec!r}, {self.num_records} records, "
            f"batch_size={self.batch_size}, epoch={self.epoch})"
        )


class BatchBuffers(NamedTuple):
    result: BatchResult
    views: tuple[np.ndarray, np.ndarray, np.ndarray]


def _release(
    owner: int, executor: LocalExecutor | None, shm: shared_memory.SharedMemory | None
) -> None:
    # A process forked while this iterator was alive (another iterator's
    # worker, a DataLoader worker) holds a copy of it, and its garbage
    # collector may run this finaliser: only the creator may stop the
    # workers and unlink the memory, which other processes still use.
    if os.getpid() != owner:
        return
    if executor is not None:
        executor.close()
    if shm is not None:
        try:
            shm.close()
        except BufferError:
            pass  # a view is still alive somewhere; the unlink below still frees the name
        with contextlib.suppress(FileNotFoundError):
            shm.unlink()


def _check_extra(extra: dict[str, Any]) -> None:
    known = [p for p in inspect.signature(ImageRecordIter.__init__).parameters if p != "self"]
    for name, value in extra.items():
        if name in _IGNORED:
            continue
        if name in _UNSUPPORTED:
            if value != _UNSUPPORTED[name]:
                raise ConfigError(
                    f"ImageRecordIter option {name}={value!r} is not supported; apply such "
                    "augmentation with your own transform (RecordDataset takes any callable)"
                )
            continue
        close = difflib.get_close_matches(name, [*known, *_UNSUPPORTED], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownOptionError(f"ImageRecordIter got an unknown option {name!r}{hint}")


def _record_offsets(rec: str, idx: str, verbose: bool) -> np.ndarray:
    """Byte offsets of every record, in file order. MXNet's indexed reader
    sorts the ``.idx`` offsets and ignores its keys (spec §5.2); without an
    ``.idx`` the file's headers are walked once, in memory."""
    if not rec or any(c in rec for c in ";*?"):
        raise ConfigError(
            f"path_imgrec must name one .rec file, not {rec!r} (lists and patterns of "
            "files are not supported; merge them with `rec merge`)"
        )
    reader = RecordReader(rec)
    try:
        index = load_index(idx) if idx else build_index(reader)
        index.check_within(reader.size, reader.name)
        offsets = np.unique(index.offsets)
        if len(offsets) == 0:
            raise ConfigError(f"{rec}: holds no records")
        reader.read_at(int(offsets[-1]))  # a file cut short fails here, not mid-epoch
        if not idx and verbose:
            print(
                f"im2rec: indexed {len(offsets):,} records of {rec} in memory (no path_imgidx)",
                file=sys.stderr,
            )
    finally:
        reader.close()
    return offsets


def _part(offsets: np.ndarray, num_parts: int, part_index: int) -> np.ndarray:
    """MXNet's count split with an index (spec §5.2): ``ceil(N / num_parts)``
    records per part, the last part shorter."""
    if num_parts < 1 or not 0 <= part_index < num_parts:
        raise ConfigError(
            f"need num_parts >= 1 and 0 <= part_index < num_parts, got {part_index} of {num_parts}"
        )
    per = math.ceil(len(offsets) / num_parts)
    part = offsets[part_index * per : (part_index + 1) * per]
    if len(part) == 0:
        raise ConfigError(
            f"part {part_index} of {num_parts} holds no records ({len(offsets)} records, "
            f"{per} per part); use at most {math.ceil(len(offsets) / per)} parts"
        )
    return part


def _lst_labels(path: str, width: int) -> dict[int, np.ndarray]:
    labels: dict[int, np.ndarray] = {}
    for item in read_lst(path):
        if len(item.labels) < width:
            raise ConfigError(
                f"{path}:{item.line}: {len(item.labels)} label(s), but label_width is {width}"
            )
        labels[item.key] = np.asarray(item.labels[:width], np.float32)
    return labels

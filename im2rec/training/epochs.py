"""The machinery of MXNet's batch iterators: a part's records, epochs,
the work queue of batches built by :mod:`.batching`'s workers, MXNet's
``DataIter`` calls, resuming, and shutting down. :class:`EpochIterator`
holds it; :class:`~im2rec.training.iterator.ImageRecordIter` and
:class:`~im2rec.training.detiter.ImageDetRecordIter` add their keywords and
what a worker does for a batch (a :data:`~.batching.Fill`)."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError, Im2RecError
from ..storage.blockcache import BlockCache
from .batching import BatchBuffers, BatchJob, Fill, Pending, SlotLayout, Workers
from .blockorder import block_plan
from .listlabels import ListLabels
from .parts import chunk_starts, epoch_order, local_size, part, record_offsets, record_stops
from .sampler_state import whole
from .vocabulary import DataBatch, DataDesc, MXArray, skips_corrupt

__all__ = ["EpochIterator", "ReadOptions"]


@dataclass(frozen=True)
class ReadOptions:
    """The keywords both MXNet iterators take for reading a part, building
    batches and naming them, checked once. The iterators' signatures
    declare each one explicitly (MXNet's names, and "did you mean" for a
    mistyped one); a test checks that they agree with these defaults."""

    path_imgrec: str | os.PathLike[str]
    batch_size: int
    path_imgidx: str | os.PathLike[str] = ""
    shuffle: bool = False
    seed: int = 0
    round_batch: bool = True
    num_parts: int = 1
    part_index: int = 0
    preprocess_threads: int | None = None
    prefetch_buffer: int = 4
    shuffle_chunk_size: int = 0
    shuffle_chunk_seed: int = 0
    seed_aug: int | None = None
    verbose: bool = True
    data_name: str = "data"
    label_name: str = "softmax_label"
    label_pad_value: float = -1.0
    on_corrupt: str = "raise"
    storage_options: dict[str, Any] | None = None
    cache: BlockCache | str | os.PathLike[str] | None = None
    block_window: int = 4

    def __post_init__(self) -> None:
        skips_corrupt(self.on_corrupt)
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, not {self.batch_size}")
        if self.shuffle_chunk_size < 0 or self.prefetch_buffer < 0:
            raise ConfigError("shuffle_chunk_size and prefetch_buffer must not be negative")

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> ReadOptions:
        """These options from an iterator's arguments (its ``locals()``)."""
        return cls(**{f.name: given[f.name] for f in fields(cls)})


class EpochIterator:
    """Batches of a ``.rec``'s part, an epoch at a time (see the module)."""

    _labels: ListLabels | None  # path_imglist's labels, looked up in the batches
    batch_size: int
    label_pad_value: float

    def _open(self, read: ReadOptions) -> None:
        """The reading half of the set-up: the records of this part, their
        spans and order rules (both iterators')."""
        self._read = read
        batch_size, num_parts, part_index = read.batch_size, read.num_parts, read.part_index
        self.batch_size = batch_size
        self.shuffle, self.seed, self.round_batch = read.shuffle, read.seed, read.round_batch
        self.seed_aug = read.seed if read.seed_aug is None else read.seed_aug
        self.skip_corrupt = skips_corrupt(read.on_corrupt)
        self.storage_options = storage_options = read.storage_options
        self.label_pad_value = float(read.label_pad_value)
        path_imgrec, path_imgidx = os.fspath(read.path_imgrec), os.fspath(read.path_imgidx)
        self.path_imgrec = path_imgrec
        every = record_offsets(path_imgrec, path_imgidx, read.verbose, storage_options)
        self._offsets = part(every, num_parts, part_index)
        # each record's span ends where the next (in file order) starts
        self._every, self._size = every, local_size(path_imgrec)
        self.cache, self._plan = block_plan(
            path_imgrec, storage_options, read.cache, every, self._offsets, read.block_window
        )
        if read.round_batch and batch_size > len(self._offsets):
            raise ConfigError(
                f"batch_size {batch_size} is larger than the {len(self._offsets)} records of "
                f"part {part_index} of {num_parts}; use a smaller batch_size, or "
                "round_batch=False for one padded batch"
            )
        self._labels = None
        self._chunks = chunk_starts(self._offsets, read.shuffle_chunk_size, num_parts, path_imgidx)
        self.shuffle_chunk_seed = read.shuffle_chunk_seed

    def _start(self, layout: SlotLayout, fill: Fill, label_shape: tuple[int, ...]) -> None:
        """The working half: the workers, their ring, the first epoch; the
        batches' descriptions (``provide_data``, ``provide_label``)."""
        read = self._read
        self.layout = layout
        data = DataDesc(read.data_name, (self.batch_size, *layout.data_shape),
                        np.dtype(layout.dtype))  # fmt: skip
        label = DataDesc(read.label_name, label_shape, np.dtype(np.float32), "N")
        self.provide_data, self.provide_label = [data], [label]
        self.skipped: list[tuple[int, str]] = []
        self.epoch = 0
        # the next epoch's order and its batches under way (see _top_up)
        self._ahead: tuple[np.ndarray, deque[Pending]] | None = None
        self._workers = Workers(
            read.preprocess_threads, read.prefetch_buffer, self.layout, fill, self.path_imgrec,
            self.storage_options, self.cache,
        )  # fmt: skip
        self._start_epoch()

    # -- setup -------------------------------------------------------------

    @property
    def workers(self) -> int:
        """How many workers build batches (1: this process)."""
        return self._workers.count

    @property
    def worker_kind(self) -> Literal["inline", "processes", "threads"]:
        """Whether they are forked processes, threads, or this process."""
        return self._workers.kind

    def _start_epoch(self, first: int = 0) -> None:
        """Begin ``self.epoch`` at its batch ``first``."""
        n = len(self._offsets)
        self._num_batches = -(-n // self.batch_size)
        self._next_out = first
        self._current: DataBatch | None = None
        if self._ahead is not None and first == 0:  # its first batches are already under way
            self._order, self._pending = self._ahead
        else:
            self._order, self._pending = self._epoch_order(self.epoch), deque()
        self._next_submit = first + len(self._pending)
        self._ahead = None
        self._top_up()

    # -- resuming ----------------------------------------------------------

    def state_dict(self) -> dict[str, int]:
        """Where this iterator is: the epoch and the batches of it handed out
        (with the seeds and the part's size, to check the iterator it is
        loaded into reads the same records the same way). A fresh iterator
        made with the same options and given it by :meth:`load_state_dict`
        gives exactly the batches this one would have given next: the order
        and every random draw are functions of ``(seed, epoch, batch)``."""
        return {"epoch": self.epoch, "batch": self._next_out, "seed": self.seed,
                "seed_aug": self.seed_aug, "records": len(self._offsets),
                "batch_size": self.batch_size}  # fmt: skip

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue where :meth:`state_dict` was taken (see there)."""
        mine = self.state_dict()
        if not isinstance(state, dict) or set(state) != set(mine):
            raise ConfigError(
                f"not an iterator state (it needs {', '.join(sorted(mine))}); a state is made "
                "by state_dict()"
            )
        for key in ("seed", "seed_aug", "records", "batch_size"):
            if whole(state[key], f"the state's {key}") != mine[key]:
                raise ConfigError(
                    f"the state is of an iterator with {key}={state[key]}, this one has "
                    f"{mine[key]}: make it with the same options and the same file"
                )
        batch = whole(state["batch"], "the state's batch", 0, self._num_batches)
        epoch = whole(state["epoch"], "the state's epoch")
        self._workers.drain(self._pending)
        if self._ahead is not None:
            self._workers.drain(self._ahead[1])
            self._ahead = None
        self.epoch = epoch
        self._start_epoch(batch)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        if self._plan is not None:  # a cached remote .rec: a block at a time
            return self._plan.order(self.seed, epoch, self.shuffle)
        n = len(self._offsets)
        return epoch_order(n, self.shuffle, self.seed, epoch, self._chunks, self.shuffle_chunk_seed)

    # -- the work queue ----------------------------------------------------

    def _job(self, batch: int, slot: int, order: np.ndarray, epoch: int) -> BatchJob:
        b = self.batch_size
        positions = order[batch * b : (batch + 1) * b]
        real = len(positions)
        if real < b and self.round_batch:  # wrap to the start of this epoch's order
            positions = np.concatenate([positions, order[: b - real]])
        if self._plan is not None:
            self._plan.ask(positions, epoch)
        offsets = self._offsets[positions]
        return BatchJob(
            rec=str(self.path_imgrec),
            offsets=offsets,
            real=real,
            slot=slot,
            seed=(self.seed_aug & 0xFFFFFFFF, epoch, batch),
            labels_from_header=self._labels is None,
            skip_corrupt=self.skip_corrupt,
            storage_options=self.storage_options,
            cache=self.cache,
            stops=None if self._size is None else record_stops(self._every, offsets, self._size),
            label_pad_value=self.label_pad_value,
        )

    def _top_up(self) -> None:
        free = self._workers.slots.free
        while free and self._next_submit < self._num_batches:
            job = self._job(self._next_submit, free.popleft(), self._order, self.epoch)
            self._pending.append(self._workers.submit(job))
            self._next_submit += 1
        if not free or not self._workers.parallel:
            return
        # Every batch of this epoch is under way and slots are free: start
        # the next epoch's, which reset() takes over, so the workers never
        # wait at an epoch's end (DALI's readers run on the same way).
        if self._ahead is None:
            self._ahead = (self._epoch_order(self.epoch + 1), deque())
        order, ahead = self._ahead
        while free and len(ahead) < self._num_batches:
            job = self._job(len(ahead), free.popleft(), order, self.epoch + 1)
            ahead.append(self._workers.submit(job))

    # -- MXNet's DataIter API ----------------------------------------------

    def iter_next(self) -> bool:
        """Advance to the next batch; False at the end of the epoch."""
        if self._next_out >= self._num_batches:
            self._current = None
            return False
        self._top_up()  # slots given back since the last batch (the caller dropped it)
        pending = self._pending.popleft()
        self._next_out += 1
        lent = False
        try:
            got = self._workers.collect(pending)
            self._current, lent = self._make_batch(got)
        finally:
            if not lent:
                self._workers.slots.free.append(pending.job.slot)
        self._top_up()
        return True

    def _make_batch(self, got: BatchBuffers) -> tuple[DataBatch, bool]:
        """The batch, and whether its pixels are a view of the slot (lent
        until the caller drops them) rather than a copy."""
        result = got.result
        view, labels, ids = got.views
        labels, ids = labels.copy(), ids.copy()
        lent = self._workers.slots.lend(view, got.slot)
        data = view if lent else self._workers.slots.copy(view)
        del got, view
        self.skipped.extend(result.skipped)
        if self._labels is not None:
            labels[: result.filled] = self._lookup(ids[: result.filled])
        label = labels[:, 0] if labels.shape[1] == 1 else labels
        batch = DataBatch(
            data=[data.view(MXArray)],
            label=[label.view(MXArray)],
            pad=self.batch_size - result.filled_real,
            index=ids,
            provide_data=self.provide_data,
            provide_label=self.provide_label,
        )
        return batch, lent

    def _lookup(self, ids: np.ndarray) -> np.ndarray:
        assert self._labels is not None
        try:
            return self._labels.lookup(ids)
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
        self._workers.drain(self._pending)
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

    def close(self) -> None:
        """Stop the workers and free the shared memory (also done when the
        iterator is garbage-collected)."""
        self._pending.clear()
        self._ahead = None
        self._workers.slots.close()
        self._workers.finalizer()

    def __enter__(self) -> EpochIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.path_imgrec!r}, {self.num_records} records, "
            f"batch_size={self.batch_size}, epoch={self.epoch})"
        )

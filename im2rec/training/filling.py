"""What one worker does for one batch: read the job's records and decode
them into the batch's slot (:func:`fill_batch`), a run of single-label
records at a time in C. :mod:`.batching` hands out the jobs and owns the
slots.

Each batch's random draws come from a generator seeded by ``(seed, epoch,
batch)``, so augmentation is the same whichever worker (or how many) runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, ImageCodecError, RecordFormatError
from ..executors import check_stop
from ..recordio import RecordReader, unpack
from ..recordio.reader import SPAN_LIMIT
from ..storage.blockcache import BlockCache
from .augment import Augmenter

__all__ = ["NATIVE_RUN", "BatchJob", "BatchResult", "ImageFill", "fill_batch", "unusable"]


@dataclass(frozen=True)
class BatchJob:
    """One batch to build: records at ``offsets`` (the first ``real`` are the
    batch's own, the rest wrap around to fill it) into ``slot``."""

    rec: str
    offsets: np.ndarray
    real: int
    slot: int
    seed: tuple[int, ...]
    labels_from_header: bool
    skip_corrupt: bool
    storage_options: dict[str, Any] | None = None
    cache: BlockCache | None = None
    #: where each record's span ends (the next record's offset), when known:
    #: each is then read in one pread
    stops: np.ndarray | None = None
    #: what a record with fewer labels than label_width is padded with
    label_pad_value: float = -1.0


@dataclass(frozen=True)
class BatchResult:
    """``filled`` samples were written, ``filled_real`` of them the batch's
    own; ``skipped`` lists ``(offset, reason)`` for records that failed."""

    filled: int
    filled_real: int
    skipped: list[tuple[int, str]]


#: samples planned and rendered at once in a worker before check_stop()
#: looks again: a stop waits for at most this many images, and planning a
#: run costs the same whatever its length (docs/measured.md)
NATIVE_RUN = 64


def fill_batch(
    job: BatchJob,
    reader: RecordReader,
    augmenter: Augmenter,
    views: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> BatchResult:
    """Decode the job's records into ``views``, good ones first; the slots
    after them are zeroed so a short batch never shows stale data. Runs of
    single-label records are read and cropped in C
    (:meth:`~im2rec.training.augment.fused.Writer.records`); a sample that
    loop stops at is finished here, as every sample is without it."""
    data, labels, ids = views
    rng = np.random.default_rng(job.seed)
    write = augmenter.writer(rng)
    filled = filled_real = 0
    skipped: list[tuple[int, str]] = []
    stops = job.stops.tolist() if job.stops is not None else None
    offsets = job.offsets.tolist()
    fd = None
    if job.stops is not None and write.batched and labels.shape[1] == 1:
        fd = reader.span_fd()
        starts, ends = (np.ascontiguousarray(a, np.int64) for a in (job.offsets, job.stops))
        read = np.zeros(NATIVE_RUN, np.float32)
    n = 0
    while n < len(offsets):
        check_stop()  # after close(): a few images, not the batch
        outcome = None
        if fd is not None:
            run = min(NATIVE_RUN, len(offsets) - n)
            done, outcome = write.records(
                fd, starts[n : n + run], ends[n : n + run], data[filled : filled + run],
                read[:run], ids[filled : filled + run], 0, SPAN_LIMIT, False,
            )  # fmt: skip
            labels[filled : filled + done, 0] = read[:done] if job.labels_from_header else 0.0
            filled_real += max(0, min(n + done, job.real) - n)
            filled, n = filled + done, n + done
            if done == run:
                continue
        offset = offsets[n]  # the per-sample path (outcome: what the C loop said of it)
        try:
            if stops is not None:
                record = reader.read_span(offset, stops[n])
            else:
                record = reader.read_at(offset, copy=False)
            header, payload = unpack(record)
            label = _label(header.flag, header.label, labels.shape[1], job, reader.name, offset)
            write.finish(outcome, payload, data[filled])
        except (ImageCodecError, RecordFormatError) as exc:
            if not job.skip_corrupt:
                raise unusable(exc, reader.name, offset, "rec verify") from None
            skipped.append((offset, str(exc)))
            n += 1
            continue
        labels[filled] = label
        ids[filled] = header.id
        filled += 1
        filled_real += n < job.real
        n += 1
    data[filled:] = 0
    labels[filled:] = 0
    ids[filled:] = 0
    return BatchResult(filled, filled_real, skipped)


def unusable(
    exc: ImageCodecError | RecordFormatError, name: str, offset: int, check: str
) -> Exception:
    """``exc`` (a record that does not decode or parse) as the one line a
    worker raises: the file, the record's byte, what to run (``check``)."""
    return type(exc)(
        f"{name}: the record at byte {offset:,} cannot be used: {exc}; check the file with "
        f"`{check}`, or pass on_corrupt='skip' to skip such records"
    )


@dataclass(frozen=True)
class ImageFill:
    """``ImageRecordIter``'s work for a batch: :func:`fill_batch` with its
    augmenter (a :data:`~im2rec.training.batching.Fill`)."""

    augmenter: Augmenter

    def __call__(
        self, job: BatchJob, reader: RecordReader, views: tuple[np.ndarray, np.ndarray, np.ndarray]
    ) -> BatchResult:
        return fill_batch(job, reader, self.augmenter, views)


def _label(
    flag: int, label: Any, width: int, job: BatchJob, name: str, offset: int
) -> np.ndarray | float:
    if not job.labels_from_header:
        return 0.0  # the parent fills labels from path_imglist
    count = flag if flag > 0 else 1
    if count > width:
        # MXNet's own check, with its wording's facts (docs/format.md,
        # "ImageRecordIter", "One record's pipeline", step 3); fewer labels
        # than label_width, which MXNet refuses too, are padded instead
        raise ConfigError(
            f"{name}: the record at byte {offset:,} has {count} label(s) but label_width is "
            f"{width}; set label_width={count} or more, or give labels with path_imglist"
        )
    if count < width:
        row = np.full(width, job.label_pad_value, np.float32)
        row[:count] = label
        return row
    return label if flag > 0 else float(label)

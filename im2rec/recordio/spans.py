"""Whole single-label records read a batch at a time: what the training
loaders hand the C decoder's batch (im2rec/imaging/_batch.h), images in
one buffer.

Each span ``offsets[j]:stops[j]`` of an open file is read with one
``pread`` into one buffer, then the framing and the header of every record
are checked at once with numpy: the magic word, a whole record (cflag 0)
whose length and padding fill the span exactly, a header with flag 0 (one
label, in the header) and, for class labels, a class index
(:func:`~im2rec.recordio.header.is_class_index`). The batch stops at the
first span that is not such a record (or cannot be read): the caller's
per-record path reads that one and says what it is. The rules are
:mod:`~im2rec.recordio.codec`'s and :mod:`~im2rec.recordio.header`'s
(docs/format.md, "Records on disk").
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from .codec import (
    CFLAG_WHOLE,
    HEAD_SIZE,
    MAGIC,
    MAX_RECORD_SIZE,
    decode_flag,
    frame_size,
    holds_labels,
    image_start,
)
from .header import is_class_index

__all__ = ["Singles", "read_singles"]

_FIRST = HEAD_SIZE + image_start(0)  # where a single-label record's image starts


class Singles(NamedTuple):
    """The records of a batch up to the first that is not a whole
    single-label one: their images in ``data``."""

    data: np.ndarray  # uint8: the records, back to back (the buffer given, or a new one)
    starts: np.ndarray  # int64: each image's first byte in data
    lengths: np.ndarray  # int64: each image's length
    labels: np.ndarray  # float32
    ids: np.ndarray  # uint64
    taken: int  # how many records, from the first


def read_singles(
    fd: int,
    offsets: np.ndarray,
    stops: np.ndarray,
    span_limit: int,
    classes: bool,
    buffer: np.ndarray | None = None,
) -> Singles:
    """The records at ``offsets[j]:stops[j]`` (int64) of ``fd`` from the
    first up to the first that is not one whole single-label record (with
    ``classes``: whose label is a class index), or is longer than
    ``span_limit``, or cannot be read whole. They are read into ``buffer``
    (uint8) where it is large enough: a caller that reads batch after batch
    keeps one, which spares a fresh allocation's page faults each time."""
    offsets = np.asarray(offsets, np.int64)
    spans = np.asarray(stops, np.int64) - offsets
    usable = (
        (offsets >= 0) & (spans >= _FIRST) & (spans <= min(span_limit, HEAD_SIZE + MAX_RECORD_SIZE))
    )
    count = int(usable.argmin()) if not usable.all() else len(offsets)
    bases = np.zeros(count + 1, np.int64)
    np.cumsum(spans[:count], out=bases[1:])
    total = int(bases[-1])
    data = (
        buffer[:total] if buffer is not None and len(buffer) >= total else np.empty(total, np.uint8)
    )
    view = data.data  # (a memoryview of the array)
    for j in range(count):  # one pread a record; a short read ends the batch
        at, size = int(bases[j]), int(spans[j])
        try:
            got = os.preadv(fd, [view[at : at + size]], int(offsets[j]))
        except OSError:
            got = -1
        if got != size:
            count = j
            break
    bases = bases[:count]
    words = data[bases[:, None] + np.arange(_FIRST)]
    head = words.view("<u4").reshape(count, _FIRST // 4)  # magic, lrec, flag, label, id (2)
    lrec, flag = head[:, 1].astype(np.int64), head[:, 2].astype(np.int64)
    good = (
        (head[:, 0] == MAGIC)
        & (decode_flag(lrec) == CFLAG_WHOLE)
        & (frame_size(lrec) == spans[:count])
        & holds_labels(flag, lrec)
        & (flag == 0)  # flag 0: one label, in the header
    )
    labels = head[:, 3].view("<f4").astype(np.float32)
    if classes:
        value = labels.astype(np.float64)
        with np.errstate(invalid="ignore"):
            good &= is_class_index(value)
    if not good.all():
        count = int(good.argmin())
    ids = head[:count, 4].astype(np.uint64) | head[:count, 5].astype(np.uint64) << np.uint64(32)
    return Singles(
        data, bases[:count] + _FIRST, lrec[:count] - image_start(0), labels[:count], ids, count
    )

"""Walking a ``.rec`` a block at a time: what ``rec info`` and ``rec
verify`` read a file with.

:func:`walk_blocks` reads the file in blocks of :data:`BLOCK` bytes and
hands over, for each, the heads of the whole records lying in it at once
(a :class:`Block`): the work on them is done on arrays, not a record at a
time. A record the block walk does not take (a split record, one larger
than a block, damage) comes as :func:`~im2rec.recordio.walking.walk_records`
gives it, ``(offset, next_offset)`` or a :class:`Damage`, in its place in
file order.

The heads of a block are found by ``_words.whole_frames`` when the C
extension is built, else by :func:`_whole_frames` below (the same walk;
tests check one against the other).
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import native
from ..executors import tune_malloc
from ..storage.files import FileView, placed, read_room
from .codec import (
    CFLAG_WHOLE,
    HEAD,
    HEAD_SIZE,
    IR_HEADER,
    IR_HEADER_SIZE,
    MAGIC,
    decode_flag,
    frame_size,
    holds_labels,
)
from .detection import Labels
from .reader import RecordReader
from .runs import runs
from .walking import Damage, walk_records

__all__ = ["BLOCK", "HEADER_FIELDS", "MAX_RECORDS", "Block", "walk_blocks", "whole_frames"]

#: bytes read at a time (the records lying wholly in them are one Block,
#: or several of at most MAX_RECORDS records: the arrays made of a block's
#: records stay small however small the records are)
BLOCK = 8 << 20
MAX_RECORDS = 1 << 16

#: a frame's head and the image header after it, as numpy reads them:
#: the same words as codec.HEAD and codec.IR_HEADER
HEADER_FIELDS = np.dtype(
    {
        "names": ["magic", "lrec", "flag", "label", "id", "id2"],
        "formats": ["<u4", "<u4", "<u4", "<f4", "<u8", "<u8"],
        "offsets": [0, 4, 8, 12, 16, 24],
    }
)
assert HEADER_FIELDS.itemsize == HEAD.size + IR_HEADER.size == 32

_native = getattr(native.load("words"), "whole_frames", None)


def _whole_frames(data: bytes | memoryview, start: int, out: np.ndarray) -> tuple[int, int]:
    pos, count, end = start, 0, len(data)
    while count < len(out) and pos + HEAD_SIZE <= end:
        magic, lrec = HEAD.unpack_from(data, pos)
        nxt = pos + frame_size(lrec)
        if magic != MAGIC or decode_flag(lrec) != CFLAG_WHOLE or nxt > end:
            break
        out[count] = pos
        count += 1
        pos = nxt
    return count, pos


def whole_frames(data: bytes | memoryview, start: int, out: np.ndarray) -> tuple[int, int]:
    """The heads of the whole records lying one after another in ``data``
    from ``start`` (a multiple of 4), written to ``out`` (int64, as many as
    fit): ``(count, stop)``, ``stop`` the first frame not taken (a head cut
    by the end, no magic word, a part of a split record, a payload past the
    end) or the end."""
    if _native is not None:
        return _native(data, start, out)  # type: ignore[no-any-return]
    return _whole_frames(data, start, out)


@dataclass(frozen=True)
class Block:
    """Whole records lying in ``data`` (the file's bytes from ``base``), at
    ``heads`` (int64 offsets into ``data``, rising). ``data`` may be a
    buffer the walk reuses (:func:`walk_blocks`): what is kept of it is
    copied out."""

    data: bytes | memoryview
    base: int
    heads: np.ndarray
    #: :meth:`header_fields`, when the walk copied them as it found the heads
    fields: np.ndarray | None = None
    #: :meth:`labels`, when the walk gathered them as it read the block
    labelled: tuple[np.ndarray, Labels] | None = None

    def header_fields(self) -> np.ndarray:
        """Each record's frame head and image header (:data:`HEADER_FIELDS`);
        a record shorter than its header has bytes of the next record (or
        zeros) past its end: check ``lrec`` before using the rest."""
        if self.fields is not None:
            return self.fields
        words = np.frombuffer(self.data, "<u4", count=len(self.data) // 4)
        at = (self.heads >> 2)[:, None] + np.arange(HEADER_FIELDS.itemsize // 4)
        rows = np.where(at < len(words), words[np.minimum(at, len(words) - 1)], 0)
        return rows.astype("<u4").view(HEADER_FIELDS)[:, 0]

    def labels(self) -> tuple[np.ndarray, Labels]:
        """The records whose header reads with its labels before the image
        (flag > 0, ``lrec`` holding them): their positions in the block,
        rising, and their labels, copied out (a detection label each, when
        the layout holds: :func:`~im2rec.recordio.detection.check`)."""
        if self.labelled is not None:
            return self.labelled
        return _labels_of(self.data, self.heads, self.header_fields())


def _labels_of(
    data: bytes | memoryview, heads: np.ndarray, fields: np.ndarray
) -> tuple[np.ndarray, Labels]:
    """:meth:`Block.labels` of the records at ``heads`` of ``data``."""
    if not fields["flag"].any():  # (the usual classification block: no labels before images)
        none = np.empty(0, np.int64)
        return none, Labels(np.empty(0, np.float32), none, none)
    flag, lrec = fields["flag"].astype(np.int64), fields["lrec"].astype(np.int64)
    many = np.flatnonzero((flag > 0) & holds_labels(flag, lrec))
    words = np.frombuffer(data, "<f4", count=len(data) // 4)
    values, starts = runs(words, (heads[many] + HEAD_SIZE + IR_HEADER_SIZE) >> 2, flag[many])
    return many, Labels(values, starts, flag[many])


def walk_blocks(
    reader: RecordReader,
    *,
    recover: bool = False,
    block: int = BLOCK,
    start: int = 0,
    labels: bool = False,
) -> Iterator[Block | tuple[int, int] | Damage]:
    """Every record of the file in order from ``start`` (a record's head):
    runs of whole records a :class:`Block` at a time, any other record (or
    damaged stretch, with ``recover``) as :func:`walk_records` gives it.
    With ``labels``, the blocks' :meth:`Block.labels` are gathered on the
    reading thread, where it can (the caller asks for each block's)."""
    tune_malloc()  # (a block's arrays, made and freed block after block)
    buf, size = reader.mapping()
    room = min(block // HEAD_SIZE + 1, MAX_RECORDS)
    out = np.empty(room, np.int64)
    ahead = _ReadAhead(buf, block, room, labels)
    try:
        base, data, pos = start, b"", start
        walked: _Walked | None = None
        while pos < size:
            at = pos - base
            if not 0 <= at < len(data):
                base, at = pos, 0
                data, walked = ahead.read(pos)
            labelled = None
            if at == 0 and walked is not None:  # (walked as it was read)
                count, stop = walked.count, walked.stop
                heads, fields = walked.heads[:count].copy(), walked.fields[:count].copy()
                labelled = walked.labelled
            else:
                count, stop = whole_frames(data, at, out)
                heads, fields = out[:count].copy(), None
            if count:
                pos = base + stop
                if count < room and (stop == len(data) or _cut(data, stop)):
                    ahead.start(pos)  # (the next block, read while this one is used)
                yield Block(data, base, heads, fields, labelled)
                continue
            if at and base + len(data) < size and _cut(data, at):  # (it lies across the end)
                base = pos
                data, walked = ahead.read(pos)
                continue
            # a split record, one larger than a block, damage, the file's end:
            # one item of the per-record walk
            item = next(walk_records(reader, recover=recover, start=pos))
            yield item
            pos = item.end if isinstance(item, Damage) else item[1]
    finally:
        ahead.close()


@dataclass(frozen=True)
class _Walked:
    """The whole records from the start of a block read (``whole_frames``
    from 0, with their :data:`HEADER_FIELDS`), found as it was read."""

    count: int
    stop: int
    heads: np.ndarray
    fields: np.ndarray
    labelled: tuple[np.ndarray, Labels] | None


class _ReadAhead:
    """Reads of a block, the next one started on a thread while the caller
    works on the last (``pread`` lets go of the GIL). A local file's blocks
    are read into two buffers in turn (new memory for each would be page
    faults on every 4 KiB): a block's ``data`` is good until the walk has
    moved two blocks on. With the C walk, a local block's whole records
    (at most ``room``) are found on the thread too, just after the read,
    while the block is in the CPU's cache, and with ``labels`` their labels
    gathered (the copy lets go of the GIL)."""

    def __init__(self, buf: Any, block: int, room: int, labels: bool = False) -> None:
        self.buf, self.block, self.room, self.labels = buf, block, room, labels
        self._next: tuple[int, Future[tuple[Any, _Walked | None]]] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._buffers: list[tuple[mmap.mmap, np.ndarray, np.ndarray]] = []
        self._turn = 0

    def start(self, pos: int) -> None:
        if pos >= self.buf.size:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="im2rec-read")
        self._next = (pos, self._pool.submit(self._read, pos))

    def read(self, pos: int) -> tuple[Any, _Walked | None]:
        """The block from ``pos``, and its whole records when found as it was read."""
        started, self._next = self._next, None
        if started is not None:
            data = started[1].result()  # (a read not wanted is waited for all the same)
            if started[0] == pos:
                return data
        return self._read(pos)

    def _read(self, pos: int) -> tuple[Any, _Walked | None]:
        n = max(0, min(self.block, self.buf.size - pos))
        if type(self.buf) is not FileView:
            return self.buf.read(pos, n), None
        if len(self._buffers) < 2:
            self._buffers.append((read_room(self.block), np.empty(self.room, np.int64),
                                  np.empty(self.room, HEADER_FIELDS)))  # fmt: skip
        room, heads, fields = self._buffers[self._turn % len(self._buffers)]
        view = placed(room, pos, n)
        self._turn += 1
        self.buf.fill(view, pos)
        if _native is None:
            return view, None
        count, stop = _native(view, 0, heads, fields)
        labelled = _labels_of(view, heads[:count], fields[:count]) if self.labels else None
        return view, _Walked(count, stop, heads, fields, labelled)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _cut(data: bytes | memoryview, at: int) -> bool:
    """Whether the frame at ``at`` is a whole record the end of ``data`` cut."""
    if at + HEAD_SIZE > len(data):
        return True
    magic, lrec = HEAD.unpack_from(data, at)
    return bool(magic == MAGIC and decode_flag(lrec) == CFLAG_WHOLE)

"""Walking a ``.rec``'s frames: what verify, summarise, unpack, show,
merge, export and the samplers share.

The walk reads the file's frame heads (with ``pread``, a block at a time)
without copying payloads, so a multi-GB file is streamed at close to disk
speed. With ``recover`` a damaged stretch is skipped: the walk moves on to
the next aligned magic word whose length word is plausible, and reports
the skipped byte range.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import RecordFormatError
from ..storage.files import FileView
from ..storage.prefetch import FOLLOW_STEP, Follower, follow
from .codec import (
    ALIGN,
    CFLAG_FIRST,
    CFLAG_WHOLE,
    HEAD,
    HEAD_SIZE,
    IR_HEADER,
    MAGIC_BYTES,
    aligned,
    decode_flag,
    decode_length,
    image_start,
    padded,
)
from .framing import Buffer, iter_heads, read_record
from .header import unpack
from .reader import RecordReader

__all__ = ["Damage", "Progress", "header_at", "length_word", "walk_records"]

Progress = Callable[[int, int], None]  # (bytes walked, file size)


@dataclass(frozen=True)
class Damage:
    """A stretch ``[offset, end)`` that holds no readable record."""

    offset: int
    end: int
    reason: str


def length_word(buf: Buffer, head: int) -> int:
    """The length word of the frame at ``head``."""
    return int(HEAD.unpack(buf[head : head + HEAD_SIZE])[1])


def _next_head(buf: FileView | bytes, start: int, size: int) -> int:
    """The next aligned offset that looks like a record head, or ``size``."""
    pos = padded(start)
    while pos + HEAD_SIZE <= size:
        hit = buf.find(MAGIC_BYTES, pos)
        if hit == -1 or hit + HEAD_SIZE > size:  # a magic in the last 8 bytes heads nothing
            break
        if aligned(hit):
            lrec = length_word(buf, hit)
            starts = decode_flag(lrec) in (CFLAG_WHOLE, CFLAG_FIRST)
            if starts and hit + HEAD_SIZE + decode_length(lrec) <= size:
                return hit
        pos = padded(hit + 1)
    return size


def walk_records(
    reader: RecordReader, *, recover: bool = False, start: int = 0
) -> Iterator[tuple[int, int] | Damage]:
    """``(offset, next_offset)`` for every record in file order from
    ``start`` (a record's head); with ``recover``, a :class:`Damage` for
    each unreadable stretch instead of an error.

    Once the walk is a read-ahead step into a local file, the file is read
    in order ahead of it (:func:`~im2rec.storage.prefetch.follow`): a walk
    of heads alone over a cold file otherwise waits for the disk at every
    head."""
    buf, size = reader.mapping()
    pos = start
    wake = start + FOLLOW_STEP  # (where the follower is next told of the walk)
    ahead: Follower | None = None
    tried = False
    try:
        while pos < size:
            try:
                for head, nxt in iter_heads(buf, size, reader.name, start=pos):
                    yield head, nxt
                    pos = nxt
                    if pos >= wake:  # (a comparison a record; the rest once a step)
                        if not tried and type(buf) is FileView:
                            ahead, tried = follow(buf.fd, size, pos), True
                        if ahead is not None:
                            ahead.tell(pos)
                        wake = pos + FOLLOW_STEP
                return
            except RecordFormatError as exc:
                if not recover:
                    raise
                resume = _next_head(buf, pos + ALIGN, size)
                yield Damage(pos, resume, str(exc).split(": ", 1)[-1])
                pos = resume
    finally:
        if ahead is not None:
            ahead.stop()


def header_at(buf: Buffer, head: int, nxt: int, name: str) -> Any:
    """The image-record header of the record at ``head``, reading only the
    header (and its labels) when the record is not split."""
    first = buf[head : head + HEAD_SIZE + IR_HEADER.size]
    lrec = HEAD.unpack_from(first)[1]
    length = decode_length(lrec)
    if decode_flag(lrec) == CFLAG_WHOLE and length >= IR_HEADER.size:
        flag = IR_HEADER.unpack_from(first, HEAD_SIZE)[0]
        if flag == 0:
            return unpack(first[HEAD_SIZE:])[0]
        start = head + HEAD_SIZE
        return unpack(buf[start : start + min(length, image_start(flag))])[0]
    return unpack(read_record(buf, head, nxt, name)[0])[0]

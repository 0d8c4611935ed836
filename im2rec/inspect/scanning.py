"""Walking a ``.rec``'s frames, and ``rec index`` (rebuild_index) on top.

The walk is shared by verify (:mod:`.verifying`), summarise (:mod:`.summary`),
unpack, show, merge and export. It walks the file's frame headers (read with ``pread``, a block at a
time), without copying payloads, so a multi-GB file is streamed at close to disk speed with
memory that grows only with the record count (one int64 offset each). With
``recover`` a damaged stretch is skipped: the walk moves on to the next
4-aligned magic word whose length word is plausible, and reports the skipped
byte range.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import Im2RecError, RecordFormatError
from ..recordio import RecordIndex, RecordReader, read_record, unpack
from ..recordio.framing import LENGTH_MASK, MAGIC_BYTES, Buffer, iter_heads
from ..storage.files import FileView

__all__ = ["FRAME_WORDS", "Damage", "Progress", "header_at", "rebuild_index", "walk_records"]

FRAME_WORDS = struct.Struct("<II")  # a frame head: magic, cflag << 29 | length
_HEADER = struct.Struct("<IfQQ")
Progress = Callable[[int, int], None]  # (bytes walked, file size)


@dataclass(frozen=True)
class Damage:
    """A stretch ``[offset, end)`` that holds no readable record."""

    offset: int
    end: int
    reason: str


def _next_head(buf: FileView | bytes, start: int, size: int) -> int:
    """The next aligned offset that looks like a record head, or ``size``."""
    pos = start + (-start % 4)
    while pos + 8 <= size:
        hit = buf.find(MAGIC_BYTES, pos)
        if hit == -1 or hit + 8 > size:  # a magic in the last 8 bytes heads nothing
            break
        if hit % 4 == 0:
            _, lrec = FRAME_WORDS.unpack(buf[hit : hit + 8])
            if lrec >> 29 in (0, 1) and hit + 8 + (lrec & LENGTH_MASK) <= size:
                return hit
        pos = hit + (4 - hit % 4 if hit % 4 else 4)
    return size


def walk_records(
    reader: RecordReader, *, recover: bool = False
) -> Iterator[tuple[int, int] | Damage]:
    """``(offset, next_offset)`` for every record in file order; with
    ``recover``, a :class:`Damage` for each unreadable stretch instead of an
    error."""
    buf, size = reader.mapping()
    pos = 0
    while pos < size:
        try:
            for head, nxt in iter_heads(buf, size, reader.name, start=pos):
                yield head, nxt
                pos = nxt
            return
        except RecordFormatError as exc:
            if not recover:
                raise
            resume = _next_head(buf, pos + 4, size)
            yield Damage(pos, resume, str(exc).split(": ", 1)[-1])
            pos = resume


def header_at(buf: Buffer, head: int, nxt: int, name: str) -> Any:
    """The image-record header of the record at ``head``, reading only the
    header (and its labels) when the record is not split."""
    first = buf[head : head + 8 + _HEADER.size]
    _, lrec = FRAME_WORDS.unpack_from(first)
    length = lrec & LENGTH_MASK
    if lrec >> 29 == 0 and length >= _HEADER.size:
        flag = _HEADER.unpack_from(first, 8)[0]
        if flag == 0:
            return unpack(first[8:])[0]
        return unpack(buf[head + 8 : head + 8 + min(length, _HEADER.size + 4 * flag)])[0]
    return unpack(read_record(buf, head, nxt, name)[0])[0]


def rebuild_index(
    path: str | os.PathLike[str],
    *,
    keys: Literal["seq", "id"] = "seq",
    recover: bool = False,
) -> tuple[RecordIndex, list[Damage]]:
    """Index a ``.rec``: keys 0..N-1 (``seq``, like rec2idx.py) or each
    record's header id (``id``, what im2rec.py writes)."""
    reader = RecordReader(path)
    buf, _ = reader.mapping()
    offsets = array("q")  # 8 bytes a record: millions of records stay small
    ids = array("Q")
    damages: list[Damage] = []
    for item in walk_records(reader, recover=recover):
        if isinstance(item, Damage):
            damages.append(item)
            continue
        offsets.append(item[0])
        if keys == "id":
            try:
                ids.append(int(header_at(buf, item[0], item[1], reader.name).id))
            except RecordFormatError as exc:
                raise Im2RecError(f"{exc}; index it with --keys seq instead") from None
    if keys == "seq":  # numpy-free: `rec index` starts fast
        return RecordIndex(range(len(offsets)), offsets, f"{reader.name} (rebuilt)"), damages
    import numpy as np

    key_array = np.frombuffer(ids, dtype=np.uint64) if ids else np.empty(0, np.uint64)
    ordered = np.sort(key_array)
    dups = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(dups):
        again = int(np.flatnonzero(key_array == dups[0])[1])
        raise Im2RecError(
            f"{reader.name}: header id {int(dups[0])} appears in more than one record (again "
            f"at byte {offsets[again]:,}); use --keys seq"
        )
    # ids at or past 2**63 do not fit int64 keys: kept exact, as Python ints
    big = len(ordered) and int(ordered[-1]) >= 1 << 63
    index_keys = key_array.tolist() if big else key_array.astype(np.int64)
    return RecordIndex(index_keys, offsets, f"{reader.name} (rebuilt)"), damages

"""RecordIO framing: how one record becomes bytes on disk and back.

Layout of one record (all words little-endian uint32; docs/format.md, "Records on disk")::

    +------------+--------------------------+-------------------+---------+
    | magic      | lrec = cflag<<29 | length | payload (length)  | 0-3 pad |
    | 0xCED7230A | cflag: 0 whole, 1 first,  |                   | to 4 B  |
    | 0a 23 d7 ce|        2 middle, 3 last   |                   |         |
    +------------+--------------------------+-------------------+---------+

A payload that contains the magic word at a 4-aligned offset *relative to the
record start* is cut there: the magic bytes are dropped, the pieces are written
as parts with cflag 1, 2 ... 2, 3, and a reader puts the magic word back
between them. Unaligned occurrences stay as they are (they can never sit at an
aligned file position, where a reader looks for headers). Padding is computed
from the whole record length, so only the last part is padded.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator
from typing import Any

from .. import native
from ..errors import (
    NotRecordIOError,
    RecordFormatError,
    RecordTooLargeError,
    TruncatedRecordError,
)
from ..storage.files import FileView
from ..storage.files import pread as _pread
from .codec import (
    CFLAG_FIRST,
    CFLAG_LAST,
    CFLAG_MIDDLE,
    CFLAG_WHOLE,
    HEAD,
    HEAD_SIZE,
    MAGIC,
    MAGIC_BYTES,
    MAX_RECORD_SIZE,
    aligned,
    decode_flag,
    decode_length,
    encode_lrec,
    frame_size,
    padded,
    padding,
)

__all__ = [
    "CFLAG_FIRST",
    "CFLAG_LAST",
    "CFLAG_MIDDLE",
    "CFLAG_WHOLE",
    "MAGIC",
    "MAGIC_BYTES",
    "MAX_RECORD_SIZE",
    "Buffer",
    "frame",
    "frame_parts",
    "has_aligned_magic",
    "not_recordio",
    "whole_frame",
    "needs_split",
    "iter_heads",
    "read_record",
    "unpack_head",
]

_unpack_head = HEAD.unpack_from
#: (magic, length word) at an offset of a buffer
unpack_head = _unpack_head
# From this size a record is scanned for magic words with numpy (faster than
# bytes.find, and worth numpy's import for image-sized records); the C scan,
# when built, is faster than both and imports nothing (docs/measured.md).
_VECTOR_SCAN = 1 << 16
_has_word: Callable[[bytes | bytearray | memoryview, bytes], bool] | None
_has_word = getattr(native.load("words"), "has_word", None)
_frame_whole: Callable[[bytes | bytearray | memoryview], bytes | None] | None
_frame_whole = getattr(native.load("words"), "frame", None)

#: What the readers slice: bytes-like objects, or a file read on demand.
Buffer = bytes | bytearray | memoryview | mmap.mmap | FileView


def _words(buf: Buffer, pos: int) -> tuple[int, int]:
    """The magic and length words at ``pos`` (8 bytes must be there)."""
    if isinstance(buf, FileView):  # parsed in the view's cached block: no copy, one call
        block, off = buf.window(pos)
        if off + HEAD_SIZE > len(block):
            raise buf._shrunk(pos + len(block) - off)
        return _unpack_head(block, off)
    return _unpack_head(buf, pos)


def _payload(buf: Buffer, start: int, length: int) -> bytes:
    if type(buf) is FileView:
        data = buf.read(start, length)
        if len(data) < length:
            raise buf._shrunk(start + len(data))
        return data
    return buf[start : start + length]  # type: ignore[return-value]


def _head(cflag: int, length: int) -> bytes:
    return HEAD.pack(MAGIC, encode_lrec(cflag, length))


def frame(data: bytes | bytearray | memoryview) -> bytes:
    """Return the on-disk bytes of one record holding ``data``, as one
    buffer (what a writer appends for a small record)."""
    if _frame_whole is not None and (framed := _frame_whole(data)) is not None:
        return framed  # (None: a record to split, or too large; said below)
    if isinstance(data, memoryview):
        data = data.tobytes()
    n = len(data)
    if n >= MAX_RECORD_SIZE:
        raise _too_large(n)
    if n < _VECTOR_SCAN:  # inline: this is the per-record path of small records
        hit = data.find(MAGIC_BYTES)
        while hit != -1 and not aligned(hit):
            hit = data.find(MAGIC_BYTES, hit + 1)
        whole = hit == -1
    else:
        whole = not has_aligned_magic(data)
    if whole:  # the common case: one whole record
        return b"".join((_head(CFLAG_WHOLE, n), data, padding(n)))
    return _frame_split(bytes(data))


def needs_split(*pieces: bytes | bytearray | memoryview) -> bool:
    """Whether the record holding the concatenation of ``pieces`` has a
    magic word at a 4-aligned offset, and so is written as a split record.
    Packing workers answer it (in parallel) and hand the answer to
    :func:`frame_parts`, so the writer does not scan every image again."""
    if not all(aligned(len(p)) for p in pieces[:-1]):  # pieces scan alone only when aligned
        return bool(_aligned_magics(b"".join(pieces)))
    return any(has_aligned_magic(p) for p in pieces)


def whole_frame(n: int) -> tuple[bytes, bytes]:
    """The bytes around a whole (unsplit) record of ``n`` bytes: its magic
    and length words before, its padding after."""
    if n >= MAX_RECORD_SIZE:
        raise _too_large(n)
    return _head(CFLAG_WHOLE, n), padding(n)


def frame_parts(
    *pieces: bytes | bytearray | memoryview, split: bool | None = None, copy: bool = True
) -> tuple[list[Any], int]:
    """The on-disk bytes of one record holding the concatenation of
    ``pieces``, as a list of buffers to write in order (for ``os.writev``),
    and their total length.

    ``bytes`` pieces are in the list as they are, not copied: a writer that
    frames an image record as (header, image bytes) never copies the image.
    Mutable buffers are copied (the caller may reuse them), and a record
    that must be split (an aligned magic word inside) is joined. ``split``
    is :func:`needs_split`'s answer when the caller already has it.
    ``copy=False``: the caller will not change the pieces while the list is
    in use, so none is copied.
    """
    n = sum(p.nbytes if type(p) is memoryview else len(p) for p in pieces)  # bytes, not items
    if n >= MAX_RECORD_SIZE:
        raise _too_large(n)
    kept = [p if not copy or type(p) is bytes or _frozen(p) else bytes(p) for p in pieces]
    if split is None:
        split = needs_split(*kept)
    if split:
        joined = _frame_split(b"".join(kept))
        return [joined], len(joined)
    parts: list[Any] = [_head(CFLAG_WHOLE, n), *kept]  # the common case: one whole record
    if pad := padding(n):
        parts.append(pad)
    return parts, HEAD_SIZE + padded(n)


def _too_large(n: int) -> RecordTooLargeError:
    return RecordTooLargeError(
        f"record of {n:,} bytes is too large: RecordIO stores at most "
        f"{MAX_RECORD_SIZE - 1:,} bytes per record (29-bit length); "
        "store smaller images, e.g. re-encode with a lower quality or resize"
    )


def _frozen(piece: bytes | bytearray | memoryview) -> bool:
    """A read-only view of a run of ``bytes``: it cannot change, so it is
    written as it is (a caller may reuse any other buffer: those are copied,
    as are views whose length is not their byte count)."""
    return (
        type(piece) is memoryview and piece.readonly and type(piece.obj) is bytes
        and piece.ndim == 1 and piece.itemsize == 1 and piece.contiguous
    )  # fmt: skip


def has_aligned_magic(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` has a magic word at a multiple of 4 (the usual
    answer, no, without listing where): the C scan when it is built, else
    ``any`` over numpy's comparison (quicker than :func:`_aligned_magics`'
    list of offsets, which it need not make)."""
    if _has_word is not None:
        return _has_word(data, MAGIC_BYTES)
    if len(data) >= _VECTOR_SCAN or type(data) is memoryview:
        import numpy as np

        size = data.nbytes if type(data) is memoryview else len(data)
        return bool((np.frombuffer(data, dtype="<u4", count=size >> 2) == MAGIC).any())
    return bool(_aligned_magics(data))


def _aligned_magics(data: bytes | bytearray) -> list[int]:
    """Offsets of every magic word at a multiple of 4 in ``data``, in one pass."""
    if len(data) >= _VECTOR_SCAN:
        # numpy compares the aligned words at once (see _VECTOR_SCAN)
        import numpy as np

        words = np.frombuffer(data, dtype="<u4", count=len(data) >> 2)
        return (np.flatnonzero(words == MAGIC) << 2).tolist()  # type: ignore[no-any-return]
    hits, hit = [], data.find(MAGIC_BYTES)
    while hit != -1:
        if aligned(hit):
            hits.append(hit)
        hit = data.find(MAGIC_BYTES, hit + 1)
    return hits


def _frame_split(data: bytes) -> bytes:
    # dmlc's writer (docs/format.md, "Records on disk"): cut at every aligned magic word, drop it,
    # emit parts 1, 2..2, then the tail as part 3. Aligned words are 4 apart
    # at least, so each one found in the whole record is a cut.
    out: list[bytes | bytearray] = []
    start = 0
    for hit in _aligned_magics(data):
        out.append(_head(CFLAG_FIRST if start == 0 else CFLAG_MIDDLE, hit - start))
        out.append(data[start:hit])
        start = hit + 4
    n = len(data)
    out.append(_head(CFLAG_LAST, n - start))
    out.append(data[start:])
    out.append(padding(n))
    return b"".join(out)


def read_record(buf: Buffer, pos: int, end: int, name: str) -> tuple[bytes, int]:
    """Decode the record whose first header is at ``pos``.

    Returns the payload (a slice of ``buf``: bytes for bytes/mmap/FileView, a view for a
    memoryview) and the offset of the next record. ``end`` is the size of the
    valid data in ``buf``; ``name`` is the file name used in error messages.
    """
    if type(buf) is FileView and pos + HEAD_SIZE <= end:
        # The per-record path of every file reader, inlined: a whole record
        # inside the view's cached block (or one new block read) is sliced
        # out with no further call. Anything else takes the general path.
        base, block = buf._block
        off = pos - base
        if off < 0 or off + HEAD_SIZE > len(block):
            if 0 <= off <= len(block) + 64:  # a walk over small records: read ahead, cache
                block, off = buf.window(pos)
            else:  # a jump (random access): one small read, not cached
                block, off = _pread(buf.fd, buf.BLOCK, pos), 0
        if off + HEAD_SIZE <= len(block):
            magic, lrec = _unpack_head(block, off)
            nxt = pos + frame_size(lrec)
            if magic == MAGIC and decode_flag(lrec) == CFLAG_WHOLE and nxt <= end:
                off += HEAD_SIZE  # (a whole record's length word is its length)
                if off + lrec <= len(block):
                    return block[off : off + lrec], nxt
                return _payload(buf, pos + HEAD_SIZE, lrec), nxt
    if pos + HEAD_SIZE > end:
        raise _truncated(name, pos, end, "inside a record header")
    magic, lrec = _words(buf, pos)
    if magic != MAGIC:
        raise _bad_magic(name, pos, magic)
    length = decode_length(lrec)
    start = pos + HEAD_SIZE
    nxt = pos + frame_size(lrec)
    if nxt > end:
        raise _truncated(name, pos, end, f"inside a {length:,}-byte payload")
    cflag = decode_flag(lrec)
    if cflag == CFLAG_WHOLE:
        return _payload(buf, start, length), nxt
    if cflag != CFLAG_FIRST:
        raise RecordFormatError(
            f"{name}: byte {pos:,} is not the start of a record (it is part {cflag} "
            "of a split record); the offset is wrong or the .idx is stale: "
            "rebuild the index from the .rec"
        )
    return _read_split(buf, pos, start, length, nxt, end, name)


def _read_split(
    buf: Buffer, head: int, start: int, length: int, nxt: int, end: int, name: str
) -> tuple[bytes, int]:
    parts = [_payload(buf, start, length)]
    total = length
    while True:
        pos = nxt
        if pos + HEAD_SIZE > end:
            raise _truncated(
                name, pos, end, f"inside the split record that starts at byte {head:,}"
            )
        magic, lrec = _words(buf, pos)
        if magic != MAGIC:
            raise _bad_magic(name, pos, magic)
        cflag, length = decode_flag(lrec), decode_length(lrec)
        if cflag not in (CFLAG_MIDDLE, CFLAG_LAST):
            raise RecordFormatError(
                f"{name}: the split record that starts at byte {head:,} is not "
                f"finished: byte {pos:,} holds a part with cflag {cflag} where a "
                "continuation (2 or 3) belongs; the file is damaged"
            )
        start = pos + HEAD_SIZE
        nxt = pos + frame_size(lrec)
        if nxt > end:
            raise _truncated(name, pos, end, f"inside a {length:,}-byte payload")
        total += len(MAGIC_BYTES) + length
        if total >= MAX_RECORD_SIZE:  # no writer makes one; refused before it is joined
            raise RecordFormatError(
                f"{name}: the split record that starts at byte {head:,} holds more than "
                f"{MAX_RECORD_SIZE - 1:,} bytes, which no RecordIO writer makes; the file is "
                "damaged or hostile"
            )
        parts.append(MAGIC_BYTES)
        parts.append(_payload(buf, start, length))
        if cflag == CFLAG_LAST:
            return b"".join(parts), nxt


def iter_heads(buf: Buffer, end: int, name: str, start: int = 0) -> Iterator[tuple[int, int]]:
    """Yield ``(offset, next_offset)`` of every record from ``start`` to ``end``.

    Reads only the 8-byte headers, so it walks a file without copying payloads.
    """
    pos = start
    while pos < end:
        if pos + HEAD_SIZE > end:
            raise _truncated(name, pos, end, "inside a record header")
        head = pos
        while True:
            magic, lrec = _words(buf, pos)
            if magic != MAGIC:
                raise _bad_magic(name, pos, magic)
            cflag = decode_flag(lrec)
            nxt = pos + frame_size(lrec)
            if nxt > end:
                raise _truncated(name, pos, end, "inside a record payload")
            if pos == head and cflag not in (CFLAG_WHOLE, CFLAG_FIRST):
                raise RecordFormatError(
                    f"{name}: byte {pos:,} holds part {cflag} of a split record "
                    "where a new record must start; the file is damaged"
                )
            pos = nxt
            if cflag in (CFLAG_WHOLE, CFLAG_LAST):
                break
            if pos + HEAD_SIZE > end:
                raise _truncated(name, pos, end, f"inside the split record at byte {head:,}")
        yield head, pos


def _truncated(name: str, pos: int, end: int, where: str) -> TruncatedRecordError:
    return TruncatedRecordError(
        f"{name}: truncated {where} at byte {pos:,} (the file has {end:,} bytes); "
        "the file was cut short: copy or re-create it"
    )


def _bad_magic(name: str, pos: int, word: int) -> RecordFormatError:
    what = _what_it_is(name, word) if pos == 0 else None
    if what is not None:
        return NotRecordIOError(f"{name}: {what}")
    return RecordFormatError(
        f"{name}: no record starts at byte {pos:,} (found 0x{word:08X}, expected "
        f"magic 0x{MAGIC:08X}); the file is not RecordIO, is damaged, or the "
        "offset comes from a stale .idx"
    )


#: what the first bytes of a file that is not RecordIO most often are
_TEXT = frozenset(b"0123456789\t .-+e\r\n")


def not_recordio(name: str, first: bytes) -> NotRecordIOError | None:
    """The error for a file whose first bytes ``first`` show it is no
    RecordIO file but a list, an index or an image, or None."""
    if len(first) < 4 or first[:4] == MAGIC_BYTES:
        return None
    what = _what_it_is(name, int.from_bytes(first[:4], "little"))
    return None if what is None else NotRecordIOError(f"{name}: {what}")


def _what_it_is(name: str, word: int) -> str | None:
    """The files people give a .rec command by mistake, named from their
    first four bytes: a list or an index (text of numbers), an image."""
    head = word.to_bytes(4, "little")
    if head[:3] == b"\xff\xd8\xff":
        return "this is a JPEG image, not a .rec; pack images with `rec list` and `rec pack`"
    if head == b"\x89PNG":
        return "this is a PNG image, not a .rec; pack images with `rec list` and `rec pack`"
    if set(head) <= _TEXT and head[:1].isdigit():
        if name.endswith(".idx"):
            return "this is an index (.idx), not a .rec; give the .rec beside it"
        return f"this is a text list (.lst), not a .rec; pack it into one with `rec pack {name}`"
    return None

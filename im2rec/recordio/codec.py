"""The record frame and the image header's layout, stated once (dmlc-core's
``recordio.h``: ``EncodeLRec``, ``DecodeFlag``, ``DecodeLength``; MXNet's
``IRHeader``; docs/format.md, "Records on disk").

A frame is the magic word, the length word (``cflag << 29 | length``),
``length`` bytes and zeros to the next multiple of 4. A whole image
record's bytes are a 24-byte header, ``flag`` float32 labels, then the
image.

The functions take a Python int or a numpy int64 array and give back the
same kind: a walk over one head and a numpy check of a batch of heads
share one spelling. Nothing here imports numpy. The C fast path
(``im2rec/recordio/_words.c``) states the framing for itself; tests check it
against this module.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "ALIGN",
    "CFLAG_FIRST",
    "CFLAG_LAST",
    "CFLAG_MIDDLE",
    "CFLAG_WHOLE",
    "HEAD",
    "HEAD_SIZE",
    "IR_HEADER",
    "IR_HEADER_SIZE",
    "LENGTH_MASK",
    "MAGIC",
    "MAGIC_BYTES",
    "MAX_RECORD_SIZE",
    "aligned",
    "can_start",
    "decode_flag",
    "decode_length",
    "encode_lrec",
    "frame_size",
    "holds_labels",
    "image_start",
    "padded",
    "padding",
    "padding_bits",
]

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)
#: A frame's head: the magic word, then the length word (little-endian).
HEAD = struct.Struct("<II")
HEAD_SIZE = HEAD.size
_FLAG_SHIFT = 29
#: Exclusive upper bound on a record's size: the length field has 29 bits.
MAX_RECORD_SIZE = 1 << _FLAG_SHIFT
LENGTH_MASK = MAX_RECORD_SIZE - 1
# The part a frame holds: a whole record, or a part of one split where its
# payload held an aligned magic word (the word dropped at each cut).
#: A frame holding a whole record.
CFLAG_WHOLE = 0
#: The first part of a split record.
CFLAG_FIRST = 1
#: A middle part of a split record.
CFLAG_MIDDLE = 2
#: The last part of a split record.
CFLAG_LAST = 3
#: Frames start, and payloads are padded, at multiples of this.
ALIGN = 4
#: The image record's header: ``{uint32 flag; float label; uint64 id[2];}``.
IR_HEADER = struct.Struct("<IfQQ")
IR_HEADER_SIZE = IR_HEADER.size
_LABEL_SIZE = 4  # each of a header's ``flag`` labels is a float32
_PADS = (b"", b"\0\0\0", b"\0\0", b"\0")

W = TypeVar("W", int, "NDArray[np.int64]")


def encode_lrec(cflag: int, length: int) -> int:
    """The length word of a frame holding part ``cflag`` and ``length`` bytes."""
    return (cflag << _FLAG_SHIFT) | length


def decode_flag(lrec: W) -> W:
    """The part a length word says its frame holds (a ``CFLAG_*``)."""
    return lrec >> _FLAG_SHIFT


def decode_length(lrec: W) -> W:
    """The payload bytes a length word says its frame holds."""
    return lrec & LENGTH_MASK


def padded(length: W) -> W:
    """``length`` rounded up to a multiple of :data:`ALIGN`."""
    return (length + (ALIGN - 1)) & -ALIGN


def padding(length: int) -> bytes:
    """The zeros written after ``length`` payload bytes."""
    return _PADS[length & (ALIGN - 1)]


@overload
def aligned(offset: int) -> bool: ...
@overload
def aligned(offset: NDArray[np.int64]) -> NDArray[np.bool_]: ...
def aligned(offset: int | NDArray[np.int64]) -> bool | NDArray[np.bool_]:
    """Whether ``offset`` is a multiple of :data:`ALIGN`, where frames
    start (a bool, or an array of them)."""
    return (offset & (ALIGN - 1)) == 0


@overload
def can_start(offset: int) -> bool: ...
@overload
def can_start(offset: NDArray[np.int64]) -> NDArray[np.bool_]: ...
def can_start(offset: int | NDArray[np.int64]) -> bool | NDArray[np.bool_]:
    """Whether a frame may start at ``offset`` (what an index may hold): a
    non-negative multiple of :data:`ALIGN`."""
    return (offset >= 0) & aligned(offset)


def frame_size(lrec: W) -> W:
    """The bytes a frame with length word ``lrec`` takes, head to padding:
    a frame at ``pos`` is followed by one at ``pos + frame_size(lrec)``."""
    return HEAD_SIZE + padded(decode_length(lrec))


def padding_bits(lrec: W) -> W:
    """The bits of a frame's last word (read little-endian) that are its
    padding, zeros in a good frame; 0 when it has none."""
    length = decode_length(lrec)
    pad = padded(length) - length
    return ((1 << (8 * pad)) - 1) << (8 * (ALIGN - pad))


def image_start(flag: W) -> W:
    """Where the image starts in a record whose header has ``flag``: after
    the header and its ``flag`` float32 labels."""
    return IR_HEADER_SIZE + _LABEL_SIZE * flag


@overload
def holds_labels(flag: int, length: int) -> bool: ...
@overload
def holds_labels(flag: NDArray[np.int64], length: NDArray[np.int64]) -> NDArray[np.bool_]: ...
def holds_labels(flag: Any, length: Any) -> Any:
    """Whether a record of ``length`` bytes (its data, after the length
    word) holds its image header and the ``flag`` labels after it."""
    return (length >= IR_HEADER_SIZE) & (image_start(flag) <= length)

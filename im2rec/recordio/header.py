"""The 24-byte image-record header and MXNet's label rules (docs/format.md, "The image header").

Layout, little-endian, no padding (C struct ``{uint32 flag; float label;
uint64 image_id[2];}``)::

    bytes 0-3   flag   0: one scalar label in ``label``
                       n>0: n float32 labels follow the header
    bytes 4-7   label  float32 (0.0 when flag > 0)
    bytes 8-15  id     uint64, im2rec writes the .lst index here
    bytes 16-23 id2    uint64, normally 0

The payload (usually an encoded image) follows the header and any labels.
"""

from __future__ import annotations

import numbers
import struct
from typing import Any, NamedTuple

from ..errors import RecordFormatError
from .codec import IR_HEADER, IR_HEADER_SIZE, holds_labels, image_start

__all__ = [
    "HEADER_SIZE",
    "IRHeader",
    "is_class_index",
    "is_whole",
    "pack",
    "stored_label",
    "unpack",
]

_HEADER = IR_HEADER
HEADER_SIZE = IR_HEADER_SIZE
_U64 = 1 << 64
_unpack_from = _HEADER.unpack_from
_new_tuple = tuple.__new__


_F32 = struct.Struct("<f")
#: Whole numbers a label read as a double holds exactly lie below this.
_EXACT = 2.0**53


def is_whole(value: Any) -> Any:
    """Whether a label is a whole number held exactly (``|value| < 2**53``):
    a float, or a numpy float array (an array of bools then; NaN and
    infinities are not whole)."""
    return (abs(value) < _EXACT) & (value % 1 == 0)


def is_class_index(value: Any) -> Any:
    """Whether a label is a class index: a whole number from 0 below 2**53
    (:func:`is_whole`'s forms)."""
    return (value >= 0) & is_whole(value)


def stored_label(value: float) -> float | None:
    """``value`` as float32 stores it, or None when a whole number would
    come back as another whole number (16,777,217 is stored as 16,777,216:
    two classes or identities silently merged). Fractions round, as in
    MXNet; a value past float32's range raises ``OverflowError``."""
    given = value
    value = float(value)  # (an int past a double's range: OverflowError)
    try:
        (stored,) = _F32.unpack(_F32.pack(value))
    except struct.error:
        raise OverflowError(f"{value!r} does not fit float32") from None
    if value.is_integer() and stored != value:
        return None
    if isinstance(given, numbers.Integral) and int(stored) != int(given):
        return None  # (2**62 + 1: already another number as a double)
    return float(stored)


class IRHeader(NamedTuple):
    """Header of an image record: ``(flag, label, id, id2)``.

    ``label`` is a float, or a float32 array when the record carries several
    labels (``flag`` is then their count).
    """

    flag: int
    label: Any
    id: int
    id2: int


# MXNet's namedtuple was called HEADER; keep its repr so printed headers match,
# and the module-level alias lets pickle find the class under that name.
IRHeader.__name__ = "HEADER"
IRHeader.__qualname__ = "HEADER"
HEADER = IRHeader


def pack(header: IRHeader | tuple[Any, Any, Any, Any], s: bytes | bytearray | memoryview) -> bytes:
    """Prefix ``s`` with the header, applying MXNet's label rules.

    A scalar label (any ``numbers.Number``) is stored in the header with flag 0.
    Anything else is cast to a flat float32 array stored after the header, with
    flag = its length and header label 0. The caller's flag is ignored.

    ``s`` must be bytes-like (``TypeError`` otherwise, as MXNet's
    ``bytes + s`` raised); a label that float32 cannot hold (``1e40``) or
    that is not a number raises :class:`RecordFormatError` instead of being
    stored as ``inf`` or garbage.
    """
    if not isinstance(s, bytes | bytearray | memoryview):
        raise TypeError(
            f"pack() stores bytes after the header, not {type(s).__name__}; "
            "encode the payload first (pack_img encodes an image array)"
        )
    flag, label, id_, id2 = header
    if isinstance(label, numbers.Number):
        return _pack_header(0, label, id_, id2) + bytes(s)
    import numpy as np  # only multi-label records need it; `rec verify` starts without

    try:
        with np.errstate(over="raise", invalid="ignore"):  # NaN stays NaN, as in MXNet
            labels = np.asarray(label, dtype="<f4").ravel()
    except FloatingPointError:
        raise RecordFormatError(
            f"a label of {_shown(label)} does not fit float32 (largest about 3.4e38); "
            "RecordIO stores labels as float32"
        ) from None
    except (TypeError, ValueError) as exc:
        raise RecordFormatError(f"labels must be numbers, not {_shown(label)} ({exc})") from None
    return _pack_header(labels.size, 0.0, id_, id2) + labels.tobytes() + bytes(s)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def _pack_header(flag: int, label: Any, id_: Any, id2: Any) -> bytes:
    try:
        return _HEADER.pack(flag, label, id_, id2)
    except (struct.error, TypeError, OverflowError) as exc:
        for field, value in (("id", id_), ("id2", id2)):
            if not isinstance(value, numbers.Integral) or not 0 <= int(value) < _U64:
                raise RecordFormatError(
                    f"header {field}={value!r} is not an integer in [0, 2**64); "
                    "record ids are unsigned 64-bit (im2rec stores the .lst index there)"
                ) from exc
        if flag >= 1 << 32:
            raise RecordFormatError(f"{flag:,} labels in one record; at most 2**32-1 fit") from exc
        raise RecordFormatError(
            f"header label {label!r} cannot be stored as float32: {exc}"
        ) from exc


def unpack(s: bytes | bytearray | memoryview) -> tuple[IRHeader, bytes]:
    """Split a record into its header and payload.

    With flag > 0 the label is a read-only float32 array of ``flag`` values
    taken from after the header, as MXNet does.
    """
    try:
        fields = _unpack_from(s)
    except struct.error:
        raise RecordFormatError(
            f"record of {len(s)} bytes is too short for the {HEADER_SIZE}-byte "
            "image-record header; it was not written by pack()"
        ) from None
    flag = fields[0]
    if flag == 0:
        # tuple.__new__ skips the namedtuple's Python-level __new__: this is
        # the per-record hot path of every reader.
        return _new_tuple(IRHeader, fields), s[HEADER_SIZE:]  # type: ignore[return-value]
    end = image_start(flag)
    if not holds_labels(flag, len(s)):
        raise RecordFormatError(
            f"record header says {flag:,} float32 labels follow, but the record "
            f"holds only {len(s):,} bytes; the record is damaged or not an image record"
        )
    import numpy as np

    labels = np.frombuffer(s, dtype="<f4", count=flag, offset=HEADER_SIZE)
    if labels.flags.writeable:
        labels.flags.writeable = False
    return IRHeader(flag, labels, fields[2], fields[3]), s[end:]  # type: ignore[return-value]

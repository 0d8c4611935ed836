"""Just enough of MATLAB's MAT-file level 5 format to read the devkit's
``meta.mat`` without scipy: numeric and char arrays, struct arrays, cells,
zlib-compressed elements, the small-element form, either byte order.

Values come back as: ``str`` for char arrays; ``float`` for a numeric 1x1, a
1-D ``numpy`` array otherwise; a list of ``{field: value}`` for struct arrays
(column-major order, as MATLAB stores them); a list for cells.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

from ..errors import DatasetError

__all__ = ["read_mat"]

MI_MATRIX, MI_COMPRESSED = 14, 15
#: The devkit's meta.mat is about 2 MB unpacked; a compressed element that
#: inflates past this is damage or a zip bomb, not a devkit.
MAX_INFLATED = 64 << 20
_NUMERIC = {
    1: "i1",
    2: "u1",
    3: "i2",
    4: "u2",
    5: "i4",
    6: "u4",
    7: "f4",
    9: "f8",
    12: "i8",
    13: "u8",
}
_TEXT = {16: "utf-8", 17: "utf-16", 18: "utf-32"}
CHAR, STRUCT, CELL = 4, 2, 1


class _Reader:
    def __init__(self, data: bytes, order: str, name: str):
        self.data, self.order, self.name = data, order, name

    def fail(self, why: str) -> DatasetError:
        return DatasetError(f"{self.name}: not a MAT-file this reader understands ({why})")

    def element(self, pos: int) -> tuple[int, bytes, int]:
        """``(type, payload, next position)`` of the data element at ``pos``."""
        if pos + 8 > len(self.data):
            raise self.fail(f"truncated at byte {pos}")
        first, second = struct.unpack_from(self.order + "II", self.data, pos)
        if first >> 16:  # small data element: size and type share the first word
            size, kind = first >> 16, first & 0xFFFF
            return kind, self.data[pos + 4 : pos + 4 + size], pos + 8
        kind, size = first, second
        end = pos + 8 + size
        if end > len(self.data):
            raise self.fail(f"an element at byte {pos} runs past the end")
        padded = end if kind == MI_COMPRESSED else end + (-size % 8)
        return kind, self.data[pos + 8 : end], padded

    def enough(self, elements: int, pos: int) -> None:
        """Refuse a struct or cell array whose dimensions claim more elements
        than its bytes can hold (8 at least each): the count comes from the
        file, and a few bytes must not make a loop build millions of items."""
        if not 0 <= elements <= (len(self.data) - pos) // 8 + 1:
            raise self.fail(f"an array claims {elements:,} elements in {len(self.data):,} bytes")

    def value(self, kind: int, payload: bytes) -> tuple[str, Any]:
        if kind == MI_COMPRESSED:
            inflate = zlib.decompressobj()
            raw = inflate.decompress(payload, MAX_INFLATED)
            if inflate.unconsumed_tail:
                raise self.fail(f"a compressed element inflates past {MAX_INFLATED >> 20} MiB")
            inner = _Reader(raw, self.order, self.name)
            kind, payload, _ = inner.element(0)
            return inner.value(kind, payload)
        if kind != MI_MATRIX:
            raise self.fail(f"a top-level element of type {kind}")
        if not payload:
            return "", np.zeros(0)
        return self.matrix(payload)

    def matrix(self, payload: bytes) -> tuple[str, Any]:
        sub = _Reader(payload, self.order, self.name)
        _, flags, pos = sub.element(0)
        klass = flags[0] if self.order == "<" else flags[3]
        _, dims_raw, pos = sub.element(pos)
        count = int(np.prod(np.frombuffer(dims_raw, self.order + "i4").astype(object)))
        _, name, pos = sub.element(pos)
        if klass == STRUCT:
            _, width_raw, pos = sub.element(pos)
            width = struct.unpack(self.order + "i", width_raw[:4])[0]
            _, names_raw, pos = sub.element(pos)
            fields = [
                names_raw[i : i + width].split(b"\0", 1)[0].decode("ascii")
                for i in range(0, len(names_raw), width)
            ]
            sub.enough(count * max(1, len(fields)), pos)
            items = []
            for _ in range(count):
                item = {}
                for field in fields:
                    kind, data, pos = sub.element(pos)
                    item[field] = sub.value(kind, data)[1]
                items.append(item)
            return name.decode("ascii"), items
        if klass == CELL:
            sub.enough(count, pos)
            cells = []
            for _ in range(count):
                kind, data, pos = sub.element(pos)
                cells.append(sub.value(kind, data)[1])
            return name.decode("ascii"), cells
        kind, real, pos = sub.element(pos)
        if klass == CHAR:
            if kind in _TEXT:
                endian = "" if kind == 16 else "-le" if self.order == "<" else "-be"
                text = real.decode(_TEXT[kind] + endian)
            else:
                text = "".join(map(chr, np.frombuffer(real, self.order + _NUMERIC[kind])))
            return name.decode("ascii"), text
        if kind not in _NUMERIC:
            raise self.fail(f"numeric data stored as type {kind}")
        values = np.frombuffer(real, self.order + _NUMERIC[kind]).astype(np.float64)
        return name.decode("ascii"), float(values[0]) if values.size == 1 else values


def read_mat(data: bytes, name: str) -> dict[str, Any]:
    """The named variables of a level-5 MAT-file held in ``data``."""
    if len(data) < 128:
        raise DatasetError(f"{name}: too short for a MAT-file")
    marker = data[126:128]
    if marker not in (b"IM", b"MI"):
        raise DatasetError(f"{name}: not a level-5 MAT-file (MATLAB v7.3/HDF5 is not supported)")
    reader = _Reader(data, "<" if marker == b"IM" else ">", name)
    out: dict[str, Any] = {}
    pos = 128
    try:
        while pos < len(data):
            kind, payload, pos = reader.element(pos)
            var, value = reader.value(kind, payload)
            out[var] = value
    except (IndexError, KeyError, ValueError, struct.error, zlib.error, RecursionError) as exc:
        # Sizes, types and names inside a damaged file point anywhere; each
        # way that shows up in the parse is the same news for the user.
        raise reader.fail(f"damaged: {type(exc).__name__}: {exc}") from None
    return out

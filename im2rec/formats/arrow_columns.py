"""Arrow arrays for ``rec export --to parquet``, built from their buffers.

``pa.array`` on a Python sequence imports pandas the first time it runs
(pyarrow checks the sequence for pandas types): a quarter of a second of
every export's start-up, as long as the rest of the export of 200 MB. The
arrays here are made with ``from_buffers`` over numpy arrays instead, and
the image bytes are copied into buffers used in turn (:class:`BinaryColumn`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "BinaryColumn", "fixed_lists", "float_lists", "integers", "list_lengths", "lists", "numbers",
    "strings", "values",
]  # fmt: skip


def _offsets(sizes: Any, n: int) -> np.ndarray:
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.fromiter(sizes, np.int64, n), out=offsets[1:])
    return offsets


def numbers(pa: Any, kind: Any, values: list[Any]) -> Any:
    """A numeric array of arrow type ``kind`` (an integer or float type)."""
    data = np.asarray(values, dtype=kind.to_pandas_dtype())
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(data)])


def values(pa: Any, kind: Any, data: np.ndarray, valid: np.ndarray | None = None) -> Any:
    """A numeric array of arrow type ``kind`` over ``data`` (a numpy array
    of that type), null where ``valid`` is False."""
    data = np.ascontiguousarray(data, dtype=kind.to_pandas_dtype())
    mask = None
    if valid is not None and not valid.all():
        mask = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(kind, len(data), [mask, pa.py_buffer(data)])


def lists(pa: Any, counts: np.ndarray, child: Any, valid: np.ndarray | None = None) -> Any:
    """A ``list<child's type>`` array: row ``i`` the next ``counts[i]`` of
    ``child``'s values (null where ``valid`` is False)."""
    offsets = _offsets(counts, len(counts)).astype(np.int32)
    mask = None
    if valid is not None and not valid.all():
        mask = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.list_(child.type), len(counts),
                                 [mask, pa.py_buffer(offsets)], children=[child])  # fmt: skip


def fixed_lists(pa: Any, child: Any, width: int) -> Any:
    """A ``fixed_size_list<child's type>[width]`` array of ``child``'s values."""
    return pa.Array.from_buffers(pa.list_(child.type, width), len(child) // width, [None],
                                 children=[child])  # fmt: skip


def list_lengths(array: Any) -> np.ndarray:
    """Each list's length in a list (or large list) array, 0 for a null one,
    read from its buffers (pyarrow's ``list_value_length``, ``fill_null``,
    ``offsets`` and ``to_numpy`` import pandas: a sixth of a second)."""
    validity, offsets_buffer = array.buffers()[:2]
    width = np.int64 if "large" in str(array.type).split("<")[0] else np.int32
    start, n = array.offset, len(array)
    lengths = np.diff(np.frombuffer(offsets_buffer, width)[start : start + n + 1]).astype(np.int64)
    if array.null_count:
        bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
        lengths[~bits[start : start + n].astype(bool)] = 0
    return lengths


def integers(pa: Any, array: Any) -> tuple[np.ndarray, np.ndarray]:
    """An integer array's values (0 where null) and which are not null,
    read from its buffers (``to_numpy`` of one with nulls imports pandas,
    as ``list_lengths`` says)."""
    kind = array.type
    dtype = np.dtype(f"<{'i' if pa.types.is_signed_integer(kind) else 'u'}{kind.bit_width // 8}")
    validity, data = array.buffers()[:2]
    start, n = array.offset, len(array)
    numbers = np.frombuffer(data, dtype)[start : start + n] if n else np.empty(0, dtype)
    valid = np.ones(n, bool)
    if array.null_count:
        bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
        valid = bits[start : start + n].astype(bool)
        numbers = np.where(valid, numbers, 0)
    return numbers, valid


def strings(pa: Any, values: list[str]) -> Any:
    """A string array (UTF-8)."""
    encoded = [value.encode("utf-8", "surrogateescape") for value in values]
    offsets = _offsets(map(len, encoded), len(encoded))
    return pa.StringArray.from_buffers(
        len(encoded), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))
    )


def float_lists(pa: Any, values: list[list[float]]) -> Any:
    """A ``list<float32>`` array."""
    offsets = _offsets(map(len, values), len(values))
    flat = np.fromiter((v for row in values for v in row), np.float32, int(offsets[-1]))
    items = pa.Array.from_buffers(pa.float32(), len(flat), [None, pa.py_buffer(flat)])
    return pa.Array.from_buffers(pa.list_(pa.float32()), len(values),
                                 [None, pa.py_buffer(offsets.astype(np.int32))],
                                 children=[items])  # fmt: skip


class BinaryColumn:
    """Binary arrays built in two buffers used in turn, so that copying the
    images in touches memory already faulted in, at half the cost of a
    fresh block from the allocator for each row group. The caller must be
    done with an array (the row group written) before it builds the one
    after next, which reuses its buffer."""

    def __init__(self, pa: Any, size: int):
        self.pa = pa
        self.buffers = [bytearray(size), bytearray(size)]
        self.turn = 0

    def array(self, values: list[bytes | memoryview]) -> Any:
        offsets = _offsets(map(len, values), len(values))
        total = int(offsets[-1])
        if total >= 1 << 31:  # (past binary's int32 offsets; records are far smaller)
            return self.pa.array(values, self.pa.binary())
        self.turn ^= 1
        if len(self.buffers[self.turn]) < total:
            self.buffers[self.turn] = bytearray(total)
        out = memoryview(self.buffers[self.turn])
        bounds = offsets.tolist()
        for value, start, stop in zip(values, bounds, bounds[1:], strict=False):
            out[start:stop] = value
        return self.pa.BinaryArray.from_buffers(
            self.pa.binary(), len(values),
            [None, self.pa.py_buffer(offsets.astype(np.int32)), self.pa.py_buffer(out[:total])],
        )  # fmt: skip

"""MXNet's NDArray list files (``mx.nd.save``/``mx.nd.load``, and the mean
image ``ImageRecordIter(mean_img=...)`` reads and writes), without MXNet.

Layout (``src/ndarray/ndarray.cc``, all little-endian): ``u64 0x112``, ``u64
0``, ``u64`` array count, each array, ``u64`` name count, each name as ``u64``
length and UTF-8 bytes. An array: ``u32`` magic (V2 ``0xF993FAC9``, V3
``...CA``; V1 ``...C8`` and the older magic-less form are read too), for
V2/V3 an ``i32`` storage type (0, dense; sparse arrays are refused), the
shape (``i32`` ndim and ``i64`` dims; V1 the same, the legacy form ``u32``
dims), the context (``i32`` device type, ``i32`` device id), an ``i32``
dtype flag, then the values.

A file is someone else's: every count and size is checked against the bytes
left before anything is allocated.
"""

from __future__ import annotations

import math
import os
import struct

import numpy as np

from ...errors import DatasetError, MissingFileError
from ...storage.atomic import write_file
from ...storage.files import open_regular

__all__ = ["load_ndarrays", "save_ndarrays"]

_LIST_MAGIC = 0x112
_V1, _V2, _V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
#: mshadow's dtype flags.
_DTYPES = {
    0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32,
    5: np.int8, 6: np.int64, 7: np.bool_, 8: np.int16, 9: np.uint16,
    10: np.uint32, 11: np.uint64,
}  # fmt: skip
_FLAG_OF = {np.dtype(v): k for k, v in _DTYPES.items()}
MAX_FILE = 1 << 31  # a mean image is a few MB; model files are not read here
MAX_NDIM = 32
#: arrays (and names) in one file: a mean-image file holds one. Each array
#: becomes a Python object, so the count is bounded, not only by the bytes
#: (a "none" array is 4 bytes: 40 MB of them once took 1.3 GB)
MAX_ARRAYS = 1024


class _Cursor:
    def __init__(self, data: bytes, name: str):
        self.data, self.pos, self.name = data, 0, name

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise DatasetError(
                f"{self.name}: not a whole MXNet NDArray file (it ends inside {what} at byte "
                f"{self.pos:,}); make it again with mx.nd.save, or delete it to have "
                "ImageRecordIter compute the mean image again"
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str) -> tuple[int, ...]:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def count(self, what: str, each: int) -> int:
        """A u64 count of items taking at least ``each`` bytes, at most
        :data:`MAX_ARRAYS`."""
        (n,) = self.unpack("Q", what)
        if n > MAX_ARRAYS:
            raise DatasetError(
                f"{self.name}: claims {n:,} {what}; an NDArray file read here (a mean image) "
                f"holds at most {MAX_ARRAYS:,}"
            )
        if n * each > len(self.data) - self.pos:
            raise DatasetError(
                f"{self.name}: claims {n:,} {what}, more than its {len(self.data):,} bytes hold"
            )
        return n


def load_ndarrays(path: str | os.PathLike[str]) -> list[tuple[str, np.ndarray]]:
    """The ``(name, array)`` pairs of an NDArray file (names are ``""`` when
    the file has none). Raises :class:`DatasetError` for anything else."""
    name = os.fspath(path)
    try:
        fd, size = open_regular(path)
    except FileNotFoundError:
        raise MissingFileError(f"{name}: NDArray file not found") from None
    with os.fdopen(fd, "rb") as f:
        if size > MAX_FILE:
            raise DatasetError(f"{name}: {size:,} bytes, more than an NDArray file read here")
        # the size checked, not the limit: read(n) allocates n bytes first
        data = f.read(size)
    cur = _Cursor(data, name)
    magic, _reserved = cur.unpack("QQ", "the header")
    if magic != _LIST_MAGIC:
        raise DatasetError(f"{name}: not an MXNet NDArray file (its first 8 bytes are not 0x112)")
    arrays = [_array(cur, i) for i in range(cur.count("arrays", 4))]
    names = []
    for _ in range(cur.count("names", 8)):
        (size,) = cur.unpack("Q", "a name's length")
        names.append(cur.take(size, "a name").decode("utf-8", "replace"))
    if names and len(names) != len(arrays):
        raise DatasetError(f"{name}: {len(arrays)} arrays but {len(names)} names")
    return list(zip(names or [""] * len(arrays), arrays, strict=True))


def _array(cur: _Cursor, i: int) -> np.ndarray:
    what = f"array {i}"
    (magic,) = cur.unpack("I", what)
    if magic in (_V2, _V3):
        (stype,) = cur.unpack("i", what)
        if stype != 0:
            raise DatasetError(
                f"{cur.name}: {what} is sparse (storage type {stype}); not read here"
            )
    if magic in (_V1, _V2, _V3):
        (ndim,) = cur.unpack("i", what)
        if not 0 <= ndim <= MAX_NDIM:
            raise DatasetError(f"{cur.name}: {what} claims {ndim} dimensions")
        shape = cur.unpack(f"{ndim}q", what)
    else:  # the oldest files: the magic is the dimension count, dims are u32
        if magic > MAX_NDIM:
            raise DatasetError(f"{cur.name}: {what} has an unknown format (0x{magic:08x})")
        shape = cur.unpack(f"{magic}I", what)
    if len(shape) == 0:
        return np.zeros(0, np.float32)  # MXNet's "none" array: nothing follows
    if any(d < 0 for d in shape):
        raise DatasetError(f"{cur.name}: {what} has a negative dimension {shape}")
    cur.unpack("ii", what)  # the context (device type, id): CPU here whatever it says
    (flag,) = cur.unpack("i", what)
    if flag not in _DTYPES:
        raise DatasetError(f"{cur.name}: {what} has an unknown dtype flag {flag}")
    dtype = np.dtype(_DTYPES[flag]).newbyteorder("<")
    count = math.prod(shape)  # exact: a product of huge claimed dims must not wrap around
    raw = cur.take(count * dtype.itemsize, f"{what}'s values")
    try:
        values = np.frombuffer(raw, dtype).reshape(shape)
    except ValueError:  # an empty array whose other dimensions multiply past 2**63
        raise DatasetError(f"{cur.name}: {what} has an impossible shape {shape}") from None
    return values.astype(dtype.newbyteorder("="))


def save_ndarrays(path: str | os.PathLike[str], arrays: list[tuple[str, np.ndarray]]) -> None:
    """Write ``arrays`` as MXNet 1.x's ``mx.nd.save`` does (V2 arrays, dense,
    on the CPU), atomically."""
    parts = [struct.pack("<QQQ", _LIST_MAGIC, 0, len(arrays))]
    for _, array in arrays:
        a = np.ascontiguousarray(array)
        flag = _FLAG_OF.get(a.dtype.newbyteorder("="))
        if flag is None:
            raise DatasetError(f"{os.fspath(path)}: MXNet cannot store dtype {a.dtype}")
        parts.append(struct.pack(f"<Iii{a.ndim}q", _V2, 0, a.ndim, *a.shape))
        parts.append(struct.pack("<iii", 1, 0, flag))  # cpu(0)
        parts.append(a.astype(a.dtype.newbyteorder("<")).tobytes())
    parts.append(struct.pack("<Q", len(arrays)))
    for name, _ in arrays:
        encoded = name.encode("utf-8")
        parts.append(struct.pack("<Q", len(encoded)) + encoded)
    write_file(path, b"".join(parts))

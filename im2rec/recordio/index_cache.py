"""A binary copy of a parsed ``.idx`` beside it, ``NAME.idx.im2rec``, so
that the next open reads three arrays instead of parsing millions of lines
(docs/performance.md, "Scale": a 5M-record index opens in about 0.1 s
instead of 0.5 s, MXNet's in 1.8 s).

Layout, little-endian: the magic ``IM2RIDX1``; a header (the ``.idx``'s
size, modification time, inode and device, a SHA-256 of its first and last
MiB, the record count, the dense table's base and span); then ``keys`` and
``offsets`` (int64, one a record) and the dense lookup table (int64, one a
key of the span; none for sparse keys).

The copy is never trusted blindly:

* it is used only while the ``.idx`` is the very file it was made from
  (size, time, inode, device and the two hashed MiB all equal);
* its sizes are bounded before anything is allocated (a record count the
  ``.idx``'s size cannot hold, a span past twice the count, a file of
  another length: not used);
* what it holds is checked as a parsed ``.idx`` is: offsets non-negative
  multiples of 4, and the table holding exactly each key's offset, which
  also proves the keys unique. So a planted or damaged copy can at most
  give a valid index, which a planted ``.idx`` could give as well.

It is written atomically (a temporary file renamed into place) after a
parse of at least :data:`CACHE_FROM` lines, and silently not written where
the folder is read-only. ``IM2REC_INDEX_CACHE=0`` turns it off (neither read
nor written).
"""

from __future__ import annotations

import hashlib
import os
import struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["CACHE_FROM", "cache_path", "read_cache", "write_cache"]

MAGIC = b"IM2RIDX1"
#: size, mtime_ns, inode, device, fingerprint, count, base, span
_HEADER = struct.Struct("<8sQqQQ32sQqQ")
#: lines from which a parsed index is worth caching (smaller ones parse in
#: a few milliseconds)
CACHE_FROM = 200_000
_PIECE = 1 << 18


def enabled() -> bool:
    return os.environ.get("IM2REC_INDEX_CACHE", "1") != "0"


def cache_path(idx: str | os.PathLike[str]) -> str:
    return os.fspath(idx) + ".im2rec"


def _identity(fd: int) -> tuple[int, int, int, int, bytes]:
    """What ties a copy to one ``.idx``: its size, time, inode, device and a
    hash of its first and last MiB (a rewrite of the same size within the
    clock's resolution still changes the hash unless it leaves both ends)."""
    from .files import pread

    info = os.fstat(fd)
    size = info.st_size
    digest = hashlib.sha256(pread(fd, min(size, 1 << 20), 0))
    digest.update(pread(fd, min(size, 1 << 20), max(0, size - (1 << 20))))
    return size, info.st_mtime_ns, info.st_ino, info.st_dev, digest.digest()


def read_cache(
    idx: str | os.PathLike[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """``(keys, offsets, dense table, base)`` from the copy of ``idx``, or
    None when there is no usable copy (see the module doc); the table is
    empty for sparse keys."""
    import numpy as np

    from .files import open_regular
    from .views import int_view

    if not enabled():
        return None
    try:
        fd_idx, _ = open_regular(idx)
    except (OSError, Exception):  # noqa: BLE001 - no .idx: the caller says so
        return None
    try:
        identity = _identity(fd_idx)
    finally:
        os.close(fd_idx)
    try:
        fd, size = open_regular(cache_path(idx))
    except Exception:  # noqa: BLE001 - no copy (or not a file): parse the text
        return None
    try:
        head = os.read(fd, _HEADER.size)
        if len(head) != _HEADER.size:
            return None
        magic, *fields = _HEADER.unpack(head)
        idx_size, mtime, ino, dev, fingerprint, count, base, span = fields
        if magic != MAGIC or (idx_size, mtime, ino, dev, fingerprint) != identity:
            return None
        # bounded before allocating: a line is at least 4 bytes ("0\t0\n")
        if count > idx_size // 4 + 1 or span > 2 * count + 1024:
            return None
        if size != _HEADER.size + 8 * (2 * count + span):
            return None
        arrays = [np.empty(n, dtype="<i8") for n in (count, count, span)]
        with os.fdopen(os.dup(fd), "rb", buffering=0) as f:
            for array in arrays:
                view = int_view(array).cast("B")
                while view:
                    got = f.readinto(view)
                    if not got:
                        return None
                    view = view[got:]
    except OSError:
        return None
    finally:
        os.close(fd)
    keys, offsets, table = arrays
    if not _consistent(keys, offsets, table, base):
        return None
    return keys, offsets, table, base


def _consistent(keys: np.ndarray, offsets: np.ndarray, table: np.ndarray, base: int) -> bool:
    """Offsets that can start a record, and a table holding exactly each
    key's offset (then the keys are unique: a repeated key would leave a
    slot of the table unfilled or another key's offset in it)."""
    import numpy as np

    for start in range(0, len(offsets), _PIECE):
        piece = offsets[start : start + _PIECE]
        if bool(((piece < 0) | (piece % 4 != 0)).any()):
            return False
    if not len(table):
        return True
    if len(keys) and (int(keys.min()) < base or int(keys.max()) - base >= len(table)):
        return False
    filled = 0
    for start in range(0, len(keys), _PIECE):
        piece = keys[start : start + _PIECE]
        if not bool((table[piece - base] == offsets[start : start + _PIECE]).all()):
            return False
    for start in range(0, len(table), _PIECE):
        filled += int(np.count_nonzero(table[start : start + _PIECE] >= 0))
    return filled == len(keys)


def write_cache(
    idx: str | os.PathLike[str], keys: np.ndarray, offsets: np.ndarray, table: Any, base: int
) -> None:
    """Write the copy of ``idx`` (``table``: the dense lookup table, or None
    for sparse keys); nothing happens where that cannot be done."""
    import numpy as np

    from ..atomic import AtomicGroup
    from .files import open_regular
    from .views import int_view

    if not enabled() or len(keys) < CACHE_FROM:
        return
    table = np.empty(0, dtype="<i8") if table is None else table
    try:
        fd_idx, _ = open_regular(idx)
        try:
            identity = _identity(fd_idx)
        finally:
            os.close(fd_idx)
        head = _HEADER.pack(MAGIC, *identity, len(keys), base, len(table))
        with AtomicGroup() as group, group.open(cache_path(idx)) as f:
            f.write(head)
            for array in (keys, offsets, table):
                f.write(int_view(np.ascontiguousarray(array, dtype="<i8")).cast("B"))
    except Exception:  # noqa: BLE001 - read-only folder, full disk, anything: the index still works
        return

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

It is mapped read-only (``mmap``, shared): the keys, offsets and table are
views of the page cache, so every process that opens the same index, a
DataLoader worker forked or spawned (which maps the copy its parent checked
again instead of receiving the arrays pickled), holds the same pages.

It is written atomically (a temporary file renamed into place) after a
parse of at least :data:`CACHE_FROM` lines, and silently not written where
the folder is read-only. ``IM2REC_INDEX_CACHE=0`` turns it off (neither read
nor written).
"""

from __future__ import annotations

import functools
import hashlib
import mmap
import os
import struct
import weakref
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "CACHE_FROM",
    "Cached",
    "Mapped",
    "cache_path",
    "map_again",
    "part_of",
    "read_cache",
    "shareable",
    "write_cache",
]

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
    from ..storage.files import pread

    info = os.fstat(fd)
    size = info.st_size
    digest = hashlib.sha256(pread(fd, min(size, 1 << 20), 0))
    digest.update(pread(fd, min(size, 1 << 20), max(0, size - (1 << 20))))
    return size, info.st_mtime_ns, info.st_ino, info.st_dev, digest.digest()


class Mapped(NamedTuple):
    """Which copy an index's arrays are mapped from: a worker process maps
    the same file again (its pages are the parent's, in the page cache)
    instead of receiving the arrays pickled."""

    path: str
    device: int
    inode: int
    size: int
    mtime_ns: int
    records: int
    span: int


class Cached(NamedTuple):
    keys: np.ndarray
    offsets: np.ndarray
    table: np.ndarray  # empty for sparse keys
    base: int


def read_cache(idx: str | os.PathLike[str]) -> Cached | None:
    """The arrays of the copy of ``idx``, mapped read-only, or None when
    there is no usable copy (see the module doc)."""
    from ..storage.files import open_regular

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
        # bounded before mapping: a line is at least 4 bytes ("0\t0\n")
        if count > idx_size // 4 + 1 or span > 2 * count + 1024:
            return None
        if size != _HEADER.size + 8 * (2 * count + span):
            return None
        info = os.fstat(fd)
        source = Mapped(cache_path(idx), info.st_dev, info.st_ino, size, info.st_mtime_ns,
                        count, span)  # fmt: skip
        arrays = _map(fd, source)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if not _consistent(*arrays, base):
        return None
    _register(arrays, source)
    return Cached(*arrays, base)


def map_again(source: Mapped) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arrays of a copy another process checked and mapped (a
    DataLoader worker's index), if it is still that very file; else
    :class:`IndexFormatError`."""
    from ..errors import IndexFormatError
    from ..storage.files import open_regular

    try:
        fd, _ = open_regular(source.path)
    except Exception as exc:  # noqa: BLE001 - said below, with the file
        raise IndexFormatError(
            f"{source.path}: the index's binary copy is gone ({exc}); open the dataset again"
        ) from None
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns) != source[1:5]:
            raise IndexFormatError(
                f"{source.path}: the index's binary copy changed after the dataset was "
                "opened; open the dataset again"
            )
        return _map(fd, source)
    finally:
        os.close(fd)


# -- sending mapped arrays to other processes -----------------------------------
# An array mapped from a copy is pickled as the copy's name and the array's
# part (0 keys, 1 offsets, 2 table), wherever it is held (the index, a
# reader, a dataset's key view), and mapped again on the other side.

#: id(array) -> (a weak reference to it, its copy, its part)
_MAPPED: dict[int, tuple[weakref.ref[Any], Mapped, int]] = {}
#: the arrays this process mapped again from a pickle, by (copy, part)
_REMAPPED: weakref.WeakValueDictionary[tuple[Mapped, int], Any] = weakref.WeakValueDictionary()


def _register(arrays: tuple[np.ndarray, ...], source: Mapped) -> None:
    for part, array in enumerate(arrays):
        key = id(array)
        _MAPPED[key] = (weakref.ref(array, functools.partial(_forget, key)), source, part)


def _forget(key: int, _: object) -> None:
    _MAPPED.pop(key, None)


class _Part:
    """What a mapped array is pickled as."""

    __slots__ = ("part", "source")

    def __init__(self, source: Mapped, part: int):
        self.source, self.part = source, part

    def __reduce__(self) -> tuple[Any, ...]:
        return (part_of, (self.source, self.part))


def shareable(array: Any) -> Any:
    """What to pickle in place of ``array``: a reference to the copy it is
    mapped from (a few hundred bytes), or the array itself."""
    entry = _MAPPED.get(id(array))
    if entry is not None and entry[0]() is array:
        return _Part(entry[1], entry[2])
    return array


def part_of(source: Mapped, part: int) -> np.ndarray:
    """A part of a copy, mapped in this process (once for all its holders)."""
    array = _REMAPPED.get((source, part))
    if array is None:
        arrays = map_again(source)
        _register(arrays, source)
        # (each part is kept while something holds it; a part asked for
        # later is mapped again: one more mapping of the same pages)
        array = _REMAPPED[(source, part)] = arrays[part]
    return array


def _map(fd: int, source: Mapped) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """keys, offsets and table as read-only views of the file, mapped shared:
    every process that maps it uses the same pages of the page cache, so
    DataLoader workers, forked or spawned, hold the index once between them.
    (A copy is only ever replaced by a rename, never changed in place; one
    truncated in place by hand would fault a process reading it.)"""
    import numpy as np

    mapped = mmap.mmap(fd, source.size, prot=mmap.PROT_READ)
    at = _HEADER.size
    arrays = []
    for n in (source.records, source.records, source.span):
        arrays.append(np.frombuffer(mapped, dtype="<i8", count=n, offset=at))
        at += 8 * n
    return arrays[0], arrays[1], arrays[2]


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

    from ..storage.atomic import AtomicGroup
    from ..storage.files import open_regular

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
                f.write(np.ascontiguousarray(array, dtype="<i8").data.cast("B"))
    except Exception:  # noqa: BLE001 - read-only folder, full disk, anything: the index still works
        return

"""A binary copy of a parsed ``.idx``, so that the next open maps three
arrays instead of parsing millions of lines (docs/performance.md,
"Scale").

Layout, little-endian: the magic ``IM2RIDX2``; a header (the ``.idx``'s
size, modification and change times, inode and device, a SHA-256 of its
first and last MiB, the record count, the dense table's base and span);
then ``keys`` and ``offsets`` (int64, one a record) and the dense lookup
table (int64, one a key of the span; none for sparse keys).

The copy is never trusted blindly:

* it lives in this user's own cache folder (:func:`cache_path`, under
  :func:`~im2rec.storage.private.cache_home`, mode 0700), never beside the
  ``.idx``: another user cannot plant one (in a shared sticky folder they
  could create ``NAME.idx.im2rec`` beside someone else's ``.idx``), and
  refreshing a dataset folder (``rsync --inplace``) cannot cut one short
  under a reader that has it mapped, which would kill it with SIGBUS;
* it is used only while the ``.idx`` is the very file it was made from:
  size, modification time, *change* time (which no one can set back: an
  ``.idx`` edited in place with its modification time restored has a new
  one), inode, device and the two hashed MiB all equal. It is written only
  for an ``.idx`` unchanged while it was parsed and last changed
  :data:`SETTLED_NS` before, so that no later edit can fall in the same
  tick of the file system's clock;
* its sizes are bounded before anything is allocated (a record count the
  ``.idx``'s size cannot hold, a span past twice the count, a file of
  another length: not used);
* what it holds is checked as a parsed ``.idx`` is: offsets non-negative
  multiples of 4, and the table holding exactly each key's offset, which
  also proves the keys unique.

It is mapped read-only (``mmap``, shared): the keys, offsets and table are
views of the page cache, so every process that opens the same index, a
DataLoader worker forked or spawned (which maps the copy its parent checked
again instead of receiving the arrays pickled), holds the same pages. A
copy is never replaced while it is valid (a second process that parses the
same ``.idx`` keeps the first one's), and a worker that finds it replaced
all the same checks the new one as an open does.

It is written after a parse of at least :data:`CACHE_FROM` lines (and
the open that wrote it uses it mapped at once), and silently not written
where the cache folder cannot be made.
``IM2REC_INDEX_CACHE=0`` turns it off (neither read nor written).
"""

from __future__ import annotations

import functools
import hashlib
import mmap
import os
import struct
import time
import weakref
from typing import TYPE_CHECKING, Any, NamedTuple

from .codec import can_start

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "CACHE_FROM",
    "Cached",
    "Mapped",
    "cache_path",
    "identity_of",
    "map_again",
    "part_of",
    "read_cache",
    "shareable",
    "write_cache",
]

MAGIC = b"IM2RIDX2"
#: size, mtime_ns, ctime_ns, inode, device, fingerprint, count, base, span
_HEADER = struct.Struct("<8sQqqQQ32sQqQ")
#: lines from which a parsed index is worth caching (smaller ones parse in
#: a few milliseconds)
CACHE_FROM = 200_000
#: an .idx is copied only once it has not changed for this long (ns): two
#: changes within one tick of a file system's clock share a change time
#: (coarse clocks tick every few ms; FAT and some network file systems
#: keep whole or even seconds)
SETTLED_NS = 2_000_000_000
_PIECE = 1 << 18

#: what ties a copy to one .idx (see :func:`identity_of`)
Identity = tuple[int, int, int, int, int, bytes]


def enabled() -> bool:
    return os.environ.get("IM2REC_INDEX_CACHE", "1") != "0"


def cache_path(idx: str | os.PathLike[str]) -> str:
    """Where the copy of ``idx`` is kept: in this user's cache folder, named
    for this machine and the ``.idx``'s real path."""
    from ..storage.private import cache_name

    return cache_name("index", idx, ".idx")


def identity_of(idx: str | os.PathLike[str]) -> Identity | None:
    """The ``.idx``'s identity now, or None when it cannot be read."""
    from ..storage.files import open_regular

    try:
        fd, _ = open_regular(idx)
    except Exception:  # noqa: BLE001 - no .idx: the caller says so
        return None
    try:
        return _identity(fd)
    finally:
        os.close(fd)


def _identity(fd: int) -> Identity:
    """What ties a copy to one ``.idx``: its size, modification and change
    times, inode, device and a hash of its first and last MiB."""
    from ..storage.files import pread

    info = os.fstat(fd)
    size = info.st_size
    digest = hashlib.sha256(pread(fd, min(size, 1 << 20), 0))
    digest.update(pread(fd, min(size, 1 << 20), max(0, size - (1 << 20))))
    return size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev, digest.digest()


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
    idx: str  # the .idx it is a copy of


class Cached(NamedTuple):
    keys: np.ndarray
    offsets: np.ndarray
    table: np.ndarray  # empty for sparse keys
    base: int


def read_cache(idx: str | os.PathLike[str], identity: Identity | None = None) -> Cached | None:
    """The arrays of the copy of ``idx`` (whose :func:`identity_of` the
    caller may have taken), mapped read-only, or None when there is no
    usable copy (see the module doc)."""
    from ..storage.private import open_own

    if not enabled():
        return None
    identity = identity or identity_of(idx)
    if identity is None:
        return None
    path = cache_path(idx)
    if not _private(os.path.dirname(path)):
        return None
    fd = open_own(path)
    if fd is None:  # no copy, or one that is not to be trusted: parse the text
        return None
    try:
        size = os.fstat(fd).st_size
        head = os.read(fd, _HEADER.size)
        if len(head) != _HEADER.size:
            return None
        magic, *fields = _HEADER.unpack(head)
        idx_size, mtime, ctime, ino, dev, fingerprint, count, base, span = fields
        if magic != MAGIC or (idx_size, mtime, ctime, ino, dev, fingerprint) != identity:
            return None
        # bounded before mapping: a line is at least 4 bytes ("0\t0\n")
        if count > idx_size // 4 + 1 or span > 2 * count + 1024:
            return None
        if size != _HEADER.size + 8 * (2 * count + span):
            return None
        info = os.fstat(fd)
        source = Mapped(path, info.st_dev, info.st_ino, size, info.st_mtime_ns, count, span,
                        os.fspath(idx))  # fmt: skip
        arrays = _map(fd, source)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if not _consistent(*arrays, base):
        return None
    _register(arrays, source)
    return Cached(*arrays, base)


def _private(folder: str) -> bool:
    from ..storage.private import private_folder

    try:
        private_folder(folder) if os.path.lexists(folder) else None
    except Exception:  # noqa: BLE001 - a folder others may write: not read
        return False
    return os.path.isdir(folder)


def map_again(source: Mapped) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arrays of a copy another process checked and mapped (a
    DataLoader worker's index): that very file, or a copy made since of
    the same ``.idx``, checked as an open checks it; else
    :class:`IndexFormatError`."""
    from ..errors import IndexFormatError
    from ..storage.private import open_own

    fd = open_own(source.path)
    if fd is not None:
        try:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns) == source[1:5]:
                return _map(fd, source)
        finally:
            os.close(fd)
    cached = read_cache(source.idx)  # replaced (the same content, say): checked anew
    if cached is not None and (len(cached.keys), len(cached.table)) == source[5:7]:
        return cached.keys, cached.offsets, cached.table
    raise IndexFormatError(
        f"{source.idx}: the index changed after the dataset was opened (its binary copy "
        f"{source.path} is gone or no longer matches it); open the dataset again"
    )


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
        if not bool(can_start(piece).all()):
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
    idx: str | os.PathLike[str],
    before: Identity | None,
    keys: np.ndarray,
    offsets: np.ndarray,
    table: Any,
    base: int,
) -> bool:
    """Write the copy of ``idx``, parsed from the file whose identity was
    ``before`` (:func:`identity_of`, taken before the parse); ``table``:
    the dense lookup table, or None for sparse keys. Nothing happens where
    that cannot be done, or where the ``.idx`` changed during the parse or
    too recently (see the module doc). True when a copy of this ``.idx``
    is in place afterwards (this one, or one another process wrote)."""
    import numpy as np

    from ..storage.atomic import create_output
    from ..storage.private import private_folder

    if not enabled() or len(keys) < CACHE_FROM or before is None:
        return False
    if identity_of(idx) != before or time.time_ns() - max(before[1], before[2]) < SETTLED_NS:
        return False
    table = np.empty(0, dtype="<i8") if table is None else table
    path = cache_path(idx)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        private_folder(os.path.dirname(path))
        with os.fdopen(create_output(tmp), "wb") as f:
            f.write(_HEADER.pack(MAGIC, *before, len(keys), base, len(table)))
            for array in (keys, offsets, table):
                f.write(np.ascontiguousarray(array, dtype="<i8").data.cast("B"))
        try:
            os.link(tmp, path)  # never over a copy in use...
        except FileExistsError:
            if read_cache(idx) is None:  # ...unless it is not this one's
                os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - no room, no folder, anything: the index still works
        return False
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return True

"""What ``rec browse``'s scan of a local ``.rec`` found, kept in this
user's cache folder so that the next ``rec browse`` of the same file starts
with its counts, filters and charts, and so that the per-record facts of a
100M-record file live in the page cache rather than in the server's memory.

Layout, little-endian: the magic ``IM2RBRW1``, the record count, the
(record, class) pair count and the trailer's length (32 bytes, then zeros
to byte 64); per record its payload's bytes (u32), stored width and height
(u16, saturated), objects (u16, saturated) and state (u8: :data:`BROKEN`,
:data:`UNDECODABLE`, :data:`IMAGED`), padded to 8 bytes; the pairs' classes
and positions (i64, sorted by class, then position); a JSON trailer (the
``.rec``'s and ``.idx``'s identities, the summary counts).

It is trusted as :mod:`~im2rec.recordio.index_cache`'s copies are: in a
folder of this user's only (mode 0700), opened without following a link,
used only while both files are the very ones it was made from (size,
modification and change times, inode, device, a hash of their first and
last MiB), every size checked against the file's before anything is
mapped, every position checked against the record count. It is written
through a file of its own (``create_output``) moved into place, only for
files unchanged while they were scanned and settled before (:func:`settled`).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BROKEN", "IMAGED", "UNDECODABLE", "Facts", "Kept", "Writer", "identities",
           "kept_path", "read_kept", "settled"]  # fmt: skip

MAGIC = b"IM2RBRW1"
_HEAD = struct.Struct("<8sQQQ")
_START = 64
#: the largest trailer read back (its counts are a class a line)
_MAX_TRAILER = 64 << 20
#: state bits: the label's layout is broken; no image header could be
#: read; the image pass has seen the record
BROKEN, UNDECODABLE, IMAGED = 1, 2, 4
_FIELDS = (("bytes", "<u4"), ("width", "<u2"), ("height", "<u2"), ("objects", "<u2"),
           ("state", "u1"))  # fmt: skip


def _part_size(count: int) -> int:
    size = sum(np.dtype(kind).itemsize for _, kind in _FIELDS) * count
    return (size + 7) & ~7


@dataclass
class Facts:
    """One array a record (``bytes``, ``width``, ``height``, ``objects``,
    ``state``), views of a mapped file or of memory."""

    bytes: np.ndarray
    width: np.ndarray
    height: np.ndarray
    objects: np.ndarray
    state: np.ndarray

    @classmethod
    def over(cls, buffer: Any, count: int, offset: int = _START) -> Facts:
        arrays = []
        for _, kind in _FIELDS:
            arrays.append(np.frombuffer(buffer, kind, count, offset))
            offset += np.dtype(kind).itemsize * count
        return cls(*arrays)

    @classmethod
    def in_memory(cls, count: int) -> Facts:
        return cls.over(bytearray(_part_size(count)), count, 0)


@dataclass
class Kept:
    """A kept scan: the facts, the pairs, the trailer's summary."""

    facts: Facts
    labels: np.ndarray
    positions: np.ndarray
    summary: dict[str, Any]


def kept_path(rec: str) -> str:
    """Where the scan of ``rec`` is kept: named for this machine and its real path."""
    from ..storage.private import cache_name

    return cache_name("browse", rec, ".scan")


def identities(rec: str, idx: str) -> list[str] | None:
    """The ``.rec``'s and ``.idx``'s identities, as text; None when either
    cannot be read."""
    from ..recordio.index_cache import identity_of

    found = [identity_of(rec), identity_of(idx)]
    return [json.dumps([*f[:5], f[5].hex()]) for f in found if f is not None] \
        if None not in found else None  # fmt: skip


def settled(identity: list[str]) -> bool:
    """Whether both files last changed long enough ago that no later edit
    can fall in the same tick of the file system's clock (as for the
    index's copies: :data:`~im2rec.recordio.index_cache.SETTLED_NS`)."""
    from ..recordio.index_cache import SETTLED_NS

    changed = max(max(json.loads(one)[1:3]) for one in identity)
    return bool(time.time_ns() - changed >= SETTLED_NS)


class Writer:
    """A scan being kept: the facts mapped from a file of its own in the
    cache folder (``facts``), made whole by :meth:`finish`. Where no such
    file can be made, the facts are in memory and nothing is kept."""

    def __init__(self, rec: str, count: int) -> None:
        from ..storage.atomic import create_output
        from ..storage.private import private_folder

        self.path = kept_path(rec)
        self.tmp = f"{self.path}.{os.getpid()}.{id(self)}.tmp"
        self.file: Any = None
        self._map: mmap.mmap | None = None
        self.count = count
        try:
            private_folder(os.path.dirname(self.path))
            self.file = os.fdopen(create_output(self.tmp, readable=True, mode=0o600), "r+b")
            self.file.truncate(_START + _part_size(count))
            self._map = mmap.mmap(self.file.fileno(), _START + _part_size(count))
            self.facts = Facts.over(self._map, count)
        except Exception:  # noqa: BLE001 - no folder, no room: the scan runs in memory
            self.close()
            self.facts = Facts.in_memory(count)

    def finish(self, labels: np.ndarray, positions: np.ndarray, summary: dict[str, Any]) -> bool:
        """Write the pairs and the trailer after the facts and put the file
        in place (the facts stay mapped, now from it); False where nothing
        was kept."""
        if self.file is None:
            return False
        try:
            trailer = json.dumps(summary).encode()
            self.file.seek(_START + _part_size(self.count))
            for array in (labels, positions):
                self.file.write(np.ascontiguousarray(array, "<i8").data.cast("B"))
            self.file.write(trailer)
            self.file.seek(0)
            self.file.write(_HEAD.pack(MAGIC, self.count, len(labels), len(trailer)))
            self.file.flush()
            os.replace(self.tmp, self.path)
            self.file.close()
            self.file = None
        except Exception:  # noqa: BLE001 - no room, anything: the scan is still in memory
            self.close()
            return False
        return True

    def close(self) -> None:
        if self._map is not None:
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None
        if self.file is not None:
            self.file.close()
            self.file = None
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)


def read_kept(path: str, count: int, identity: Any) -> Kept | None:
    """The scan kept at ``path`` for a ``.rec`` of ``count`` records whose
    files now have ``identity`` (:func:`identities`), mapped read-only; None
    when there is none to trust (see the module doc)."""
    from ..storage.private import open_own

    if identity is None:
        return None
    fd = open_own(path)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        if size < _START:
            return None
        magic, n, pairs, trailer = _HEAD.unpack(os.pread(fd, _HEAD.size, 0))
        part = _part_size(count)
        if magic != MAGIC or n != count or trailer > _MAX_TRAILER or pairs > size:
            return None
        if size != _START + part + 16 * pairs + trailer:
            return None
        summary = json.loads(os.pread(fd, trailer, size - trailer))
        if not isinstance(summary, dict) or summary.get("identities") != identity:
            return None
        view = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    except (OSError, ValueError, struct.error):
        return None
    finally:
        os.close(fd)
    at = _START + part
    labels = np.frombuffer(view, "<i8", pairs, at)
    positions = np.frombuffer(view, "<i8", pairs, at + 8 * pairs)
    if pairs and (int(positions.min()) < 0 or int(positions.max()) >= count):
        return None
    if pairs and bool(np.any(labels[1:] < labels[:-1])):
        return None
    return Kept(Facts.over(view, count), labels, positions, summary)

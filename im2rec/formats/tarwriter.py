"""WebDataset's container written: one member per sample field, named
``KEY.EXT``, with fixed metadata (mode 0444, owner 0, mtime 0), so the same
samples always make the same bytes; a new shard starts when the next sample
would pass ``maxcount`` samples or ``maxsize`` bytes (as WebDataset's own
``ShardWriter``). Every shard is written to a temporary file and they all
appear together, when the last is complete. Images given with the bytes a
reader holds (a :class:`~im2rec.storage.files.FileRange` with ``data``)
are written at once, while those bytes are in the CPU's cache; images only
in the ``.rec`` are copied by the kernel, a batch at a time, on a copying
thread (:class:`~im2rec.storage.copying.Copier`).
"""

from __future__ import annotations

import os
import re
import tarfile
from typing import Any

from ..errors import ConfigError
from ..storage.atomic import AtomicGroup
from ..storage.copying import Copier, batches, send_batch, write_all
from ..storage.files import FileRange
from ..storage.writeback import Writeback

__all__ = ["ShardWriter", "member_header"]

_BLOCK = 512
_BATCH = 1 << 20  # members handed to the copying thread at a time, in bytes


_MAX_WIDTH = 20  # the digits of 2**64: a wider field only pads (and %0999999999d allocates GBs)
#: a shard pattern's % conversions: a literal %%, a number field, or anything else
_CONVERSION = re.compile(r"%(?:(%)|(0?)([0-9]*)d|)")


def number_fields(pattern: str) -> int:
    """How many number fields (``%d``, ``%06d``) ``pattern`` holds: 0 or 1.
    Any other conversion (``%c``, ``%s``, ``%.1s``: a crash on a shard
    number, or two shards of one name), a second field or a width past
    :data:`_MAX_WIDTH` is a :class:`ConfigError`."""
    fields = 0
    for match in _CONVERSION.finditer(pattern):
        literal, _, width = match.groups()
        if literal:
            continue
        ok = match.group(0).endswith("d") and (not width or int(width) <= _MAX_WIDTH)
        fields += 1
        if not ok or fields > 1:
            raise ConfigError(
                f"{pattern}: -o must hold exactly one number pattern, %d or %0Nd with N up to "
                f"{_MAX_WIDTH} (such as %06d); write a literal % as %%"
            )
    return fields


class ShardWriter:
    """Samples into tar shards named ``pattern % number`` (see the module doc)."""

    def __init__(self, pattern: str, *, maxcount: int = 100_000, maxsize: int = 3_000_000_000):
        if maxcount < 1 or maxsize < 1:
            raise ConfigError("--maxcount and --maxsize must be at least 1")
        fields = number_fields(pattern)
        if not fields:
            if maxcount != 100_000 or maxsize != 3_000_000_000:
                raise ConfigError(
                    f"{pattern}: --maxcount/--maxsize split the output into shards, so -o needs "
                    "a number pattern such as 'shards/train-%06d.tar'"
                )
            maxcount, maxsize = 1 << 62, 1 << 62  # one shard
        self.pattern, self.maxcount, self.maxsize = pattern, maxcount, maxsize
        self.numbered = bool(fields)
        self.group = AtomicGroup()
        self.shards: list[str] = []
        self._fd: int | None = None
        self._count = self._size = 0
        # members not yet written: bytes, and images still in the .rec, which a
        # copying thread writes a batch at a time (the kernel copies them while
        # the next records are read and formatted here)
        self._pending: list[Any] = []  # bytes, ranges, and views of ranges' data
        self._queued = 0
        self._copier: Copier | None = None
        self._writeback: Writeback | None = None  # (the shard's: on the disk as it is written)

    def __enter__(self) -> ShardWriter:
        self.group.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if exc[0] is None:
                self._close_shard()
        except BaseException as error:
            self._end_shard(quiet=True)
            self.group.__exit__(type(error), error, error.__traceback__)
            raise
        self._end_shard(quiet=True)  # (after an error: the shards are then removed)
        self.group.__exit__(*exc)

    def _send(self) -> None:
        """Write the pending members (see ``send_batch``)."""
        assert self._fd is not None
        items = batches(self._pending)
        self._pending, self._queued = [], 0
        self._written()
        self._copier = send_batch(self._fd, items, self._copier)

    def _written(self) -> None:
        """Ask for the writeback of what the shard holds so far."""
        if self._writeback is not None and self._fd is not None:
            self._writeback.written(os.lseek(self._fd, 0, os.SEEK_CUR))

    def _close_shard(self) -> None:
        if self._fd is not None:
            # tar's end: two zero blocks, then zeros to a whole 10 kB record
            end = self._size + 2 * _BLOCK
            self._pending.append(b"\0" * (2 * _BLOCK + (-end) % tarfile.RECORDSIZE))
            self._send()
            self._end_shard()

    def _end_shard(self, quiet: bool = False) -> None:
        """Stop the copying thread (raising a failed copy unless ``quiet``)
        and close the shard's file; what is still pending is dropped."""
        self._pending, self._queued = [], 0
        copier, self._copier = self._copier, None
        try:
            if copier is not None:
                copier.stop(quiet)
        finally:
            if self._writeback is not None:
                self._writeback.close()
                self._writeback = None
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def write(self, key: str, fields: list[tuple[str, bytes | FileRange]]) -> None:
        """One sample: ``(extension, bytes)`` for each of its fields; bytes
        still in a file may be given as a :class:`FileRange` (written at once
        from its ``data``, or copied by the kernel, never through this
        process)."""
        size = sum(_BLOCK + len(data) + (-len(data)) % _BLOCK for _, data in fields)
        if self._fd is None or (
            self._count and (self._count >= self.maxcount or self._size + size > self.maxsize)
        ):
            self._close_shard()
            name = (
                self.pattern % len(self.shards)
                if self.numbered
                else self.pattern.replace("%%", "%")
            )
            os.makedirs(os.path.dirname(name) or ".", exist_ok=True)
            self.shards.append(name)
            self._fd = self.group.create(name)
            self._writeback = Writeback(self._fd)
            self._count = self._size = 0
        self._count += 1
        self._size += size
        pending = self._pending
        # a sample with a range read into memory (and the rest bytes), with
        # nothing pending before it, is written at once in one call (see
        # send_batch); samples of bytes only are gathered into batches
        now = (
            not pending
            and any(type(data) is FileRange for _, data in fields)
            and all(_held(data) for _, data in fields)
        )
        for ext, data in fields:
            pending.append(member_header(f"{key}.{ext}", len(data)))
            pending.append(data.data if now and type(data) is FileRange else data)
            if len(data) % _BLOCK:
                pending.append(_ZEROS[: -len(data) % _BLOCK])
        if now:
            if self._copier is not None:
                self._copier.wait()
            write_all(self._fd, pending)
            pending.clear()
            self._written()
            return
        self._queued += size
        if self._queued >= _BATCH or any(
            type(data) is FileRange and data.data is not None for _, data in fields
        ):
            self._send()

    @property
    def bytes_written(self) -> int:
        return self._size


_ZEROS = bytes(_BLOCK)


def _held(data: bytes | FileRange) -> bool:
    return isinstance(data, bytes) or data.data is not None


def _template() -> tuple[bytes, int]:
    info = tarfile.TarInfo("")
    info.mode, info.mtime = 0o444, 0
    header = info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict")
    blank = header[:148] + b" " * 8 + header[156:]  # the sum counts its own field as spaces
    return header, sum(blank) - sum(header[124:136])  # (without the size field)


_TEMPLATE, _TEMPLATE_SUM = _template()


def member_header(name: str, size: int) -> bytes:
    """The 512-byte header of a regular file member, as ``tarfile`` writes
    it (ustar, mode 0444, owner 0, mtime 0). Only the name, the size and
    the checksum differ between members, so they are patched into a header
    ``tarfile`` made (several times faster than building each one; the
    equality is tested). Names that ustar cannot hold go to ``tarfile``."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) > 100 or not raw.isascii() or size >= 8**11:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = size, 0o444, 0
        return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    size_field = b"%011o\0" % size
    total = _TEMPLATE_SUM + sum(raw) + sum(size_field)
    return b"".join((
        raw, _ZEROS[: 100 - len(raw)], _TEMPLATE[100:124], size_field, _TEMPLATE[136:148],
        b"%06o\0 " % total, _TEMPLATE[156:],
    ))  # fmt: skip

"""The members of the ILSVRC2012 tars, read and checked (spec: imagenet.md
§3, §6): every name is checked before anything is written (``./``
prefixes dropped, ``.`` and folders skipped; absolute paths, ``..``,
links, devices and sparse files refuse the whole archive), every size is
bounded before it is read, and a zeroed header (which ``tar`` takes for
the end) is damage, not the end.

A class tar (one of the train tar's thousand) is read in place, member by
member: where a header is the plain ustar one that GNU tar and ``tarfile``
write for a short ASCII name, it is parsed in C (or by one Python check)
and the file's bytes are read with the next header in one ``pread``; from
the first header that is anything else (pax, a GNU long name, a link),
``tarfile`` reads the rest. ``tarfile`` parses each member in Python
under the GIL, which kept the extracting threads from running together.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from typing import Any

from ..errors import DatasetError
from ..formats.tars import BoundedTarInfo, plain_header
from ..listing.lstfile import cannot_carry
from ..storage.confined import plain_path

__all__ = ["MAX_MEMBER", "Slice", "check_zero_tail", "class_files", "safe_name", "unique"]

#: Every file is read whole (to sniff, and to fix odd ones); the largest
#: ILSVRC2012 image is about 15 MB. Larger members are refused, so a hostile
#: tar cannot make each extraction thread hold gigabytes.
MAX_MEMBER = 64 << 20
_BLOCK = 512
_ZEROS = bytes(_BLOCK)


def safe_name(member: tarfile.TarInfo, archive: str, outer: bool = False) -> str | None:
    """The member's relative name; None for entries to skip. ``outer``: a
    member of the train tar (a class tar, read in place, not whole)."""
    name = member.name
    while name.startswith("./"):
        name = name[2:]
    name = name.rstrip("/")
    if name in ("", ".") or member.isdir():
        return None
    where = f"{archive}: member {member.name!r}"
    if member.issym() or member.islnk():
        raise DatasetError(
            f"{where} is a link; refusing an archive with links (they can point anywhere)"
        )
    if not member.isfile():
        raise DatasetError(f"{where} is a device or special file; refusing the archive")
    if member.issparse():  # its holes would be made of zeros: read in place, it is not the file
        raise DatasetError(f"{where} is a sparse file; refusing the archive")
    if not plain_path(name):
        raise DatasetError(
            f"{where} is not a plain relative path (absolute, or a '..', '.' or empty part): "
            "it could be written outside the target; refusing the archive"
        )
    if any(cannot_carry(part) for part in name.split("/")):
        raise DatasetError(
            f"{where} has a TAB, a newline, whitespace at an end or bytes that are not UTF-8 in "
            "its name, which the .lst files made from it cannot hold; refusing the archive (the "
            "official ILSVRC2012 tars have none: check the download with --checksum)"
        )
    if member.size > MAX_MEMBER and not outer:
        raise DatasetError(
            f"{where} is {member.size:,} bytes; no ILSVRC2012 file is larger than "
            f"{MAX_MEMBER >> 20} MiB, and each is read whole: refusing the archive"
        )
    return name


def unique(name: str, seen: set[str], where: str) -> None:
    """Refuse a second member of the same name: which copy ends up on disk
    would depend on the order the threads write them."""
    if name in seen:
        raise DatasetError(
            f"{where}: member {name!r} appears twice; an archive with two files of one name "
            "is ambiguous (which is the image?): refusing it"
        )
    seen.add(name)


def check_zero_tail(fd: int, base: int, end: int, size: int, where: str) -> None:
    """Raise unless the bytes from ``end`` (where tar saw its end-of-archive
    block) to ``size`` are zeros, as tar's end blocks and padding are. A
    zeroed header block looks like the end of the archive to tar, which
    would then silently drop every member after it."""
    pos = end
    while pos < size:
        block = os.pread(fd, min(1 << 20, size - pos), base + pos)
        if not block:
            return
        if block.count(0) != len(block):
            raise DatasetError(
                f"{where}: the archive ends at byte {end:,} of {size:,}, yet data follows "
                "(a damaged header): the members after it would be lost; check the download "
                "with --checksum"
            )
        pos += len(block)


class Slice(io.RawIOBase):
    """``size`` bytes of a file from ``start``, read with ``pread``: each
    worker thread reads its own inner tar without sharing a file position."""

    def __init__(self, fd: int, start: int, size: int):
        self.fd, self.start, self.size, self.pos = fd, start, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self.pos, self.size)[whence]
        self.pos = max(0, min(self.size, base + offset))
        return self.pos

    def readinto(self, buf: Any) -> int:
        n = min(len(buf), self.size - self.pos)
        if n <= 0:
            return 0
        data = os.pread(self.fd, n, self.start + self.pos)
        buf[: len(data)] = data
        self.pos += len(data)
        return len(data)


#: a class tar's file: its name, its bytes, and the archive bytes it took
ClassFile = tuple[str, "bytes | memoryview", int]


def class_files(fd: int, start: int, size: int, where: str) -> Iterator[ClassFile]:
    """The files of the class tar at bytes ``start`` to ``start + size`` of
    ``fd``, in order, each name checked (:func:`safe_name`, no folder, no
    repeat); ``where`` names it in errors (``train.tar:n01440764.tar``)."""
    seen: set[str] = set()
    end, pos = start + size, start
    head = memoryview(os.pread(fd, min(_BLOCK, size), pos))
    while True:
        found = plain_header(head) if len(head) == _BLOCK else None
        if found is None:
            if head == _ZEROS:  # the end of the archive, or a zeroed header: see the tail
                check_zero_tail(fd, start, pos - start, size, where)
                return
            # anything else, or a header cut short: tarfile reads (or refuses) the rest
            yield from _tarfile_files(fd, pos, end - pos, where, seen)
            return
        name, n = found
        info = tarfile.TarInfo(name)
        info.size = n
        checked = safe_name(info, where)  # (the size is bounded here, before it is read)
        data_at = pos + _BLOCK
        after = data_at + n + (-n % _BLOCK)
        if after > end:
            raise DatasetError(
                f"{where}: member {name!r} of {n:,} bytes runs past the archive's end; the tar "
                "is damaged or cut short: check the download with --checksum"
            )
        if checked is None:  # skipped unread (a "." entry)
            pos, head = after, memoryview(os.pread(fd, min(_BLOCK, end - after), after))
            continue
        _one_file(checked, seen, where)
        want = after - data_at + min(_BLOCK, end - after)  # the file, and the next header
        got = memoryview(os.pread(fd, want, data_at))
        if len(got) < want:
            raise DatasetError(
                f"{where}: member {checked!r} ends early: the file changed while it was being "
                "read; run again with --resume once it is whole"
            )
        yield checked, got[:n], _BLOCK + n
        pos, head = after, got[after - data_at :]


def _one_file(name: str, seen: set[str], where: str) -> None:
    """A class tar holds files only, each name once."""
    if "/" in name:
        raise DatasetError(f"{where}: unexpected folder in {name!r}")
    unique(name, seen, where)


def _tarfile_files(
    fd: int, base: int, size: int, where: str, seen: set[str]
) -> Iterator[ClassFile]:
    """:func:`class_files` from ``base`` by ``tarfile``, for the headers the
    plain parser leaves to it."""
    stream = io.BufferedReader(Slice(fd, base, size), 1 << 20)
    try:
        with tarfile.open(fileobj=stream, mode="r:", tarinfo=BoundedTarInfo) as inner:
            for info in inner:
                name = safe_name(info, where)
                inner.members.clear()  # type: ignore[attr-defined]
                if name is None:
                    continue
                _one_file(name, seen, where)
                f = inner.extractfile(info)
                assert f is not None  # a regular file, checked by safe_name
                yield name, f.read(), info.size + _BLOCK
            check_zero_tail(fd, base, inner.offset, size, where)
    except tarfile.TarError as exc:
        raise DatasetError(f"{where}: damaged tar ({exc}); check it with --checksum") from None

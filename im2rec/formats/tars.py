"""WebDataset's container, read: POSIX tar shards of samples, read with the
standard library's :mod:`tarfile` and a direct parser of the plain ustar
headers that :mod:`.tarwriter` and WebDataset write.

:func:`samples` is streamed, one member at a time (constant
memory); a sample is the run of consecutive members sharing a key (the name
up to the first dot of its last component). Untrusted shards are read as
``rec imagenet`` reads tars: a member name that is absolute or climbs out
with ``..`` is refused, a field repeated within a sample is refused, and a
member larger than a record can be is skipped unread. In a plain (not
compressed) shard, an image-sized member is not copied into the sample but
given as where it lies (:class:`~im2rec.storage.files.FileRange`), with
the chunk of the shard just read that holds it, so ``rec import`` writes it
from there as ``cat`` writes what it read (or, larger than a chunk, has
the kernel copy it). Shard names (globs, brace notation) are expanded by
:mod:`.shards`.
"""

from __future__ import annotations

import os
import re
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from ..errors import DatasetError, Im2RecError, MissingFileError
from ..recordio import MAX_RECORD_SIZE
from ..recordio.chunks import Chunks
from ..recordio.codec import ALIGN
from ..recordio.framing import has_aligned_magic
from ..storage.confined import relative_name
from ..storage.files import FileRange, HeldFile, open_regular, pread

__all__ = ["BoundedTarInfo", "Data", "Sample", "plain_header", "samples"]

_BLOCK = 512
#: a member's bytes: ``bytes``, or where they lie in the shard (a large
#: member of a plain tar; ``bytes(data)`` reads them)
Data = bytes | FileRange
#: at most this many members of a sample are kept (a sample is a handful of
#: fields; a key shared by thousands of members is a hostile tar)
MAX_FIELDS = 64


@dataclass
class Sample:
    """One sample: its key, fields by extension, and where it came from."""

    key: str
    shard: str
    fields: dict[str, Data] = field(default_factory=dict)
    #: fields not read: extension -> why (too large, not a regular file)
    skipped: dict[str, str] = field(default_factory=dict)


def _split(name: str) -> tuple[str, str]:
    """``(key, extension)``: the key is the name up to the first dot of its
    last component (WebDataset's rule)."""
    head, _, last = name.rpartition("/")
    stem, dot, ext = last.partition(".")
    return (f"{head}/{stem}" if head else stem), ext if dot else ""


#: the largest pax or GNU extended header read (a path, a few attributes:
#: under a kilobyte in practice); tarfile reads one whole into memory
MAX_EXTENDED = 1 << 20
#: a member's size past this cannot be a file (tarfile takes any pax number)
MAX_MEMBER_SIZE = 1 << 62
#: a compressed shard inflates to at most this many times its size, plus
#: INFLATE_SLACK (images do not compress: real shards stay near 1x)
MAX_INFLATION = 64
INFLATE_SLACK = 64 << 20


_COMPRESSED = ((b"\x1f\x8b", "r:gz"), (b"BZh", "r:bz2"), (b"\xfd7zXZ\x00", "r:xz"))


class BoundedTarInfo(tarfile.TarInfo):
    """A member header that ``tarfile`` reads with its sizes bounded: the
    data of a pax or GNU long-name header is read whole into memory, so
    one claiming more than :data:`MAX_EXTENDED` is refused before it is
    read, and a size past :data:`MAX_MEMBER_SIZE` (a pax ``size`` of 30
    digits) is refused before it is used as an offset. Give it to
    ``tarfile.open(..., tarinfo=BoundedTarInfo)``."""

    _EXTENDED = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
                 tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)  # fmt: skip

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in self._EXTENDED and self.size > MAX_EXTENDED:
            raise tarfile.ReadError(
                f"an extended header of {self.size:,} bytes at byte {self.offset:,} (at most "
                f"{MAX_EXTENDED:,} are read)"
            )
        member: tarfile.TarInfo = super()._proc_member(tarfile_)  # type: ignore[misc]
        if not 0 <= member.size <= MAX_MEMBER_SIZE:
            raise tarfile.ReadError(f"member {member.name!r} claims {member.size:,} bytes")
        return member


def samples(shard: str, limit: int = MAX_RECORD_SIZE) -> Iterator[Sample]:
    """The samples of one tar shard (plain or compressed), read in order
    (see the module doc). Only a regular file is a shard: a FIFO or a
    device (``/dev/zero``) would be read for ever."""
    try:
        fd, size = open_regular(shard, "is a folder, not a tar shard")
    except FileNotFoundError:
        raise MissingFileError(f"{shard}: shard not found") from None
    except Im2RecError as exc:
        raise DatasetError(f"{exc}; only regular files are read as shards") from None
    file = os.fdopen(fd, "rb")
    # The compression is told by its magic bytes, so that an error is the
    # one of the format the shard is in (tarfile's "r:*" lists four).
    head = pread(fd, 6, 0)
    mode = next((m for magic, m in _COMPRESSED if head.startswith(magic)), "r:")
    try:
        tar = cast(Any, tarfile.open)(shard, mode, fileobj=file, tarinfo=BoundedTarInfo)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        file.close()
        raise DatasetError(f"{shard}: not a readable tar file ({exc})") from None
    current: Sample | None = None
    try:
        with file, tar:
            raw = tar.fileobj is file  # (not a decompressor)
            members = (
                _plain_members(tar, shard, limit)
                if raw
                else _members(tar, shard, limit, MAX_INFLATION * size + INFLATE_SLACK)
            )
            for raw_name, nbytes, regular, data in members:
                name = relative_name(raw_name, f"{shard}: member")
                key, ext = _split(name)
                if current is None or key != current.key:
                    if current is not None:
                        yield current
                    current = Sample(key, shard)
                if ext in current.fields or ext in current.skipped:
                    raise DatasetError(
                        f"{shard}: member {name} appears twice in sample {key}; refusing a "
                        "shard with duplicate members (which one is meant?)"
                    )
                if len(current.fields) + len(current.skipped) >= MAX_FIELDS:
                    raise DatasetError(f"{shard}: sample {key} has over {MAX_FIELDS} members")
                if not regular:
                    current.skipped[ext] = "not a regular file"
                elif data is None:
                    current.skipped[ext] = f"{nbytes:,} bytes, more than a record holds"
                else:
                    current.fields[ext] = data
            if raw and tar.offset + 2 * _BLOCK > size:
                # tarfile takes a header cut short for the end of the archive
                raise DatasetError(
                    f"{shard}: cut short after {tar.offset:,} bytes (no end-of-archive marker); "
                    "the tar is truncated: copy it again"
                )
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise DatasetError(f"{shard}: damaged tar ({exc})") from None
    if current is not None:
        yield current


#: (name, size, whether a regular file, its bytes: None if not a regular
#: file or not below the size limit, then not read)
Member = tuple[str, int, bool, Data | None]


def _plain_members(tar: tarfile.TarFile, shard: str, limit: int) -> Iterator[Member]:
    """:func:`_members` of an uncompressed tar: a plain ustar file header (what
    WebDataset and ``rec export`` write) is parsed here and its data read
    through reused chunks (:class:`_Ahead`): a small member as ``bytes``, a
    large one (from ``RANGE_FROM``) as where it lies in the shard, a
    :class:`FileRange` that keeps the shard open and says whether MXNet's
    magic word is in it (scanned as it was read), with the chunk's view of
    its bytes when it fits in one (written to the ``.rec`` from there, not
    copied in Python), else copied to the ``.rec`` by the kernel.
    Anything else (pax and GNU extensions, links, base-256 sizes, prefixes)
    is ``tarfile``'s to read. A shard that changes while it is read (its
    size or modification time) is refused: the ranges would no longer hold
    the bytes that were scanned."""
    fileobj = cast(Any, tar.fileobj)
    before = os.fstat(fileobj.fileno())
    held = HeldFile(os.dup(fileobj.fileno()))
    ahead = _Ahead(held.fd, before.st_size)
    # tarfile.open has read the first header already: start again from it
    cast(Any, tar).firstmember = None
    tar.offset = 0
    fileobj.seek(0)
    while True:
        offset = tar.offset
        found = plain_header(ahead.get(offset, _BLOCK))
        if found is None:
            fileobj.seek(tar.offset)  # where tarfile expects to read next
            member = _next(tar, shard)
            if member is None:
                break
            if not member.isdir():
                yield _member(tar, member, shard, limit)
            continue
        name, size = found
        start = offset + _BLOCK
        tar.offset = start + size + (-size) % _BLOCK
        if size >= limit:
            yield name, size, True, None
            continue
        data: Data | None
        if RANGE_FROM <= size <= _Ahead.SIZE:  # written from the chunk that holds it
            data = ahead.take(start, size, shard, held, scan=True)
        elif size >= RANGE_FROM:
            magic = ahead.scan(start, size)
            data = None if magic is None else FileRange(held.fd, start, size, shard, magic, held)
        else:
            view = ahead.get(start, size)
            data = bytes(view) if len(view) == size else None
        if data is None:
            raise DatasetError(f"{shard}: member {name} is cut short (the tar is truncated)")
        yield name, size, True, data
    after = os.fstat(held.fd)
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise DatasetError(
            f"{shard}: changed while it was being read (another program wrote to it); "
            "run again once that program has finished"
        )


def _member(tar: tarfile.TarFile, member: tarfile.TarInfo, shard: str, limit: int) -> Member:
    # A sparse member is not read: its map of holes would have us make
    # gigabytes of zeros from a few bytes (and WebDataset never writes one).
    regular = member.isreg() and not member.issparse()
    wanted = regular and member.size < limit
    return member.name, member.size, regular, _read(tar, member, shard) if wanted else None


#: members from this size are handed on as ranges of the shard (see
#: _plain_members): images; labels and json stay bytes
RANGE_FROM = 32 << 10


class _Ahead(Chunks):
    """A shard read front to back through reused chunks (see
    :class:`~im2rec.recordio.chunks.Chunks`); a member larger than a chunk
    is scanned piece by piece and not kept."""

    def scan(self, start: int, n: int) -> bool | None:
        """Whether the ``n`` bytes from ``start`` hold MXNet's magic word at
        a multiple of 4 from ``start``; None if the file ends first."""
        found = False
        while n:
            piece = self.get(start, min(n, len(self.buf)))
            if len(piece) < n:
                piece = piece[: len(piece) & -ALIGN]  # pieces end aligned: no word spans two
            if not piece:
                return None
            found = found or has_aligned_magic(piece)
            start, n = start + len(piece), n - len(piece)
        return found


_USTAR = (b"ustar\x0000", b"ustar  \x00")  # POSIX and GNU magic, with their versions
#: mode, uid, gid, mtime, devmajor, devminor: (start, width) of the number fields
_NUMBERS = ((100, 8), (108, 8), (116, 8), (136, 12), (329, 8), (337, 8))


def plain_header(block: bytes | memoryview) -> tuple[str, int] | None:
    """``(name, size)`` where the 512-byte ``block`` is a plain ustar
    regular-file header (no prefix, no extension, the checksum right: what
    ``tarfile``, GNU tar, WebDataset and ``rec export`` write for a short
    ASCII name), else None, and ``tarfile`` is to read it."""
    return _ustar_file(bytes(block)) if len(block) == _BLOCK else None


def _ustar_file(block: bytes) -> tuple[str, int] | None:
    """``(name, size)`` of a plain ustar regular-file header, else None."""
    if block[156] not in (48, 0) or block[345] or block[124] & 0x80:  # "0" or NUL: a file
        return None
    if block[257:265] not in _USTAR:
        return None
    try:
        size = _octal(block, 124, 11, 12)
        chksum = _octal(block, 148, 6, 8)
        for start, width in _NUMBERS:  # the others tarfile reads: numbers too, or not plain
            if block[start] & 0x80:
                return None
            _octal(block, start, width - 1, width)
        end = block.find(b"\0", 0, 100)
        name = block[: end if end >= 0 else 100].decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return None
    # the sum of the other bytes, with the checksum field counted as spaces
    if not name or name.endswith("/") or not _sums_to(block, chksum + sum(block[148:156]) - 256):
        return None
    return name, size


def _sums_to(block: bytes, total: int) -> bool:
    """``sum(block) == total`` for a 512-byte block, without a Python loop: the byte sum
    lies in [0, 130560], and Adler-32 gives it modulo 65521 while the block
    read as one number gives it modulo 255 (as 256 = 1 modulo 255); the two
    moduli are coprime with a product past the range, so both agreeing is
    equality (the Chinese remainder theorem)."""
    return (
        0 <= total <= 255 * _BLOCK
        and zlib.adler32(block) & 0xFFFF == (total + 1) % 65521
        and int.from_bytes(block, "little") % 255 == total % 255
    )


_OCTAL = re.compile(rb"[0-7]*")


def _octal(block: bytes, start: int, digits: int, width: int) -> int:
    """The octal number in the ``width``-byte field at ``start`` (up to a
    NUL, spaces stripped, as tarfile reads it), digits only: ``int()``
    would also take a sign (``-0000000012``, a negative size), ``_`` and
    inner spaces, which are no tar number (ValueError: tarfile reads it,
    and refuses a negative size). The usual spelling, ``digits`` digits
    and then only spaces up to a NUL, is read without a copy; anything else
    as tarfile does (twelve digits are one number, not eleven and a
    terminator)."""
    field = block[start : start + digits]
    tail = block[start + digits : start + width].split(b"\0", 1)[0]
    if not field or not _OCTAL.fullmatch(field) or tail.strip(b" "):
        field = block[start : start + width].split(b"\0", 1)[0].strip(b" ")
        if not _OCTAL.fullmatch(field):
            raise ValueError(f"not an octal number: {field!r}")
    return int(field or b"0", 8)


def _next(tar: tarfile.TarFile, shard: str) -> tarfile.TarInfo | None:
    try:
        member = tar.next()
    except tarfile.TarError as exc:
        raise DatasetError(f"{shard}: damaged tar ({exc})") from None
    cast(Any, tar).members.clear()  # tarfile keeps every member it read: memory stays constant
    return member


def _members(tar: tarfile.TarFile, shard: str, limit: int, inflated: int) -> Iterator[Member]:
    """The members of a compressed shard; every offset is a position in the
    inflated stream, so a member (or header) ending past ``inflated`` bytes
    is refused before its bytes are inflated: a compression bomb."""
    while (member := _next(tar, shard)) is not None:
        end = member.offset_data + (member.size if member.isreg() and not member.issparse() else 0)
        if end > inflated:
            raise DatasetError(
                f"{shard}: member {member.name} would inflate the shard past {inflated:,} bytes "
                f"({MAX_INFLATION}x its size and {INFLATE_SLACK >> 20} MiB); refusing it as a "
                "compression bomb (a real shard of images compresses little)"
            )
        if not member.isdir():  # folders carry no sample data
            yield _member(tar, member, shard, limit)


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo, shard: str) -> bytes:
    f: Any = tar.fileobj  # the bytes as they are stored (never a sparse member's)
    f.seek(member.offset_data)
    # in pieces: memory grows with the bytes there, not with the size claimed
    pieces, left = [], member.size
    while left and f is not None and (piece := f.read(min(left, 1 << 20))):
        pieces.append(piece)
        left -= len(piece)
    data = b"".join(pieces)
    if len(data) != member.size:
        raise DatasetError(f"{shard}: member {member.name} is cut short (the tar is truncated)")
    return data

"""Safe, streaming extraction of the ILSVRC2012 tars (spec: imagenet.md §3, §6).

Every member name is checked before anything is written: ``./`` prefixes
are dropped, ``.`` and directory entries skipped, and absolute paths, ``..``
components, links and devices refuse the whole archive. The train tar is a
tar of per-class tars: each inner tar is read straight from the outer stream
(never written to disk first), and files are written by a few threads while
the next ones are read. Odd images are recognised by content, not name.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DatasetError, Im2RecError, ImageCodecError
from ..formats.tars import BoundedTarInfo
from ..imaging.codec import DECODE_ERRORS, open_image
from ..imaging.headers import jpeg_frame
from ..listing.lstfile import cannot_carry, printable
from ..recordio.writer import write_all
from ..storage.atomic import create_output, fresh_folder, own_folder
from ..storage.files import open_regular

__all__ = ["Member", "OddImage", "extract_train", "extract_val", "list_members", "sniff"]

Progress = Callable[[int], None]  # bytes of the archive consumed since the last call
#: Every file is read whole (to sniff, and to fix odd ones); the largest
#: ILSVRC2012 image is about 15 MB. Larger members are refused, so a hostile
#: tar cannot make each extraction thread hold gigabytes.
MAX_MEMBER = 64 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class OddImage:
    """A file whose content is not what its ``.JPEG`` name says."""

    path: str  # relative to the target, e.g. train/n02105855/n02105855_2933.JPEG
    kind: str  # png | cmyk-jpeg
    action: str  # kept | re-encoded | not re-encoded (why): kept as it is


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
    if name.startswith("/") or ".." in name.split("/"):
        raise DatasetError(f"{where} would be written outside the target; refusing the archive")
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


def _unique(name: str, seen: set[str], where: str) -> None:
    """Refuse a second member of the same name: which copy ends up on disk
    would depend on the order the threads write them."""
    if name in seen:
        raise DatasetError(
            f"{where}: member {name!r} appears twice; an archive with two files of one name "
            "is ambiguous (which is the image?): refusing it"
        )
    seen.add(name)


@dataclass(frozen=True)
class Member:
    """A file in a tar: its safe name and where its bytes are."""

    name: str
    offset: int
    size: int


def list_members(path: Path) -> list[Member]:
    """Every file of a tar, reading headers only (checked by :func:`safe_name`)."""
    out = []
    seen: set[str] = set()
    try:
        fd, size = open_regular(path, "is a folder, not a tar file")
    except Im2RecError as exc:
        raise DatasetError(f"{exc}; the ImageNet tars must be regular files") from None
    try:
        with (
            os.fdopen(fd, "rb") as f,
            tarfile.open(fileobj=f, mode="r:", tarinfo=BoundedTarInfo) as tar,
        ):
            for member in tar:
                name = safe_name(member, path.name, outer=True)
                if name is not None:
                    _unique(name, seen, str(path))
                    out.append(Member(name, member.offset_data, member.size))
                # headers are kept in `out`; 1.3 million TarInfos are not (`members`
                # is a plain list, left out of typeshed)
                tar.members.clear()  # type: ignore[attr-defined]
            _check_zero_tail(f.fileno(), 0, tar.offset, size, str(path))
    except tarfile.TarError as exc:
        raise DatasetError(f"{path}: not a readable tar file ({exc})") from None
    return out


def _check_zero_tail(fd: int, base: int, end: int, size: int, where: str) -> None:
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


def sniff(data: bytes) -> str | None:
    """``png`` for PNG data, ``cmyk-jpeg`` for a 4-component JPEG, else None."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    frame = jpeg_frame(data)
    return "cmyk-jpeg" if frame is not None and frame[2] == 4 else None


def reencode(data: bytes) -> bytes:
    """An RGB JPEG (quality 95) of an odd image. Raises
    :class:`~im2rec.errors.ImageCodecError` (for a decompression bomb
    :class:`~im2rec.errors.ImageTooLargeError`) when it cannot be read."""
    try:
        with open_image(data) as im:
            out = io.BytesIO()
            im.convert("RGB").save(out, "JPEG", quality=95)
    except ImageCodecError:
        raise
    except DECODE_ERRORS as exc:
        raise ImageCodecError(f"cannot decode it: {exc}") from exc
    return out.getvalue()


class _Slice(io.RawIOBase):
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


def _place(data: bytes, rel: str, fix: bool, on_odd: Callable[[OddImage], None]) -> bytes:
    """The bytes to write for a file: odd images are reported, and with
    ``fix`` re-encoded; one that cannot be (damaged, or a decompression
    bomb) is kept as it is and reported so, instead of stopping the run."""
    kind = sniff(data)
    if kind is None:
        return data
    if not fix:
        on_odd(OddImage(rel, kind, "kept"))
        return data
    try:
        fixed = reencode(data)
    except ImageCodecError as exc:
        why = printable(str(exc)).replace("\t", " ")
        on_odd(OddImage(rel, kind, f"not re-encoded ({why}): kept as it is"))
        return data
    on_odd(OddImage(rel, kind, "re-encoded"))
    return fixed


def _write(path: Path, data: bytes) -> None:
    # os-level calls: no Python file object per image (1.3 million of them);
    # O_NOFOLLOW: the folders are our own, and a link in them is not followed
    fd = create_output(path, mode=0o644)
    try:
        write_all(fd, [data])
    finally:
        os.close(fd)


def _parallel(tasks: list[Callable[[], None]], threads: int) -> None:
    """Run ``tasks`` on ``threads`` threads; the first error stops the rest."""
    with ThreadPoolExecutor(threads, thread_name_prefix="im2rec-extract") as pool:
        futures = [pool.submit(task) for task in tasks]
        try:
            for future in futures:
                future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def extract_train(
    tar_path: Path,
    classes: list[Member],
    dest: Path,
    *,
    fix_odd: bool,
    on_bytes: Progress,
    on_odd: Callable[[OddImage], None],
    threads: int = 4,
) -> None:
    """Each ``<wnid>.tar`` of the outer tar (``classes``, from
    :func:`list_members`) into ``dest/<wnid>/``, several classes at a time,
    each inner tar read in place (never copied out). A class is written to
    ``dest/<wnid>.partial`` and renamed when whole; classes already whole
    (an earlier, interrupted run) are skipped."""
    fd, _ = open_regular(tar_path)
    try:

        def one(member: Member) -> Callable[[], None]:
            return lambda: _extract_class(
                fd, tar_path.name, member, dest, fix_odd, on_bytes, on_odd
            )

        _parallel([one(m) for m in classes], threads)
    finally:
        os.close(fd)


def _extract_class(
    fd: int,
    archive: str,
    member: Member,
    dest: Path,
    fix_odd: bool,
    on_bytes: Progress,
    on_odd: Callable[[OddImage], None],
) -> None:
    wnid = member.name[: -len(".tar")]
    if (dest / wnid).is_dir():
        on_bytes(member.size)
        return
    part = dest / f"{wnid}.partial"
    fresh_folder(part)
    inner_name = f"{archive}:{member.name}"
    stream = io.BufferedReader(_Slice(fd, member.offset, member.size), 1 << 20)
    try:
        with tarfile.open(fileobj=stream, mode="r:", tarinfo=BoundedTarInfo) as inner:
            seen: set[str] = set()
            for info in inner:
                name = safe_name(info, inner_name)
                inner.members.clear()  # type: ignore[attr-defined]
                if name is None:
                    continue
                if "/" in name:
                    raise DatasetError(f"{inner_name}: unexpected folder in {name!r}")
                _unique(name, seen, inner_name)
                f = inner.extractfile(info)
                assert f is not None  # a regular file, checked by safe_name
                data = _place(f.read(), f"train/{wnid}/{name}", fix_odd, on_odd)
                _write(part / name, data)
                on_bytes(info.size + 512)
            _check_zero_tail(fd, member.offset, inner.offset, member.size, inner_name)
    except tarfile.TarError as exc:
        raise DatasetError(f"{inner_name}: damaged tar ({exc}); check it with --checksum") from None
    os.replace(part, dest / wnid)


def extract_val(
    tar_path: Path,
    members: list[Member],
    dest: Path,
    classes: dict[str, str],
    *,
    fix_odd: bool,
    on_bytes: Progress,
    on_odd: Callable[[OddImage], None],
    threads: int = 4,
) -> None:
    """The flat val tar (``members``, from :func:`list_members`, every one
    named in ``classes``) into ``dest/<wnid>/<fname>``, each file's class
    looked up by name (the tar's order is not the names' order). Files
    already there (an interrupted run) are written again: after a power
    loss one can have the right size and zeros inside."""
    for folder in sorted(set(classes.values())):
        own_folder(dest / folder)
    fd, _ = open_regular(tar_path)

    def chunk(part: list[Member]) -> Callable[[], None]:
        def run() -> None:
            for member in part:
                wnid = classes[member.name]
                target = dest / wnid / member.name
                raw = os.pread(fd, member.size, member.offset)
                if len(raw) != member.size:  # the tar was cut since it was listed
                    raise DatasetError(
                        f"{tar_path}: member {member.name} ends early: the file changed "
                        "while it was being read; run again with --resume once it is whole"
                    )
                _write(target, _place(raw, f"val/{wnid}/{member.name}", fix_odd, on_odd))
                on_bytes(member.size + 512)

        return run

    try:
        step = max(1, len(members) // (threads * 8))
        _parallel([chunk(members[i : i + step]) for i in range(0, len(members), step)], threads)
    finally:
        os.close(fd)

"""Safe, streaming extraction of the ILSVRC2012 tars (spec: imagenet.md §3, §6).

Every member name is checked before anything is written (:mod:`.members`:
``./`` prefixes are dropped, ``.`` and directory entries skipped, and
absolute paths, ``..`` components, links and devices refuse the whole
archive). The train tar is a tar of per-class tars: each inner tar is read
in place from the outer one (never written to disk first), and a few
classes are extracted at once, on threads. Odd images are recognised by
content, not name.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..errors import DatasetError, Im2RecError, ImageCodecError
from ..formats.tars import BoundedTarInfo
from ..imaging.codec import DECODE_ERRORS, open_image
from ..imaging.headers import jpeg_frame
from ..listing.lstfile import printable
from ..recordio.writer import write_all
from ..storage.atomic import create_output, fresh_folder, own_folder
from ..storage.files import open_regular
from .members import check_zero_tail, class_files, safe_name, unique

__all__ = ["Member", "OddImage", "extract_train", "extract_val", "list_members", "sniff"]

Progress = Callable[[int], None]  # bytes of the archive consumed since the last call
#: a file's bytes (a class tar's file: a view of what was read)
Data = bytes | memoryview


@dataclass(frozen=True)
class OddImage:
    """A file whose content is not what its ``.JPEG`` name says."""

    path: str  # relative to the target, e.g. train/n02105855/n02105855_2933.JPEG
    kind: str  # png | cmyk-jpeg
    action: str  # kept | re-encoded | not re-encoded (why): kept as it is


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
                    unique(name, seen, str(path))
                    out.append(Member(name, member.offset_data, member.size))
                # headers are kept in `out`; 1.3 million TarInfos are not (`members`
                # is a plain list, left out of typeshed)
                tar.members.clear()  # type: ignore[attr-defined]
            check_zero_tail(f.fileno(), 0, tar.offset, size, str(path))
    except tarfile.TarError as exc:
        raise DatasetError(f"{path}: not a readable tar file ({exc})") from None
    return out


def sniff(data: Data) -> str | None:
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


def _place(data: Data, rel: str, fix: bool, on_odd: Callable[[OddImage], None]) -> Data:
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
        fixed = reencode(bytes(data))
    except ImageCodecError as exc:
        why = printable(str(exc)).replace("\t", " ")
        on_odd(OddImage(rel, kind, f"not re-encoded ({why}): kept as it is"))
        return data
    on_odd(OddImage(rel, kind, "re-encoded"))
    return fixed


def _write(path: Path, data: Data) -> None:
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
    where = f"{archive}:{member.name}"
    for name, data, taken in class_files(fd, member.offset, member.size, where):
        _write(part / name, _place(data, f"train/{wnid}/{name}", fix_odd, on_odd))
        on_bytes(taken)
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

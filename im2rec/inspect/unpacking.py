"""Getting records out of a ``.rec``: ``unpack_rec`` writes every payload
back as a file (below one folder, whatever names the file holds) and a
``.lst`` that packs to the same records again (``rec pack OUT.lst
--pass-through``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DatasetError, RecordFormatError
from ..imaging.headers import image_extension
from ..listing.classmap import read_class_map
from ..recordio import RecordReader, read_record, unpack
from ..recordio.faces import layout_record
from ..recordio.walking import Damage, header_at, length_word, walk_records
from ..storage.atomic import AtomicGroup, fresh_folder
from ..storage.confined import ConfinedWriter
from .summary import face_layout

__all__ = ["UnpackResult", "image_extension", "read_class_map", "unpack_rec"]


def _label_text(value: float) -> str:
    # %f for whole numbers (as im2rec.py writes), else the shortest text that
    # reads back to the same float32, so a re-pack stores the same bits.
    return f"{value:f}" if float(value).is_integer() else repr(float(value))


@dataclass
class UnpackResult:
    out: Path
    lst: Path
    images: int = 0
    other: int = 0  # payloads that are not image files (written as .bin, not listed)
    layout_records: int = 0  # InsightFace's header and identity records (not written)
    skipped: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list, repr=False)  # OUT.lst, in record order

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "lst": str(self.lst),
            "images": self.images,
            "other": self.other,
            "layout_records": self.layout_records,
        }


def unpack_rec(
    rec: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    classes: dict[int, str] | None = None,
    force: bool = False,
) -> UnpackResult:
    """Write each record's payload to ``OUT/FOLDER/ID.EXT`` (FOLDER: the class
    map's folder for a whole-number label, else the label; ``multi-label``
    for records with several) and ``OUT.lst`` beside OUT, whose lines
    re-pack to the same records in the same order.

    Every record header is read before anything is written, so a damaged
    file, or a record that ``pack()`` did not write, fails with nothing on
    disk. A new OUT is filled as ``OUT.partial`` and renamed when complete;
    with ``force`` an existing folder is written into in place."""
    out_dir = Path(out)
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise DatasetError(f"{out_dir}: exists and is not empty; pass --force to write into it")
    reader = RecordReader(rec)
    buf, _ = reader.mapping()
    first_head, layout_records, records = None, 0, 0
    for head, nxt in _records(reader):  # a walk reads only the 8-byte frame heads
        header = _header(buf, head, nxt, reader.name)
        records += 1
        if layout_record(header.flag, length_word(buf, head)):
            layout_records += 1
            first_head = header if header.id == 0 else first_head
    faces = face_layout(first_head, layout_records, records) is not None
    in_place = out_dir.exists()
    work = out_dir if in_place else out_dir.with_name(out_dir.name + ".partial")
    if not in_place:
        fresh_folder(work)  # (what an interrupted run left goes)
    try:
        result = _unpack_into(reader, buf, work, out_dir, classes, faces)
    except BaseException:
        if not in_place:  # a new folder appears whole or not at all
            shutil.rmtree(work, ignore_errors=True)
        raise
    if not in_place:
        os.replace(work, out_dir)
    with AtomicGroup() as group:
        group.write_text(result.lst, "".join(result.lines))
    return result


def _unpack_into(
    reader: RecordReader,
    buf: Any,
    work: Path,
    out_dir: Path,
    classes: dict[int, str] | None,
    faces: bool,
) -> UnpackResult:
    result = UnpackResult(out_dir, out_dir.with_name(out_dir.name + ".lst"))
    used: set[int] = set()
    free = 0  # ids below this are all used: duplicates take the next free one
    with ConfinedWriter(work) as files:
        for head, nxt in _records(reader):
            header, payload = unpack(read_record(buf, head, nxt, reader.name)[0])
            labels = header.label.tolist() if header.flag else [header.label]
            if faces and header.flag:
                if not payload:  # the header and identity records: the layout, not images
                    result.layout_records += 1
                    continue
                labels = labels[:1]  # [identity, aligned]: one folder per identity
            key = header.id
            if key in used:
                while free in used:
                    free += 1
                key = free
            used.add(key)
            ext = image_extension(payload)
            if len(labels) > 1:
                folder = "multi-label"
            elif float(labels[0]).is_integer():
                folder = (classes or {}).get(int(labels[0]), f"{int(labels[0])}")
            else:
                folder = _label_text(labels[0])
            name = f"{folder}/{key}{ext or '.bin'}"
            files.write(name, payload)
            if ext is None:
                result.other += 1
                result.skipped.append(str(out_dir / name))
                continue
            result.images += 1
            fields = [str(key), *map(_label_text, labels), name]
            result.lines.append("\t".join(fields) + "\n")
    return result


def _records(reader: RecordReader) -> Iterator[tuple[int, int]]:
    for item in walk_records(reader):
        if not isinstance(item, Damage):  # not yielded without recover; keeps mypy exact
            yield item


def _header(buf: Any, head: int, nxt: int, name: str) -> Any:
    try:
        return header_at(buf, head, nxt, name)
    except RecordFormatError as exc:
        why = str(exc).removeprefix(f"{name}: ")
        raise RecordFormatError(
            f"{name}: the record at byte {head:,} has no image-record header ({why}); "
            "nothing was written"
        ) from None

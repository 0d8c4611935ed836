"""InsightFace's face layout: what ``face2rec2.py`` writes and
``arcface_torch``'s ``MXFaceDataset`` (and DALI) read.

Checked against InsightFace's ``src/data/face2rec2.py``:

- records ``1 .. N`` are the images, grouped by identity, each with the two
  labels ``[identity, 1.0]`` (the second is face2rec2's "aligned" flag; two
  labels make ``flag = 2``) and its own record number as header id and
  ``.idx`` key;
- record ``0``, written after the images, is the header: ``flag = 2``,
  ``label = [N + 1, N + 1 + K]`` (the first identity record, and the end)
  and no image;
- records ``N + 1 .. N + K``, one per identity in order, hold its image
  range ``[start, end)`` as two labels, and no image.

Readers take ``label[0]`` of an image record as its identity and
``range(1, header.label[0])`` as the image keys. Identity records cover
consecutive keys, so an image that failed to pack leaves no hole: numbers
are given as records are written.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DatasetError, EmptyRecError, Im2RecError, MissingFileError
from ..imaging.headers import image_size
from ..recordio import IndexedRecordWriter, IRHeader, pack
from ..recordio.faces import MAX_IDENTITIES, face_header
from ..recordio.framing import needs_split
from ..recordio.keyset import KeySet

__all__ = [
    "FaceCounts",
    "convert_to_faces",
    "face_header",
    "identity_of_label",
    "property_text",
    "settle_property",
    "write_faces",
    "write_property",
]


def identity_of_label(label: Any) -> int | None:
    """The identity a label names (a whole number >= 0, or the first of
    several), or None."""
    if hasattr(label, "__len__"):
        if not len(label):
            return None
        label = label[0]
    value = float(label)
    if not value.is_integer() or value < 0:
        return None
    return int(value)


@dataclass
class FaceCounts:
    """What :func:`write_faces` wrote (and :func:`write_property`)."""

    images: int
    identities: int
    rec_sha256: str
    idx_sha256: str
    #: the largest identity + 1: the number of classes a classifier needs
    classes: int = 0
    #: ``(height, width)`` of every image, when they all have one size
    size: tuple[int, int] | None = None
    #: the ``property`` file written beside the ``.rec``, or why not
    property: Path | None = None
    property_note: str | None = None


def write_faces(images: Iterable[tuple[int, bytes]], rec: Path, idx: Path, name: str) -> FaceCounts:
    """Write ``(identity, image bytes)`` pairs, grouped by identity, as the
    face layout into ``rec``/``idx`` (atomically: they appear when complete).
    ``name`` names the source in the error for images not grouped."""
    writer = IndexedRecordWriter(rec, idx, hashing=True)
    # each identity's first record (its end: the next one's first), and
    # which identities were seen: arrays and bits, not objects an identity
    starts = array("q")
    done = KeySet()
    current, largest = -1, -1
    number = 1
    sizes = _Sizes()
    try:
        for identity, image in images:
            sizes.add(image)
            if identity != current:
                if identity in done:
                    raise DatasetError(
                        f"{name}: identity {identity} appears again after others; the layout "
                        "needs each identity's images together"
                    )
                done.add(identity)
                starts.append(number)
                current, largest = identity, max(largest, identity)
            header = pack(IRHeader(0, [float(identity), 1.0], number, 0), b"")
            writer.write_key(number, header, image, split=needs_split(header, image))
            number += 1
        if len(starts) > MAX_IDENTITIES:
            raise DatasetError(f"{name}: more than {MAX_IDENTITIES:,} identities")
        first = number
        writer.write_key(
            0, pack(IRHeader(0, [float(first), float(first + len(starts))], 0, 0), b"")
        )
        starts.append(number)  # (the last identity's end)
        for j in range(len(starts) - 1):
            start, end = starts[j], starts[j + 1]
            writer.write_key(
                first + j, pack(IRHeader(0, [float(start), float(end)], first + j, 0), b"")
            )
        writer.close()
    except BaseException:
        writer.abort()
        raise
    return FaceCounts(
        number - 1, len(starts) - 1, writer.sha256(), writer.index_sha256(), largest + 1,
        sizes.one(),
    )  # fmt: skip


class _Sizes:
    """Whether every image has one size, read from its header (a few
    microseconds an image: no decoding)."""

    def __init__(self) -> None:
        self.size: tuple[int, int] | None = None
        self.same = True

    def add(self, image: bytes) -> None:
        if self.same:
            size = image_size(image)
            self.same = size is not None and self.size in (None, size)
            self.size = size

    def one(self) -> tuple[int, int] | None:
        return self.size if self.same else None


#: the file older InsightFace training scripts read beside train.rec
PROPERTY = "property"
MAX_PROPERTY = 4096


def write_property(rec: Path, counts: FaceCounts, *, overwrite: bool) -> FaceCounts:
    """InsightFace's ``property`` file beside ``rec``: ``classes,height,width``
    (what ``face2rec2.py``'s users and ``RecBuilder`` leave there, and its
    older training scripts read), written atomically. Not written, with the
    reason in ``counts.property_note``, when the images are not all one size,
    or when :func:`settle_property` says no."""
    from ..storage import write_bytes

    if counts.size is None:
        counts.property_note = (
            "the images are not all one size (or some are unreadable), so no one height and "
            "width could be written"
        )
        return counts
    path, text = rec.parent / PROPERTY, property_text(counts)
    counts.property_note = settle_property(str(path), text, overwrite=overwrite)
    if counts.property_note is None:
        write_bytes(path, text)
        counts.property = path
    return counts


def property_text(counts: FaceCounts) -> bytes:
    assert counts.size is not None
    return f"{counts.classes},{counts.size[0]},{counts.size[1]}\n".encode()


def settle_property(location: str, text: bytes, *, overwrite: bool) -> str | None:
    """Whether ``text`` may be written to ``location`` (a path or a URL):
    None when nothing is there, the same text is, or ``overwrite``; else why
    not. Something that cannot be a property file (a folder, a device, more
    than 4 kB) is never replaced."""
    from ..storage import read_bytes

    try:
        there = read_bytes(location, limit=MAX_PROPERTY)
    except (FileNotFoundError, MissingFileError):
        return None
    except Im2RecError as exc:
        return f"{location} is there and is not a property file ({exc}); it was left as it is"
    if there == text or overwrite:
        return None

    def shown(data: bytes) -> str:
        return repr(data[:40].decode("utf-8", "replace").strip())

    return (
        f"{location} is there already and says {shown(there)}, not {shown(text)}; "
        "pass --overwrite to replace it"
    )


def convert_to_faces(
    rec: str | os.PathLike[str], out: str | os.PathLike[str], *, overwrite: bool = False
) -> FaceCounts:
    """``rec convert REC --layout insightface -o OUT``: a plain ``.rec`` whose
    labels are identities (a whole number, or the first of several) rewritten
    in the face layout to ``OUT.rec``/``OUT.idx``, images grouped by identity
    in the order identities first appear, each identity's in file order.

    The record headers are walked first (8 bytes and a header a record), so
    a label that is not an identity, or a file already in the layout, is an
    error before anything is written."""
    from ..inspect.summary import face_layout
    from ..recordio import RecordReader, read_record, unpack
    from ..recordio.faces import layout_record
    from ..recordio.walking import header_at, length_word, walk_records

    target = Path(os.fspath(out)).with_suffix(".rec")
    existing = [p for p in (target, target.with_suffix(".idx")) if p.exists()]
    if existing and not overwrite:
        raise DatasetError(f"{existing[0]}: already exists; pass --overwrite to replace it")
    reader = RecordReader(rec)
    try:
        buf, size = reader.mapping()
        if not size:
            raise EmptyRecError(reader.name)
        first: dict[int, int] = {}
        order: list[tuple[int, int, int]] = []  # (identity's rank, head, identity)
        header0, layout_records = None, 0
        for head, nxt in walk_records(reader):  # type: ignore[misc]  # no Damage without recover
            header = header_at(buf, head, nxt, reader.name)
            if layout_record(header.flag, length_word(buf, head)):
                layout_records += 1
                header0 = header if header.id == 0 else header0
            identity = identity_of_label(header.label)
            if identity is None:
                raise DatasetError(
                    f"{reader.name}: the record at byte {head:,} (id {header.id}) has label "
                    f"{header.label}, not an identity (a whole number >= 0); nothing was written"
                )
            order.append((first.setdefault(identity, len(first)), head, identity))
        if face_layout(header0, layout_records, len(order)) is not None:
            raise DatasetError(
                f"{reader.name}: already in the InsightFace layout; nothing was written"
            )
        order.sort(key=lambda entry: entry[0])

        def images() -> Iterator[tuple[int, bytes]]:
            for _, head, identity in order:
                yield identity, bytes(unpack(read_record(buf, head, size, reader.name)[0])[1])

        counts = write_faces(images(), target, target.with_suffix(".idx"), reader.name)
        return write_property(target, counts, overwrite=overwrite)
    finally:
        reader.close()

"""``rec verify``: every frame, padding, header and image checked, and the
``.idx`` and manifest beside the ``.rec`` checked against what the walk found."""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Im2RecError
from ..progress import with_progress
from ..recordio import RecordReader, read_record, unpack
from ..recordio.codec import (
    CFLAG_LAST,
    CFLAG_WHOLE,
    HEAD_SIZE,
    decode_flag,
    decode_length,
    frame_size,
    padding_bits,
)
from ..recordio.framing import Buffer, not_recordio
from ..recordio.manifests import load_pack_manifest
from ..recordio.walking import Damage, Progress, header_at, walk_records
from ..storage import exists, is_url, sibling
from ..storage.files import FileView, open_regular, read_json
from .indexcheck import SMALL_INDEX, index_problems, index_size, parse_ahead

__all__ = [
    "LABEL_PROBLEMS",
    "Problem",
    "VerifyResult",
    "bad_padding",
    "padding_message",
    "verify",
]


@dataclass(frozen=True)
class Problem:
    """One thing wrong, where it is."""

    offset: int | None
    key: Any
    message: str


@dataclass
class VerifyResult:
    path: str
    bytes: int
    records: int = 0
    indexed: int | None = None
    decoded: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "bytes": self.bytes, "records": self.records,
            "indexed": self.indexed, "decoded": self.decoded, "ok": self.ok,
            "problems": [vars(p) for p in self.problems],
        }  # fmt: skip


@with_progress("verifying", "B", done=0, total=1, scale=True)
def verify(
    path: str | os.PathLike[str],
    idx: str | os.PathLike[str] | None = None,
    *,
    decode: bool = False,
    boxes: bool = False,
    manifest: str | os.PathLike[str] | None = None,
    on_progress: Progress | None = None,
    progress: bool = False,
) -> VerifyResult:
    """Check every frame, the ``.idx`` (if there is one, or ``idx``), the
    images (``decode``), every label as a detection label (``boxes``:
    :func:`~im2rec.inspect.boxes.label_problems`; the first
    :data:`LABEL_PROBLEMS` records that break it are named, the rest
    counted) and a pack manifest's SHA-256s (``manifest``)."""
    reader = RecordReader(path)
    buf, size = reader.mapping()
    wrong = not_recordio(reader.name, buf[0 : min(4, size)])
    if wrong is not None:  # (a list or an index: one line, not a line per offset)
        reader.close()
        raise wrong
    result = VerifyResult(reader.name, size)
    index_location = os.fspath(idx) if idx is not None else sibling(reader.location, ".idx")
    index_path = Path(index_location)
    indexed = idx is not None or exists(index_location)
    parsed = None
    if indexed and (boxes or index_size(index_location, 0) >= SMALL_INDEX):  # (arrays, surely)
        parsed = parse_ahead(index_location)  # (beside the walk)
    heads = array("q")  # 8 bytes a record: memory stays small for millions of records
    broken = 0  # records whose label is no detection label

    def few() -> None:  # (a walk a record at a time: the heads the index lists read ahead)
        nonlocal parsed
        if indexed and parsed is None and type(buf) is FileView and not is_url(index_location):
            parsed = parse_ahead(index_location, lists=True, hints=(buf.fd, size, BLOCKS_FROM))

    for item in _walk(reader, size, boxes, few):
        if isinstance(item, Damage):
            result.problems.append(
                Problem(
                    item.offset,
                    None,
                    f"{item.reason} (bytes {item.offset:,} to {item.end:,} skipped)",
                )
            )
            continue
        if not isinstance(item, tuple):  # a Block of whole records, checked on arrays
            broken = _check_block(item, buf, reader.name, result, heads, decode, boxes, broken)
            if on_progress is not None:
                on_progress(item.base + len(item.data), size)
            continue
        heads.append(item[0])
        _check_padding(buf, item, result)
        if decode:
            _check_image(buf, item, reader.name, result)
        if boxes:
            broken += _check_label(buf, item, reader.name, result, broken)
        if on_progress is not None and len(heads) % 4096 == 0:
            on_progress(item[1], size)
    result.records = len(heads)
    if broken > LABEL_PROBLEMS:
        result.problems.append(Problem(None, None, f"{broken - LABEL_PROBLEMS:,} more records' "
                                       "labels are not detection labels"))  # fmt: skip
    if indexed:
        arrays = len(heads) >= BLOCKS_FROM or boxes
        count, found = index_problems(index_location, heads, size, arrays=arrays, parsed=parsed)
        result.indexed = count if count is not None else result.indexed
        result.problems.extend(Problem(*p) for p in found)
    if manifest is not None:
        _check_manifest(Path(manifest), buf, index_path, result)
    if on_progress is not None:
        on_progress(size, size)
    return result


#: records with a bad detection label named one by one (the rest are counted)
LABEL_PROBLEMS = 100
#: records a walk takes one at a time before it knows their mean size
_FIRST = 64
#: the records (estimated from the first ones' mean size) from which the
#: rest of a walk is a block at a time, on arrays: below it, numpy's import
#: is more than the per-record walk takes
BLOCKS_FROM = 32_768


def _walk(
    reader: RecordReader, size: int, boxes: bool, few: Callable[[], None] = lambda: None
) -> Iterator[Any]:
    """The walk: a record at a time, then, where the file holds about
    BLOCKS_FROM records or more (or labels are checked: numpy then anyway),
    blocks of whole records (and any other record alone). ``few`` is called
    where it goes on a record at a time."""
    walk = walk_records(reader, recover=True)
    pos, seen = 0, 0
    if not boxes:
        for item in walk:
            yield item
            pos = item.end if isinstance(item, Damage) else item[1]
            seen += 1
            if seen == _FIRST:
                break
        else:
            return
        if size * seen < BLOCKS_FROM * pos:  # (few records: go on one at a time)
            few()
            yield from walk
            return
    from ..recordio.blocks import walk_blocks

    yield from walk_blocks(reader, recover=True, start=pos, labels=boxes)


def _check_block(
    block: Any, buf: Buffer, name: str, result: VerifyResult, heads: array[int],
    decode: bool, boxes: bool, broken: int,
) -> int:  # fmt: skip
    """The checks of :func:`verify` on a block of whole records, the
    problems in file order; the count of records with bad labels after it."""
    from .blockchecks import bad_paddings, label_findings

    fields = block.header_fields()
    lrec = fields["lrec"].astype("int64")
    starts = block.heads + block.base
    ends = starts + frame_size(lrec)
    heads.frombytes(starts.astype("<i8").tobytes())
    found = [(head, 0, Problem(head, None, padding_message(at)))
             for head, at in bad_paddings(block, lrec)]  # fmt: skip
    if decode:
        for head, end in zip(starts.tolist(), ends.tolist(), strict=True):
            mark = len(result.problems)
            _check_image(buf, (head, end), name, result)
            found += [(head, 1, p) for p in result.problems[mark:]]
            del result.problems[mark:]
    if boxes:
        for i in label_findings(block, fields).tolist():
            mark = len(result.problems)
            broken += _check_label(buf, (int(starts[i]), int(ends[i])), name, result, broken)
            found += [(int(starts[i]), 2, p) for p in result.problems[mark:]]
            del result.problems[mark:]
    found.sort(key=lambda entry: entry[:2])
    result.problems.extend(p for _, _, p in found)
    return broken


def _check_label(
    buf: Buffer, item: tuple[int, int], name: str, result: VerifyResult, broken: int
) -> int:
    """1 when the record's label is no good detection label (named while
    fewer than LABEL_PROBLEMS are), else 0."""
    from .boxes import label_problems  # (numpy: only when labels are checked)

    try:
        header = header_at(buf, item[0], item[1], name)
    except Im2RecError as exc:
        result.problems.append(Problem(item[0], None, f"the header does not read: {exc}"))
        return 1
    found = label_problems(header.label if header.flag > 0 else None)
    if found and broken < LABEL_PROBLEMS:
        result.problems.append(Problem(item[0], header.id, "label: " + "; ".join(found)))
    return 1 if found else 0


def bad_padding(buf: Buffer, head: int, end: int) -> int | None:
    """Where the padding after the data of the record at ``head`` (each part
    of a split one) is not zeros, else None. MXNet pads with zeros to a
    multiple of 4: other bytes there mean a damaged length word whose record
    still ends in the same place (the bytes it lost became padding). Reading
    the padding reads the block the next head is in: no extra read."""
    # FileView.read itself, not a slice, which goes through __getitem__
    # (docs/measured.md)
    read = buf.read if isinstance(buf, FileView) else lambda at, n: bytes(buf[at : at + n])
    pos = head
    while pos + HEAD_SIZE <= end:
        lrec = int.from_bytes(read(pos + 4, 4), "little")  # (the word after the magic)
        nxt = pos + frame_size(lrec)
        bits = padding_bits(lrec)
        if bits and int.from_bytes(read(nxt - 4, 4), "little") & bits:
            return pos + HEAD_SIZE + decode_length(lrec)
        pos = nxt
        if decode_flag(lrec) in (CFLAG_WHOLE, CFLAG_LAST):  # the record ends here
            return None
    return None


def _check_padding(buf: Buffer, item: tuple[int, int], result: VerifyResult) -> None:
    at = bad_padding(buf, *item)
    if at is not None:
        result.problems.append(Problem(item[0], None, padding_message(at)))


def padding_message(at: int) -> str:
    return (
        f"the padding after the record's data at byte {at:,} is not zeros (MXNet pads with "
        "zeros): its length word is damaged"
    )


def _check_image(buf: Buffer, item: tuple[int, int], name: str, result: VerifyResult) -> None:
    from PIL import UnidentifiedImageError

    from ..imaging.codec import DECODE_ERRORS, open_image

    head, key = item[0], None
    try:
        header, payload = unpack(read_record(buf, head, item[1], name)[0])
        key = header.id
        with open_image(payload) as im:
            im.load()
        result.decoded += 1
    except UnidentifiedImageError:
        result.problems.append(Problem(head, key, "the payload is not an image Pillow can read"))
    except DECODE_ERRORS as exc:  # (RecordFormatError among them)
        result.problems.append(Problem(head, key, f"the image does not decode: {exc}"))


def _check_manifest(path: Path, buf: Buffer, index_path: Path, result: VerifyResult) -> None:
    import hashlib  # OpenSSL loads only when a manifest is checked

    try:
        manifest = load_pack_manifest(read_json(path), str(path))
    except (OSError, ValueError) as exc:
        result.problems.append(Problem(None, None, f"{path}: not a pack manifest ({exc})"))
        return
    expected = {"rec": manifest["rec"]["sha256"], "idx": manifest["idx"]["sha256"]}
    digest = hashlib.sha256()
    for start in range(0, result.bytes, 1 << 24):
        digest.update(buf[start : start + (1 << 24)])
    index_digest = hashlib.sha256()
    fd, _ = open_regular(index_path)
    with os.fdopen(fd, "rb") as f:  # in blocks: an .idx of millions of lines is large
        for block in iter(lambda: f.read(1 << 22), b""):
            index_digest.update(block)
    actual = {"rec": digest.hexdigest(), "idx": index_digest.hexdigest()}
    for kind in ("rec", "idx"):
        if actual[kind] != expected[kind]:
            result.problems.append(
                Problem(
                    None,
                    None,
                    f"the .{kind}'s SHA-256 differs from {path.name}: "
                    "the file changed since it was packed",
                )
            )
    if manifest["records"] != result.records:
        result.problems.append(
            Problem(
                None,
                None,
                f"{path.name} says {manifest['records']:,} records, "
                f"the file holds {result.records:,}",
            )
        )

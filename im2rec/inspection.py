"""Looking inside a ``.rec``: rebuild its index, verify it, summarise it.

All three walk the file's frame headers (read with ``pread``, a block at a
time), without copying payloads, so a multi-GB file is streamed at close to disk speed with
memory that grows only with the record count (one int64 offset each). With
``recover`` a damaged stretch is skipped: the walk moves on to the next
4-aligned magic word whose length word is plausible, and reports the skipped
byte range.
"""

from __future__ import annotations

import math
import os
import struct
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .errors import Im2RecError, RecordFormatError
from .recordio import (
    RecordIndex,
    RecordReader,
    read_index_entries,
    read_record,
    unpack,
)
from .recordio.faces import face_header
from .recordio.files import FileView, open_regular, read_json
from .recordio.framing import LENGTH_MASK, MAGIC_BYTES, Buffer, iter_heads
from .recordio.index import index_arrays
from .storage import exists, sibling

__all__ = [
    "Damage",
    "Problem",
    "VerifyResult",
    "rebuild_index",
    "summarise",
    "verify",
    "walk_records",
]

FRAME_WORDS = struct.Struct("<II")  # a frame head: magic, cflag << 29 | length
_HEADER = struct.Struct("<IfQQ")
Progress = Callable[[int, int], None]  # (bytes walked, file size)


@dataclass(frozen=True)
class Damage:
    """A stretch ``[offset, end)`` that holds no readable record."""

    offset: int
    end: int
    reason: str


def _next_head(buf: FileView | bytes, start: int, size: int) -> int:
    """The next aligned offset that looks like a record head, or ``size``."""
    pos = start + (-start % 4)
    while pos + 8 <= size:
        hit = buf.find(MAGIC_BYTES, pos)
        if hit == -1 or hit + 8 > size:  # a magic in the last 8 bytes heads nothing
            break
        if hit % 4 == 0:
            _, lrec = FRAME_WORDS.unpack(buf[hit : hit + 8])
            if lrec >> 29 in (0, 1) and hit + 8 + (lrec & LENGTH_MASK) <= size:
                return hit
        pos = hit + (4 - hit % 4 if hit % 4 else 4)
    return size


def walk_records(
    reader: RecordReader, *, recover: bool = False
) -> Iterator[tuple[int, int] | Damage]:
    """``(offset, next_offset)`` for every record in file order; with
    ``recover``, a :class:`Damage` for each unreadable stretch instead of an
    error."""
    buf, size = reader.mapping()
    pos = 0
    while pos < size:
        try:
            for head, nxt in iter_heads(buf, size, reader.name, start=pos):
                yield head, nxt
                pos = nxt
            return
        except RecordFormatError as exc:
            if not recover:
                raise
            resume = _next_head(buf, pos + 4, size)
            yield Damage(pos, resume, str(exc).split(": ", 1)[-1])
            pos = resume


def header_at(buf: Buffer, head: int, nxt: int, name: str) -> Any:
    """The image-record header of the record at ``head``, reading only the
    header (and its labels) when the record is not split."""
    first = buf[head : head + 8 + _HEADER.size]
    _, lrec = FRAME_WORDS.unpack_from(first)
    length = lrec & LENGTH_MASK
    if lrec >> 29 == 0 and length >= _HEADER.size:
        flag = _HEADER.unpack_from(first, 8)[0]
        if flag == 0:
            return unpack(first[8:])[0]
        return unpack(buf[head + 8 : head + 8 + min(length, _HEADER.size + 4 * flag)])[0]
    return unpack(read_record(buf, head, nxt, name)[0])[0]


def rebuild_index(
    path: str | os.PathLike[str],
    *,
    keys: Literal["seq", "id"] = "seq",
    recover: bool = False,
) -> tuple[RecordIndex, list[Damage]]:
    """Index a ``.rec``: keys 0..N-1 (``seq``, like rec2idx.py) or each
    record's header id (``id``, what im2rec.py writes)."""
    reader = RecordReader(path)
    buf, _ = reader.mapping()
    offsets = array("q")  # 8 bytes a record: millions of records stay small
    ids = array("Q")
    damages: list[Damage] = []
    for item in walk_records(reader, recover=recover):
        if isinstance(item, Damage):
            damages.append(item)
            continue
        offsets.append(item[0])
        if keys == "id":
            try:
                ids.append(int(header_at(buf, item[0], item[1], reader.name).id))
            except RecordFormatError as exc:
                raise Im2RecError(f"{exc}; index it with --keys seq instead") from None
    if keys == "seq":  # numpy-free: `rec index` starts fast
        return RecordIndex(range(len(offsets)), offsets, f"{reader.name} (rebuilt)"), damages
    import numpy as np

    key_array = np.frombuffer(ids, dtype=np.uint64) if ids else np.empty(0, np.uint64)
    ordered = np.sort(key_array)
    dups = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(dups):
        again = int(np.flatnonzero(key_array == dups[0])[1])
        raise Im2RecError(
            f"{reader.name}: header id {int(dups[0])} appears in more than one record (again "
            f"at byte {offsets[again]:,}); use --keys seq"
        )
    # ids at or past 2**63 do not fit int64 keys: kept exact, as Python ints
    big = len(ordered) and int(ordered[-1]) >= 1 << 63
    index_keys = key_array.tolist() if big else key_array.astype(np.int64)
    return RecordIndex(index_keys, offsets, f"{reader.name} (rebuilt)"), damages


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


def verify(
    path: str | os.PathLike[str],
    idx: str | os.PathLike[str] | None = None,
    *,
    decode: bool = False,
    manifest: str | os.PathLike[str] | None = None,
    on_progress: Progress | None = None,
) -> VerifyResult:
    """Check every frame, the ``.idx`` (if there is one, or ``idx``), the
    images (``decode``) and a pack manifest's SHA-256s (``manifest``)."""
    reader = RecordReader(path)
    buf, size = reader.mapping()
    result = VerifyResult(reader.name, size)
    heads = array("q")  # 8 bytes a record: memory stays small for millions of records
    for item in walk_records(reader, recover=True):
        if isinstance(item, Damage):
            result.problems.append(
                Problem(
                    item.offset,
                    None,
                    f"{item.reason} (bytes {item.offset:,} to {item.end:,} skipped)",
                )
            )
            continue
        heads.append(item[0])
        _check_padding(buf, item, result)
        if decode:
            _check_image(buf, item, reader.name, result)
        if on_progress is not None and len(heads) % 4096 == 0:
            on_progress(item[1], size)
    result.records = len(heads)
    index_location = os.fspath(idx) if idx is not None else sibling(reader.location, ".idx")
    index_path = Path(index_location)
    if idx is not None or exists(index_location):
        _check_index(index_location, heads, size, result)
    if manifest is not None:
        _check_manifest(Path(manifest), buf, index_path, result)
    if on_progress is not None:
        on_progress(size, size)
    return result


def bad_padding(buf: Buffer, head: int, end: int) -> int | None:
    """Where the padding after the data of the record at ``head`` (each part
    of a split one) is not zeros, else None. MXNet pads with zeros to a
    multiple of 4: other bytes there mean a damaged length word whose record
    still ends in the same place (the bytes it lost became padding). Reading
    the padding reads the block the next head is in: no extra read."""
    # FileView.read itself: a slice goes through __getitem__ (a third of the
    # time this check took, on a walk that costs a few us a record)
    read = buf.read if isinstance(buf, FileView) else lambda at, n: bytes(buf[at : at + n])
    pos = head
    while pos + 8 <= end:
        lrec = int.from_bytes(read(pos + 4, 4), "little")
        length = lrec & LENGTH_MASK
        data_end = pos + 8 + length
        pad = -length % 4
        if pad and read(data_end, pad) != _ZEROS[:pad]:
            return data_end
        pos = data_end + pad
        if lrec >> 29 in (0, 3):  # a whole record, or the last part of a split one
            return None
    return None


_ZEROS = bytes(3)


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

    from .imaging import DECODE_ERRORS, open_image

    head, key = item[0], None
    try:
        header, payload = unpack(read_record(buf, head, item[1], name)[0])
        key = header.id
        with open_image(payload) as im:
            im.load()
        result.decoded += 1
    except UnidentifiedImageError:
        result.problems.append(Problem(head, key, "the payload is not an image Pillow can read"))
    except (RecordFormatError, *DECODE_ERRORS) as exc:
        result.problems.append(Problem(head, key, f"the image does not decode: {exc}"))


def _check_index(path: str, heads: array[int], size: int, result: VerifyResult) -> None:
    """The ``.idx`` against the record heads the walk found: every offset a
    head, every key once, as many entries as records. A small index is
    checked with Python lists and a set (no numpy import: start-up is most
    of a small file's check); a large one with arrays (8 bytes a record
    each) and sorting, not sets of Python ints: 5M records took 1.5 GB."""
    name = path.rsplit("/", 1)[-1]
    keys: Any
    offsets: Any
    try:
        if _size_of(path) < _SMALL_INDEX:
            keys, offsets = read_index_entries(path)
            head_set = set(heads)
            bad = [i for i, off in enumerate(offsets) if off not in head_set]
            del head_set
            strays, dups = len(bad), [k for k, n in Counter(keys).items() if n > 1]
        else:
            keys, offsets = index_arrays(path)
            strays, bad = _stray_offsets(offsets, heads)
            dups = _repeated(keys)
    except Im2RecError as exc:
        result.problems.append(Problem(None, None, str(exc)))
        return
    result.indexed = len(offsets)
    for i in bad[:20]:
        off = int(offsets[i])
        where = "past the end of the file" if off + 8 > size else "not the start of a record"
        result.problems.append(Problem(off, _py(keys[i]), f"{name}: offset {off:,} is {where}"))
    if strays > 20:
        result.problems.append(
            Problem(None, None, f"{name}: {strays - 20:,} more offsets are not record starts")
        )
    if dups:
        shown = ", ".join(map(repr, dups[:5])) + (", ..." if len(dups) > 5 else "")
        result.problems.append(
            Problem(None, None, f"{name}: {len(dups):,} key(s) appear more than once: {shown}")
        )
    if len(offsets) != len(heads):
        result.problems.append(
            Problem(
                None,
                None,
                f"{name} lists {len(offsets):,} records, the file holds {len(heads):,}",
            )
        )


def _stray_offsets(offsets: Any, heads: array[int]) -> tuple[int, list[int]]:
    """How many offsets are no record head, and the positions of the first 20."""
    import numpy as np

    starts = np.frombuffer(heads, dtype=np.int64) if len(heads) else np.empty(0, np.int64)
    bad: list[int] = []
    strays = 0
    for begin in range(0, len(offsets), _PIECE):
        piece = offsets[begin : begin + _PIECE]
        at = np.minimum(np.searchsorted(starts, piece), max(len(starts) - 1, 0))
        stray = np.flatnonzero(starts[at] != piece) if len(starts) else np.arange(len(piece))
        strays += len(stray)
        if len(bad) < 20:
            bad.extend((stray[: 20 - len(bad)] + begin).tolist())
    return strays, bad


_PIECE = 1 << 16  # offsets looked up at a time: the temporaries stay small
#: .idx bytes (about 250,000 lines) below which Python objects are cheap enough
_SMALL_INDEX = 4 << 20


def _size_of(path: str) -> int:
    from .storage import is_url

    return 0 if is_url(path) else os.path.getsize(path)


def _py(key: Any) -> Any:
    return key.item() if hasattr(key, "item") else key


def _repeated(keys: Any) -> list[Any]:
    """The keys that appear more than once (sorted int64 keys, else a Counter)."""
    import numpy as np

    if isinstance(keys, np.ndarray):
        ordered = np.sort(keys)
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
        return [int(k) for k in np.unique(repeated)]
    return [k for k, n in Counter(keys).items() if n > 1]


def _check_manifest(path: Path, buf: Buffer, index_path: Path, result: VerifyResult) -> None:
    import hashlib  # OpenSSL loads only when a manifest is checked

    try:
        manifest = read_json(path)
        expected = {"rec": manifest["rec"]["sha256"], "idx": manifest["idx"]["sha256"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        result.problems.append(Problem(None, None, f"{path}: not a pack manifest ({exc})"))
        return
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
    if manifest.get("records") not in (None, result.records):
        result.problems.append(
            Problem(
                None,
                None,
                f"{path.name} says {manifest['records']:,} records, "
                f"the file holds {result.records:,}",
            )
        )


_DISTINCT = 1000  # label values (and label widths) counted one by one in a summary


def _count(counter: Counter[Any], key: Any, overflow: Counter[str], name: str) -> None:
    if key in counter or len(counter) < _DISTINCT:
        counter[key] += 1
    else:
        overflow[name] += 1


def _widths(flags: Counter[int]) -> Counter[int]:
    """Records by labels held: flags 0 and 1 both hold one label."""
    out: Counter[int] = Counter()
    for flag, n in flags.items():
        out[max(flag, 1)] += n
    return out


def summarise(path: str | os.PathLike[str], *, sample: int | None = 200) -> dict[str, Any]:
    """Counts, labels, ids, image formats and sizes (from ``sample`` records
    spread over the file, or all with ``sample=None``), split records, index.

    Memory is 8 bytes a record and at most 1,000 distinct label values (and
    label widths) counted: more are reported as ``{"distinct": ">1000"}``.
    """
    reader = RecordReader(path)
    buf, size = reader.mapping()
    heads = array("q")
    flags: Counter[int] = Counter()
    labels: Counter[float] = Counter()
    overflow: Counter[str] = Counter()
    first_id = last_id = None
    split = 0
    face: dict[str, Any] = {"layout_records": set(), "header": None}
    for head, nxt in walk_records(reader):  # type: ignore[misc]  # no Damage without recover
        heads.append(head)
        word = FRAME_WORDS.unpack(buf[head : head + 8])[1]
        split += word >> 29 == 1
        header = header_at(buf, head, nxt, reader.name)
        if header.flag == 2 and word == 24 + 8:  # two labels and no image: a layout record
            face["layout_records"].add(head)
            if header.id == 0:
                face["header"] = header
        _count(flags, header.flag, overflow, "flags")
        if header.flag == 0:
            _count(labels, header.label, overflow, "labels")
        first_id = header.id if first_id is None else min(first_id, header.id)
        last_id = header.id if last_id is None else max(last_id, header.id)
    n = len(heads)
    step = 1 if sample is None or n <= sample else n / sample
    formats: Counter[str] = Counter()
    widths, heights = [], []
    from .errors import ImageTooLargeError
    from .imaging import DECODE_ERRORS, open_image

    for i in sorted({int(k * step) for k in range(math.ceil(n / step))}):
        if heads[i] in face["layout_records"]:
            continue
        try:  # the header only: sizes and formats need no pixels
            payload = unpack(read_record(buf, heads[i], size, reader.name)[0])[1]
            with open_image(payload) as im:
                formats[im.format or "?"] += 1
                widths.append(im.width)
                heights.append(im.height)
        except ImageTooLargeError:
            formats["over the pixel limit"] += 1
        except (RecordFormatError, *DECODE_ERRORS):  # a summary counts what it cannot read
            formats["not an image"] += 1
    index_path = sibling(reader.location, ".idx")
    agrees = None
    index_exists = exists(index_path)
    if index_exists:
        try:
            import numpy as np

            _, offsets = index_arrays(index_path)
            starts = np.frombuffer(heads, dtype=np.int64) if n else np.empty(0, np.int64)
            # (the walk finds heads in file order: sorted) 8 bytes a record, no lists
            agrees = len(offsets) == n and bool(np.array_equal(np.sort(offsets), starts))
        except Im2RecError:
            agrees = False
    return {
        "path": reader.name, "bytes": size, "records": n, "split_records": split,
        # MXNet's label_width: flag 0 is one label in the header, flag k > 0
        # is k labels before the image; "flags" keeps the raw header field.
        "label_width": (
            {str(k): v for k, v in sorted(_widths(flags).items())}
            if not overflow["flags"] else {"distinct": f">{_DISTINCT}"}
        ),
        "flags": (
            {str(k): v for k, v in sorted(flags.items())}
            if not overflow["flags"] else {"distinct": f">{_DISTINCT}"}
        ),
        "labels": (
            {f"{k:g}": v for k, v in sorted(labels.items())}
            if not overflow["labels"] else {"distinct": f">{_DISTINCT}"}
        ),
        "ids": [first_id, last_id] if n else None,
        "images_sampled": sum(formats.values()), "formats": dict(formats),
        "width": [min(widths), max(widths)] if widths else None,
        "height": [min(heights), max(heights)] if heights else None,
        "index": {"path": index_path, "exists": index_exists, "agrees": agrees},
        "layout": face_layout(face["header"], len(face["layout_records"]), n),
    }  # fmt: skip


def face_layout(header: Any, layout_records: int, records: int) -> dict[str, Any] | None:
    """InsightFace's face layout, when record 0 is its header record and the
    identity records it names are there: images and identities."""
    found = None if header is None else face_header(header, b"", records)
    if found is None or layout_records != 1 + found[1] - found[0]:
        return None
    first, end = found
    return {"name": "insightface", "images": first - 1, "identities": end - first,
            "identity_records": [first, end - 1]}  # fmt: skip

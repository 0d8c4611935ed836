"""RecordIO to WebDataset tar shards and back: ``rec export`` and ``rec import``.

Export writes one sample per record, in file order: the image bytes
unchanged as ``KEY.jpg`` (``.png``, ... from their signature; ``.bin`` when
unknown; none for a record without payload), ``KEY.cls`` with the label when
it is one whole number, and ``KEY.json`` with the whole header (``flag``,
``label`` as a list, ``id``, ``id2``) and the record's ``.idx`` key, so that
nothing is lost. ``KEY`` is the header id, zero-padded to nine digits; when
ids do not increase (an id seen twice, or InsightFace's header record 0
after the images) the record's position is added (``000000000-25``), since
WebDataset merges consecutive members that share a key.

Import rebuilds ``PREFIX.rec``/``.idx``: from shards that ``rec export``
wrote, byte-identical to the original (the ``.json`` holds every header
field and key; records are framed as MXNet frames them); from other shards,
each sample's image (its first image field) and label (``.cls``, or a
``.json`` field named with ``label_key``), with ids and keys counted from 0.
Samples without an image or a label are skipped and reported, not fatal.

Neither decodes an image, so both stream in one process at disk speed.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DatasetError
from ..inspection import FRAME_WORDS, header_at, walk_records
from ..recordio import (
    MAX_RECORD_SIZE,
    IndexedRecordWriter,
    IRHeader,
    pack,
    read_index_entries,
    read_record,
    unpack,
)
from ..recordio.chunks import Chunks
from ..recordio.files import FileRange
from ..recordio.framing import LENGTH_MASK, needs_split
from ..storage import exists, is_url, sibling
from ..storage.objects import publish, url_join
from . import image_extension
from .tars import Data, Sample, samples
from .tarwriter import ShardWriter

__all__ = ["ExportResult", "ImportResult", "export_webdataset", "import_webdataset"]

#: (records or samples done, total if known else 0, bytes written)
Progress = Callable[[int, int, int], None]
IMAGE_EXTS = ("jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff", "ppm")
MAX_JSON = 1 << 20
MAX_LABELS = 1 << 20


@dataclass
class ExportResult:
    rec: str
    shards: list[str]
    samples: int = 0
    bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"rec": self.rec, "shards": self.shards, "samples": self.samples,
                "bytes": self.bytes}  # fmt: skip


def export_webdataset(
    rec: str | os.PathLike[str],
    pattern: str,
    *,
    maxcount: int = 100_000,
    maxsize: int = 3_000_000_000,
    on_progress: Progress | None = None,
) -> ExportResult:
    """Write ``rec``'s records as WebDataset shards named ``pattern % n``
    (local paths, or URLs: then made in a temporary folder and uploaded)."""
    if is_url(pattern):
        folder, _, name = pattern.rpartition("/")
        with tempfile.TemporaryDirectory(prefix="im2rec-export-") as tmp:
            result = export_webdataset(rec, os.path.join(tmp, name), maxcount=maxcount,
                                       maxsize=maxsize, on_progress=on_progress)  # fmt: skip
            urls = [url_join(folder, os.path.basename(s)) for s in result.shards]
            publish(list(zip(map(Path, result.shards), urls, strict=True)))
        result.shards = urls
        return result
    from ..recordio import RecordReader

    reader = RecordReader(rec)
    idx = sibling(reader.location, ".idx")
    keys = _KeysByOffset(idx if exists(idx) else None)
    buf, size = reader.mapping()
    fd = getattr(buf, "fd", -1)
    # a local .rec is read front to back, a chunk at a time, and each image
    # written to its shard from the chunk (see recordio.chunks)
    chunks = Chunks(fd, size) if isinstance(fd, int) and fd >= 0 else None
    result = ExportResult(reader.name, [])
    last_id = -1
    with ShardWriter(pattern, maxcount=maxcount, maxsize=maxsize) as writer:
        for position, (head, nxt) in enumerate(walk_records(reader)):  # type: ignore[misc]
            header, image = _record_at(buf, chunks, head, nxt, size, reader.name)
            key = f"{header.id:09d}" if header.id > last_id else f"{header.id:09d}-{position}"
            last_id = max(last_id, header.id)
            labels = header.label.tolist() if header.flag else [float(header.label)]
            meta = _header_json(header.flag, labels, header.id, header.id2, keys.at(head))
            fields: list[tuple[str, bytes | FileRange]] = []
            if len(image):
                if isinstance(image, bytes):
                    start = image
                elif image.data is not None:
                    start = bytes(image.data[:16])
                else:
                    start = buf[image.offset : image.offset + 16]
                fields.append(((image_extension(start[:16]) or ".bin")[1:], image))
            if not header.flag and float(header.label).is_integer():
                fields.append(("cls", str(int(header.label)).encode()))
            fields.append(("json", meta))
            writer.write(key, fields)
            result.samples += 1
            if on_progress is not None:
                on_progress(result.samples, keys.count, head)
    result.shards = writer.shards
    result.bytes = sum(os.path.getsize(s) for s in writer.shards)
    reader.close()
    return result


def _record_at(
    buf: Any, chunks: Chunks | None, head: int, nxt: int, size: int, name: str
) -> tuple[Any, bytes | FileRange]:
    """A record's header, and its image: for a whole record in a local file,
    where it lies, with the chunk's view of it when it fits in one (written
    from there), else copied file to file by the kernel; else its bytes."""
    word = FRAME_WORDS.unpack(buf[head : head + 8])[1]
    if word >> 29 == 0 and chunks is not None:
        header = header_at(buf, head, nxt, name)
        start = 8 + 24 + (4 * header.flag if header.flag else 0)
        offset, length = head + start, (word & LENGTH_MASK) + 8 - start
        if length > chunks.SIZE:
            return header, FileRange(chunks.fd, offset, length, name)
        image = chunks.take(offset, length, name)
        if image is None:  # (the walk saw the whole record: the file shrank since)
            end = min(os.fstat(chunks.fd).st_size, offset + length)
            raise FileRange(chunks.fd, offset, length, name)._shrunk(end)
        return header, image
    header, payload = unpack(read_record(buf, head, size, name)[0])
    return header, bytes(payload)


class _KeysByOffset:
    """The ``.idx`` key of each record, asked for in file order: the index
    read without numpy (checked as ``load_index`` checks it), sorted by
    offset when it is not already (as written, it is), kept as arrays of
    int64 (16 bytes a record), then walked along with the records."""

    def __init__(self, idx: str | None):
        keys, offsets = ([], []) if idx is None else read_index_entries(idx, check=True)
        self.count, self.pos = len(keys), 0
        if any(b < a for a, b in zip(offsets, offsets[1:], strict=False)):
            order = sorted(range(len(offsets)), key=offsets.__getitem__)
            keys, offsets = [keys[i] for i in order], [offsets[i] for i in order]
        self.offsets: Sequence[int] = array("q", offsets)
        try:
            self.keys: Sequence[Any] = array("q", keys)
        except OverflowError:  # (keys past int64: kept as they are)
            self.keys = keys

    def at(self, offset: int) -> Any:
        offsets, pos = self.offsets, self.pos
        while pos < len(offsets) and offsets[pos] < offset:
            pos += 1
        self.pos = pos
        return self.keys[pos] if pos < len(offsets) and offsets[pos] == offset else None


def _header_json(flag: int, labels: list[float], rid: int, id2: int, key: Any) -> bytes:
    """``{"flag":...,"label":[...],"id":...,"id2":...,"key":...}``, compact
    (formatted directly: a record's worth of json.dumps costs more than its copy)."""
    if all(map(math.isfinite, labels)) and (key is None or isinstance(key, int)):
        text = ",".join(map(repr, labels))
        return (
            f'{{"flag":{flag},"label":[{text}],"id":{rid},"id2":{id2},'
            f'"key":{"null" if key is None else key}}}'
        ).encode()
    meta = {"flag": flag, "label": labels, "id": rid, "id2": id2, "key": key}
    return json.dumps(meta, separators=(",", ":")).encode()


@dataclass
class ImportResult:
    rec: Path
    idx: Path
    shards: int = 0
    records: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    report: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rec": str(self.rec), "idx": str(self.idx), "shards": self.shards,
                "records": self.records, "skipped": dict(self.skipped),
                "report": str(self.report) if self.report else None}  # fmt: skip


def import_webdataset(
    shards: list[str],
    prefix: str | os.PathLike[str],
    *,
    label_key: str | None = None,
    overwrite: bool = False,
    on_progress: Progress | None = None,
) -> ImportResult:
    """Rebuild ``PREFIX.rec``/``.idx`` from WebDataset shards (see the module doc)."""
    base = os.fspath(prefix).removesuffix(".rec")
    result = ImportResult(Path(f"{base}.rec"), Path(f"{base}.idx"), len(shards))
    existing = [p for p in (result.rec, result.idx) if p.exists()]
    if existing and not overwrite:
        raise DatasetError(f"{existing[0]}: already exists; pass --overwrite to replace it")
    report_lines: list[str] = []
    writer = IndexedRecordWriter(result.rec, result.idx)
    try:
        # One thread: the images go from shard to .rec in the kernel, so
        # what is left here is parsing, and a reading thread beside it only
        # made the two wait for the GIL (a cold 500 MB import: 0.48-0.76 s
        # in one thread, 0.79-1.24 s in two).
        for shard, sample_key, made in _records(shards, label_key):
            if isinstance(made, str):
                result.skipped[made.split(":")[0]] += 1
                report_lines.append(f"{shard}\t{sample_key}\t{made}\n")
                continue
            key, header, image, split = made
            writer.write_key(key, header, image, split=split)
            result.records += 1
            if on_progress is not None:
                on_progress(result.records, 0, writer.tell())
        if not result.records:
            raise DatasetError(
                f"none of the samples of {len(shards)} shard(s) could be imported "
                f"({', '.join(f'{n} {why}' for why, n in result.skipped.items()) or 'no samples'})"
                "; nothing was written"
                + ("" if label_key else "; are the labels in a .json field? name it --label-key")
            )
        writer.close()
    except BaseException:
        writer.abort()
        raise
    report = Path(f"{base}.import-skipped.tsv")
    if report_lines:
        report.write_text("shard\tkey\treason\n" + "".join(report_lines), encoding="utf-8")
        result.report = report
    else:
        report.unlink(missing_ok=True)
    return result


Made = tuple[str, str, "tuple[Any, bytes, Data, bool] | str"]


def _records(shards: list[str], label_key: str | None) -> Iterator[Made]:
    """``(shard, sample key, record or why it is skipped)`` for every sample."""
    number = 0
    for shard in shards:
        for sample in samples(shard):
            made = _record(sample, label_key, number)
            number += not isinstance(made, str)
            yield shard, sample.key, made


def _record(
    sample: Sample, label_key: str | None, number: int
) -> tuple[Any, bytes, Data, bool] | str:
    """``(idx key, header bytes, image bytes, whether split)`` for a sample,
    or why it is skipped."""
    meta = _json(sample)
    if isinstance(meta, str):
        return meta
    images = [ext for ext in sample.fields if ext.lower() in IMAGE_EXTS or ext == "bin"]
    image = sample.fields[images[0]] if images else b""
    if meta is not None and {"flag", "label", "id", "id2"} <= meta.keys():
        exported = _exported_header(meta)  # written by rec export: every field as it was
        if isinstance(exported, str):
            return exported
        header, key = exported
        key = number if key is None else key
    else:
        if not images:
            why = "; ".join(f"{ext}: {why}" for ext, why in sample.skipped.items())
            return f"no image: {why or 'no image field (' + ', '.join(sample.fields) + ')'}"
        label = _label(sample, meta, label_key)
        if isinstance(label, str):
            return label
        header, key = IRHeader(0, label, number, 0), number
    head = pack(header, b"")
    if len(head) + len(image) >= MAX_RECORD_SIZE:
        return f"record-too-large: {len(head) + len(image):,} bytes"
    # An image left in its shard was scanned as it was read, while its
    # bytes were in the CPU's cache; one read whole is scanned here.
    if type(image) is FileRange and image.magic is not None:
        return key, head, image, image.magic or needs_split(head)
    return key, head, image, needs_split(head, bytes(image))


def _json(sample: Sample) -> dict[str, Any] | None | str:
    raw = sample.fields.get("json")
    if raw is None:
        return None
    if len(raw) > MAX_JSON:
        return f"bad json: {len(raw):,} bytes"
    try:
        meta = json.loads(bytes(raw))
    except (ValueError, UnicodeDecodeError) as exc:
        return f"bad json: {exc}"
    return meta if isinstance(meta, dict) else "bad json: not an object"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _exported_header(meta: dict[str, Any]) -> tuple[IRHeader, Any] | str:
    flag, labels, rid, id2, key = (meta.get(k) for k in ("flag", "label", "id", "id2", "key"))
    if not (
        isinstance(labels, list) and 0 < len(labels) <= MAX_LABELS and all(map(_number, labels))
        and all(isinstance(v, int) and 0 <= v < 1 << 64 for v in (rid, id2))
        and isinstance(flag, int) and len(labels) == (flag or 1)
        and (key is None or (isinstance(key, int) and 0 <= key < 1 << 64))
    ):  # fmt: skip
        return "bad json: its header fields (flag, label, id, id2, key) are not rec export's"
    assert isinstance(rid, int) and isinstance(id2, int)  # (checked above)
    label: Any = labels if flag else labels[0]
    return IRHeader(flag, label, rid, id2), key


def _label(sample: Sample, meta: dict[str, Any] | None, label_key: str | None) -> Any:
    if label_key is not None:
        value: Any = (meta or {}).get(label_key)
        if _number(value):
            return float(value)
        if isinstance(value, list) and 0 < len(value) <= MAX_LABELS and all(map(_number, value)):
            return [float(v) for v in value]
        return f"no label: no number or list of numbers under {label_key!r} in its .json"
    raw = sample.fields.get("cls")
    if raw is None:
        return "no label: no .cls field (name a .json field with --label-key)"
    if len(raw) > 64:
        return f"no label: .cls is not a whole number ({len(raw):,} bytes)"
    try:
        return float(int(bytes(raw).decode("ascii").strip()))
    except (UnicodeDecodeError, ValueError):
        return f"no label: .cls is not a whole number ({bytes(raw)[:20]!r})"

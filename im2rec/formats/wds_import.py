"""``rec import webdataset``: WebDataset tar shards back to ``.rec``/``.idx``
(the mapping is described in :mod:`.webdataset`).

From shards that ``rec export`` wrote the ``.rec``/``.idx`` come back byte
for byte: each sample's ``.json`` holds every header field and the
``.idx`` key, and records are framed as MXNet frames them. From other
shards, each sample's image (its first image field) and label (``.cls``, or
a ``.json`` field named with ``label_key``) make a record, with ids and keys
counted from 0; samples without an image or a label are skipped and
reported, not fatal.

Nothing is decoded, so the import streams in one process at disk speed:
the images go from the shard's chunks to the ``.rec`` (see
:mod:`~im2rec.recordio.chunks`), and what is left per sample is a few
microseconds of parsing, most of it spared for the ``.json`` that ``rec
export`` writes for a single-label record (:func:`_exported_fast`).
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DatasetError, RecordFormatError
from ..progress import with_progress
from ..recordio import MAX_RECORD_SIZE, IndexedRecordWriter, IRHeader, pack
from ..recordio.codec import IR_HEADER
from ..recordio.framing import needs_split
from ..recordio.header import stored_label
from ..storage.atomic import write_file
from ..storage.files import FileRange
from .tars import Data, Sample, samples

__all__ = ["ImportResult", "import_webdataset"]

#: (samples done, 0, bytes written)
Progress = Callable[[int, int, int], None]
IMAGE_EXTS = ("jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff", "ppm")
MAX_JSON = 1 << 20
MAX_LABELS = 1 << 20


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


@with_progress("importing", " records", done=0)
def import_webdataset(
    shards: list[str],
    prefix: str | os.PathLike[str],
    *,
    label_key: str | None = None,
    overwrite: bool = False,
    on_progress: Progress | None = None,
    progress: bool = False,
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
        # makes the two wait for the GIL (docs/measured.md).
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
        write_file(report, "shard\tkey\treason\n" + "".join(report_lines))
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
    fast = _exported_fast(sample, number)
    return _general(sample, label_key, number) if fast is None else fast


def _general(
    sample: Sample, label_key: str | None, number: int
) -> tuple[Any, bytes, Data, bool] | str:
    meta = _json(sample)
    if isinstance(meta, str):
        return meta
    images = [ext for ext in sample.fields if _is_image(ext)]
    image = sample.fields[images[0]] if images else b""
    if not images and sample.skipped:  # (not a record without payload: its image was refused)
        why = "; ".join(f"{ext}: {why}" for ext, why in sample.skipped.items())
        return f"no image: {why}"
    if meta is not None and {"flag", "label", "id", "id2"} <= meta.keys():
        exported = _exported_header(meta)  # written by rec export: every field as it was
        if isinstance(exported, str):
            return exported
        header, key = exported
        key = number if key is None else key
    else:
        if not images:
            return f"no image: no image field ({', '.join(sample.fields)})"
        label = _label(sample, meta, label_key)
        if isinstance(label, str):
            return label
        header, key = IRHeader(0, label, number, 0), number
    unheld = _unheld_label(header.label)
    if unheld is not None:
        return unheld
    try:
        head = pack(header, b"")
    except RecordFormatError as exc:  # (a label past float32)
        return f"bad label: {exc}"
    return _made(key, head, image)


def _unheld_label(label: Any) -> str | None:
    """Why a label cannot be stored as it is: a whole number that float32
    would turn into another (16,777,217 -> 16,777,216), else None."""
    for value in label if isinstance(label, list) else [label]:
        try:
            if stored_label(value) is None:
                return f"bad label: {value:.0f} is a whole number float32 cannot hold"
        except OverflowError:
            return None  # (pack says so)
    return None


def _is_image(ext: str) -> bool:
    """Whether a member's extension names an image (``.bin``: rec export's
    payload of unknown format)."""
    return ext.lower() in IMAGE_EXTS or ext == "bin"


def _made(key: Any, head: bytes, image: Data) -> tuple[Any, bytes, Data, bool] | str:
    if len(head) + len(image) >= MAX_RECORD_SIZE:
        return f"record-too-large: {len(head) + len(image):,} bytes"
    # An image left in its shard was scanned as it was read, while its
    # bytes were in the CPU's cache; one read whole is scanned here.
    if type(image) is FileRange and image.magic is not None:
        return key, head, image, image.magic or needs_split(head)
    return key, head, image, needs_split(head, bytes(image))


#: the .json that rec export writes for a single-label record (see
#: webdataset._header_json), in JSON's own syntax; the label as repr()
#: writes a float, with a fraction or an exponent (JSON reads "-0" as the
#: whole number 0, and float() as -0.0)
_NUMBER = rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:[eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)"
_WHOLE = rb"(?:0|[1-9][0-9]{0,19})"
_EXPORTED = re.compile(
    rb'\{"flag":0,"label":\[(%s)\],"id":(%s),"id2":(%s),"key":(%s|null)\}'
    % (_NUMBER, _WHOLE, _WHOLE, _WHOLE)
)
_SHORT = 256  # (rec export's are under 150 bytes: a longer one takes the general path)


def _exported_fast(sample: Sample, number: int) -> tuple[Any, bytes, Data, bool] | str | None:
    """:func:`_record` of a sample as ``rec export`` writes one for a
    single-label record (its image, ``.cls`` and that ``.json``), without
    parsing JSON or making a header object, and the same result (tested);
    None for anything else, which then takes the general path (so a sample
    that path would refuse is refused there)."""
    fields = sample.fields
    raw = fields.get("json")
    if sample.skipped or type(raw) is not bytes or len(raw) > _SHORT:
        return None
    match = _EXPORTED.fullmatch(raw)
    if match is None:
        return None
    others = [ext for ext in fields if ext != "json" and ext != "cls"]
    if len(others) > 1 or (others and not _is_image(others[0])):
        return None  # (two images, or another field: not rec export's)
    image = fields[others[0]] if others else b""
    text, rid, id2, key = match.groups()
    label = float(text)
    if not math.isfinite(label):
        return None
    try:
        head = IR_HEADER.pack(0, label, int(rid), int(id2))
    except (OverflowError, struct.error):  # past float32 or 64 bits
        return None
    if label.is_integer() and abs(label) > 1 << 24 and stored_label(label) is None:
        return None  # (a whole number float32 changes: the general path says so)
    whole = number if key == b"null" else int(key)
    return None if whole >> 64 else _made(whole, head, image)


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
    except RecursionError:  # (a RecursionError is no ValueError)
        return "bad json: nested too deeply"
    return meta if isinstance(meta, dict) else "bad json: not an object"


def _number(value: Any) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # a whole number past a float's range
        return False


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

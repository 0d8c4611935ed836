"""RecordIO to WebDataset tar shards: ``rec export`` (the mapping is
described in :mod:`.webdataset`). Export writes one sample per record, in
file order, and never decodes an image."""

from __future__ import annotations

import json
import math
import os
import tempfile
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EmptyRecError
from ..imaging.headers import image_extension
from ..progress import with_progress
from ..recordio import read_index_entries, read_record, unpack
from ..recordio.chunks import Chunks
from ..recordio.codec import CFLAG_WHOLE, HEAD_SIZE, decode_flag, decode_length, image_start
from ..recordio.walking import header_at, length_word, walk_records
from ..storage import exists, is_url, sibling
from ..storage.files import FileRange
from ..storage.objects import publish, url_join
from .tarwriter import ShardWriter

__all__ = ["ExportResult", "KeysByOffset", "export_webdataset"]

#: (records done, records in the .idx (0 if none), bytes of the .rec walked)
Progress = Callable[[int, int, int], None]


@dataclass
class ExportResult:
    rec: str
    shards: list[str]
    samples: int = 0
    bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"rec": self.rec, "shards": self.shards, "samples": self.samples,
                "bytes": self.bytes}  # fmt: skip


@with_progress("exporting", " records", done=0, total=1)
def export_webdataset(
    rec: str | os.PathLike[str],
    pattern: str,
    *,
    maxcount: int = 100_000,
    maxsize: int = 3_000_000_000,
    on_progress: Progress | None = None,
    progress: bool = False,
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
    if not reader.size:  # (before a shard is made: nothing is written)
        reader.close()
        raise EmptyRecError(reader.name)
    idx = sibling(reader.location, ".idx")
    keys = KeysByOffset(idx if exists(idx) else None)
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
    word = length_word(buf, head)
    if decode_flag(word) == CFLAG_WHOLE and chunks is not None:
        header = header_at(buf, head, nxt, name)
        start = image_start(header.flag)
        offset, length = head + HEAD_SIZE + start, decode_length(word) - start
        if length > chunks.SIZE:
            return header, FileRange(chunks.fd, offset, length, name)
        image = chunks.take(offset, length, name)
        if image is None:  # (the walk saw the whole record: the file shrank since)
            end = min(os.fstat(chunks.fd).st_size, offset + length)
            raise FileRange(chunks.fd, offset, length, name)._shrunk(end)
        return header, image
    header, payload = unpack(read_record(buf, head, size, name)[0])
    return header, bytes(payload)


class KeysByOffset:
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

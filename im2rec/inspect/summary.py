"""``rec info``: a ``.rec`` summarised from one walk of its frames (counts,
label widths and values, image formats and sizes from a sample, the layout,
and detection labels' objects, classes and box sizes)."""

from __future__ import annotations

import math
import os
from array import array
from collections import Counter
from typing import Any

from ..errors import Im2RecError
from ..recordio import RecordReader, read_record, unpack
from ..recordio.codec import (
    CFLAG_FIRST,
    decode_flag,
    frame_size,
    holds_labels,
    image_start,
)
from ..recordio.faces import face_header, layout_record
from ..recordio.walking import header_at, length_word
from ..storage import exists, sibling

__all__ = ["face_layout", "summarise"]

_DISTINCT = 1000  # label values (and label widths) counted one by one in a summary


def _widths(flags: dict[int, int]) -> dict[int, int]:
    """Records by labels held: flags 0 and 1 both hold one label."""
    out: Counter[int] = Counter()
    for flag, n in flags.items():
        out[max(flag, 1)] += n
    return dict(out)


def summarise(path: str | os.PathLike[str], *, sample: int | None = 200) -> dict[str, Any]:
    """Counts, labels, ids, image formats and sizes (from ``sample`` records
    spread over the file, or all with ``sample=None``), split records, index.

    Memory is 8 bytes a record and at most 1,000 distinct label values (and
    label widths) counted: more are reported as ``{"distinct": ">1000"}``.
    """
    reader = RecordReader(path)
    buf, size = reader.mapping()
    from ..recordio.blocks import Block, walk_blocks
    from .indexcheck import parse_ahead

    index_path = sibling(reader.location, ".idx")
    index_exists = exists(index_path)
    parsed = parse_ahead(index_path) if index_exists else None  # (beside the walk)

    walk = _Walk(reader.name, buf)
    for item in walk_blocks(reader, labels=True):
        if isinstance(item, Block):
            walk.block(item)
        else:  # (no Damage without recover)
            walk.record(*item)  # type: ignore[misc]
    heads, flags, labels = walk.heads, walk.flags.counts(), walk.labels.counts()
    overflow = {"flags": walk.flags.left, "labels": walk.labels.left}
    face, boxes, split = walk.face, walk.boxes, walk.split
    first_id, last_id = walk.first_id, walk.last_id
    n = len(heads)
    step = 1 if sample is None or n <= sample else n / sample
    formats: Counter[str] = Counter()
    widths, heights = [], []
    from ..errors import ImageTooLargeError
    from ..imaging.codec import DECODE_ERRORS, open_image

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
        except DECODE_ERRORS:  # a summary counts what it cannot read (RecordFormatError too)
            formats["not an image"] += 1
    agrees = None
    if parsed is not None:
        try:
            import numpy as np

            _, offsets = parsed()
            starts = np.frombuffer(heads, dtype=np.int64) if n else np.empty(0, np.int64)
            # (the walk finds heads in file order: sorted) 8 bytes a record, no lists
            agrees = len(offsets) == n and (
                bool(np.array_equal(offsets, starts))  # (the usual: in file order)
                or bool(np.array_equal(np.sort(offsets), starts))
            )
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
        # every record's label a detection label: objects, classes, box sizes
        "detection": boxes.to_dict() if boxes.is_detection else None,
    }  # fmt: skip


class _Walk:
    """What :func:`summarise` gathers, a record or a block at a time."""

    def __init__(self, name: str, buf: Any) -> None:
        import numpy as np

        from .boxes import BoxStats  # (numpy: summarise walks blocks)
        from .tallies import Tally

        self.name, self.buf = name, buf
        self.heads = array("q")
        self.flags = Tally(_DISTINCT)
        self.labels = Tally(_DISTINCT, np.float32)
        self.first_id: int | None = None
        self.last_id: int | None = None
        self.split = 0
        self.face: dict[str, Any] = {"layout_records": set(), "header": None}
        self.boxes = BoxStats()

    def _ids(self, low: int, high: int) -> None:
        self.first_id = low if self.first_id is None else min(self.first_id, low)
        self.last_id = high if self.last_id is None else max(self.last_id, high)

    def record(self, head: int, nxt: int) -> None:
        self.heads.append(head)
        word = length_word(self.buf, head)
        self.split += decode_flag(word) == CFLAG_FIRST
        header = header_at(self.buf, head, nxt, self.name)
        if layout_record(header.flag, word):
            self.face["layout_records"].add(head)
            if header.id == 0:
                self.face["header"] = header
        import numpy as np

        self.flags.add_all(np.array([header.flag]))
        if header.flag > 0:
            self.boxes.add(header.label)
        else:
            self.boxes.not_detection += 1
            self.labels.add_all(np.array([header.label]))
        self._ids(header.id, header.id)

    def block(self, block: Any) -> None:
        """The whole records of a block, on arrays; one whose header does
        not read as :meth:`record` reads it (which says why)."""
        import numpy as np

        fields = block.header_fields()
        flag, lrec = fields["flag"].astype(np.int64), fields["lrec"].astype(np.int64)
        readable = holds_labels(flag, lrec)
        if not readable.all():  # (header_at says why it does not read)
            head = block.base + int(block.heads[np.argmin(readable)])
            header_at(self.buf, head, head + int(frame_size(lrec.max())), self.name)
        heads = block.heads + block.base
        self.heads.frombytes(heads.astype("<i8").tobytes())
        for head in heads[layout_record(flag, lrec)].tolist():
            self.face["layout_records"].add(head)
            header = header_at(self.buf, head, head + int(frame_size(image_start(2))), self.name)
            if header.id == 0:
                self.face["header"] = header
        self.flags.add_all(flag)
        single = flag == 0
        self.labels.add_all(fields["label"][single])
        self.boxes.not_detection += int(single.sum())
        if not single.all():  # (every header reads: its labels are the block's)
            self.boxes.add_labels(block.labels()[1])
        self._ids(int(fields["id"].min()), int(fields["id"].max()))


def face_layout(header: Any, layout_records: int, records: int) -> dict[str, Any] | None:
    """InsightFace's face layout, when record 0 is its header record and the
    identity records it names are there: images and identities."""
    found = None if header is None else face_header(header, b"", records)
    if found is None or layout_records != 1 + found[1] - found[0]:
        return None
    first, end = found
    return {"name": "insightface", "images": first - 1, "identities": end - first,
            "identity_records": [first, end - 1]}  # fmt: skip

"""A ``.rec`` as ``rec browse`` shows it: records by position, in file
order or a seeded shuffle (an affine permutation: no array of the file's
length), each one's header, label, class names and boxes; thumbnails made
by the shared decoders, kept in a cache bounded in bytes; the class counts
of one background scan of the headers."""

from __future__ import annotations

import io
import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import Im2RecError
from ..imaging.codec import DECODE_ERRORS, Upright
from ..imaging.headers import image_extension, image_size
from ..listing.classmap import class_map_beside, read_class_map
from ..recordio import IndexedRecordReader, IRHeader, unpack
from ..recordio.detection import problem
from ..recordio.runs import runs

__all__ = ["THUMB_CACHE_BYTES", "Browsed", "Scan"]

#: the bytes of thumbnails a dataset keeps
THUMB_CACHE_BYTES = 64 << 20
#: thumbnail sides a request may ask for
THUMB_SIDES = (64, 96, 128, 160, 192, 256)


@dataclass
class Scan:
    """What one pass over the headers found: records seen, per class the
    records holding it, records whose label layout is broken."""

    done: int = 0
    total: int = 0
    classes: dict[int, int] = field(default_factory=dict)
    broken: int = 0
    finished: bool = False
    error: str | None = None

    def to_dict(self, names: dict[int, str]) -> dict[str, Any]:
        return {"done": self.done, "total": self.total, "finished": self.finished,
                "error": self.error, "broken": self.broken,
                "classes": [{"label": k, "name": names.get(k, str(k)), "count": n}
                            for k, n in sorted(self.classes.items())]}  # fmt: skip


class Browsed:
    """One ``.rec`` (and its ``.idx``) opened for browsing: read only."""

    def __init__(self, path: str, name: str | None = None) -> None:
        self.path = path
        self.reader = IndexedRecordReader(path)
        self.name = name or os.path.basename(path)
        self.count = len(self.reader)
        found = None if self.reader.remote else class_map_beside(path)
        self.classes: dict[int, str] = read_class_map(found) if found else {}
        self._thumbs: OrderedDict[tuple[int, int], tuple[bytes, str]] = OrderedDict()
        self._thumb_bytes = 0
        self._lock = threading.Lock()
        self.scan = Scan(total=self.count)
        self._pairs = (np.empty(0, np.int64), np.empty(0, np.int64))

    def position(self, k: int, seed: int | None) -> int:
        """The record at place ``k`` of the view: ``k`` itself, or with a
        seed the affine permutation ``(a k + b) mod n``."""
        n = self.count
        if seed is None or n < 2:
            return k
        rng = np.random.default_rng(seed)
        a = int(rng.integers(1, n))
        while math.gcd(a, n) != 1:
            a += 1
        return (a * k + int(rng.integers(0, n))) % n

    def header(self, i: int) -> tuple[IRHeader, bytes]:
        header, payload = unpack(self.reader[i])
        return header, payload

    def describe(self, i: int, detail: bool = False) -> dict[str, Any]:
        """What the grid shows of record ``i``; with ``detail``, the record
        view's too (its EXIF orientation: the image opened)."""
        try:
            header, payload = self.header(i)
        except Im2RecError as exc:
            return {"position": i, "error": str(exc)}
        label = header.label
        values = [float(v) for v in np.asarray(label).reshape(-1)] if header.flag else [
            float(label)]  # fmt: skip
        out: dict[str, Any] = {
            "position": i, "key": _plain(self.reader.keys[i]), "id": header.id, "id2": header.id2,
            "flag": header.flag, "label": values[:4096],
            "offset": int(self.reader.index.offsets[i]), "size": len(payload),
            "format": (image_extension(payload[:16]) or "").lstrip(".") or None,
        }  # fmt: skip
        size = image_size(payload)
        out["pixels"] = None if size is None else [size[1], size[0]]
        out["names"], out["boxes"], out["broken"] = self._label(header.flag, values)
        if detail:
            out["orientation"] = self.orientation(payload) if size is not None else None
        return out

    def _label(self, flag: int, values: list[float]) -> tuple[list[str], list[Any], str | None]:
        names = self.classes
        if not flag:
            v = values[0]
            return ([names.get(int(v), str(int(v)))] if v.is_integer() else [f"{v:g}"]), [], None
        why = problem(values) if len(values) > values[0] else None
        if why is None and len(values) >= 2 and values[0] >= 2 and values[1] >= 5:
            a, b = int(values[0]), int(values[1])
            boxes = []
            for k in range(a, len(values) - b + 1, b):
                cls, x0, y0, x1, y1 = values[k : k + 5]
                boxes.append({"class": int(cls), "name": names.get(int(cls), str(int(cls))),
                              "box": [x0, y0, x1, y1]})  # fmt: skip
            return sorted({str(box["name"]) for box in boxes}), boxes, None
        whole = all(v.is_integer() and v >= 0 for v in values)
        shown = [names.get(int(v), str(int(v))) for v in values] if whole else \
            [f"{v:g}" for v in values[:16]]  # fmt: skip
        return shown, [], why if values and values[0] >= 2 and len(values) >= 7 else None

    def thumbnail(self, i: int, side: int) -> tuple[bytes, str]:
        """Record ``i`` as an image at most ``side`` pixels a side, as stored
        (EXIF orientation not applied: the frame a label's boxes are in),
        and its type: the payload itself where it is a JPEG or PNG at most
        four times that size (the browser scales it; nothing is decoded here),
        else a JPEG made by the shared decoders. ``Im2RecError`` or a
        decode error when it is not an image (the caller says why)."""
        key = (i, side)
        with self._lock:
            if key in self._thumbs:
                self._thumbs.move_to_end(key)
                return self._thumbs[key]
        _, payload = self.header(i)
        kind = _SMALL_TYPES.get(image_extension(payload[:16]) or "")
        size = image_size(payload) if kind else None
        if kind and size and max(size) <= 4 * side:
            found = (payload, kind)
        else:
            found = (_shrunk(payload, side), "image/jpeg")
        with self._lock:
            self._thumbs[key] = found
            self._thumb_bytes += len(found[0])
            while self._thumb_bytes > THUMB_CACHE_BYTES and self._thumbs:
                _, old = self._thumbs.popitem(last=False)
                self._thumb_bytes -= len(old[0])
        return found

    def orientation(self, payload: bytes) -> int | None:
        try:
            with Upright(payload) as upright:
                return upright.orientation
        except DECODE_ERRORS:
            return None

    def run_scan(self, stop: threading.Event) -> None:
        """One pass over the headers, a block of records at a time on arrays
        (:func:`~im2rec.recordio.blocks.walk_blocks`, as ``rec info`` reads):
        per class the records holding it (a record's classes once each),
        broken detection labels. Kept as two sorted arrays, 16 bytes a
        (record, class) pair."""
        from ..recordio.blocks import Block, walk_blocks
        from ..recordio.walking import header_at

        scan = self.scan
        offsets = np.asarray(self.reader.index.offsets, np.int64)
        order = None if bool(np.all(offsets[1:] > offsets[:-1])) else np.argsort(offsets)
        sorted_offsets = offsets if order is None else offsets[order]
        pairs: list[tuple[np.ndarray, np.ndarray]] = []
        try:
            buf, _ = self.reader.mapping()
            for item in walk_blocks(self.reader):
                if stop.is_set():
                    return
                if isinstance(item, Block):
                    heads = item.heads + item.base
                    fields = item.header_fields()
                    flags = fields["flag"].astype(np.int64)
                    labels = fields["label"].astype(np.float64)
                    many = np.flatnonzero(flags > 0)
                    values, starts = item.values(item.heads[many] + 32, flags[many])
                else:
                    head, nxt = item  # type: ignore[misc]
                    header = header_at(buf, head, nxt, self.reader.name)
                    heads = np.array([head], np.int64)
                    flags = np.array([header.flag], np.int64)
                    labels = np.array([0.0 if header.flag else float(header.label)])
                    many = np.flatnonzero(flags > 0)
                    values = np.asarray(header.label, np.float32).reshape(-1)[: header.flag]
                    starts = np.zeros(len(many), np.int64)
                where = np.searchsorted(sorted_offsets, heads).clip(0, max(len(offsets) - 1, 0))
                known = sorted_offsets[where] == heads if len(offsets) else heads < 0
                positions = where if order is None else order[where]
                owner, classes, broken = _classes_of(flags, labels, many, values, starts)
                scan.broken += broken
                keep = known[owner]
                pairs.append((positions[owner[keep]], classes[keep]))
                scan.done += len(heads)
                for c, n in zip(*np.unique(classes[keep], return_counts=True), strict=True):
                    scan.classes[int(c)] = scan.classes.get(int(c), 0) + int(n)
            position = np.concatenate([p for p, _ in pairs]) if pairs else np.empty(0, np.int64)
            label = np.concatenate([c for _, c in pairs]) if pairs else np.empty(0, np.int64)
            sort = np.lexsort((position, label))
            self._pairs = (label[sort], position[sort])
            scan.finished = True
        except Im2RecError as exc:
            scan.error = str(exc)

    def members(self, label: int) -> np.ndarray | None:
        """The records holding class ``label``, in index order (None until
        the scan is done)."""
        if not self.scan.finished:
            return None
        labels, positions = self._pairs
        low, high = np.searchsorted(labels, [label, label + 1])
        return positions[low:high]


def _classes_of(
    flags: np.ndarray, labels: np.ndarray, many: np.ndarray, values: np.ndarray,
    starts: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:  # fmt: skip
    """``(record, class)`` pairs of a block's records (each pair once) and
    how many detection labels are broken: a single label that is a class
    number; a detection label's objects' classes; a multi-label record's
    class numbers."""
    from ..recordio.detection import Labels, check

    single = np.flatnonzero((flags == 0) & (labels >= 0) & (labels == np.floor(labels)))
    owners, classes = [single], [labels[single].astype(np.int64)]
    broken = 0
    if len(many):
        counts = flags[many]
        values = np.asarray(values, np.float64)
        head = values[np.minimum(starts, max(len(values) - 1, 0))] if len(values) else values
        boxed = (counts >= 7) & (head >= 2)
        if boxed.any():
            pick = np.flatnonzero(boxed)
            faults, groups = check(Labels(values, starts[pick], counts[pick]))
            broken = int((faults.code != 0).sum())
            for group in groups:
                fine = (faults.code[group.owner] == 0) & (group.objects[:, 0] >= 0)
                owners.append(many[pick[group.owner[fine]]])
                classes.append(np.asarray(group.objects[fine, 0], np.int64))
        plain = np.flatnonzero(~boxed)
        if len(plain):
            rows = np.repeat(many[plain], counts[plain])
            picked = runs(values, starts[plain], counts[plain])[0]
            whole = (picked >= 0) & (picked == np.floor(picked))
            owners.append(rows[whole])
            classes.append(picked[whole].astype(np.int64))
    owner = np.concatenate(owners)
    cls = np.concatenate(classes)
    key = np.unique(owner.astype(np.int64) * (1 << 25) + cls.clip(-1, (1 << 24)) + 1)
    return key >> 25, (key & ((1 << 25) - 1)) - 1, broken


_SMALL_TYPES = {".jpg": "image/jpeg", ".png": "image/png"}


def _shrunk(payload: bytes, side: int) -> bytes:
    """``payload`` decoded (at a DCT scale where it is a JPEG), made at most
    ``side`` pixels a side, as stored, and encoded as a JPEG."""
    from PIL import ImageOps

    from ..imaging.columns import SCALARS
    from ..imaging.jpeg import dct_scale

    with Upright(payload, -1) as upright:  # (as stored: the boxes' frame)
        width, height = upright.size
        upright.draft("RGB", dct_scale(SCALARS, width, height, width, height, (side, side)))
        image = ImageOps.contain(upright.load().convert("RGB"), (side, side))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=85)
    return out.getvalue()


def _plain(key: Any) -> Any:
    return key.item() if hasattr(key, "item") else key

"""A ``.rec`` as ``rec browse`` shows it: records by position, in file
order or a seeded shuffle (an affine permutation: no array of the file's
length), each one's header, label, class names and boxes; thumbnails made
by the shared decoders, kept in a cache bounded in bytes; the background
scan (:mod:`.scanning`) behind the filters and charts."""

from __future__ import annotations

import io
import math
import os
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from ..errors import Im2RecError
from ..imaging.codec import DECODE_ERRORS, Upright
from ..imaging.headers import image_extension, image_size
from ..listing.classmap import class_map_beside, read_class_map
from ..recordio import IndexedRecordReader, IRHeader, unpack
from ..recordio.detection import claims_boxes, read_label
from .scanning import Scanner

__all__ = ["THUMB_CACHE_BYTES", "Browsed"]

#: the bytes of thumbnails a dataset keeps
THUMB_CACHE_BYTES = 64 << 20
#: thumbnail sides a request may ask for
THUMB_SIDES = (64, 96, 128, 160, 192, 256)


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
        self.scanner = Scanner(self.reader, path)

    def places(self, start: int, stop: int, seed: int | None, n: int | None = None) -> list[int]:
        """The places ``start`` to ``stop`` of a view of ``n`` (the file's
        count unless given) take: themselves, or with a seed the affine
        permutation ``(a k + b) mod n``, ``a`` and ``b`` drawn from it."""
        n = self.count if n is None else n
        ks = range(start, min(stop, n))
        if seed is None or n < 2:
            return list(ks)
        rng = np.random.default_rng(seed)
        a = int(rng.integers(1, n))
        while math.gcd(a, n) != 1:
            a += 1
        b = int(rng.integers(0, n))
        return [(a * k + b) % n for k in ks]

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
        """``(names, boxes, why broken)`` of a label: a class; a detection
        label's boxes (:func:`read_label`, as the scan reads them); else
        class numbers, and why the layout is broken where it claims to be
        one (:func:`claims_boxes`)."""
        names = self.classes
        if not flag:
            v = values[0]
            return ([names.get(int(v), str(int(v)))] if v.is_integer() else [f"{v:g}"]), [], None
        why = None
        if values and claims_boxes(values[0], len(values)):
            try:
                objects = read_label(values).objects
            except ValueError as exc:
                why = str(exc)
            else:
                boxes = [{"class": int(row[0]), "name": names.get(int(row[0]), str(int(row[0]))),
                          "box": row[1:5].tolist()} for row in objects]  # fmt: skip
                return sorted({str(box["name"]) for box in boxes}), boxes, None
        whole = all(v.is_integer() and v >= 0 for v in values)
        shown = [names.get(int(v), str(int(v))) for v in values] if whole else \
            [f"{v:g}" for v in values[:16]]  # fmt: skip
        return shown, [], why

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

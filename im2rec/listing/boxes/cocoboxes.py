"""A COCO file's annotations, a column piece at a time: checked (the first
bad one reported, its value read back from the file), crowd and GluonCV's
left-out ones dropped, then joined to their images and made boxes, clipped
and normalised as :mod:`.coco` says, and every image's rows in order.

Memory: what is kept of each annotation (its image, class, ``bbox`` and
flag, 53 bytes), the pieces read freed as they are gone through."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from ...errors import DatasetError
from ...executors.worker import give_back_memory
from ..entries import ranks
from .cococolumns import ImagesRead, field_error, value_of
from .common import MAX_OBJECTS, BoxOptions, check_box
from .jsoncolumns import Columns
from .jsonkinds import BIGINT, FLOAT, INT, MISSING, QUAD

__all__ = ["IGNORED", "NO_AREA", "Annotations", "Rows", "image_rows", "read_annotations"]

#: (--convention gluoncv) the skip reasons of what GluonCV's reader leaves out
NO_AREA = "annotation whose area is not above 0 (left out, as GluonCV does)"
IGNORED = "annotation marked ignore (left out, as GluonCV does)"


class Annotations:
    """The annotations kept, in file order, in the pieces they were read
    in: ``(image ids, labels, boxes, flags)`` each (int64, int32, float64 x,
    y, width, height in pixels, float32 iscrowd). :func:`image_rows`
    consumes them, a piece at a time."""

    def __init__(self) -> None:
        self.pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return sum(len(piece[0]) for piece in self.pieces)


def read_annotations(
    columns: Columns, path: str, labels: dict[int, int], options: BoxOptions,
    skips: dict[str, list[str]],
) -> Annotations:  # fmt: skip
    """Every annotation checked in file order; those kept (the columns'
    pieces let go as they are gone through)."""
    gluoncv = options.convention == "gluoncv"
    fields = columns.sections["annotations"]
    ids = np.asarray(sorted(labels), np.int64)
    by_id = np.asarray([labels[i] for i in sorted(labels)], np.int32)
    names = list(fields)
    out = Annotations()
    base = 0
    while fields[names[0]].pieces:
        piece = {name: fields[name].pieces.pop(0) for name in names}
        n = len(piece["image_id"][0])
        image_kind, image_ids = piece["image_id"]
        cat_kind, cats = piece["category_id"]
        crowd_kind, crowd = piece["iscrowd"]
        bbox_kind, bbox = piece["bbox"]
        bbox = bbox.reshape(-1, 4)
        at = np.minimum(np.searchsorted(ids, cats), max(len(ids) - 1, 0))
        known = (ids[at] == cats) if len(ids) else np.zeros(n, bool)
        crowd = np.where(crowd_kind == MISSING, 0, crowd)  # (no iscrowd: 0)
        skipped = (crowd == 1) & (options.crowd == "skip")
        good_box = (bbox_kind == QUAD) & np.isfinite(bbox).all(axis=1)
        checks = [image_kind != INT, cat_kind != INT, ~known, crowd == 2, ~skipped & ~good_box]
        if gluoncv:
            area_kind, area = piece["area"]
            good_area = np.isin(area_kind, (INT, BIGINT, FLOAT)) & np.isfinite(area)
            checks.append(~skipped & ~good_area)
        bad = np.logical_or.reduce(checks)
        if bad.any():
            k = int(np.argmax(bad))
            _refuse(path, base + k, [bool(c[k]) for c in checks], int(cats[k]))
        keep = ~skipped
        if gluoncv:
            ignored = keep & (piece["ignore"][1] == 1)
            no_area = keep & ~ignored & (area <= 0)
            for k in np.flatnonzero(ignored | no_area).tolist():
                skips[IGNORED if ignored[k] else NO_AREA].append(f"annotation {base + k}")
            keep &= ~ignored & ~no_area
        out.pieces.append((image_ids[keep], by_id[at[keep]], bbox[keep],
                           crowd[keep].astype(np.float32)))  # fmt: skip
        base += n
        if len(fields[names[0]].pieces) % 32 == 0:  # (the pieces gone through, given back)
            give_back_memory()
    return out


def _refuse(path: str, k: int, failed: list[bool], category: int) -> None:
    """Raise what is wrong with annotation ``k``: the first of its checks
    that failed (image_id, category_id, its category, iscrowd, bbox, area)."""
    where = f"{path}: annotation {k}"
    first = failed.index(True)
    if first == 0:
        raise field_error(where, "image_id", int)
    if first == 1:
        raise field_error(where, "category_id", int)
    if first == 2:
        raise DatasetError(f"{where}: category_id {category} is not among the categories")
    if first == 3:
        crowd = value_of(path, "annotations", k, "iscrowd")
        raise DatasetError(f"{where}: iscrowd is {crowd!r}, not 0 or 1")
    if first == 4:
        bbox = value_of(path, "annotations", k, "bbox")
        raise DatasetError(f"{where}: bbox {bbox!r:.60} is not [x, y, width, height] in pixels")
    area = value_of(path, "annotations", k, "area")
    raise DatasetError(f"{where}: area {area!r:.40} is not a number (GluonCV reads it)")


#: annotations made boxes at a time (the float64 arithmetic's memory)
CHUNK = 1 << 19


class Rows(NamedTuple):
    """Every image's objects, in the listing's order of images: ``objects``
    (a count an image); ``rows`` (float32, six an object, in the file's
    order) and ``order`` (the rows kept, image by image); ``empty_boxes``
    (image position, object) of the boxes with nothing inside; the images'
    sizes in that order."""

    objects: np.ndarray
    rows: np.ndarray
    order: np.ndarray
    empty_boxes: list[tuple[int, int]]
    widths: np.ndarray
    heights: np.ndarray

    def labels(
        self, listed: np.ndarray, boxes: int = CHUNK
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The labels of the images ``listed`` (a mask over positions), some
        images at a time (about ``boxes`` boxes): their positions, their
        labels one after another (``4, 6, width, height``, then the
        objects), and where each ends."""
        starts = np.cumsum(self.objects) - self.objects
        listed_at = np.flatnonzero(listed)
        ahead = np.cumsum(self.objects[listed_at])
        lo = 0
        while lo < len(listed_at):
            hi = max(lo + 1, int(np.searchsorted(ahead, (ahead[lo - 1] if lo else 0) + boxes)))
            take = listed_at[lo:hi]
            counts = self.objects[take]
            ends = np.cumsum(4 + 6 * counts)
            out = np.empty(int(ends[-1]), np.float32)
            heads = ends - 6 * counts - 4
            out[heads], out[heads + 1] = 4.0, 6.0
            out[heads + 2], out[heads + 3] = self.widths[take], self.heights[take]
            rank = ranks(counts)
            source = self.order[np.repeat(starts[take], counts) + rank]
            target = np.repeat(heads + 4, counts) + 6 * rank
            for j in range(6):
                out[target + j] = self.rows[source, j]
            yield take, out, ends
            lo = hi


def image_rows(path: str, images: ImagesRead, ann: Annotations, gluoncv: bool) -> Rows:
    """Each annotation joined to its image, as a box clipped to it (empty
    ones left out and named), normalised; the rows in the images' order.
    ``ann`` is consumed, a piece at a time."""
    n = len(images.ids)
    order = images.order
    position = np.empty(n, np.int64)
    position[order] = np.arange(n)
    sorted_ids = np.argsort(images.ids, kind="stable")
    ids_in_order = images.ids[sorted_ids]
    # (an annotation of no image gets position n: a size of 1 x 1 until it is refused)
    widths = np.append(images.widths[order], 1.0)
    heights = np.append(images.heights[order], 1.0)
    total = len(ann)
    rows = np.empty((total, 6), np.float32)
    pos = np.empty(total, np.int64)
    empty = np.empty(total, bool)
    orphan = None
    lo = 0
    while ann.pieces:
        image_ids, labels, boxes, flags = ann.pieces.pop(0)
        part = slice(lo, lo + len(image_ids))
        at = np.minimum(np.searchsorted(ids_in_order, image_ids), max(n - 1, 0))
        found = ids_in_order[at] == image_ids if n else np.zeros(len(image_ids), bool)
        if orphan is None and not found.all():
            orphan = int(image_ids[int(np.argmax(~found))])
        pos[part] = here = np.where(found, position[sorted_ids[at]] if n else 0, n)
        empty[part] = _boxes(path, order, here, widths[here], heights[here], boxes, gluoncv,
                             rows[part])  # fmt: skip
        rows[part, 0], rows[part, 5] = labels, flags
        lo = part.stop
        if len(ann.pieces) % 32 == 0:  # (the pieces gone through, given back)
            give_back_memory()
    counts = np.bincount(pos, minlength=n + 1)[:n]
    if (counts > MAX_OBJECTS).any():
        p = int(np.argmax(counts > MAX_OBJECTS))
        raise DatasetError(
            f"{path}: image {int(order[p])}: {int(counts[p]):,} objects; at most "
            f"{MAX_OBJECTS:,} an image"
        )
    if orphan is not None:
        raise DatasetError(f"{path}: annotations name image_id {orphan}, which is not an image")
    by_image = np.argsort(pos, kind="stable")  # (file order inside an image)
    gone = empty[by_image]
    rank = ranks(counts)
    empty_boxes = list(zip(pos[by_image][gone].tolist(), rank[gone].tolist(), strict=True))
    del rank
    objects = np.bincount(pos[~empty], minlength=n).astype(np.int64)
    kept = by_image[~gone]
    del by_image
    if total < 1 << 31:  # (4 bytes a box, not 8)
        kept = kept.astype(np.int32)
    return Rows(objects, rows, kept, empty_boxes, widths[:n], heights[:n])


def _boxes(
    path: str, order: np.ndarray, at_image: np.ndarray, width: np.ndarray, height: np.ndarray,
    boxes: np.ndarray, gluoncv: bool, rows: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """Boxes ``x, y, w, h`` of images ``width`` x ``height``, clipped as
    :mod:`.coco` says, normalised into ``rows[:, 1:5]``; which have nothing
    inside."""
    x, y, w, h = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    if gluoncv:
        right, bottom = width - 1, height - 1
        x1, y1 = x + np.where(w - 1 > 0, w - 1, 0.0), y + np.where(h - 1 > 0, h - 1, 0.0)
        x0, y0, x1, y1 = (_low(top, _high(0.0, v)) for v, top in
                          ((x, right), (y, bottom), (x1, right), (y1, bottom)))  # fmt: skip
    else:
        x0, y0, x1, y1 = _high(0.0, x), _high(0.0, y), _low(width, x + w), _low(height, y + h)
    empty = ~((x1 > x0) & (y1 > y0))
    inside = (0 <= x0) & (x1 <= width) & (0 <= y0) & (y1 <= height)
    inside |= at_image == len(order)  # (an annotation of no image: refused once all are read)
    if not (inside | empty).all():  # (a clipped box cannot leave its image: check_box says so)
        j = int(np.flatnonzero(~inside & ~empty)[0])
        check_box(f"{path}: image {int(order[at_image[j]])}", (x0[j], y0[j], x1[j], y1[j]),
                  (width[j], height[j]))  # fmt: skip
    for k, (v, side) in enumerate(((x0, width), (y0, height), (x1, width), (y1, height))):
        rows[:, 1 + k] = v / side  # (float64 to float32: rounded to the nearest)
    return empty


def _high(low: float, v: np.ndarray) -> np.ndarray:
    """Python's ``max(low, v)``: ``v`` when above ``low``, else ``low``."""
    return np.where(v > low, v, low)


def _low(high: np.ndarray | float, v: np.ndarray) -> np.ndarray:
    """Python's ``min(high, v)``: ``v`` when below ``high``, else ``high``."""
    return np.where(v < high, v, high)

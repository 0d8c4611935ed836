"""Detection labels as the Hub's ``objects`` column, and back: the one
home of that conversion, both ways.

A record's objects become, for each object, ``bbox`` (COCO's ``[x, y,
width, height]`` in pixels of the stored image), ``category`` (the class
number; -1 on MXNet's padding rows), ``area`` (``width * height``, 0 for an
empty box), ``id`` (counted across the dataset) and, where the label's
objects have more than five values, ``extra`` (the values after the box:
``rec list``'s VOC ``difficult`` or COCO ``iscrowd``).

The pixels are exact: a corner ``c`` (float32) times a size below
2**24 is exact in float64, and :func:`corners` gives back ``float32(x /
W)`` and ``float32((x + w) / W)``, the stored corners, for every box but a
degenerate one (an empty box whose far corner is tiny beside its near
one). The export checks each box with :func:`corners` itself and names a
record whose boxes would not come back exactly.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Objects", "corners", "labels", "objects"]


class Objects(NamedTuple):
    """The objects of a batch of rows: row ``i`` has the next ``counts[i]``
    objects; ``extra_counts[k]`` values of ``extra`` follow object ``k``'s box."""

    counts: np.ndarray
    category: np.ndarray
    bbox: np.ndarray
    area: np.ndarray
    extra_counts: np.ndarray
    extra: np.ndarray


def corners(bbox: np.ndarray, width: np.ndarray, height: np.ndarray) -> np.ndarray:
    """``(m, 4)`` float32 corners ``xmin, ymin, xmax, ymax`` in [0, 1] of
    the image from ``(m, 4)`` pixel boxes ``[x, y, w, h]`` and each box's
    image ``width`` and ``height``."""
    box = np.asarray(bbox, np.float64).reshape(-1, 4)
    w = np.asarray(width, np.float64)
    h = np.asarray(height, np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = np.stack([box[:, 0] / w, box[:, 1] / h, (box[:, 0] + box[:, 2]) / w,
                        (box[:, 1] + box[:, 3]) / h], axis=1)  # fmt: skip
        return out.astype(np.float32)


def objects(
    rows: list[np.ndarray], width: np.ndarray, height: np.ndarray
) -> tuple[Objects, np.ndarray]:
    """The objects of detection labels ``rows`` (float32 values, each a
    detection label or a header alone) on images ``width`` x ``height``
    pixels (0 where not known), and which rows' boxes come back exactly
    through :func:`corners` (False on an image of unknown size)."""
    counts = np.zeros(len(rows), np.int64)
    parts, extras, widths = [], [], []
    for i, values in enumerate(rows):
        a, b = int(values[0]), int(values[1])
        rows_ = values[a:].reshape(-1, b)
        counts[i] = len(rows_)
        parts.append(rows_[:, :5])
        extras.append(rows_[:, 5:].reshape(-1))
        widths.append(np.full(len(rows_), b - 5, np.int64))
    five = np.concatenate(parts) if parts else np.empty((0, 5), np.float32)
    w = np.repeat(np.asarray(width, np.float64), counts)
    h = np.repeat(np.asarray(height, np.float64), counts)
    x0, y0 = five[:, 1] * w, five[:, 2] * h
    x1, y1 = five[:, 3] * w, five[:, 4] * h
    bbox = np.stack([x0, y0, x1 - x0, y1 - y0], axis=1)
    area = np.maximum(x1 - x0, 0) * np.maximum(y1 - y0, 0)
    back = corners(bbox, w, h)
    same = (back.view(np.uint32) == np.ascontiguousarray(five[:, 1:5]).view(np.uint32)).all(axis=1)
    same &= (w > 0) & (h > 0)
    owner = np.repeat(np.arange(len(rows)), counts)
    exact = np.ones(len(rows), bool)
    exact[owner[~same]] = False
    exact &= (np.asarray(width) > 0) & (np.asarray(height) > 0)
    found = Objects(
        counts, five[:, 0].astype(np.int64), bbox, area,
        np.concatenate(widths) if widths else np.empty(0, np.int64),
        np.concatenate(extras) if extras else np.empty(0, np.float32),
    )  # fmt: skip
    return found, exact


def labels(
    found: Objects,
    width: np.ndarray,
    height: np.ndarray,
    heads: list[np.ndarray] | None,
    empty_extra: int = 0,
) -> list[np.ndarray]:
    """Each row's detection label (float32) from its objects on an image
    ``width`` x ``height`` pixels: the header ``heads[i]`` (a label's own
    ``A, B, ...`` values) or, with None, ``4, B, width, height``, GluonCV's;
    ``B`` is 5 and the objects' extra values (``empty_extra`` for a row
    without objects). A row's objects must all have as many extra values
    (ValueError naming the row otherwise)."""
    counts = np.asarray(found.counts, np.int64)
    n = len(counts)
    if not n:
        return []
    first = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    widths = np.asarray(found.extra_counts, np.int64)
    extra = np.full(n, empty_extra, np.int64)
    some = counts > 0
    extra[some] = widths[first[some]]
    uneven = np.flatnonzero(widths != np.repeat(extra, counts))
    if len(uneven):
        at = int(np.searchsorted(first, uneven[0], "right") - 1)
        raise ValueError(f"row {at}: its objects have different numbers of extra values")
    b = 5 + extra
    if heads is None:
        head = np.stack([np.full(n, 4.0), b, width, height], axis=1).astype(np.float32).ravel()
        head_len = np.full(n, 4, np.int64)
    else:
        head_len = np.fromiter(map(len, heads), np.int64, n)
        head = np.concatenate(heads).astype(np.float32)
        long = head_len >= 2  # (a shorter header is named by the label's own check)
        said = np.zeros(n, np.float32)
        said[long] = head[np.concatenate(([0], np.cumsum(head_len)[:-1]))[long] + 1]
        wrong = np.flatnonzero(some & long & (said != b))
        if len(wrong):
            i = int(wrong[0])
            raise ValueError(f"row {i}: its label header says {said[i]:g} values an object")
    sizes = head_len + counts * b
    start = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    out = np.empty(int(sizes.sum()), np.float32)
    head_start = np.concatenate(([0], np.cumsum(head_len)[:-1])).astype(np.int64)
    out[np.repeat(start - head_start, head_len) + np.arange(len(head))] = head
    m = len(found.category)
    step = np.repeat(b, counts)
    at = np.repeat(start + head_len - first * b, counts) + np.arange(m) * step
    w = np.repeat(np.asarray(width, np.float64), counts)
    h = np.repeat(np.asarray(height, np.float64), counts)
    box = corners(found.bbox, w, h)
    out[at] = found.category
    for k in range(4):
        out[at + 1 + k] = box[:, k]
    if len(found.extra):
        extra_first = np.concatenate(([0], np.cumsum(widths)[:-1])).astype(np.int64)
        spots = np.repeat(at + 5 - extra_first, widths) + np.arange(len(found.extra))
        out[spots] = found.extra
    return np.split(out, start[1:])

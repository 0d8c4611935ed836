"""The box rules of MXNet's detection augmenter (``det_aug_default``), in
float32 as its C++ computes them: mirror, pad and crop boxes, the crop's
constraints, which objects a crop keeps and where they land.

Boxes are rows ``cls, xmin, ymin, xmax, ymax, extra...`` with corners
normalised to the image (:mod:`im2rec.recordio.detection`'s layout). Every
function takes and returns such arrays; nothing here touches pixels. This is
the one home of these rules: :class:`~.detection.DetAugmenter` plans with
them, for :class:`~im2rec.training.detiter.ImageDetRecordIter` and for
``RecordDataset``'s detection samples alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "Rect",
    "Sampler",
    "crop_boxes",
    "first_crop",
    "mirrored",
    "pad_box",
    "projected",
    "try_crop",
]

F = np.float32
#: a pad scale under this is no pad (MXNet's ``GeneratePadBox`` threshold)
PAD_THRESHOLD = F(1.05)

#: ``uniform(a, b)``: a float32 draw as libstdc++'s
#: ``uniform_real_distribution<float>`` makes one, ``a + (b - a) * u``
Uniform = Callable[[float, float], np.float32]


class Rect(NamedTuple):
    """OpenCV's ``Rect_<float>``: corner ``x, y``, size ``width, height``
    (normalised: the image is ``(0, 0, 1, 1)``); float32 scalars, or
    arrays of them for several crops (:func:`crop_boxes`)."""

    x: Any
    y: Any
    width: Any
    height: Any


@dataclass(frozen=True)
class Sampler:
    """One of ``num_crop_sampler`` crop samplers: the ranges of a crop's
    scale (its side relative to the image's), aspect ratio (width over
    height, in pixels), IoU with an object, ``sample`` coverage (the part of
    the crop an object covers) and ``object`` coverage (the part of an
    object inside the crop), and how many crops it tries."""

    min_scale: float = 0.0
    max_scale: float = 1.0
    min_aspect: float = 1.0
    max_aspect: float = 1.0
    min_overlap: float = 0.0
    max_overlap: float = 1.0
    min_sample_coverage: float = 0.0
    max_sample_coverage: float = 1.0
    min_object_coverage: float = 0.0
    max_object_coverage: float = 1.0
    trials: int = 25

    @property
    def constrained(self) -> tuple[bool, bool, bool]:
        """Which of IoU, sample coverage and object coverage this sampler
        checks: one whose range is not the whole ``[0, 1]``."""
        return (
            self.min_overlap > 0 or self.max_overlap < 1,
            self.min_sample_coverage > 0 or self.max_sample_coverage < 1,
            self.min_object_coverage > 0 or self.max_object_coverage < 1,
        )


def mirrored(objects: np.ndarray) -> np.ndarray:
    """Boxes of the image flipped left to right: ``x -> 1 - x``."""
    out: np.ndarray = objects.copy()
    out[:, 1] = F(1) - objects[:, 3]
    out[:, 3] = F(1) - objects[:, 1]
    return out


def projected(objects: np.ndarray, box: Rect) -> np.ndarray:
    """Boxes in the coordinates of ``box`` (a crop, or a padded canvas),
    clipped to it: MXNet's ``ImageDetObject::Project``."""
    out: np.ndarray = objects.copy()
    out[:, 1] = np.maximum(F(0), (objects[:, 1] - box.x) / box.width)
    out[:, 2] = np.maximum(F(0), (objects[:, 2] - box.y) / box.height)
    out[:, 3] = np.minimum(F(1), (objects[:, 3] - box.x) / box.width)
    out[:, 4] = np.minimum(F(1), (objects[:, 4] - box.y) / box.height)
    return out


def pad_box(max_pad_scale: float, uniform: Uniform) -> Rect | None:
    """A padded canvas ``scale`` times the image's side, the image at a
    random place inside it, as a rect in the image's coordinates; None when
    the drawn scale is under 1.05 (no padding, as MXNet)."""
    scale = uniform(1.0, max_pad_scale)
    if scale < PAD_THRESHOLD:
        return None
    x0 = uniform(0.0, float(scale - F(1)))
    y0 = uniform(0.0, float(scale - F(1)))
    return Rect(F(-x0), F(-y0), scale, scale)


def crop_boxes(sampler: Sampler, image_aspect: np.float32, draws: np.ndarray) -> Rect:
    """Random crops of ``sampler``'s scale and aspect range in an image of
    aspect ``image_aspect`` (width over height), one for each row of
    ``draws`` (four uniforms in [0, 1) a crop): MXNet's ``GenerateCropBox``,
    its arithmetic and its clamps, on arrays. The fields of the result are
    arrays."""
    u = np.asarray(draws, F).reshape(-1, 4)
    low_scale, high_scale = F(sampler.min_scale), F(sampler.max_scale)
    scale = (low_scale + (high_scale - low_scale) * u[:, 0]) + F(1e-12)
    square = scale * scale
    low = np.maximum(F(sampler.min_aspect) / image_aspect, square)
    # (C++: 1. / float is a double, then taken as a float by min<float>)
    high = np.minimum(
        F(sampler.max_aspect) / image_aspect, (1.0 / square.astype(np.float64)).astype(F)
    )
    ratio = np.sqrt(low + (high - low) * u[:, 1])
    width = np.minimum(F(1), scale * ratio)
    height = np.minimum(F(1), scale / ratio)
    x0 = (F(1) - width) * u[:, 2]
    y0 = (F(1) - height) * u[:, 3]
    return Rect(x0, y0, width, height)


def _intersection(box: Rect, objects: np.ndarray) -> np.ndarray:
    """The area each object's box shares with each crop of ``box``
    (``(crops, objects)``; OpenCV's ``a & b``: none when empty)."""
    bx, by = np.reshape(box.x, (-1, 1)), np.reshape(box.y, (-1, 1))
    bw, bh = np.reshape(box.width, (-1, 1)), np.reshape(box.height, (-1, 1))
    x1 = np.maximum(bx, objects[:, 1])
    y1 = np.maximum(by, objects[:, 2])
    x2 = np.minimum(bx + bw, objects[:, 1] + (objects[:, 3] - objects[:, 1]))
    y2 = np.minimum(by + bh, objects[:, 2] + (objects[:, 4] - objects[:, 2]))
    w, h = x2 - x1, y2 - y1
    area: np.ndarray = np.where((w > 0) & (h > 0), w * h, F(0)).astype(F)
    return area


def first_crop(
    objects: np.ndarray, boxes: Rect, sampler: Sampler, emit: str, emit_threshold: float
) -> tuple[int, np.ndarray] | None:
    """The first of the crops ``boxes`` (arrays) that MXNet's ``TryCrop``
    accepts, and the objects it keeps in its coordinates; None when it
    refuses them all.

    A crop passes when some object meets every constraint the sampler
    sets (each range that is not ``[0, 1]``); with none set, any crop
    passes. Then ``emit`` picks the objects kept: ``center``, those whose
    centre lies in the crop; ``overlap``, those more than ``emit_threshold``
    inside it. A crop keeping none is refused. An image with no object is
    cropped by the first crop drawn."""
    if len(objects) == 0:
        return (0, objects) if len(np.reshape(boxes.x, -1)) else None
    widths = objects[:, 3] - objects[:, 1]
    heights = objects[:, 4] - objects[:, 2]
    areas = (widths * heights).astype(F)
    inter = _intersection(boxes, objects)  # (crops, objects)
    crop_area = (np.reshape(boxes.width, (-1, 1)) * np.reshape(boxes.height, (-1, 1))).astype(F)
    iou_on, sample_on, object_on = sampler.constrained
    valid: np.ndarray = np.ones(len(inter), bool)
    if iou_on or sample_on or object_on:
        ok = np.ones(inter.shape, bool)
        if iou_on:
            union = crop_area + areas - inter
            iou = np.where(inter > 0, inter / np.where(union > 0, union, F(1)), F(0))
            ok &= (iou >= F(sampler.min_overlap)) & (iou <= F(sampler.max_overlap))
        if sample_on:
            cover = inter / crop_area
            ok &= cover >= F(sampler.min_sample_coverage)
            ok &= cover <= F(sampler.max_sample_coverage)
        if object_on:
            with np.errstate(divide="ignore", invalid="ignore"):
                cover = inter / areas
            ok &= cover >= F(sampler.min_object_coverage)
            ok &= cover <= F(sampler.max_object_coverage)
        valid = np.asarray(ok.any(axis=1))
    bx, by = np.reshape(boxes.x, (-1, 1)), np.reshape(boxes.y, (-1, 1))
    if emit == "center":
        cx = (objects[:, 1] + objects[:, 3]) * F(0.5)
        cy = (objects[:, 2] + objects[:, 4]) * F(0.5)
        keep = (bx <= cx) & (cx < bx + np.reshape(boxes.width, (-1, 1)))
        keep &= (by <= cy) & (cy < by + np.reshape(boxes.height, (-1, 1)))
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            keep = inter / areas > F(emit_threshold)
    accepted = valid & keep.any(axis=1)
    if not accepted.any():
        return None
    at = int(np.argmax(accepted))
    box = Rect(*(F(np.reshape(v, -1)[at]) for v in boxes))
    return at, projected(objects[keep[at]], box)


def try_crop(
    objects: np.ndarray, box: Rect, sampler: Sampler, emit: str, emit_threshold: float
) -> np.ndarray | None:
    """:func:`first_crop` of one crop: the objects it keeps, or None."""
    got = first_crop(objects, box, sampler, emit, emit_threshold)
    return None if got is None else got[1]

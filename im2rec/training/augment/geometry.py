"""Where each pixel of an output sample comes from: MXNet's geometric
augmenters (``image_aug_default.cc``), in its order (docs/format.md, "One
record's pipeline", step 4): resize the short side, an affine warp (rotate, shear, random scale and
aspect, image-size bounds), padding, then one crop that becomes the output:
MXNet's random-resized crop, a random crop size, or the centre (or random)
crop of the output size, enlarging the image first when it is smaller.

The random draws follow MXNet's distributions (uniform reals, uniform
integers, a coin for the random-resized crop's orientation); MXNet's
generator (libstdc++'s ``mt19937`` distributions) is not reproduced, so the
same seed does not give MXNet's crops, only crops drawn the same way.

The random-resized crop is the one rule here for every path that makes it
(the Python path, the batch the C decoder renders): a sample takes a fixed
block of :data:`RRC_DRAWS` uniforms from numpy's ``Generator.random``, five
a try (area, aspect, orientation, row, column), used or not, and
:func:`random_resized` turns blocks into boxes: written once, over Python
numbers for one sample and numpy columns for a batch
(:mod:`~im2rec.imaging.columns`). A
fixed count makes a batch's draws one ``random((n, RRC_DRAWS))`` call whose
rows are the per-sample calls' blocks, in order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from ...imaging.codec import short_side
from ...imaging.columns import ARRAYS, SCALARS

__all__ = [
    "RRC_DRAWS",
    "Affine",
    "CropRule",
    "Interp",
    "affine_warp",
    "final_crop",
    "pick_interp",
    "planned_box",
    "planned_boxes",
    "random_resized",
]

Box = tuple[float, float, float, float]
#: ``(old size, new size) -> Pillow filter`` for one resampling step.
Interp = Callable[[tuple[int, int], tuple[int, int]], Image.Resampling]

#: MXNet's ``inter_method`` codes (OpenCV's) in Pillow terms; 3 is OpenCV's
#: area averaging, whose Pillow counterpart is the box filter.
INTERPOLATION = {
    0: Image.Resampling.NEAREST,
    1: Image.Resampling.BILINEAR,
    2: Image.Resampling.BICUBIC,
    3: Image.Resampling.BOX,
    4: Image.Resampling.LANCZOS,
}
INTER_METHODS = (0, 1, 2, 3, 4, 9, 10)
_BORDER = 2  # fill pixels around a warped image: the reach of a bicubic filter
#: MXNet's tries of its random-resized crop before the whole image is taken
RRC_TRIES = 10
#: uniforms a random-resized crop takes per sample: five a try
RRC_DRAWS = 5 * RRC_TRIES


def pick_interp(method: int, rng: np.random.Generator) -> Interp:
    """MXNet's ``GetInterMethod``: the code itself, 9 "auto" (cubic to
    enlarge both sides, area to shrink both, else bilinear) or 10 a random
    one of 0-4 for each resampling step."""

    def choose(old: tuple[int, int], new: tuple[int, int]) -> Image.Resampling:
        if method == 9:
            if new[0] > old[0] and new[1] > old[1]:
                return INTERPOLATION[2]
            if new[0] < old[0] and new[1] < old[1]:
                return INTERPOLATION[3]
            return INTERPOLATION[1]
        if method == 10:
            return INTERPOLATION[int(rng.integers(0, 5))]
        return INTERPOLATION[method]

    return choose


def resized(width: int, height: int, resize: int) -> tuple[int, int]:
    """The ``resize`` step (:func:`~im2rec.imaging.codec.short_side`)."""
    return short_side(SCALARS, width, height, resize)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class CropRule:
    """The options of the last geometric step (the crop to the output)."""

    out_w: int
    out_h: int
    rand_crop: bool
    random_resized_crop: bool
    area: tuple[float, float]
    ratio: tuple[float, float]  # the aspect-ratio range, already resolved
    crop_size: tuple[int, int] | None  # (min, max) side of a random square, or None

    def uses_area(self) -> bool:
        """MXNet runs its random-resized crop only when an area or aspect
        bound differs from 1 (``random_resized_crop=True`` alone is a no-op)."""
        return self.random_resized_crop and (self.area != (1.0, 1.0) or self.ratio != (1.0, 1.0))


def final_crop(
    width: int,
    height: int,
    rule: CropRule,
    rng: np.random.Generator,
    too_small: Callable[[int, int], Exception],
) -> tuple[Box, tuple[int, int], bool]:
    """The last geometric step on a ``width`` x ``height`` image: ``(box,
    size, True)`` when a region ``box`` is cropped and resized to the output
    ``size`` (the random-resized crop, or a random crop size); else ``(whole
    image, size, False)``: the image is enlarged to ``size`` if it is smaller
    than the output, and the output window is cut from it (see
    :func:`centre_window`). MXNet falls back to that after ten failed tries
    of its random-resized crop."""
    out_w, out_h = rule.out_w, rule.out_h
    if rule.uses_area():
        draws = rng.random(RRC_DRAWS).tolist()
        (x0, y0, x1, y1), found = random_resized(SCALARS, width, height, rule, draws)
        if found:
            return (x0, y0, x1, y1), (out_w, out_h), True
    elif rule.crop_size is not None:
        if width < rule.crop_size[1] or height < rule.crop_size[1]:
            raise too_small(width, height)
        side = int(rng.integers(rule.crop_size[0], rule.crop_size[1] + 1))
        y, x = height - side, width - side
        if rule.rand_crop:
            y, x = int(rng.integers(0, y + 1)), int(rng.integers(0, x + 1))
        else:
            y, x = y // 2, x // 2
        return (x, y, x + side, y + side), (out_w, out_h), True
    return (0, 0, width, height), enlarged(width, height, out_w, out_h), False


def random_resized(
    ops: Any, width: Any, height: Any, rule: CropRule, draws: Any
) -> tuple[tuple[Any, Any, Any, Any], Any]:
    """MXNet's random-resized crop of a ``width`` x ``height`` image from
    ``draws`` (:data:`RRC_DRAWS` uniforms in [0, 1), five a try; over
    ``ops``, numbers or columns, see :mod:`~im2rec.imaging.columns`): the
    first of the tries (:func:`_try`) whose box fits. Returns the box
    (whole numbers; zeros where no try fits) and whether one did."""
    return ops.first_fit(functools.partial(_try, ops, rule), width, height, draws, RRC_TRIES)  # type: ignore[no-any-return]


def _try(
    ops: Any, rule: CropRule, width: Any, height: Any, u_area: Any, u_aspect: Any, coin: Any,
    uy: Any, ux: Any,
) -> tuple[Any, Any, Any, Any, Any]:  # fmt: skip
    """One try of the random-resized crop from its five uniforms: an area
    fraction and an aspect uniform in the rule's ranges, the sides
    ``round(sqrt(area / aspect))`` high and ``round(sqrt(area * aspect))``
    wide, swapped when the coin is above 0.5, and a position uniform over
    the places the box fits (a draw's floor, kept below the count where
    ``u * n`` rounds up). Returns ``(x, y, w, h, fits)``."""
    (a0, a1), (r0, r1) = rule.area, rule.ratio
    target = width * height * (a0 + (a1 - a0) * u_area)
    aspect = r0 + (r1 - r0) * u_aspect
    h = ops.floor(ops.sqrt(target / aspect) + 0.5)  # C's std::round of a positive
    w = ops.floor(ops.sqrt(target * aspect) + 0.5)
    swap = coin > 0.5
    w, h = ops.where(swap, h, w), ops.where(swap, w, h)
    fits = ops.every(h > 0, h <= height, w > 0, w <= width)
    y = ops.minimum(ops.floor(uy * (height - h + 1)), height - h)
    x = ops.minimum(ops.floor(ux * (width - w + 1)), width - w)
    return x, y, w, h, fits


def planned_box(
    ops: Any, width: Any, height: Any, resize: int, rule: CropRule, draws: Any
) -> tuple[tuple[Any, Any, Any, Any], tuple[Any, Any]]:
    """The random-resized crop planned on a stored image, before decoding
    (over ``ops``): the image resized (:func:`resized`), cropped by
    :func:`random_resized` from its draws, or where no try fits enlarged
    to the output (:func:`enlarged`) with the centre window taken, and the
    box scaled back to the stored image. Returns the box in stored pixels
    and the size the resampling starts from on the resized image (the
    crop's, or the whole image's where no try fits: what :data:`Interp` is
    asked about)."""
    vw, vh = short_side(ops, width, height, resize)
    (x0, y0, x1, y1), found = random_resized(ops, vw, vh, rule, draws)
    sides = (ops.where(found, x1 - x0, vw), ops.where(found, y1 - y0, vh))
    window = functools.partial(_window, out_w=rule.out_w, out_h=rule.out_h)
    x0, y0, x1, y1 = ops.fill(ops.negate(found), (x0, y0, x1, y1), window, vw, vh)
    sx, sy = vw / width, vh / height
    return (x0 / sx, y0 / sy, x1 / sx, y1 / sy), sides


def planned_boxes(
    width: np.ndarray, height: np.ndarray, resize: int, rule: CropRule, draws: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`planned_box` for a batch: ``draws`` ``(n, RRC_DRAWS)``; the
    boxes ``(n, 4)`` (float64) and the sides ``(n, 2)``."""
    width = np.asarray(width, np.int64)
    height = np.asarray(height, np.int64)
    box, sides = planned_box(ARRAYS, width, height, resize, rule, np.asarray(draws, np.float64))
    return np.stack(box, axis=1).astype(np.float64), np.stack(sides, axis=1).astype(np.int64)


def _window(vw: int, vh: int, out_w: int, out_h: int) -> tuple[float, float, float, float]:
    """The output's centre window of an image enlarged to hold it, in the
    image's coordinates (the random-resized crop's fallback)."""
    size = enlarged(vw, vh, out_w, out_h)
    x, y = (size[0] - out_w) // 2, (size[1] - out_h) // 2
    ex, ey = size[0] / vw, size[1] / vh
    return x / ex, y / ey, (x + out_w) / ex, (y + out_h) / ey


def enlarged(width: int, height: int, out_w: int, out_h: int) -> tuple[int, int]:
    """MXNet's enlargement of an image smaller than the output, one side at
    a time, in float32 arithmetic truncated as C++ does."""
    f32 = np.float32
    if height < out_h:
        width, height = int(f32(out_h) / f32(height) * f32(width)), out_h
    if width < out_w:
        width, height = out_w, int(f32(out_w) / f32(width) * f32(height))
    return width, height


def centre_window(
    width: int, height: int, rule: CropRule, rng: np.random.Generator
) -> tuple[int, int]:
    """Top-left corner of the output-size window cut from a ``width`` x
    ``height`` image: centred, or uniformly random with ``rand_crop``."""
    y, x = height - rule.out_h, width - rule.out_w
    if rule.rand_crop:
        return int(rng.integers(0, x + 1)), int(rng.integers(0, y + 1))
    return x // 2, y // 2


@dataclass(frozen=True)
class Affine:
    """MXNet's affine step: its options, and whether it runs at all."""

    max_rotate_angle: int
    rotate: int
    rotate_list: tuple[int, ...]
    max_shear_ratio: float
    scale: tuple[float, float]  # (min_random_scale, max_random_scale)
    ratio: tuple[float, float]  # aspect range; not drawn with random_resized_crop
    img_size: tuple[float, float]  # (min_img_size, max_img_size)
    random_resized_crop: bool

    def active(self) -> bool:
        return bool(
            self.max_rotate_angle > 0
            or self.max_shear_ratio > 0
            or self.rotate > 0
            or self.rotate_list
            or self.scale != (1.0, 1.0)
            or (not self.random_resized_crop and self.ratio != (1.0, 1.0))
            or self.img_size != (0.0, 1e10)
        )


def affine_warp(
    im: Image.Image, aff: Affine, fill: tuple[int, ...], interp: Interp, rng: np.random.Generator
) -> Image.Image:
    """Rotate, shear and scale ``im`` about its centre into a canvas of
    ``scale * size`` bounded by the image-size limits, filling the corners
    with ``fill``: the matrix of MXNet's ``warpAffine`` call, applied with
    Pillow (which samples the inverse map at pixel centres as OpenCV does,
    once the half-pixel offset is accounted for)."""
    shear = rng.random() * aff.max_shear_ratio * 2 - aff.max_shear_ratio
    angle = int(rng.integers(-aff.max_rotate_angle, aff.max_rotate_angle + 1))
    if aff.rotate > 0:
        angle = aff.rotate
    if aff.rotate_list:
        angle = aff.rotate_list[int(rng.integers(0, len(aff.rotate_list)))]
    a, b = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    scale = ratio = 1.0
    if not aff.random_resized_crop:
        scale = rng.random() * (aff.scale[1] - aff.scale[0]) + aff.scale[0]
        ratio = rng.random() * (aff.ratio[1] - aff.ratio[0]) + aff.ratio[0]
    hs = 2 * scale / (1 + ratio)
    ws = ratio * hs
    cols, rows = im.size
    low, high = aff.img_size
    new_w = max(low, min(high, scale * cols))
    new_h = max(low, min(high, scale * rows))
    m00, m01 = hs * a - shear * b * ws, hs * b + shear * a * ws
    m10, m11 = -b * ws, a * ws
    m02 = (new_w - (m00 * cols + m01 * rows)) / 2
    m12 = (new_h - (m10 * cols + m11 * rows)) / 2
    size = (max(1, int(new_w)), max(1, int(new_h)))
    det = m00 * m11 - m01 * m10
    if abs(det) < 1e-12:  # a shear that folds the image flat: all fill
        return Image.new(im.mode, size, fill if len(fill) > 1 else fill[0])
    # Inverse map (output -> input), shifted for Pillow's half-pixel centres.
    i00, i01, i10, i11 = m11 / det, -m01 / det, -m10 / det, m00 / det
    i02 = -(i00 * m02 + i01 * m12)
    i12 = -(i10 * m02 + i11 * m12)
    i02 += 0.5 - 0.5 * (i00 + i01) + _BORDER
    i12 += 0.5 - 0.5 * (i10 + i11) + _BORDER
    # OpenCV samples with 1/32-pixel fixed-point weights: values within float
    # noise of a whole number (cos 90 degrees) are that number there.
    coeffs = tuple(round(v) if abs(v - round(v)) < 1e-9 else v
                   for v in (i00, i01, i02, i10, i11, i12))  # fmt: skip
    method = interp((cols, rows), size)
    # Pillow's transform has no box or Lanczos filter: OpenCV's warpAffine
    # treats area as bilinear, and Lanczos comes closest to bicubic.
    method = {
        Image.Resampling.BOX: Image.Resampling.BILINEAR,
        Image.Resampling.LANCZOS: Image.Resampling.BICUBIC,
    }.get(method, method)
    # OpenCV's constant border blends edge pixels with the fill; Pillow clamps
    # at the edge. Framing the image in fill first makes Pillow blend alike.
    framed = pad(im, _BORDER, fill)
    return framed.transform(
        size,
        Image.Transform.AFFINE,
        coeffs,
        method,
        fillcolor=fill if len(fill) > 1 else fill[0],
    )


def pad(im: Image.Image, width: int, fill: tuple[int, ...]) -> Image.Image:
    """``width`` pixels of ``fill`` on every side (``copyMakeBorder``)."""
    canvas = Image.new(im.mode, (im.width + 2 * width, im.height + 2 * width),
                       fill if len(fill) > 1 else fill[0])  # fmt: skip
    canvas.paste(im, (width, width))
    return canvas

"""Decoding only what a crop keeps: the fast path of
:func:`~im2rec.imaging.regions.decode_region` for JPEGs.

A random-resized crop keeps about half of an image on average. libjpeg-turbo
can leave out the rows below the crop, the inverse DCT and colour conversion
of the columns beside it and of the rows above it (``jpeg_crop_scanline``,
``jpeg_skip_scanlines``), and decode at 1/2, 1/4 or 1/8 scale. Pillow
exposes only the scale (``draft``), so the rest is reached through a small C
extension, :mod:`im2rec.imaging._jpeg`.

The contract: the output is Pillow's, for the same image, crop and
resampling: identical for a plain cut and for the step filters (nearest,
box), within one level for the others. The region's pixels are exactly
those of a full decode at the same DCT scale (the scale is picked by
Pillow's own ``draft`` rule), and the region includes every pixel the
resampling filter reaches. What is left is the float rounding of Pillow's
filter positions measured from the region's corner instead of the image's:
at most one level, on about one value in a thousand (tested). The step
filters, for which such a rounding picks another pixel, are given the
image's own coordinates on a canvas of its size instead.

Where the fast path does not apply, :func:`region` returns None and the
caller decodes with Pillow: no extension (no compiler at install time, or
``IM2REC_NATIVE_JPEG=0``), output "as stored" (``color`` -1), CMYK and
YCCK images, EXIF orientations other than 1, and data that does not end in
an EOI marker. The last keeps damaged files failing the same way on both
paths: a region decode stops at the crop's last row and would not see a
file cut short below it; Pillow reads to the end and says it is truncated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from PIL import Image

from .. import native
from ..errors import ImageCodecError
from .codec import Crop, Plan, check_pixels, opencv_mode, pixel_limit, resize
from .columns import ARRAYS, SCALARS

# (None: built without a compiler or libjpeg headers, or switched off: Pillow decodes)
_native: Any = native.load("jpeg")

__all__ = [
    "Regions",
    "Window",
    "dct_scale",
    "enabled",
    "libjpeg_turbo_version",
    "region",
    "regions",
    "window",
]

_JCS_GRAYSCALE, _JCS_RGB, _JCS_YCBCR = 1, 2, 3
#: how far each of Pillow's filters reaches from a sample, in source pixels
#: when enlarging (it widens by the reduction when shrinking)
_SUPPORT = {
    Image.Resampling.NEAREST: 0.5, Image.Resampling.BOX: 0.5, Image.Resampling.BILINEAR: 1.0,
    Image.Resampling.HAMMING: 1.0, Image.Resampling.BICUBIC: 2.0, Image.Resampling.LANCZOS: 3.0,
}  # fmt: skip
_STEP = (Image.Resampling.NEAREST, Image.Resampling.BOX)


def enabled() -> bool:
    """Whether the region decoder is built and not switched off
    (``IM2REC_NATIVE_JPEG=0``)."""
    return _native is not None and native.jpeg_regions_on()


def libjpeg_turbo_version() -> str | None:
    """The libjpeg-turbo the extension was built against (``2.1.5``), or None."""
    return native.jpeg_turbo_version(_native)


@dataclass(frozen=True)
class Window:
    """The decoded part of a JPEG that a crop-and-resize needs, with the
    geometry that takes it to the output."""

    pixels: bytes
    mode: str  # "L", "RGB" or "RGBX" (a pad byte after each RGB pixel)
    x: int  # where the window lies in the image at the DCT scale
    y: int
    width: int
    height: int
    scaled: tuple[int, int]  # the whole image's size at the DCT scale
    box: tuple[float, float, float, float]  # the crop, in those coordinates
    size: tuple[int, int]  # the output size
    method: Image.Resampling
    cut: int | None  # a plain cut: the crop's first column in the window

    def image(self) -> Image.Image:
        """The window as an image (sharing the pixels, not copying them)."""
        raw = "RGBX" if self.mode == "RGBX" else self.mode
        return Image.frombuffer(self.mode, (self.width, self.height), self.pixels, "raw", raw, 0, 1)

    def finish(self, im: Image.Image) -> Image.Image:
        """``im`` (this window's pixels, in any mode) cropped and resampled
        to the output, as Pillow would from the whole image."""
        if self.cut is not None:
            return im.crop((self.cut, 0, self.cut + self.size[0], self.size[1]))
        box = self.box
        if self.method in _STEP:
            # A step filter turns a last-bit difference in a sample's position
            # into another source pixel: give Pillow the very coordinates it
            # gets on its own path, on a canvas of the whole (scaled) image.
            canvas = Image.new(im.mode, self.scaled)
            canvas.paste(im, (self.x, self.y))
            return resize(canvas, self.size, self.method, box)
        shifted = (box[0] - self.x, box[1] - self.y, box[2] - self.x, box[3] - self.y)
        return resize(im, self.size, self.method, shifted)


def region(
    data: bytes | memoryview, color: int, plan: Plan
) -> tuple[Image.Image | None, Crop] | None:
    """:func:`~im2rec.imaging.regions.decode_region` of a JPEG by region
    decoding, or None when the fast path does not apply (see the module
    doc) and ``plan`` has not been called."""
    got = window(data, color, plan)
    if got is None:
        return None
    crop, win = got
    return (None if win is None else win.finish(opencv_mode(win.image(), color))), crop


def window(
    data: bytes | memoryview, color: int, plan: Plan, rgbx: bool = False
) -> tuple[Crop, Window | None] | None:
    """Decode the part of a JPEG that ``plan``'s crop and its resampling
    need, at the smallest DCT scale that keeps the output size (``color``
    as :func:`~im2rec.imaging.regions.decode_region`; ``rgbx`` gives colour
    pixels four bytes, which Pillow and numpy take without a copy): the
    plan's crop and the window (None where the crop shows nothing). None,
    with ``plan`` not called, where the fast path does not apply."""
    if color == -1 or not enabled() or bytes(data[-2:]) != b"\xff\xd9":
        return None
    try:
        width, height, _, space, orientation = _native.header(data)
    except ValueError:
        return None  # Pillow's to read, or to say what is wrong
    if space not in (_JCS_GRAYSCALE, _JCS_RGB, _JCS_YCBCR) or orientation not in (0, 1):
        return None
    check_pixels((width, height), "an image")
    crop = plan(width, height)
    box, size, method = crop.box, crop.size, crop.method
    if size is None:
        return crop, None
    check_pixels(size, "the resized image", output=True)
    scale, (left, top, right, bottom), fbox, exact = region_rule(
        SCALARS, width, height, *box, size, method
    )
    left, top, right, bottom = int(left), int(top), int(right), int(bottom)
    sw, sh = -(-width // scale), -(-height // scale)
    try:
        got = _native.decode(data, scale, left, top, right, bottom, color == 0, pixel_limit(), rgbx)
    except ValueError as exc:
        raise ImageCodecError(f"cannot decode image: {exc}") from exc
    if got is None:
        raise ImageCodecError("cannot decode image: an unsupported colour space")
    pixels, x, y, w, h = got
    bpp = len(pixels) // (w * h)
    mode = {1: "L", 3: "RGB", 4: "RGBX"}[bpp]
    return crop, Window(
        pixels, mode, x, y, w, h, (sw, sh), fbox, size, method, left - x if exact else None
    )


class Regions(NamedTuple):
    """What decoding and resampling a batch of crops need (one row each)."""

    scale: np.ndarray  # the DCT scale denominator (int64: 1, 2, 4 or 8)
    bounds: np.ndarray  # (n, 4) int64: left, top, right, bottom of the region at that scale
    fbox: np.ndarray  # (n, 4) float64: the crop's box at that scale
    exact: np.ndarray  # bool: a plain cut (no resampling), the region the box itself


def regions(
    width: np.ndarray,
    height: np.ndarray,
    boxes: np.ndarray,
    size: tuple[int, int],
    method: Image.Resampling,
) -> Regions:
    """:func:`region_rule` for a batch: ``boxes`` ``(n, 4)`` in stored
    pixels of ``width`` x ``height`` images (what the C decoder's batch is
    given, im2rec/imaging/_crop.h)."""
    width = np.asarray(width, np.int64)
    height = np.asarray(height, np.int64)
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x0, y0, x1, y1 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
        got = region_rule(ARRAYS, width, height, x0, y0, x1, y1, size, method)
    scale, bounds, fbox, exact = got
    return Regions(
        np.asarray(scale, np.int64), np.stack(bounds, axis=1).astype(np.int64),
        np.stack(fbox, axis=1), np.asarray(exact, bool),
    )  # fmt: skip


def dct_scale(
    ops: Any, width: Any, height: Any, crop_w: Any, crop_h: Any, size: tuple[int, int]
) -> Any:
    """The one DCT-scale rule: the largest of 1, 2, 4 and 8 at which a
    ``width`` x ``height`` JPEG still holds a ``crop_w`` x ``crop_h`` crop
    at ``size`` or more (Pillow's ``draft`` rule), and 1 when the crop is
    under twice the output; over ``ops`` (:mod:`~im2rec.imaging.columns`:
    Python numbers for one image, numpy columns for a batch)."""
    small = ops.either(size[0] * 2 > crop_w, size[1] * 2 > crop_h)
    need_w = ops.count(ops.ceil(width * size[0] / ops.maximum(crop_w, _TINY)))
    need_h = ops.count(ops.ceil(height * size[1] / ops.maximum(crop_h, _TINY)))
    fits = ops.minimum(width // need_w, height // need_h)
    scale = ops.where(fits >= 8, 8, ops.where(fits >= 4, 4, ops.where(fits >= 2, 2, 1)))
    return ops.where(small, 1, scale)


def region_rule(
    ops: Any, width: Any, height: Any, x0: Any, y0: Any, x1: Any, y1: Any,
    size: tuple[int, int], method: Image.Resampling,
) -> tuple[Any, Any, Any, Any]:  # fmt: skip
    """The one rule for where a crop ``(x0, y0, x1, y1)`` of a ``width`` x
    ``height`` JPEG resampled to ``size`` with ``method`` is decoded, written
    once over ``ops`` (:mod:`~im2rec.imaging.columns`: Python numbers for
    one sample, numpy columns for a batch): the scale :func:`dct_scale` picks,
    the box at that scale (scaled by the ratio of sizes, as Pillow's
    ``_crop_resize`` after a draft, whose sizes round up), and the region:
    the box itself for a plain cut (scale 1, a whole-pixel box of the
    output size), else the box widened by the reach of the filter and kept
    in the image. Returns ``(scale, (left, top, right, bottom), (box at the
    scale), plain cut)``."""
    scale = dct_scale(ops, width, height, x1 - x0, y1 - y0, size)
    sw, sh = -(-width // scale), -(-height // scale)
    fx, fy = sw / width, sh / height
    f0, f1, f2, f3 = x0 * fx, y0 * fy, x1 * fx, y1 * fy
    c0, c1, c2, c3 = ops.trunc(x0), ops.trunc(y0), ops.trunc(x1), ops.trunc(y1)
    exact = ops.every(
        scale == 1, c0 == x0, c1 == y0, c2 == x1, c3 == y1, c2 - c0 == size[0],
        c3 - c1 == size[1],
    )  # fmt: skip
    reach = _SUPPORT.get(method, 3.0)
    mx = ops.ceil(reach * ops.maximum(1.0, (f2 - f0) / size[0])) + 1
    my = ops.ceil(reach * ops.maximum(1.0, (f3 - f1) / size[1])) + 1
    bounds = (
        ops.where(exact, c0, ops.maximum(0, ops.floor(f0) - mx)),
        ops.where(exact, c1, ops.maximum(0, ops.floor(f1) - my)),
        ops.where(exact, c2, ops.minimum(sw, ops.ceil(f2) + mx)),
        ops.where(exact, c3, ops.minimum(sh, ops.ceil(f3) + my)),
    )
    return scale, bounds, (f0, f1, f2, f3), exact


#: a crop side below this is under twice any output (the scale is 1 then)
_TINY = 1e-9

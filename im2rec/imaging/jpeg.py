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

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image

from .. import native
from ..errors import ImageCodecError
from .codec import Box, Plan, check_pixels, opencv_mode, pixel_limit, resize

# (None: built without a compiler or libjpeg headers, or switched off: Pillow decodes)
_native: Any = native.load("jpeg")

__all__ = ["Window", "enabled", "libjpeg_turbo_version", "region", "window"]

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
    data: bytes | memoryview,
    color: int,
    plan: Plan,
    resample: Image.Resampling | Callable[[], Image.Resampling],
) -> Image.Image | None:
    """:func:`~im2rec.imaging.regions.decode_region` of a JPEG by region decoding,
    or None when the fast path does not apply (see the module doc) and
    ``plan`` has not been called."""
    got = window(data, color, plan, resample)
    if got is None:
        return None
    return got.finish(opencv_mode(got.image(), color))


def window(
    data: bytes | memoryview,
    color: int,
    plan: Plan,
    resample: Image.Resampling | Callable[[], Image.Resampling],
    rgbx: bool = False,
) -> Window | None:
    """Decode the part of a JPEG that ``plan``'s crop and its resampling
    need, at the smallest DCT scale that keeps the output size (``color``
    as :func:`~im2rec.imaging.regions.decode_region`; ``rgbx`` gives colour pixels
    four bytes, which Pillow and numpy take without a copy). None, with
    ``plan`` not called, where the fast path does not apply."""
    if color == -1 or not enabled() or bytes(data[-2:]) != b"\xff\xd9":
        return None
    try:
        width, height, _, space, orientation = _native.header(data)
    except ValueError:
        return None  # Pillow's to read, or to say what is wrong
    if space not in (_JCS_GRAYSCALE, _JCS_RGB, _JCS_YCBCR) or orientation not in (0, 1):
        return None
    check_pixels((width, height), "an image")
    box, size = plan(width, height)
    check_pixels(size, "the resized image", output=True)
    method = resample() if callable(resample) else resample
    scale = _draft_scale((width, height), box, size)
    # Pillow's geometry at this scale: its size rounds up, and the box is
    # scaled by the ratio of sizes (as _crop_resize does after a draft).
    sw, sh = -(-width // scale), -(-height // scale)
    fx, fy = sw / width, sh / height
    fbox = (box[0] * fx, box[1] * fy, box[2] * fx, box[3] * fy)
    cut = tuple(map(int, box))
    exact = scale == 1 and cut == box and size == (cut[2] - cut[0], cut[3] - cut[1])
    if exact:  # a plain cut: no filter reaches beyond the box
        left, top, right, bottom = cut
    else:
        reach = _SUPPORT.get(method, 3.0)
        mx = math.ceil(reach * max(1.0, (fbox[2] - fbox[0]) / size[0])) + 1
        my = math.ceil(reach * max(1.0, (fbox[3] - fbox[1]) / size[1])) + 1
        left, top = max(0, math.floor(fbox[0]) - mx), max(0, math.floor(fbox[1]) - my)
        right, bottom = min(sw, math.ceil(fbox[2]) + mx), min(sh, math.ceil(fbox[3]) + my)
    try:
        got = _native.decode(data, scale, left, top, right, bottom, color == 0, pixel_limit(), rgbx)
    except ValueError as exc:
        raise ImageCodecError(f"cannot decode image: {exc}") from exc
    if got is None:
        raise ImageCodecError("cannot decode image: an unsupported colour space")
    pixels, x, y, w, h = got
    bpp = len(pixels) // (w * h)
    mode = {1: "L", 3: "RGB", 4: "RGBX"}[bpp]
    return Window(
        pixels, mode, x, y, w, h, (sw, sh), fbox, size, method, left - x if exact else None
    )


def _draft_scale(full: tuple[int, int], box: Box, size: tuple[int, int]) -> int:
    """The DCT scale denominator Pillow's ``draft`` picks for this crop
    (see ``imaging._draft``): the smallest image still holding the crop at
    the output size or more."""
    crop_w, crop_h = box[2] - box[0], box[3] - box[1]
    if size[0] * 2 > crop_w or size[1] * 2 > crop_h:
        return 1
    need = (math.ceil(full[0] * size[0] / crop_w), math.ceil(full[1] * size[1] / crop_h))
    fits = min(full[0] // need[0], full[1] // need[1])
    return next((s for s in (8, 4, 2, 1) if fits >= s), 1)

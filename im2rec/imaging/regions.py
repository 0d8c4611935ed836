"""Decoding an image to the region a crop keeps, and im2rec.py's
re-encoding: the one entry point (:func:`decode_region`) that takes the
JPEG region decoder (:mod:`.jpeg`) when it can, and Pillow with a DCT draft
otherwise. Above both :mod:`im2rec.imaging.codec` (Pillow with OpenCV's
conventions) and :mod:`.jpeg`, which both sit below it."""

from __future__ import annotations

from PIL import Image, UnidentifiedImageError

from ..errors import Im2RecError, ImageCodecError
from .codec import (
    DECODE_ERRORS,
    Box,
    Crop,
    Plan,
    Upright,
    check_iscolor,
    check_pixels,
    failure_text,
    im2rec_geometry,
    opencv_mode,
    pillow_format,
    resize,
    save_pil,
)
from .columns import SCALARS
from .jpeg import dct_scale, region

__all__ = ["decode_planned", "decode_region", "transcode"]


def transcode(
    data: bytes,
    *,
    color: int = 1,
    resize: int = 0,
    center_crop: bool = False,
    img_fmt: str = ".jpg",
    quality: int = 95,
) -> bytes:
    """Decode image bytes and re-encode them the way im2rec.py does
    (``cv2.imread(path, color)``, centre crop, resize, ``cv2.imencode``).

    EXIF orientation is applied for ``color`` 1 and 0 (OpenCV's imread does),
    before cropping. A JPEG that shrinks at least 2x is decoded at a reduced
    scale in the DCT domain (``draft``), which is several times faster and
    indistinguishable after the bilinear resize. Raises
    :class:`ImageCodecError` for data that is not a readable image.
    """
    check_iscolor(color)
    fmt = pillow_format(img_fmt)

    def plan(width: int, height: int) -> Crop:
        return Crop(*im2rec_geometry(width, height, resize, center_crop))

    im = decode_region(data, color, plan)
    if fmt == "JPEG" and im.mode in ("RGBA", "I;16"):
        im = im.convert("RGB") if im.mode == "RGBA" else opencv_mode(im, 0)  # no alpha, 8 bits
    return save_pil(im, fmt, quality)


def decode_region(data: bytes | memoryview, color: int, plan: Plan) -> Image.Image:
    """:func:`decode_planned` for a plan whose crop always shows the image."""
    im, _ = decode_planned(data, color, plan)
    if im is None:
        raise ImageCodecError("the plan's crop shows none of the image")
    return im


def decode_planned(
    data: bytes | memoryview, color: int, plan: Plan
) -> tuple[Image.Image | None, Crop]:
    """Decode image bytes to the region ``plan`` picks, resampled as it
    says; the image (None when the plan's crop shows none of it: then
    only the header is read) and the plan's :class:`Crop`.

    ``color`` is OpenCV's imread flag (1 RGB, 0 gray, -1 as stored).
    ``plan`` sees the size after EXIF orientation (applied for ``color`` 1
    and 0, as OpenCV does). A JPEG whose region shrinks at least 2x is
    decoded at a reduced DCT scale (``draft``): several times faster and
    indistinguishable after the resize. A region that is the output size
    is cut out without resampling. Raises :class:`ImageCodecError` for data
    that is not a readable image.
    """
    if data[:3] == b"\xff\xd8\xff":
        fast = region(data, color, plan)  # only the part the plan keeps
        if fast is not None:
            return fast
    try:
        source = Upright(data, color)  # (not closed: the result may be its image)
        width, height = source.size
        crop = plan(width, height)
        box, size = crop.box, crop.size
        if size is None:
            return None, crop
        check_pixels(size, "the resized image", output=True)
        crop_w, crop_h = box[2] - box[0], box[3] - box[1]
        source.draft("L" if color == 0 else None,
                     dct_scale(SCALARS, width, height, crop_w, crop_h, size))  # fmt: skip
        im = source.load()
        full = (width, height)
        return _crop_resize(opencv_mode(im, color), full, box, size, crop.method), crop
    except Im2RecError:  # ours (a bomb, or the plan refusing the image): as they are
        raise
    except UnidentifiedImageError as exc:
        raise ImageCodecError("not an image format Pillow can read") from exc
    except DECODE_ERRORS as exc:
        raise ImageCodecError(f"cannot decode image: {failure_text(exc)}") from exc


def _crop_resize(
    im: Image.Image,
    full: tuple[int, int],
    box: Box,
    size: tuple[int, int],
    resample: Image.Resampling = Image.Resampling.BILINEAR,
) -> Image.Image:
    # The image may be smaller than `full` after a draft decode: scale the box.
    sx, sy = im.width / full[0], im.height / full[1]
    scaled = (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)
    if scaled == (0, 0, im.width, im.height) and size == im.size:
        return im
    if size == (box[2] - box[0], box[3] - box[1]) and (sx, sy) == (1.0, 1.0):
        return im.crop(box)
    return resize(im, size, resample, scaled)

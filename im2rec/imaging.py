"""Pillow(-SIMD) image coding with OpenCV's conventions (spec §2.4).

MXNet's ``pack_img``/``unpack_img`` called ``cv2.imencode``/``cv2.imdecode``:
arrays are BGR(A) or 2-D gray, ``iscolor`` is OpenCV's imread flag. This module
reproduces that with Pillow so no OpenCV is needed:

* JPEG: Pillow's defaults (4:2:0, baseline) are what OpenCV writes, so the
  bytes match for the same libjpeg; decoding uses the same IDCT, so pixels
  match; gray decodes take libjpeg's luma plane directly, as OpenCV does.
* PNG: ``quality`` is the zlib level clamped to 0-9 (so the default 95 means
  9, as in OpenCV); the bytes differ from OpenCV's, the pixels do not.
  Colour PNGs decoded as gray use libpng's fixed-point luma, as OpenCV does.
* EXIF orientation is applied for ``iscolor`` 0 and 1, not for -1 (OpenCV).
"""

from __future__ import annotations

import io
from importlib import metadata
from typing import Any

import numpy as np
from PIL import Image, ImageOps, features

from .errors import ImageCodecError

__all__ = ["backend_info", "decode_bgr", "decode_bgr_or_none", "encode_bgr"]

#: What Pillow raises for data that is not a readable image.
DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError)


def backend_info() -> dict[str, Any]:
    """Which imaging backend is active: Pillow-SIMD or Pillow, and libjpeg-turbo."""
    import PIL

    try:
        simd = metadata.version("pillow-simd") == PIL.__version__
    except metadata.PackageNotFoundError:
        simd = False
    turbo = features.check_feature("libjpeg_turbo")
    return {
        "backend": "Pillow-SIMD" if simd else "Pillow",
        "version": PIL.__version__,
        "libjpeg_turbo": features.version_feature("libjpeg_turbo") if turbo else None,
    }


def _pillow_format(img_fmt: str) -> str:
    if not img_fmt.startswith("."):
        raise ImageCodecError(
            f"image format {img_fmt!r} needs a leading dot, e.g. '.{img_fmt}' (as cv2.imencode)"
        )
    Image.init()
    fmt = Image.registered_extensions().get(img_fmt.lower())
    if fmt is None or fmt not in Image.SAVE:
        raise ImageCodecError(f"cannot encode images as {img_fmt!r}; use '.jpg' or '.png'")
    return fmt


def _to_pil(img: np.ndarray, fmt: str) -> Image.Image:
    arr = np.asarray(img)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim == 2:
        if arr.dtype == np.uint16:
            return Image.fromarray(arr)
        return Image.fromarray(_as_uint8(arr))
    if arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise ImageCodecError(
            f"expected an HxW, HxWx3 (BGR) or HxWx4 (BGRA) array, got shape {arr.shape}"
        )
    arr = _as_uint8(arr)
    if arr.shape[2] == 4 and fmt != "JPEG":
        return Image.fromarray(np.ascontiguousarray(arr[:, :, [2, 1, 0, 3]]))
    # JPEG has no alpha: OpenCV drops it, and so do we.
    return Image.fromarray(np.ascontiguousarray(arr[:, :, 2::-1]))


def _as_uint8(arr: np.ndarray) -> np.ndarray:
    if arr.dtype != np.uint8:
        raise ImageCodecError(
            f"expected a uint8 image array, got {arr.dtype}; only 2-D PNGs may be uint16"
        )
    return arr


def encode_bgr(img: np.ndarray, img_fmt: str = ".jpg", quality: int = 95) -> bytes:
    """Encode a BGR/BGRA/gray array as ``cv2.imencode`` would (see module doc)."""
    fmt = _pillow_format(img_fmt)
    pil = _to_pil(img, fmt)
    params: dict[str, Any] = {}
    if fmt == "JPEG":
        params["quality"] = min(max(int(quality), 0), 100)
    elif fmt == "PNG":
        params["compress_level"] = min(max(int(quality), 0), 9)
    out = io.BytesIO()
    try:
        pil.save(out, fmt, **params)
    except (OSError, ValueError, KeyError) as exc:
        raise ImageCodecError(f"cannot encode a {pil.mode} image as {fmt}: {exc}") from exc
    return out.getvalue()


def _libpng_gray(rgb: np.ndarray) -> np.ndarray:
    # libpng's png_set_rgb_to_gray(0.299, 0.587), which OpenCV's PNG reader
    # uses: 15-bit fixed point, truncated.
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((r * 9797 + g * 19234 + b * 3737) >> 15).astype(np.uint8)


def _reduce16(arr: np.ndarray) -> np.ndarray:
    return (arr >> 8).astype(np.uint8) if arr.dtype == np.uint16 else arr


def _check_iscolor(iscolor: int) -> None:
    if iscolor not in (-1, 0, 1):
        raise ImageCodecError(
            f"iscolor must be -1 (unchanged), 0 (gray) or 1 (colour), not {iscolor}"
        )


def decode_bgr(data: bytes | bytearray | memoryview, iscolor: int = -1) -> np.ndarray:
    """Decode image bytes to an array as ``cv2.imdecode(data, iscolor)`` does.

    Raises :class:`ImageCodecError` when the bytes are not a readable image.
    """
    _check_iscolor(iscolor)
    try:
        im = Image.open(io.BytesIO(data))
        if iscolor == 0 and im.format == "JPEG":
            im.draft("L", im.size)  # libjpeg's own luma plane, like OpenCV
        im.load()
        return _convert(im, iscolor)
    except DECODE_ERRORS as exc:
        raise ImageCodecError(f"cannot decode image ({len(data):,} bytes): {exc}") from exc


def decode_bgr_or_none(
    data: bytes | bytearray | memoryview, iscolor: int = -1
) -> np.ndarray | None:
    """:func:`decode_bgr`, but ``None`` for undecodable data (MXNet's behaviour)."""
    _check_iscolor(iscolor)
    try:
        return decode_bgr(data, iscolor)
    except ImageCodecError:
        return None


def _convert(im: Image.Image, iscolor: int) -> np.ndarray:
    if iscolor != -1:
        im = ImageOps.exif_transpose(im)
    mode = im.mode
    if iscolor == -1:
        if mode in ("L", "I;16", "1"):
            return np.asarray(im.convert("L") if mode == "1" else im)
        if mode == "I":
            return np.asarray(im).astype(np.uint16)
        has_alpha = mode in ("RGBA", "LA", "PA") or "transparency" in im.info
        rgb = np.asarray(im.convert("RGBA" if has_alpha else "RGB"))
        return np.ascontiguousarray(rgb[:, :, [2, 1, 0, 3]] if has_alpha else rgb[:, :, ::-1])
    if mode in ("I;16", "I"):
        gray = _reduce16(np.asarray(im).astype(np.uint16))
        return gray if iscolor == 0 else np.repeat(gray[:, :, None], 3, axis=2)
    if iscolor == 0:
        if mode in ("L", "1", "LA"):
            return np.asarray(im.convert("L"))
        return _libpng_gray(np.asarray(im.convert("RGB")))
    return np.ascontiguousarray(np.asarray(im.convert("RGB"))[:, :, ::-1])

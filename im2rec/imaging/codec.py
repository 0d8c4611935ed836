"""Pillow(-SIMD) image coding with OpenCV's conventions (docs/format.md, "Images in records").

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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from PIL import Image, ImageOps, features

from .. import native
from ..errors import ImageCodecError, ImageTooLargeError

if TYPE_CHECKING:  # numpy is imported where arrays are made: transcoding needs none
    import numpy as np

__all__ = [
    "ROTATED",
    "backend_info",
    "decode_bgr",
    "decode_bgr_or_none",
    "encode_bgr",
    "Crop",
    "exif_orientation",
    "short_side",
    "Upright",
    "open_image",
    "opencv_mode",
    "pillow_simd",
    "pixel_limit",
]

#: What Pillow raises for data that is not a readable image: anything. Its
#: plugins raise what their code meets on odd files (OSError, ValueError,
#: SyntaxError, EOFError, struct.error, IndexError, and ImportError where
#: an optional part is missing: a LAB TIFF converted to RGB needs
#: littlecms, which Pillow-SIMD built without it lacks), and an image that
#: cannot be read fails that image, never the run that reads it.
DECODE_ERRORS: tuple[type[Exception], ...] = (Exception,)


def failure_text(exc: BaseException) -> str:
    """Why Pillow could not read or write an image, for a failure report."""
    if isinstance(exc, ImportError):
        return f"this Pillow lacks a part the image needs ({exc}); `rec --version` lists its codecs"
    return str(exc) or type(exc).__name__


_PILLOW_DEFAULT_LIMIT = 89_478_485  # Pillow's MAX_IMAGE_PIXELS: 0x4000 * 0x4000 * 4 // 3


def pixel_limit() -> int:
    """The most pixels an image may have, stored or made: Pillow's
    ``Image.MAX_IMAGE_PIXELS`` (about 89 million, 268 MB as RGB), which a
    program may raise. Setting it to None does not lift this limit."""
    return int(Image.MAX_IMAGE_PIXELS or _PILLOW_DEFAULT_LIMIT)


def check_pixels(size: tuple[int, int], what: str, *, output: bool = False) -> None:
    """Raise :class:`ImageTooLargeError` when ``size`` is over :func:`pixel_limit`."""
    limit = pixel_limit()
    if size[0] * size[1] > limit:
        raise ImageTooLargeError(
            f"{what} of {size[0]:,}x{size[1]:,} pixels is more than the limit of {limit:,} "
            "(PIL.Image.MAX_IMAGE_PIXELS): refused before any memory is taken for it",
            output=output,
        )


def pillow_simd() -> bool:
    """Whether the ``PIL`` imported is Pillow-SIMD's (installed under its own
    name, at the version ``PIL`` reports)."""
    from importlib import metadata

    import PIL

    try:
        return metadata.version("pillow-simd") == PIL.__version__
    except metadata.PackageNotFoundError:
        return False


#: The image codecs and parts Pillow's own wheels carry, by Pillow's
#: feature name, and what a build without each cannot read.
CODECS = {
    "jpg": "JPEG",
    "zlib": "PNG",
    "libtiff": "compressed TIFF",
    "webp": "WebP",
    "avif": "AVIF",
    "jpg_2000": "JPEG 2000",
    "littlecms2": "colour conversion of LAB and ICC-profiled images",
}


def backend_info() -> dict[str, Any]:
    """Which imaging backend is active: Pillow-SIMD or Pillow, its
    libjpeg-turbo, the libjpeg-turbo of im2rec's JPEG region decoder
    (None when it was not built or ``IM2REC_NATIVE_JPEG=0``), and which of
    the :data:`CODECS` Pillow's wheels carry this build lacks (``missing``:
    name -> what it reads; an image that needs one fails alone)."""
    import PIL

    simd = pillow_simd()
    regions = native.load("jpeg") if native.jpeg_regions_on() else None
    turbo = features.check_feature("libjpeg_turbo")
    return {
        "backend": "Pillow-SIMD" if simd else "Pillow",
        "version": PIL.__version__,
        "libjpeg_turbo": features.version_feature("libjpeg_turbo") if turbo else None,
        # the JPEG region decoder (im2rec.imaging), when built and switched on
        "region_decoder": native.jpeg_turbo_version(regions) if regions is not None else None,
        "missing": {name: what for name, what in CODECS.items() if not _has(name)},
    }


def _has(name: str) -> bool:
    """Whether this Pillow has the codec or part ``name``; one it does not
    know at all (AVIF before Pillow 11.2) it has not."""
    known = name in features.modules or name in features.codecs or name in features.features
    return known and bool(features.check(name))


def pillow_format(img_fmt: str) -> str:
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
    import numpy as np

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
    import numpy as np

    if arr.dtype != np.uint8:
        raise ImageCodecError(
            f"expected a uint8 image array, got {arr.dtype}; only 2-D PNGs may be uint16"
        )
    return arr


def encode_bgr(img: np.ndarray, img_fmt: str = ".jpg", quality: int = 95) -> bytes:
    """Encode a BGR/BGRA/gray array as ``cv2.imencode`` would (see module doc)."""
    fmt = pillow_format(img_fmt)
    return save_pil(_to_pil(img, fmt), fmt, quality)


def save_pil(pil: Image.Image, fmt: str, quality: int) -> bytes:
    params: dict[str, Any] = {}
    if fmt == "JPEG":
        params["quality"] = min(max(int(quality), 0), 100)
    elif fmt == "PNG":
        params["compress_level"] = min(max(int(quality), 0), 9)
    out = io.BytesIO()
    try:
        pil.save(out, fmt, **params)
    except DECODE_ERRORS as exc:  # (as for decoding: whatever a plugin raises)
        raise ImageCodecError(
            f"cannot encode a {pil.mode} image as {fmt}: {failure_text(exc)}"
        ) from exc
    return out.getvalue()


def _libpng_gray(rgb: np.ndarray) -> np.ndarray:
    # libpng's png_set_rgb_to_gray(0.299, 0.587), which OpenCV's PNG reader
    # uses: 15-bit fixed point, truncated.
    import numpy as np

    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((r * 9797 + g * 19234 + b * 3737) >> 15).astype(np.uint8)


def _reduce16(arr: np.ndarray) -> np.ndarray:
    import numpy as np

    return (arr >> 8).astype(np.uint8) if arr.dtype == np.uint16 else arr


def check_iscolor(iscolor: int) -> None:
    if iscolor not in (-1, 0, 1):
        raise ImageCodecError(
            f"iscolor must be -1 (unchanged), 0 (gray) or 1 (colour), not {iscolor}"
        )


def decode_bgr(data: bytes | bytearray | memoryview, iscolor: int = -1) -> np.ndarray:
    """Decode image bytes to an array as ``cv2.imdecode(data, iscolor)`` does.

    Raises :class:`ImageCodecError` when the bytes are not a readable image.
    """
    check_iscolor(iscolor)
    try:
        upright = Upright(data, iscolor)
        if iscolor == 0:
            upright.draft("L")  # libjpeg's own luma plane, like OpenCV
        return _to_bgr(opencv_mode(upright.load(), iscolor))
    except ImageCodecError:
        raise
    except DECODE_ERRORS as exc:
        raise ImageCodecError(
            f"cannot decode image ({len(data):,} bytes): {failure_text(exc)}"
        ) from exc


def decode_bgr_or_none(
    data: bytes | bytearray | memoryview, iscolor: int = -1
) -> np.ndarray | None:
    """:func:`decode_bgr`, but ``None`` for undecodable data (MXNet's behaviour)."""
    check_iscolor(iscolor)
    try:
        return decode_bgr(data, iscolor)
    except ImageCodecError:
        return None


def opencv_mode(im: Image.Image, iscolor: int) -> Image.Image:
    """OpenCV's imread modes in Pillow terms: 1 gives RGB, 0 gives L, -1 keeps
    what is stored as L, I;16, RGB or RGBA. 16-bit data is reduced to 8 bits
    by dropping the low byte, as OpenCV does."""
    mode = im.mode
    if mode in ("I;16", "I;16B", "I"):
        import numpy as np  # here, not above: 8-bit images (nearly all) need no numpy

        arr = np.asarray(im).astype(np.uint16)
        if iscolor == -1:
            return Image.fromarray(arr)
        gray = Image.fromarray((arr >> 8).astype(np.uint8))
        return gray if iscolor == 0 else gray.convert("RGB")
    if iscolor == -1:
        if mode in ("L", "1"):
            return _as_mode(im, "L")
        has_alpha = mode in ("RGBA", "LA", "PA") or "transparency" in im.info
        return _as_mode(im, "RGBA" if has_alpha else "RGB")
    if iscolor == 0:
        if mode in ("L", "1", "LA"):
            return _as_mode(im, "L")
        return Image.fromarray(_libpng_gray(_rgb_array(im)))
    return _as_mode(im, "RGB")


def _rgb_array(im: Image.Image) -> np.ndarray:
    import numpy as np

    return np.asarray(im.convert("RGB"))


def _as_mode(im: Image.Image, mode: str) -> Image.Image:
    return im if im.mode == mode else im.convert(mode)


def _to_bgr(im: Image.Image) -> np.ndarray:
    import numpy as np

    arr = np.asarray(im)
    if arr.ndim == 2:
        return arr
    order = [2, 1, 0, 3] if arr.shape[2] == 4 else [2, 1, 0]
    return np.ascontiguousarray(arr[:, :, order])


# -- re-encoding for packing ---------------------------------------------------

Box = tuple[float, float, float, float]  # left, top, right, bottom
ROTATED = frozenset({5, 6, 7, 8})  # EXIF orientations that swap width and height
_ORIENTATION = 0x0112


def exif_orientation(im: Image.Image) -> int:
    """The EXIF orientation (1-8) of an opened image; 1 when there is none
    or it is not a valid value. Every reader that decodes pixels applies it
    for colour and gray output (as OpenCV's ``imread``/``imdecode`` with
    flags 1 and 0, and so MXNet's ``ImageRecordIter``, ``unpack_img`` and
    ``im2rec.py`` do); output "as stored" (-1) and raw bytes keep it."""
    try:
        value = im.getexif().get(_ORIENTATION, 1)
    except DECODE_ERRORS:  # a damaged EXIF block: the pixels may still be fine
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


class Upright:
    """An opened image (header read, no pixels yet) and the EXIF
    orientation it is shown in: the one way every reader decodes an image
    upright. ``color`` is OpenCV's flag: -1 ("as stored") keeps the
    orientation, as OpenCV's ``imread`` does, so the image is upright as
    stored. A context manager (closes the image)."""

    __slots__ = ("image", "orientation")

    def __init__(self, data: bytes | bytearray | memoryview, color: int = 1) -> None:
        self.image = open_image(data)
        self.orientation = exif_orientation(self.image) if color != -1 else 1

    @property
    def size(self) -> tuple[int, int]:
        """The upright (width, height)."""
        width, height = self.image.size
        return (height, width) if self.orientation in ROTATED else (width, height)

    def draft(self, mode: str | None, scale: int = 1) -> None:
        """Decode a JPEG at ``1/scale`` of its size in the DCT domain (1, 2,
        4 or 8: :func:`~im2rec.imaging.jpeg.dct_scale` picks it) and, with
        ``mode`` "L", from libjpeg's own luma plane (as OpenCV reads gray).
        Nothing for other formats."""
        if self.image.format != "JPEG" or (scale == 1 and mode is None):
            return
        width, height = self.image.size
        # (Pillow takes the largest of 1, 2, 4, 8 not above size // request)
        self.image.draft(mode, (max(1, width // scale), max(1, height // scale)))

    def load(self) -> Image.Image:
        """The pixels, upright."""
        self.image.load()
        if self.orientation == 1:
            return self.image
        return ImageOps.exif_transpose(self.image)

    def __enter__(self) -> Upright:
        return self

    def __exit__(self, *exc: object) -> None:
        self.image.close()


def short_side(ops: Any, width: Any, height: Any, resize: int) -> Any:
    """The size after resizing the short side to ``resize`` (im2rec.py's
    ``--resize`` and the iterators' ``resize``): the long side becomes
    ``resize * long // short`` (MXNet's integer arithmetic; it also
    enlarges); ``resize <= 0`` keeps the size. Over ``ops``
    (:mod:`~im2rec.imaging.columns`): numbers for one image, numpy columns
    for a batch."""
    if resize <= 0:
        return width, height
    tall = height > width
    return (
        ops.where(tall, resize, resize * width // ops.maximum(height, 1)),
        ops.where(tall, resize * height // ops.maximum(width, 1), resize),
    )


def im2rec_geometry(
    width: int, height: int, resize: int, center_crop: bool
) -> tuple[Box, tuple[int, int]]:
    """im2rec.py's crop box and output size (docs/format.md, "im2rec.py, Packing"): ``center_crop``
    keeps the centred square of side ``min(w, h)``; then ``resize`` > 0 makes
    the short side ``resize`` and the long side ``long * resize // short``
    (it also enlarges)."""
    box = (0, 0, width, height)
    if center_crop:
        if height > width:
            m = (height - width) // 2
            box = (0, m, width, m + width)
        else:
            m = (width - height) // 2
            box = (m, 0, m + height, height)
    w, h = box[2] - box[0], box[3] - box[1]
    from .columns import SCALARS  # (numpy: already imported by whatever resizes)

    return box, short_side(SCALARS, w, h, resize)


class Crop(NamedTuple):
    """What a plan decides once it knows the upright image's size: the
    region to keep (``box``, in its pixels), the size to resample it to
    (None: none of the image shows, and nothing is decoded), the filter,
    and the planner's own ``note``, handed back with the image."""

    box: Box
    size: tuple[int, int] | None
    method: Image.Resampling = Image.Resampling.BILINEAR
    note: Any = None


#: ``plan(width, height) -> Crop``, asked once the upright size is known.
Plan = Callable[[int, int], Crop]


def open_image(data: bytes | bytearray | memoryview) -> Image.Image:
    """``Image.open`` on in-memory bytes (lazy: only the header is read),
    refusing an image over :func:`pixel_limit` before it is decoded
    (:class:`ImageTooLargeError`). Other damage raises what Pillow raises
    (see ``DECODE_ERRORS``)."""
    # Name the format when the signature gives it away: Pillow then skips
    # probing its other plugins (a measurable share of a small image's time).
    if data[:3] == b"\xff\xd8\xff":
        formats: tuple[str, ...] | None = ("JPEG",)
    elif data[:8] == b"\x89PNG\r\n\x1a\n":
        formats = ("PNG",)
    else:
        formats = None
    try:
        im = Image.open(io.BytesIO(data), formats=formats)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        # The warning arrives as an exception where warnings are errors.
        raise ImageTooLargeError(
            f"an image with more than the limit of {pixel_limit():,} pixels "
            f"(PIL.Image.MAX_IMAGE_PIXELS), a decompression bomb: {exc}"
        ) from exc
    check_pixels(im.size, "an image")
    return im


def resize(
    im: Image.Image,
    size: tuple[int, int],
    resample: Image.Resampling,
    box: Box | None = None,
) -> Image.Image:
    """``im.resize``, except that nearest-neighbour picks OpenCV's pixel
    (``floor(x * scale)``, not Pillow's pixel under the centre: a shift of
    half a source pixel that shows as grain moving between neighbours)."""
    if resample != Image.Resampling.NEAREST:
        return im.resize(size, resample, box=box)
    x0, y0, x1, y1 = box if box is not None else (0, 0, im.width, im.height)
    sx, sy = (x1 - x0) / size[0], (y1 - y0) / size[1]
    # Pillow samples at (x + 0.5) * a + c and takes the pixel that holds it.
    coeffs = (sx, 0.0, x0 - 0.5 * sx + 1e-9, 0.0, sy, y0 - 0.5 * sy + 1e-9)
    return im.transform(size, Image.Transform.AFFINE, coeffs, Image.Resampling.NEAREST)

"""pack_img/unpack_img with Pillow: OpenCV's array conventions (docs/format.md, "Images in records")."""

from __future__ import annotations

import importlib.util
import io

import numpy as np
import pytest
from PIL import Image

from im2rec import native
from im2rec.errors import ImageCodecError
from im2rec.imaging.codec import backend_info, decode_bgr, encode_bgr
from im2rec.recordio import IRHeader, pack, pack_img, unpack_img


def png(im: Image.Image, **params: object) -> bytes:
    out = io.BytesIO()
    im.save(out, "PNG", **params)
    return out.getvalue()


@pytest.fixture
def bgr() -> np.ndarray:
    rng = np.random.default_rng(7)
    return rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)


def test_png_round_trip_is_exact(bgr: np.ndarray) -> None:
    header, img = unpack_img(pack_img((0, 1.0, 2, 0), bgr, img_fmt=".png"))
    assert header == IRHeader(0, 1.0, 2, 0)
    assert img is not None and np.array_equal(img, bgr)


def test_arrays_are_bgr(bgr: np.ndarray) -> None:
    blue = np.zeros((4, 4, 3), np.uint8)
    blue[..., 0] = 255
    _, payload = unpack(pack_img((0, 0, 0, 0), blue, img_fmt=".png"))
    assert Image.open(io.BytesIO(payload)).convert("RGB").getpixel((0, 0)) == (0, 0, 255)


def unpack(s: bytes) -> tuple[IRHeader, bytes]:
    from im2rec.recordio import unpack as _unpack

    return _unpack(s)


def test_png_quality_is_clamped_compression(bgr: np.ndarray) -> None:
    assert encode_bgr(bgr, ".png", 95) == encode_bgr(bgr, ".png", 9)
    assert encode_bgr(bgr, ".png", -5) == encode_bgr(bgr, ".png", 0)


def test_jpeg_quality_is_clamped(bgr: np.ndarray) -> None:
    assert encode_bgr(bgr, ".jpg", 150) == encode_bgr(bgr, ".jpg", 100)
    assert encode_bgr(bgr, ".JPEG", 80) == encode_bgr(bgr, ".jpg", 80)


def test_gray_and_alpha_inputs(bgr: np.ndarray) -> None:
    gray = bgr[..., 0]
    _, img = unpack_img(pack_img((0, 0, 0, 0), gray, img_fmt=".png"))
    assert img is not None and img.ndim == 2 and np.array_equal(img, gray)
    bgra = np.dstack([bgr, np.full(bgr.shape[:2], 128, np.uint8)])
    _, img = unpack_img(pack_img((0, 0, 0, 0), bgra, img_fmt=".png"), -1)
    assert img is not None and np.array_equal(img, bgra)
    _, img = unpack_img(pack_img((0, 0, 0, 0), bgra, img_fmt=".jpg"), -1)
    assert img is not None and img.shape == (20, 30, 3)  # JPEG drops alpha, like OpenCV


def test_iscolor_shapes(bgr: np.ndarray) -> None:
    s = pack_img((0, 0, 0, 0), bgr, img_fmt=".png")
    shapes = {flag: unpack_img(s, flag)[1].shape for flag in (-1, 0, 1)}  # type: ignore[union-attr]
    assert shapes == {-1: (20, 30, 3), 0: (20, 30), 1: (20, 30, 3)}


def test_sixteen_bit_png() -> None:
    arr = (np.arange(12, dtype=np.uint16) * 5000).reshape(3, 4)
    s = pack_img((0, 0, 0, 0), arr, img_fmt=".png")
    assert np.array_equal(unpack_img(s, -1)[1], arr)  # type: ignore[arg-type]
    assert np.array_equal(unpack_img(s, 0)[1], (arr >> 8).astype(np.uint8))  # type: ignore[arg-type]
    assert unpack_img(s, 1)[1].shape == (3, 4, 3)  # type: ignore[union-attr]


def test_palette_with_transparency_keeps_alpha_when_unchanged() -> None:
    im = Image.new("P", (3, 2))
    im.putpalette([255, 0, 0, 0, 255, 0] + [0] * 762)
    im.putpixel((1, 0), 1)
    data = png(im, transparency=0)
    unchanged = decode_bgr(data, -1)
    assert unchanged.shape == (2, 3, 4)
    assert unchanged[0, 0].tolist() == [0, 0, 255, 0] and unchanged[0, 1].tolist() == [
        0,
        255,
        0,
        255,
    ]
    assert decode_bgr(data, 1).shape == (2, 3, 3)


def test_exif_orientation_policy() -> None:
    """OpenCV applies EXIF orientation for iscolor 0/1, not for -1; so do we."""
    im = Image.new("RGB", (40, 20), (200, 10, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise on display
    out = io.BytesIO()
    im.save(out, "JPEG", exif=exif.tobytes())
    data = out.getvalue()
    assert decode_bgr(data, -1).shape == (20, 40, 3)
    assert decode_bgr(data, 1).shape == (40, 20, 3)
    assert decode_bgr(data, 0).shape == (40, 20)


def test_undecodable_payload_gives_none() -> None:
    header, img = unpack_img(pack((0, 3, 1, 0), b"not an image"))
    assert header.label == 3.0 and img is None
    with pytest.raises(ImageCodecError, match=r"cannot decode image \(12 bytes\)"):
        decode_bgr(b"not an image")


def test_truncated_jpeg_gives_none(bgr: np.ndarray) -> None:
    data = encode_bgr(bgr, ".jpg")
    assert unpack_img(pack((0, 0, 0, 0), data[: len(data) // 2]))[1] is None


@pytest.mark.parametrize(
    ("fmt", "message"),
    [("jpg", r"needs a leading dot, e.g. '.jpg'"), (".xyz", r"cannot encode images as '.xyz'")],
)
def test_bad_formats(bgr: np.ndarray, fmt: str, message: str) -> None:
    with pytest.raises(ImageCodecError, match=message):
        pack_img((0, 0, 0, 0), bgr, img_fmt=fmt)


def test_bad_arrays(bgr: np.ndarray) -> None:
    with pytest.raises(ImageCodecError, match=r"got shape \(2, 2, 5\)"):
        encode_bgr(np.zeros((2, 2, 5), np.uint8))
    with pytest.raises(ImageCodecError, match="expected a uint8 image array, got float32"):
        encode_bgr(bgr.astype(np.float32))


def test_bad_iscolor(bgr: np.ndarray) -> None:
    with pytest.raises(ImageCodecError, match="iscolor must be -1"):
        unpack_img(pack_img((0, 0, 0, 0), bgr), 2)


def test_other_pillow_formats(bgr: np.ndarray) -> None:
    _, img = unpack_img(pack_img((0, 0, 0, 0), bgr, img_fmt=".bmp"), 1)
    assert img is not None and np.array_equal(img, bgr)


def test_backend_info() -> None:
    info = backend_info()
    assert info["backend"] in ("Pillow", "Pillow-SIMD")
    assert info["version"] == Image.__version__
    built = importlib.util.find_spec("im2rec.imaging._jpeg") is not None
    built = built and not native.switched_off()
    assert (info["region_decoder"] is not None) == built
    if built:
        assert info["region_decoder"].count(".") == 2  # libjpeg-turbo's x.y.z


@pytest.mark.parametrize(
    ("codec", "fmt", "params"),
    [("webp", "WEBP", {"lossless": True}), ("jpg_2000", "JPEG2000", {"irreversible": False}),
     ("libtiff", "TIFF", {"compression": "tiff_deflate"}), ("avif", "AVIF", {"quality": 100}),
     ("littlecms2", "TIFF", {})],
)  # fmt: skip
def test_the_codecs_said_missing_are_the_ones_that_fail(
    codec: str, fmt: str, params: dict[str, object]
) -> None:
    """``backend_info()["missing"]`` (what ``rec --version`` prints) names
    exactly the codecs whose images this Pillow cannot read: an image that
    needs one decodes where it is not named, and where it is, fails alone
    with ImageCodecError (a LAB TIFF had aborted a whole pack)."""
    from im2rec.errors import ImageCodecError

    missing = backend_info()["missing"]
    image = Image.new("LAB" if codec == "littlecms2" else "RGB", (16, 12), (90, 140, 30))
    out = io.BytesIO()
    try:
        image.save(out, fmt, **params)
    except (OSError, KeyError, ValueError):
        assert codec in missing  # (this Pillow cannot even write it)
        return
    if codec in missing:
        with pytest.raises(ImageCodecError):
            decode_bgr(out.getvalue(), 1)
    else:
        assert decode_bgr(out.getvalue(), 1).shape == (12, 16, 3)


def test_backend_info_without_the_region_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IM2REC_NATIVE_JPEG", "0")
    assert backend_info()["region_decoder"] is None

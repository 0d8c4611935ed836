"""An image's size and JPEG frame read from its header, without decoding:
the same answer as Pillow's for every kind, None (never an exception) for
data that is not an image."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from im2rec.imaging.headers import image_size, jpeg_frame


def encoded(mode: str, size: tuple[int, int], fmt: str, **kw: object) -> bytes:
    out = io.BytesIO()
    Image.new(mode, size, 128).save(out, fmt, **kw)
    return out.getvalue()


@pytest.mark.parametrize(
    ("mode", "fmt", "kw"),
    [
        ("RGB", "JPEG", {}),
        ("RGB", "JPEG", {"progressive": True}),
        ("L", "JPEG", {}),
        ("CMYK", "JPEG", {}),
        ("RGB", "JPEG", {"exif": b"Exif\x00\x00" + bytes(64)}),  # an APP1 segment first
        ("RGB", "PNG", {}),
        ("RGBA", "PNG", {}),
        ("RGB", "BMP", {}),
        ("P", "GIF", {}),
        ("RGB", "TIFF", {}),
    ],
)
@pytest.mark.parametrize("size", [(1, 1), (37, 11), (300, 2000)])
def test_the_size_is_pillows(
    mode: str, fmt: str, kw: dict[str, object], size: tuple[int, int]
) -> None:
    data = encoded(mode, size, fmt, **kw)
    with Image.open(io.BytesIO(data)) as im:
        assert image_size(data) == (im.height, im.width)
    if fmt == "JPEG":
        assert jpeg_frame(data) == (size[1], size[0], {"L": 1, "CMYK": 4}.get(mode, 3))


def test_not_images() -> None:
    jpeg = encoded("RGB", (30, 20), "JPEG")
    sof = jpeg.index(b"\xff\xc0")
    for data in (b"", b"garbage", b"\xff\xd8", jpeg[: sof + 6], b"\x89PNG\r\n\x1a\n"):
        assert image_size(data) is None
        assert jpeg_frame(data) is None


@given(st.data())
def test_mangled_headers_never_raise(data: st.DataObject) -> None:
    jpeg = encoded("RGB", (30, 20), "JPEG")
    cut = data.draw(st.integers(0, 400))
    noise = data.draw(st.binary(max_size=64))
    at = data.draw(st.integers(0, 300))
    mangled = jpeg[:at] + noise + jpeg[at:cut]
    got = image_size(mangled)
    assert got is None or (isinstance(got[0], int) and isinstance(got[1], int))
    frame = jpeg_frame(mangled)
    assert frame is None or len(frame) == 3


def test_a_real_photo_sized_array() -> None:
    rng = np.random.default_rng(0)
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (112, 96, 3), dtype=np.uint8)).save(out, "JPEG")
    assert image_size(out.getvalue()) == (112, 96)

"""The C extensions against hostile input: every length, offset and size
from a file or from Python is checked before use (docs/security.md).

These run everywhere; under the sanitizer leg (``make sanitize``: the
extensions built with AddressSanitizer and UndefinedBehaviorSanitizer) an
out-of-bounds read or an overflow fails them even where it would go
unnoticed in a normal build.
"""

from __future__ import annotations

import io
import itertools
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from ..conftest import photo

jpeg_native: Any = pytest.importorskip("im2rec.imaging._jpeg", reason="built without it")


def plain_jpeg(size: tuple[int, int] = (32, 32)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (200, 10, 10)).save(out, "JPEG")
    return out.getvalue()


def segment(marker: int, payload: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


# An orientation entry (tag 0x0112, SHORT, one value: 6), little-endian; a
# bait segment holds it at every phase of a 12-byte entry stride, so that a
# parser reading past a short segment into the next one's memory finds it.
_ENTRY = b"\x12\x01\x03\x00\x01\x00\x00\x00\x06\x00\x00\x00"
_BAIT = b"http://ns.adobe.com/xap/1.0/\0" + b"".join(_ENTRY * 8 + b"\0" for _ in range(12))


@pytest.mark.parametrize(
    "order", [b"II*\0" + struct.pack("<I", 8), b"MM\0*" + struct.pack(">I", 8)]
)
@pytest.mark.parametrize("length", range(6, 24))
def test_a_short_exif_segment_is_read_within_its_bytes(order: bytes, length: int) -> None:
    # 14-17 bytes once made the IFD-entry bound wrap (n - 12 with n < 12):
    # the parser then read up to 786 kB past the segment (a crash, or an
    # orientation taken from another segment's memory, as the bait shows)
    short = (b"Exif\0\0" + order + b"\xff\xff")[:length].ljust(length, b"\0")
    jpg = plain_jpeg()
    data = jpg[:2] + segment(0xE1, _BAIT) + segment(0xE1, short) + segment(0xE1, _BAIT) + jpg[2:]
    assert jpeg_native.header(data)[4] == 0


def test_an_exif_orientation_is_still_read() -> None:
    entry = struct.pack("<HHIHH", 0x0112, 3, 1, 8, 0)
    exif = b"Exif\0\0" + b"II*\0" + struct.pack("<I", 8) + struct.pack("<H", 1) + entry
    jpg = plain_jpeg()
    assert jpeg_native.header(jpg[:2] + segment(0xE1, exif) + jpg[2:])[4] == 8
    # the entry cut by one byte: not read
    assert jpeg_native.header(jpg[:2] + segment(0xE1, exif[:-1]) + jpg[2:])[4] == 0


@pytest.mark.parametrize(
    "args",
    [
        (1, -1, 0, 8, 8),  # a negative left once wrapped to 4 billion
        (1, 0, -5, 8, 8),
        (1, 0, 0, -8, 8),
        (1, 0, 0, 8, 1 << 40),
        (1, 4, 0, 4, 8),  # empty
        (1, 0, 0, 8, 8, -1),  # a negative pixel limit
        (3, 0, 0, 8, 8),
    ],
)
def test_decode_refuses_negative_and_out_of_range_arguments(args: tuple[int, ...]) -> None:
    denom, left, top, right, bottom, *limit = args
    with pytest.raises((ValueError, OverflowError)):
        jpeg_native.decode(
            plain_jpeg(), denom, left, top, right, bottom, False, *(limit or [1 << 30])
        )


def test_a_region_past_the_image_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        jpeg_native.decode(plain_jpeg(), 1, 30, 0, 40, 8, False, 1 << 30)
    with pytest.raises(ValueError, match="outside"):  # left + width past 2**32 in 32 bits
        jpeg_native.decode(plain_jpeg(), 1, (1 << 32) - 2, 0, (1 << 32) - 1, 8, False, 1 << 30)


# -- every sampling combination libjpeg can write --------------------------

HELPER = Path(__file__).parents[1] / "native" / "sampled_jpeg.c"


@pytest.fixture(scope="module")
def sampled_jpeg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test helper that writes JPEGs with any sampling factors."""
    cc = os.environ.get("CC", "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip("no C compiler for the sampling helper")
    exe = tmp_path_factory.mktemp("helper") / "sampled_jpeg"
    subprocess.run([cc, "-O1", "-o", str(exe), str(HELPER), "-ljpeg"], check=True)
    return exe


def write_sampled(exe: Path, pixels: np.ndarray, factors: str, progressive: bool) -> bytes | None:
    h, w = pixels.shape[:2]
    comps = 1 if pixels.ndim == 2 else 3
    proc = subprocess.run(
        [str(exe), str(w), str(h), str(comps), "92", factors, str(int(progressive))],
        input=pixels.tobytes(),
        capture_output=True,
        check=False,
    )
    assert proc.returncode in (0, 2), proc.stderr
    return proc.stdout if proc.returncode == 0 else None


def sampling_combinations() -> list[str]:
    """Every (Y, Cb, Cr) of factors 1-4 in an MCU of at most 10 blocks (the
    ones libjpeg refuses to write are left out by the helper)."""
    factors = [(h, v) for h in range(1, 5) for v in range(1, 5)]
    return [
        ",".join(f"{h}x{v}" for h, v in combo)
        for combo in itertools.product(factors, repeat=3)
        if sum(h * v for h, v in combo) <= 10
    ]


def full_then_cut(data: bytes, denom: int, box: tuple[int, int, int, int]) -> np.ndarray:
    """A full decode at the scale (no crop, no skip), then the box cut out."""
    width, height, comps, _, _ = jpeg_native.header(data)
    sw, sh = -(-width // denom), -(-height // denom)
    pixels, x, y, w, h = jpeg_native.decode(data, denom, 0, 0, sw, sh, False, 1 << 30)
    assert (x, y, w, h) == (0, 0, sw, sh)
    full = np.frombuffer(pixels, np.uint8).reshape(sh, sw, -1)
    left, top, right, bottom = box
    return full[top:bottom, left:right]


def region_of(data: bytes, denom: int, box: tuple[int, int, int, int]) -> np.ndarray:
    left, top, right, bottom = box
    pixels, x, y, w, h = jpeg_native.decode(data, denom, left, top, right, bottom, False, 1 << 30)
    got = np.frombuffer(pixels, np.uint8).reshape(h, w, -1)
    assert y == top and x <= left and x + w >= right
    return got[:, left - x : right - x]


@pytest.mark.slow
def test_every_sampling_combination_decodes_a_region_exactly(sampled_jpeg: Path) -> None:
    # libjpeg-turbo before 3.0 cropped 4x2- and 2x4-subsampled components
    # wrongly at a reduced scale (its issue #669): up to 224 levels off.
    rng = np.random.default_rng(7)
    rgb = np.asarray(photo(75, 61, seed=9))
    combos = sampling_combinations()
    checked = 0
    for factors, progressive in itertools.product(combos, (False, True)):
        data = write_sampled(sampled_jpeg, rgb, factors, progressive)
        if data is None:  # libjpeg refuses to write it
            continue
        for denom in (1, 2, 4, 8):
            sw, sh = -(-75 // denom), -(-61 // denom)
            try:
                full = full_then_cut(data, denom, (0, 0, sw, sh))
            except ValueError:  # libjpeg cannot decode it at all (fractional sampling)
                with pytest.raises(ValueError):
                    region_of(data, denom, (1, 1, sw, sh))
                continue
            for _ in range(3):
                left, right = sorted(rng.choice(sw + 1, 2, replace=False))
                top, bottom = sorted(rng.choice(sh + 1, 2, replace=False))
                box = (int(left), int(top), int(right), int(bottom))
                got = region_of(data, denom, box)
                want = full[top:bottom, left:right]
                assert np.array_equal(got, want), (factors, progressive, denom, box,
                    int(np.abs(got.astype(int) - want.astype(int)).max()))  # fmt: skip
                checked += 1
    assert checked > 2000  # (most combinations decode)


@pytest.mark.slow
def test_gray_images_of_every_sampling_decode_a_region_exactly(sampled_jpeg: Path) -> None:
    gray = np.asarray(photo(43, 29, seed=5).convert("L"))
    for h, v in itertools.product(range(1, 5), repeat=2):
        data = write_sampled(sampled_jpeg, gray, f"{h}x{v}", False)
        assert data is not None
        for denom in (1, 2, 4, 8):
            sw, sh = -(-43 // denom), -(-29 // denom)
            box = (sw // 3, sh // 4, max(sw // 3 + 1, sw - 1), sh)
            full = full_then_cut(data, denom, (0, 0, sw, sh))
            assert np.array_equal(region_of(data, denom, box), full[box[1] :, box[0] : box[2]])


# -- the normaliser ----------------------------------------------------------

tensor_native: Any = pytest.importorskip("im2rec.imaging._tensor", reason="built without it")


def normalise(out: Any, pixels: Any, *geometry: int, flip: bool = False) -> None:
    row_bytes, pixel_bytes, left, top, width, height, channels = geometry
    k, mk = [1.0] * channels, [0.0] * channels
    tensor_native.normalise(out, pixels, row_bytes, pixel_bytes, left, top, width, height,
                            channels, k, mk, flip)  # fmt: skip


@pytest.mark.parametrize(
    "geometry",
    [
        # (left + width) * pixel_bytes wraps to a small row length
        (16, 4, (1 << 62) - 1, 0, 2, 1, 3),
        (16, 4, 0, 0, 1 << 62, 1, 3),
        # (top + height - 1) * row_bytes wraps
        (1 << 40, 1, 0, 1 << 40, 1, 1, 1),
        (1 << 62, 1, 0, 0, 1, 4, 1),
        # width * height * channels * 4 wraps
        (1 << 33, 1, 0, 0, 1 << 33, 1 << 31, 1),
        (-16, 1, 0, 0, 1, 1, 1),
        (16, 1, -1, 0, 1, 1, 1),
    ],
)
def test_normalise_refuses_geometry_that_overflows(geometry: tuple[int, ...]) -> None:
    out = np.zeros(64, np.float32)
    with pytest.raises((ValueError, OverflowError)):
        normalise(out, bytes(64), *geometry)


def test_normalise_refuses_buffers_smaller_than_the_geometry() -> None:
    with pytest.raises(ValueError, match="smaller"):
        normalise(np.zeros(12, np.float32), bytes(47), 16, 4, 0, 0, 4, 3, 3)  # needs 48 bytes
    with pytest.raises(ValueError, match="smaller"):
        normalise(np.zeros(35, np.float32), bytes(48), 16, 4, 0, 0, 4, 3, 3)  # needs 36 floats
    normalise(np.zeros(36, np.float32), bytes(48), 16, 4, 0, 0, 4, 3, 3)


def test_normalise_refuses_a_misaligned_output() -> None:
    raw = bytearray(4 * 13)
    with pytest.raises(ValueError, match="aligned"):
        normalise(memoryview(raw)[1:49], bytes(12), 12, 1, 0, 0, 12, 1, 1)

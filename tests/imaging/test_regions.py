"""Region decoding of JPEGs (im2rec.imaging): the pixels of a region are a
full decode's, for every kind of JPEG; the whole decode_region output is
Pillow's to within one level; damaged data fails cleanly; the Pillow path
is what runs where the region decoder does not apply or is not built."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageFile

from im2rec.errors import ImageCodecError, ImageTooLargeError
from im2rec.imaging.codec import Crop
from im2rec.imaging.regions import decode_region

from ..conftest import photo
from .test_jpeg import _with_and_without, encode

native: Any = pytest.importorskip("im2rec.imaging._jpeg", reason="built without the extension")
ImageFile.MAXBLOCK = 1 << 24  # progressive saves of large images in one buffer


def kinds() -> Iterator[tuple[str, bytes]]:
    """Every kind of JPEG the tests cover, at odd sizes."""
    rgb = photo(333, 221, seed=1)
    yield "baseline 4:2:0", encode(rgb)
    yield "4:2:2", encode(rgb, subsampling=1)
    yield "4:4:4", encode(rgb, subsampling=0)
    yield "progressive", encode(rgb, progressive=True)
    yield "progressive 4:4:4", encode(photo(257, 129, seed=2), progressive=True, subsampling=0)
    yield "grayscale", encode(rgb.convert("L"))
    yield "tiny", encode(photo(9, 5, seed=3))
    yield "tall", encode(photo(31, 400, seed=4))
    try:
        yield "restart markers", encode(rgb, restart_marker_blocks=3)
    except TypeError:  # Pillow < 11.1 cannot write them
        pass


KINDS = dict(kinds())


def full_decode(data: bytes, scale: int, gray: bool) -> np.ndarray | None:
    """Pillow's decode at a DCT scale (its draft), the reference; None when
    Pillow's draft rule cannot be made to pick that scale (tiny images)."""
    im = Image.open(io.BytesIO(data))
    want_size = (-(-im.width // scale), -(-im.height // scale))
    im.draft("L" if gray else im.mode, (max(1, im.width // scale), max(1, im.height // scale)))
    if im.size != want_size:
        return None
    want = "L" if gray or im.mode == "L" else "RGB"
    return np.asarray(im.convert(want))


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("scale", [1, 2, 4, 8])
def test_a_region_is_exactly_a_full_decode_cut(kind: str, scale: int) -> None:
    data = KINDS[kind]
    rng = np.random.default_rng(scale)
    compared = 0
    for gray in (False, True):
        full = full_decode(data, scale, gray)
        if full is None:
            continue
        height, width = full.shape[:2]
        for i in range(24):
            x0, x1 = sorted(int(v) for v in rng.integers(0, width + 1, 2))
            y0, y1 = sorted(int(v) for v in rng.integers(0, height + 1, 2))
            if i % 2:  # regions one to three pixels wide, where the edges meet
                x1 = x0 + 1 + i % 3
            x1, y1 = max(x1, x0 + 1), max(y1, y0 + 1)
            if x1 > width or y1 > height:
                continue
            pixels, left, top, w, h = native.decode(data, scale, x0, y0, x1, y1, gray, 1 << 30)
            assert left <= x0 and x1 <= left + w and (top, h) == (y0, y1 - y0)
            got = np.frombuffer(pixels, np.uint8).reshape(h, w, -1)[:, x0 - left : x1 - left]
            np.testing.assert_array_equal(got.reshape(full[y0:y1, x0:x1].shape), full[y0:y1, x0:x1])
            compared += 1
    assert compared or (kind, scale) in {("tiny", 4), ("tiny", 8)}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_decode_region_matches_the_pillow_path(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Crops, resizes at every DCT scale and with every filter: the region
    decoder's output is the Pillow path's (a full decode at the same DCT
    scale, crop, resize). Identical for the step filters; for the others,
    Pillow's filter positions measured from the region's corner round
    differently in the last bit: at most one level with Pillow-SIMD, two
    with Pillow 13, and a PSNR over 50 dB (measured: 78 and 54 at worst)."""
    data = KINDS[kind]
    width, height = Image.open(io.BytesIO(data)).size
    rng = np.random.default_rng(len(data))
    filters = list(Image.Resampling)
    for i in range(40):
        x0, y0 = int(rng.integers(0, width)), int(rng.integers(0, height))
        x1, y1 = int(rng.integers(x0 + 1, width + 1)), int(rng.integers(y0 + 1, height + 1))
        box = (x0, y0, x1, y1)
        # the exact cut, enlargements, and shrinks down to an eighth
        size = (x1 - x0, y1 - y0) if i % 5 == 0 else tuple(int(v) for v in rng.integers(1, 160, 2))
        crop = Crop(box, size, filters[i % len(filters)])
        fast, slow = _with_and_without(monkeypatch, data, i % 2, lambda w, h, c=crop: c)
        assert fast.shape == slow.shape
        if filters[i % len(filters)] in (Image.Resampling.NEAREST, Image.Resampling.BOX):
            np.testing.assert_array_equal(fast, slow)
        assert np.abs(fast - slow).max() <= 2
        assert psnr(fast, slow) > 50


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(((a.astype(float) - b) ** 2).mean())
    return float("inf") if mse == 0 else 10 * np.log10(255**2 / mse)


def test_scaled_decoding_keeps_the_quality_of_a_full_decode() -> None:
    """Random-resized crops of large images to 224 pixels: decoding at a
    reduced DCT scale (chosen when the crop is at least twice the output),
    then resizing, against a full-resolution decode, the same crop and the
    same resize. 40 dB is the usual bar for "visually lossless"; encoding
    such photos at quality 90 changes them by 38.9 dB; measured here: 48 dB
    at worst, 51.5 typical."""
    rng = np.random.default_rng(0)
    scaled = 0
    for width, height in ((1024, 768), (800, 600), (512, 384)):
        data = encode(photo(width, height, seed=width))
        full = Image.open(io.BytesIO(data)).convert("RGB")
        for i in range(12):
            area = rng.uniform(0.08, 1) * width * height
            aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
            w = min(width, round((area * aspect) ** 0.5))
            h = min(height, round((area / aspect) ** 0.5))
            x, y = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
            box, method = (x, y, x + w, y + h), list(Image.Resampling)[1 + i % 3]
            crop = Crop(box, (224, 224), method)
            got = np.asarray(decode_region(data, 1, lambda *_, c=crop: c))
            want = np.asarray(full.resize((224, 224), method, box=box))
            assert psnr(got, want) > 40, (box, method)
            scaled += min(w, h) >= 448
    assert scaled >= 5  # (the DCT scale was reduced in some of them)


def test_the_rotated_image_is_turned_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6
    data = encode(photo(64, 48, seed=7), exif=exif.tobytes())
    assert native.header(data)[4] == 6  # the C parse of the EXIF block finds it
    got = decode_region(data, 1, lambda w, h: Crop((0, 0, w, h), (w, h)))
    assert got.size == (48, 64)


def truncated(data: bytes, keep: float) -> bytes:
    return data[: int(len(data) * keep)]


@pytest.mark.parametrize("kind", ["baseline 4:2:0", "progressive"])
def test_damaged_data_fails_cleanly_on_both_paths(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = KINDS[kind]
    top = lambda w, h: Crop((0, 0, w, 8), (w, 8))  # noqa: E731 - a region far above the cut
    bottom = lambda w, h: Crop((0, h - 8, w, h), (w, 8))  # noqa: E731
    for env in ("1", "0"):
        monkeypatch.setenv("IM2REC_NATIVE_JPEG", env)
        # Cut short: an error even where the region lies above the cut.
        with pytest.raises(ImageCodecError):
            decode_region(truncated(data, 0.6), 1, top)
        with pytest.raises(ImageCodecError):
            decode_region(b"\xff\xd8\xff\xe0" + b"\0" * 40 + b"\xff\xd9", 1, top)
    # Cut short, then given an end marker: libjpeg warns and fills the rest
    # (grey, or the coarser scans of a progressive image); Pillow ignores its
    # warnings, and both paths give the same image.
    cut = truncated(data, 0.6) + b"\xff\xd9"
    for plan in (top, bottom):
        fast, slow = _with_and_without(monkeypatch, cut, 1, plan)
        np.testing.assert_array_equal(fast, slow)
    with pytest.raises(ValueError):
        native.decode(truncated(data, 0.5), 1, 0, 0, 10, 300, False, 1 << 30)
    with pytest.raises(ValueError):
        native.decode(data, 3, 0, 0, 10, 10, False, 1 << 30)  # not a DCT scale
    with pytest.raises(ValueError):
        native.decode(data, 1, 0, 0, 10_000, 10, False, 1 << 30)  # outside the image


def _sof_patched(data: bytes, width: int, height: int) -> bytes:
    at = min(data.find(m) % len(data) for m in (b"\xff\xc0", b"\xff\xc2")) + 5  # SOF0/SOF2
    return data[:at] + height.to_bytes(2, "big") + width.to_bytes(2, "big") + data[at + 4 :]


def test_an_oversized_header_is_refused_before_allocating() -> None:
    bomb = _sof_patched(KINDS["progressive"], 65000, 65000)
    with pytest.raises(ImageTooLargeError):
        decode_region(bomb, 1, lambda w, h: Crop((0, 0, 8, 8), (8, 8)))
    with pytest.raises(ValueError, match="more pixels than the limit"):
        native.decode(bomb, 1, 0, 0, 8, 8, False, 1 << 24)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mangled_jpegs_never_crash(data: st.DataObject) -> None:
    """Any byte changed or cut: an image or ImageCodecError, never a signal
    or another exception (the decoder runs on bytes from other people)."""
    raw = bytearray(KINDS[data.draw(st.sampled_from(sorted(KINDS)))])
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(2, len(raw) - 3))
        raw[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(4, len(raw)))] + b"\xff\xd9"
    size = (data.draw(st.integers(1, 64)), data.draw(st.integers(1, 64)))
    try:
        decode_region(bytes(raw), 1, lambda w, h: Crop((0, 0, w, h), size))
    except (ImageCodecError, ImageTooLargeError):
        pass


@pytest.mark.parametrize("native_jpeg", ["1", "0"])
def test_a_crop_that_shows_nothing_decodes_nothing(
    native_jpeg: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan whose crop shows none of the image (a detection sample that
    is all padding) reads the header and decodes no pixel: damaged pixel
    data is never reached, and the plan's crop comes back."""
    from im2rec.imaging.regions import decode_planned

    monkeypatch.setenv("IM2REC_NATIVE_JPEG", native_jpeg)
    data = truncated(KINDS["baseline 4:2:0"], 0.6)
    seen: list[tuple[int, int]] = []

    def plan(w: int, h: int) -> Crop:
        seen.append((w, h))
        return Crop((0, 0, 0, 0), None, note="padding only")

    image, crop = decode_planned(data, 1, plan)
    assert image is None and crop.note == "padding only" and len(seen) == 1
    with pytest.raises(ImageCodecError):  # (the same data, decoded, is damaged)
        decode_region(data, 1, lambda w, h: Crop((0, 0, w, h), (w, h)))

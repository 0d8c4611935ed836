"""The training crop rendered in C from decisions made in Python
(im2rec/imaging/_crop.h, fused.crop): the same samples as the Python
one-pass path, which draws the same numbers in the same order (the
generator's state after each sample is compared); where the C decoder does
not apply, nothing is drawn and the Python path takes the sample."""

from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from PIL import Image

from im2rec import native
from im2rec.errors import ImageCodecError, ImageTooLargeError
from im2rec.training.augment import INTERPOLATION, Augmenter, fused

from ..conftest import photo
from ..imaging.test_regions import KINDS, encode

pytest.importorskip("im2rec.imaging._tensor", reason="built without the extension")
jpeg_ext: Any = pytest.importorskip("im2rec.imaging._jpeg", reason="built without the extension")
pytestmark = pytest.mark.skipif(
    native.switched_off() or fused._jpeg is None, reason="no C crop without the extensions"
)

RRC = dict(random_resized_crop=True, min_random_area=0.08, max_aspect_ratio=4 / 3,
           min_aspect_ratio=3 / 4, mean=(123.68, 116.28, 103.53), std=(58.4, 57.1, 57.4),
           rand_mirror=True)  # fmt: skip
PAYLOADS = [KINDS[kind] for kind in sorted(KINDS)]
#: MXNet's filter codes whose Pillow filter the C resampler takes
FILTERS = [m for m in (1, 2, 4) if INTERPOLATION[m] in fused._OURS]


def pair(**options: Any) -> tuple[Augmenter, Augmenter]:
    """The Augmenter with its C crop, and the same one on the Python path."""
    fast = Augmenter(**options)
    assert fast._native is not None, "the C crop must take these options"
    slow = Augmenter(**options)
    object.__setattr__(slow, "_native", None)
    return fast, slow


def run(aug: Augmenter, payloads: list[bytes], seed: int) -> tuple[np.ndarray, list[Any]]:
    """Every sample, and the generator's state after each."""
    rng = np.random.default_rng(seed)
    out = np.empty((len(payloads), *aug.data_shape), aug.dtype)
    states = []
    for i, payload in enumerate(payloads):
        aug.write(payload, out[i], rng)
        states.append(rng.bit_generator.state["state"])
    return out, states


def same(fast: Augmenter, slow: Augmenter, payloads: list[bytes], seed: int) -> None:
    got, got_states = run(fast, payloads, seed)
    want, want_states = run(slow, payloads, seed)
    assert got_states == want_states  # draw for draw
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.tuples(st.sampled_from([1, 3]), st.integers(1, 90), st.integers(1, 90)),
    dtype=st.sampled_from(["float32", "uint8"]),
    area=st.tuples(st.floats(0.01, 1.0), st.floats(0.0, 3.0)),
    ratio=st.tuples(st.floats(0.2, 2.0), st.floats(0.0, 3.0)),
    resize=st.sampled_from([-1, 0, 40, 97, 500]),
    mirror=st.sampled_from([(True, False), (False, True), (False, False)]),
    method=st.sampled_from(FILTERS),
    seed=st.integers(0, 2**32 - 1),
)
@pytest.mark.slow
def test_the_c_crop_is_the_python_path(
    shape: tuple[int, int, int],
    dtype: str,
    area: tuple[float, float],
    ratio: tuple[float, float],
    resize: int,
    mirror: tuple[bool, bool],
    method: int,
    seed: int,
) -> None:
    # (area and aspect both exactly 1: MXNet's random-resized crop is off)
    assume((area[0] + area[1], ratio[0] + ratio[1]) != (1.0, 1.0) or min(area[0], ratio[0]) < 1)
    fast, slow = pair(
        data_shape=shape, dtype=dtype, random_resized_crop=True, min_random_area=area[0],
        max_random_area=area[0] + area[1], min_aspect_ratio=ratio[0],
        max_aspect_ratio=ratio[0] + ratio[1], resize=resize, rand_mirror=mirror[0],
        mirror=mirror[1], inter_method=method, mean=(10.0, 20.0, 30.0), std=(2.0, 3.0, 4.0),
    )  # fmt: skip
    same(fast, slow, PAYLOADS, seed)


def test_plain_cuts_and_the_fallback_window() -> None:
    # 224 of 256: some crops are exactly the output size (a plain cut);
    # area 1 and a fixed aspect no image has: every try fails, and the
    # whole image's centre window is taken (enlarged first when smaller)
    big = encode(photo(240, 230, seed=5))
    exact = 224 * 224 / (240 * 230)  # a 224x224 crop: cut from the decoder's rows
    options = dict(RRC, min_random_area=exact, max_random_area=exact, min_aspect_ratio=1.0,
                   max_aspect_ratio=1.0)  # fmt: skip
    same(*pair(data_shape=(3, 224, 224), **options), [big] * 20, 1)
    options = dict(RRC, min_random_area=1.0, min_aspect_ratio=9.0, max_aspect_ratio=9.5)
    same(*pair(data_shape=(3, 64, 300), **options), PAYLOADS, 2)


def test_huge_resized_sizes_are_planned_alike() -> None:
    # A 16x9000 image resized to a short side of 32,768 is 18 million rows
    # tall, and a resize past it is taken too: the geometry is numpy's
    # int64 and float64 on both paths.
    tall = encode(photo(16, 9000, seed=6))
    options = dict(RRC, resize=32768, min_random_area=0.0001, max_random_area=0.001)
    same(*pair(data_shape=(3, 8, 8), **options), [tall] * 200, 3)


def test_what_it_does_not_take_is_left_with_nothing_drawn() -> None:
    aug = Augmenter((3, 32, 32), **RRC)
    rgb = photo(60, 50, seed=7)
    png, cmyk, rotated = io.BytesIO(), io.BytesIO(), io.BytesIO()
    rgb.save(png, "PNG")
    rgb.convert("CMYK").save(cmyk, "JPEG")
    exif = Image.Exif()
    exif[0x0112] = 6
    rgb.save(rotated, "JPEG", exif=exif)
    good = encode(rgb)
    for data in (png.getvalue(), cmyk.getvalue(), rotated.getvalue(), good[:-2], b"", b"\xff\xd8"):
        rng = np.random.default_rng(0)
        before = rng.bit_generator.state
        assert fused.crop(aug._native, data, np.empty((3, 32, 32), np.float32), rng) is None
        assert rng.bit_generator.state == before


def test_over_the_pixel_limit_the_python_path_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    aug = Augmenter((3, 16, 16), **RRC)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    rng = np.random.default_rng(0)
    with pytest.raises(ImageTooLargeError):
        aug.write(encode(photo(60, 50)), np.empty((3, 16, 16), np.float32), rng)


def without_quantisation_tables(data: bytes) -> bytes:
    """``data`` with its DQT segments cut out: the header still reads, and
    decoding then fails in libjpeg (after the crop is drawn)."""
    out, at = bytearray(data[:2]), 2
    while data[at + 1] != 0xDA:  # up to the start of scan
        length = int.from_bytes(data[at + 2 : at + 4], "big")
        if data[at + 1] != 0xDB:
            out += data[at : at + 2 + length]
        at += 2 + length
    return bytes(out + data[at:])


def test_damaged_data_fails_as_on_the_python_path() -> None:
    good = encode(photo(200, 160, seed=8))
    damaged = bytearray(good)
    damaged[len(good) // 2 : len(good) // 2 + 40] = b"\xff\x00" * 20  # still ends in EOI
    fast, slow = pair(data_shape=(3, 48, 48), **RRC)

    def outcome(aug: Augmenter, data: bytes) -> tuple[str | None, Any]:
        rng = np.random.default_rng(4)
        try:
            aug.write(data, np.empty((3, 48, 48), np.float32), rng)
            error = None
        except ImageCodecError as exc:
            error = str(exc)
        return error, rng.bit_generator.state["state"]

    for data in (bytes(damaged), without_quantisation_tables(good)):
        assert outcome(fast, data) == outcome(slow, data)
    error, _ = outcome(fast, without_quantisation_tables(good))
    assert error is not None and "Quantization table" in error


def test_a_table_past_the_resamplers_bound_is_finished_by_pillow() -> None:
    # 16,384 columns to one (after the 1/8 DCT scale, 2,048 to one): a
    # bilinear filter 4,096 taps long, past the resampler's bound. The
    # crop is drawn in C and the sample finished on the Python path.
    wide = encode(Image.new("RGB", (16384, 8), (40, 90, 200)))
    options = dict(RRC, min_random_area=1.0, min_aspect_ratio=2048.0, max_aspect_ratio=2048.0)
    fast, slow = pair(data_shape=(3, 1, 1), **options)
    rng = np.random.default_rng(0)
    got = fused.crop(fast._native, wide, np.empty((3, 1, 1), np.float32), rng)
    assert isinstance(got, tuple) and got[1] == (0.0, 0.0, 16384.0, 8.0)
    same(fast, slow, [wide] * 4, 5)


def test_the_augmenter_pickles_with_its_plan() -> None:
    aug = Augmenter((3, 40, 40), **RRC)
    copy = pickle.loads(pickle.dumps(aug))
    assert copy == aug and copy._native is not None
    same(copy, pair(data_shape=(3, 40, 40), **RRC)[1], PAYLOADS, 6)


def test_options_it_does_not_render_stay_on_the_python_path() -> None:
    assert Augmenter((3, 8, 8), **{**RRC, "inter_method": 10})._native is None
    assert Augmenter((3, 8, 8), **{**RRC, "inter_method": 0})._native is None  # a step filter
    assert Augmenter((3, 8, 8), rand_crop=True)._native is None
    assert Augmenter((3, 8, 8), **RRC, brightness=0.2)._native is None
    # sizes and ranges are numpy's to plan: taken, and the same as Python's
    for extreme in ({"resize": 40000}, {"max_random_area": 1e7}):
        same(*pair(data_shape=(3, 8, 8), **{**RRC, **extreme}), PAYLOADS, 7)


def regions_for(plan: Any, sizes: np.ndarray, seed: int = 0) -> np.ndarray:
    rows, _ = plan.decide(sizes, np.random.default_rng(seed).random((len(sizes), plan.draws)))
    return rows


def test_the_c_side_checks_what_it_is_given() -> None:
    with pytest.raises(ValueError, match="bad options"):
        jpeg_ext.crop_plan(2, 8, 8, 2, None, None)  # two channels
    with pytest.raises(ValueError, match="bad options"):
        jpeg_ext.crop_plan(3, 8, 8, 4, None, None)  # the box filter
    with pytest.raises(ValueError, match="bad options"):
        jpeg_ext.crop_plan(3, 0, 8, 2, None, None)
    plan = Augmenter((3, 8, 8), **RRC)._native
    data = encode(photo(30, 30))
    starts, lengths = np.zeros(1, np.int64), np.array([len(data)], np.int64)
    sizes = np.empty((1, 2), np.int64)
    assert jpeg_ext.sizes(data, starts, lengths, 1 << 30, sizes) == 1
    assert sizes.tolist() == [[30, 30]]
    # a span outside the data, or over the pixel limit: not taken
    for at, n, limit in ((1, len(data), 1 << 30), (-1, 4, 1 << 30), (0, len(data) + 1, 1 << 30),
                         (0, len(data), 899)):  # fmt: skip
        assert jpeg_ext.sizes(data, np.array([at]), np.array([n]), limit, sizes) == 0
    for bad in ((data, starts, lengths[:0], 1 << 30, sizes), (data, starts, lengths, -1, sizes),
                (data, starts, lengths, 1 << 30, sizes[:, :1].copy())):  # fmt: skip
        with pytest.raises(ValueError):
            jpeg_ext.sizes(*bad)
    rows = regions_for(plan, sizes)
    out = np.empty((3, 8, 8), np.float32)
    assert jpeg_ext.render(plan.capsule, data, starts, lengths, rows, out, 1 << 30) == (1, None)
    for wrong in (np.empty((3, 8, 7), np.float32), np.empty((3, 8, 8), np.float32)[:, :, ::2]):
        with pytest.raises((TypeError, ValueError)):
            jpeg_ext.render(plan.capsule, data, starts, lengths, rows, wrong, 1 << 30)
    with pytest.raises(ValueError):  # not a plan
        jpeg_ext.render(object(), data, starts, lengths, rows, out, 1 << 30)
    # rows that are not a region are the caller's bug; a region outside the
    # image is the sample's failure
    for column, value in ((1, 3.0), (0, 0.5), (3, -1.0), (5, 0.0), (7, np.nan), (4, 2.0**40)):
        bad = rows.copy()
        bad[0, column] = value
        with pytest.raises(ValueError, match="not a region"):
            jpeg_ext.render(plan.capsule, data, starts, lengths, bad, out, 1 << 30)
    outside = rows.copy()
    outside[0, 1:7] = (1, 0, 0, 0, 31, 31)  # scale 1, past the 30x30 image
    done, why = jpeg_ext.render(plan.capsule, data, starts, lengths, outside, out, 1 << 30)
    assert done == 0 and "outside" in why
    # a payload the header check refuses is that sample's failure too
    done, why = jpeg_ext.render(plan.capsule, b"\xff\xd8\xff" + b"\0" * 8, starts,
                                np.array([11]), rows, out, 1 << 30)  # fmt: skip
    assert done == 0 and "not an image" in why


@pytest.mark.parametrize("switch", ["1", "0"])
def test_a_batch_writer_draws_and_writes_as_write_does(
    monkeypatch: pytest.MonkeyPatch, switch: str
) -> None:
    monkeypatch.setenv("IM2REC_NATIVE_JPEG", switch)  # the C crop, then the Python path
    aug = Augmenter((3, 40, 48), **RRC)  # type: ignore[arg-type]
    want, want_states = run(aug, PAYLOADS, 5)
    rng = np.random.default_rng(5)
    write = aug.writer(rng)
    got, states = np.empty_like(want), []
    for i, payload in enumerate(PAYLOADS):
        write(memoryview(payload) if i % 2 else payload, got[i])
        states.append(rng.bit_generator.state["state"])
    assert states == want_states
    np.testing.assert_array_equal(got, want)

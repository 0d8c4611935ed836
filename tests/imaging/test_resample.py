"""The loader's resampler (``_tensor.resample``, im2rec/imaging/_resample.h):
Pillow-SIMD's bytes for any window, box, size and filter; its AVX-512 and
AVX2 kernels and its portable loops the same; float planes the uint8 ones normalised;
every size checked before anything is read or written."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from im2rec.training.augment import fused

tensor: Any = pytest.importorskip("im2rec.imaging._tensor", reason="built without the extension")
#: the vector level the kernels run at here (the CPU's best, or IM2REC_SIMD's cap)
LEVEL = tensor.simd()[0]

PILLOW_SIMD = Image.Resampling.BICUBIC in fused._OURS
R = Image.Resampling
FILTERS = [R.BILINEAR, R.HAMMING, R.BICUBIC, R.LANCZOS]


def resample(pixels: np.ndarray, box: tuple[float, ...], size: tuple[int, int], method: int,
             flip: bool = False, vector: int = 2, pad: int = 0) -> np.ndarray:  # fmt: skip
    """pixels (H, W, 1, 3 or 4) resampled to uint8 planes (C, H, W)."""
    height, width, step = pixels.shape
    rows = np.zeros((height, width * step + pad), np.uint8)
    rows[:, : width * step] = pixels.reshape(height, -1)
    channels = 1 if step == 1 else 3
    out = np.full((channels, size[1], size[0]), 7, np.uint8)
    done = tensor.resample(out, rows.tobytes(), width * step + pad, step, width, height, box,
                           int(method), channels, size[0], size[1], None, None, flip, vector)  # fmt: skip
    assert done is True
    return out


def pillow(
    pixels: np.ndarray, box: tuple[float, ...], size: tuple[int, int], method: int
) -> np.ndarray:
    height, width, step = pixels.shape
    mode = "L" if step == 1 else "RGBX"
    image = Image.frombuffer(mode, (width, height), pixels.tobytes(), "raw", mode, 0, 1)
    got = np.asarray(image.resize(size, method, box))
    return got[None] if step == 1 else got[:, :, :3].transpose(2, 0, 1)


@st.composite
def cases(draw: st.DrawFn) -> tuple[np.ndarray, tuple[float, ...], tuple[int, int], int, bool]:
    width, height = draw(st.integers(1, 90)), draw(st.integers(1, 90))
    step = draw(st.sampled_from([1, 4]))
    seed = draw(st.integers(0, 2**32 - 1))
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, step), np.uint8)
    if draw(st.booleans()):  # smooth, as photos are: overshoot stays small
        pixels = np.sort(pixels, axis=1)
    x0 = draw(st.floats(0, width, allow_nan=False))
    y0 = draw(st.floats(0, height, allow_nan=False))
    x1 = draw(st.floats(x0, width, allow_nan=False))
    y1 = draw(st.floats(y0, height, allow_nan=False))
    box = (x0, y0, x1, y1) if draw(st.booleans()) else (0.0, 0.0, float(width), float(height))
    size = (draw(st.integers(1, 120)), draw(st.integers(1, 120)))
    if draw(st.booleans()):
        size = (width, height)  # Pillow skips a pass that would change nothing
    return pixels, box, size, draw(st.sampled_from(FILTERS)), draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(cases())
@pytest.mark.slow
def test_the_resampler_gives_pillow_simds_bytes(case: tuple[Any, ...]) -> None:
    pixels, box, size, method, flip = case
    got = resample(pixels, box, size, method, flip)  # the best kernels the CPU has
    # AVX-512, AVX2 and the portable loops: integer sums, the same bytes
    np.testing.assert_array_equal(got, resample(pixels, box, size, method, flip, vector=1))
    np.testing.assert_array_equal(got, resample(pixels, box, size, method, flip, vector=0))
    np.testing.assert_array_equal(got, resample(pixels, box, size, method, flip, pad=5))
    if pixels.shape[2] == 4:  # the same pixels as RGB rows (the training crop's): the same bytes
        for vector in (2, 1, 0):
            rgb = resample(pixels[:, :, :3], box, size, method, flip, vector=vector, pad=vector)
            np.testing.assert_array_equal(got, rgb)
    want = pillow(pixels, box, size, method)
    if flip:
        want = want[:, :, ::-1]
    if PILLOW_SIMD:
        np.testing.assert_array_equal(got, want)
    elif method in (R.BILINEAR, R.HAMMING):  # the filters it takes beside plain Pillow
        # Each pass rounds its own weights (Pillow 22-bit, ours ~14-bit), so
        # a level off in the horizontal pass can meet another in the vertical
        # one: 2 levels, seen on Pillow 10.1 (an 8x8 noise window enlarged to
        # 37x14, the portable loops alike)
        assert np.abs(got.astype(int) - want).max() <= 2


@pytest.mark.parametrize("step", [1, 3, 4])
@pytest.mark.parametrize("size", [(64, 48), (37, 19)])  # rows of whole 16-value steps, and not
@pytest.mark.parametrize("aligned", [True, False])  # streamed into 64-byte aligned planes, or not
def test_float_planes_are_the_uint8_planes_normalised(
    step: int, size: tuple[int, int], aligned: bool
) -> None:
    rng = np.random.default_rng(step)
    pixels = rng.integers(0, 256, (41, 57, step), np.uint8)
    channels = 1 if step == 1 else 3
    k = (np.float32(1 / 255) / np.array([0.229, 0.224, 0.225], np.float32))[:channels]
    mk = (np.array([0.485, 0.456, 0.406], np.float32) * 255 * k)[:channels]
    count = channels * size[0] * size[1]
    block = np.empty(count + 32, np.float32)
    start = (-block.ctypes.data % 64) // 4 + (0 if aligned else 1)
    out = block[start : start + count].reshape(channels, size[1], size[0])
    for flip in (False, True):
        planes = resample(pixels, (3.5, 2.25, 50.0, 40.0), size, R.BILINEAR, flip)
        tensor.resample(out, pixels.tobytes(), 57 * step, step, 57, 41, (3.5, 2.25, 50.0, 40.0),
                        int(R.BILINEAR), channels, *size, k.tolist(), mk.tolist(), flip)  # fmt: skip
        np.testing.assert_array_equal(out, planes * k[:, None, None] - mk[:, None, None])


# Each way the planar horizontal pass can run: (loads, pairs) of a row of
# `width` RGB pixels to `size` columns. AVX-512 (_planar_x86.h): enlarging
# takes one pair of taps from one 64-byte load; shrinking a little two
# pairs; more, two loads; a longer filter more pairs; past ~2.5x the RGBX
# path takes it.
PLANAR_CASES = [
    (150, 224, R.BILINEAR, (1, 1)),
    (260, 224, R.BILINEAR, (1, 2)),
    (300, 224, R.BILINEAR, (2, 2)),
    (450, 224, R.BILINEAR, (2, 3)),
    (150, 224, R.LANCZOS, (1, 3)),
    (37, 16, R.BICUBIC, (2, 5)),
    (40, 37, R.HAMMING, (1, 2)),
    (90, 30, R.BILINEAR, None),
]
# AVX2 (_planar_avx2.h), lanes of four outputs: enlarging with two taps
# reads one 16-byte load a lane, longer filters and small shrinks two; past
# ~1.6x the RGBX path. Rows shorter than a load put every lane at the row's
# end (the loads copied); partial blocks of eight at the right.
AVX2_CASES = [
    (150, 224, R.BILINEAR, (1, 1)),
    (50, 220, R.BICUBIC, (1, 2)),
    (5, 77, R.BICUBIC, (1, 3)),
    (260, 224, R.BILINEAR, (2, 2)),
    (150, 221, R.LANCZOS, (2, 3)),
    (14, 9, R.BICUBIC, (2, 4)),
    (4, 7, R.BILINEAR, (1, 1)),
    (450, 224, R.BILINEAR, None),
]


def rgb_rows_in_planes(width: int, size: int, method: int, vector: int) -> None:
    """RGB rows of `width` pixels resampled (to `size` x 29) by the kernels
    `vector` picks: the RGBX kernels' and the portable loops' bytes, and
    floats the same bytes normalised, mirrored or not."""
    rng = np.random.default_rng(width)
    pixels = np.sort(rng.integers(0, 256, (23, width, 4), np.uint8), axis=1)
    box, out_size = (0.0, 0.5, float(width), 21.75), (size, 29)
    for flip in (False, True):
        want = resample(pixels, box, out_size, method, flip, vector=0)
        np.testing.assert_array_equal(want, resample(pixels, box, out_size, method, flip))
        rgb = pixels[:, :, :3]
        np.testing.assert_array_equal(
            want, resample(rgb, box, out_size, method, flip, vector=vector)
        )
        got = resample(rgb, box, out_size, method, flip, vector=vector, pad=3)
        np.testing.assert_array_equal(want, got)
        np.testing.assert_array_equal(want, resample(rgb, box, out_size, method, flip, vector=0))
        k = [0.017, 0.0175, 0.0174]
        mk = [2.1, 2.03, 1.8]
        floats = np.empty((3, 29, size), np.float32)
        tensor.resample(floats, rgb.tobytes(), width * 3, 3, width, 23, box, int(method), 3,
                        size, 29, k, mk, flip, vector)  # fmt: skip
        kk, mm = np.array(k, np.float32)[:, None, None], np.array(mk, np.float32)[:, None, None]
        np.testing.assert_array_equal(floats, want * kk - mm)


@pytest.mark.parametrize(("width", "size", "method", "shape"), PLANAR_CASES)
def test_rgb_rows_in_planes_give_the_rgbx_paths_bytes(
    width: int, size: int, method: int, shape: tuple[int, int] | None
) -> None:
    # RGB rows (the JPEG decoder's, in the loaders' batch loop) go through
    # the planar pass where the CPU has AVX-512 VBMI: the same sums as the
    # RGBX kernels and the portable loops, so the same bytes and floats,
    # mirrored or not, over rows of whole and partial 16-pixel blocks.
    planar = tensor._planar(width, 0.0, float(width), size, int(method))
    if planar is None and shape is not None:
        # (a missing kernel path fails where its level is in use)
        assert LEVEL != "avx512", "AVX-512 is in use, yet its planar pass did not run"
        pytest.skip(f"the SIMD level here is {LEVEL}: the AVX-512 planar pass does not run")
    assert planar == shape
    rgb_rows_in_planes(width, size, method, vector=2)


@pytest.mark.parametrize(("width", "size", "method", "shape"), AVX2_CASES)
def test_rgb_rows_in_avx2_planes_give_the_rgbx_paths_bytes(
    width: int, size: int, method: int, shape: tuple[int, int] | None
) -> None:
    # The same where the CPU has AVX2 only (vector 1 asks for it on any
    # x86 CPU): lanes of four outputs, blocks of eight.
    planar = tensor._planar(width, 0.0, float(width), size, int(method), True)
    if planar is None and shape is not None:
        assert LEVEL == "portable", "AVX2 is in use, yet its planar pass did not run"
        pytest.skip("the SIMD level here is portable: the AVX2 planar pass does not run")
    assert planar == shape
    rgb_rows_in_planes(width, size, method, vector=1)
    if tensor._planar(width, 0.0, float(width), size, int(method)) is None:
        rgb_rows_in_planes(width, size, method, vector=2)  # the best this CPU has


def guarded(data: bytes) -> tuple[Any, np.ndarray]:
    """data at the very end of a page followed by one that may not be read:
    a read past its end faults (with or without a sanitizer)."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    size = (len(data) + page - 1) // page * page
    region = mmap.mmap(-1, size + page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    assert libc.mprotect(base + size, page, 0) == 0, ctypes.get_errno()  # PROT_NONE
    view = np.frombuffer(region, np.uint8, len(data), size - len(data))
    view[:] = np.frombuffer(data, np.uint8)
    return region, view


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect through libc: Linux")
@pytest.mark.parametrize(("width", "size", "method"), [(c[0], c[1], c[2]) for c in AVX2_CASES])
def test_the_rgb_kernels_read_nothing_past_the_window(width: int, size: int, method: int) -> None:
    # The kernels load 8, 16 or 32 bytes at a time; at the last row's end
    # they copy what lies in the row instead. The window's last byte here
    # is the last readable one.
    rng = np.random.default_rng(size)
    rgb = rng.integers(0, 256, (23, width, 3), np.uint8)
    want = resample(rgb, (0.0, 0.5, float(width), 23.0), (size, 29), method, vector=0)
    region, view = guarded(rgb.tobytes())
    for vector in (2, 1, 0):
        for flip in (False, True):
            out = np.empty((3, 29, size), np.uint8)
            assert tensor.resample(out, view, width * 3, 3, width, 23, (0.0, 0.5, float(width), 23.0),
                                   int(method), 3, size, 29, None, None, flip, vector)  # fmt: skip
            np.testing.assert_array_equal(out, want[:, :, ::-1] if flip else want)
    del view
    region.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect through libc: Linux")
@pytest.mark.parametrize("method", [R.BILINEAR, R.BICUBIC])
def test_the_rgbx_kernel_on_rgb_rows_reads_nothing_past_the_window(method: int) -> None:
    # Shrinks past the planar passes' reach take the four-row kernel, whose
    # pixel pairs are eight-byte loads of six RGB bytes: many row widths, so
    # that some output's fixed loads end right at the window's last byte.
    rng = np.random.default_rng(int(method))
    for width in range(290, 330):
        rgb = rng.integers(0, 256, (9, width, 3), np.uint8)
        want = resample(rgb, (0.0, 0.0, float(width), 9.0), (131, 5), method, vector=0)
        region, view = guarded(rgb.tobytes())
        for vector in (2, 1):
            out = np.empty((3, 5, 131), np.uint8)
            assert tensor.resample(out, view, width * 3, 3, width, 9, (0.0, 0.0, float(width), 9.0),
                                   int(method), 3, 131, 5, None, None, False, vector)  # fmt: skip
            np.testing.assert_array_equal(out, want)
        del view
        region.close()


def test_the_planar_probe_checks_its_sizes() -> None:
    for bad in [(0, 0.0, 0.0, 8), (10, -1.0, 5.0, 8), (10, 5.0, 4.0, 8), (10, 0.0, 11.0, 8),
                (10, float("nan"), 5.0, 8), (10, 0.0, 5.0, 0), (1 << 21, 0.0, 5.0, 8)]:  # fmt: skip
        with pytest.raises(ValueError):
            tensor._planar(*bad, int(R.BILINEAR))
    assert tensor._planar(10, 0.0, 10.0, 8, 99) is None  # no such filter
    assert tensor._planar(10, 0.0, 10.0, 8, 99, True) is None


def test_gray_pixels_fill_three_planes() -> None:
    pixels = np.random.default_rng(3).integers(0, 256, (20, 30, 1), np.uint8)
    one = resample(pixels, (1.0, 1.0, 29.0, 19.0), (16, 12), R.BILINEAR)
    out = np.empty((3, 12, 16), np.uint8)
    tensor.resample(out, pixels.tobytes(), 30, 1, 30, 20, (1.0, 1.0, 29.0, 19.0),
                    int(R.BILINEAR), 3, 16, 12, None, None, False)  # fmt: skip
    np.testing.assert_array_equal(out, np.repeat(one, 3, axis=0))


def _call(**changes: Any) -> Any:
    args: dict[str, Any] = dict(
        out=np.zeros((3, 6, 8), np.float32), pixels=bytes(10 * 5 * 4), row_bytes=40,
        pixel_bytes=4, width=10, height=5, box=(0.0, 0.0, 10.0, 5.0), filter=int(R.BILINEAR),
        channels=3, out_w=8, out_h=6, k=[1.0] * 3, mk=[0.0] * 3, flip=False,
    )  # fmt: skip
    args.update(changes)
    return tensor.resample(*args.values())


def test_the_resampler_checks_every_size() -> None:
    assert _call() is True  # the geometry that fits exactly
    assert _call(out=np.zeros((3, 6, 8), np.uint8), k=None, mk=None) is True
    assert _call(pixels=bytes(10 * 5 * 3), row_bytes=30, pixel_bytes=3) is True  # RGB rows
    for bad in (
        dict(pixels=bytes(10 * 5 * 4 - 1)), dict(out=np.zeros((3, 6, 7), np.float32)),
        dict(out=np.zeros((3, 6, 8), np.uint8)), dict(row_bytes=39), dict(pixel_bytes=5),
        dict(pixels=bytes(10 * 5 * 3 - 1), row_bytes=30, pixel_bytes=3),
        dict(row_bytes=29, pixel_bytes=3),
        dict(pixel_bytes=2), dict(width=0), dict(height=-1), dict(channels=2), dict(channels=1),
        dict(out_w=0), dict(out_h=1 << 17), dict(box=(-0.5, 0.0, 10.0, 5.0)),
        dict(box=(0.0, 0.0, 10.5, 5.0)), dict(box=(5.0, 0.0, 4.0, 5.0)),
        dict(box=(0.0, float("nan"), 10.0, 5.0)), dict(filter=int(R.NEAREST)),
        dict(filter=int(R.BOX)), dict(filter=99), dict(k=[1.0, 1.0]),
        dict(width=2**62, row_bytes=2**63 - 1), dict(height=2**40),
        dict(out=np.zeros((3, 6, 8), np.float32)[:, :, ::-1]),
        dict(out=np.zeros(3 * 6 * 8 * 4 + 1, np.uint8)[1:].view(np.uint8)),
    ):  # fmt: skip
        with pytest.raises((ValueError, BufferError, TypeError, OverflowError)):
            _call(**bad)


def test_a_filter_too_long_for_its_table_is_left_to_pillow() -> None:
    # shrinking 60,000 columns to 1 would need a 120,001-weight filter
    assert _call(pixels=bytes(60000 * 4), row_bytes=60000 * 4, width=60000, height=1,
                 box=(0.0, 0.0, 60000.0, 1.0), out_w=1, out_h=1,
                 out=np.zeros((3, 1, 1), np.float32)) is False  # fmt: skip


@pytest.mark.slow
def test_a_horizontal_pass_past_its_bound_is_left_to_pillow() -> None:
    # one column of 1,100 rows stretched to 65,536 columns and shrunk to one
    # row: every row is a tap, and 1,100 rows of 256 kB pass the 256 MB bound
    out = np.zeros((3, 1, 1 << 16), np.float32)
    assert _call(pixels=bytes(1100 * 4), row_bytes=4, width=1, height=1100,
                 box=(0.0, 0.0, 1.0, 1100.0), out_w=1 << 16, out_h=1, out=out) is False  # fmt: skip
    assert _call(pixels=bytes(1000 * 4), row_bytes=4, width=1, height=1000,
                 box=(0.0, 0.0, 1.0, 1000.0), out_w=1 << 16, out_h=1, out=out) is True  # fmt: skip


@st.composite
def axes(draw: st.DrawFn) -> tuple[int, float, float, int, int]:
    in_size = draw(st.integers(1, 700))
    in0 = draw(st.floats(0, in_size, allow_nan=False, width=32))
    in1 = draw(st.floats(in0, in_size, allow_nan=False, width=32))
    return in_size, in0, in1, draw(st.integers(1, 700)), draw(st.sampled_from(FILTERS))


@settings(max_examples=500, deadline=None)
@given(axes())
@pytest.mark.slow
def test_the_fast_weights_are_the_portable_weights(
    axis: tuple[int, float, float, int, int],
) -> None:
    # The AVX-512 plan (bilinear weights eight at a time, the maximum and the
    # rounding sixteen at a time) and the AVX2 one (four, four and eight)
    # against the scalar loops, weight for weight: a weight one unit off
    # would change few output bytes.
    in_size, in0, in1, out_size, method = axis
    portable = tensor._plan(in_size, in0, in1, out_size, int(method), 0)
    assert tensor._plan(in_size, in0, in1, out_size, int(method), 2) == portable
    assert tensor._plan(in_size, in0, in1, out_size, int(method), 1) == portable


def test_the_plan_hook_checks_its_sizes() -> None:
    # (a test hook, but a C entry point all the same: nothing unchecked)
    for bad in [(0, 0.0, 0.0, 8), (10, -1.0, 5.0, 8), (10, 5.0, 4.0, 8), (10, 0.0, 11.0, 8),
                (10, float("nan"), 5.0, 8), (10, 0.0, 5.0, 0), (1 << 21, 0.0, 5.0, 8)]:  # fmt: skip
        with pytest.raises(ValueError):
            tensor._plan(*bad, int(R.BILINEAR), True)
    assert tensor._plan(10, 0.0, 10.0, 8, 99, True) is None  # no such filter: Pillow's case
    first, taps, weights, precision = tensor._plan(10, 0.0, 10.0, 5, int(R.BILINEAR), True)
    assert len(first) == len(taps) == 5 and precision > 0
    sums = np.frombuffer(weights, np.int16).reshape(5, -1).sum(axis=1)
    assert np.all(np.abs(sums - (1 << precision)) <= 3)  # each row of weights sums to one

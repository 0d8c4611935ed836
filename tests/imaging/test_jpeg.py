"""Choosing how a JPEG is decoded: the Pillow path where a region or a scaled
decode does not apply."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from im2rec.imaging import jpeg
from im2rec.imaging.codec import Crop
from im2rec.imaging.columns import SCALARS
from im2rec.imaging.regions import decode_region

from ..conftest import photo


def encode(im: Image.Image, **params: Any) -> bytes:
    out = io.BytesIO()
    im.save(out, "JPEG", quality=90, **params)
    return out.getvalue()


def _with_and_without(monkeypatch: pytest.MonkeyPatch, data: bytes, *args: Any) -> tuple[Any, Any]:
    monkeypatch.setenv("IM2REC_NATIVE_JPEG", "0")
    slow = np.asarray(decode_region(data, *args)).astype(int)
    monkeypatch.setenv("IM2REC_NATIVE_JPEG", "1")
    fast = np.asarray(decode_region(data, *args)).astype(int)
    return fast, slow


def test_the_pillow_path_runs_where_regions_do_not_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    rgb = photo(64, 48, seed=7)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated: the region would have to be turned first
    cmyk = encode(rgb.convert("CMYK"))
    cases = {
        "rotated": encode(rgb, exif=exif.tobytes()),
        "cmyk": cmyk,
        "trailing bytes": encode(rgb) + b"junk",
    }
    called = []

    def plan(w: int, h: int) -> Any:
        called.append((w, h))
        return Crop((0, 0, w, h), (w // 2, h // 2))

    for name, data in cases.items():
        called.clear()
        assert jpeg.region(data, 1, plan) is None, name
        assert not called  # (the plan is left for the Pillow path)
        fast, slow = _with_and_without(monkeypatch, data, 1, plan)
        np.testing.assert_array_equal(fast, slow)
    assert jpeg.region(encode(rgb), -1, plan) is None
    monkeypatch.setenv("IM2REC_NATIVE_JPEG", "0")
    assert not jpeg.enabled() and jpeg.region(encode(rgb), 1, plan) is None


@st.composite
def crops(draw: st.DrawFn) -> tuple[int, int, tuple[float, ...], tuple[int, int]]:
    """An image size, a box in it (whole pixels, or any floats) and an output
    size (sometimes the box's own, a plain cut)."""
    width, height = draw(st.integers(1, 9000)), draw(st.integers(1, 9000))
    if draw(st.booleans()):
        x0, y0 = draw(st.integers(0, width - 1)), draw(st.integers(0, height - 1))
        x1, y1 = draw(st.integers(x0 + 1, width)), draw(st.integers(y0 + 1, height))
        box: tuple[float, ...] = (float(x0), float(y0), float(x1), float(y1))
    else:
        xs = sorted(draw(st.floats(0, width)) for _ in range(2))
        ys = sorted(draw(st.floats(0, height)) for _ in range(2))
        box = (xs[0], ys[0], xs[1], ys[1])
    if draw(st.booleans()) and box[2] - box[0] >= 1 and box[3] - box[1] >= 1:
        size = (int(box[2] - box[0]), int(box[3] - box[1]))
    else:
        size = (draw(st.integers(1, 600)), draw(st.integers(1, 600)))
    return width, height, box, size


@settings(max_examples=400, deadline=None)
@given(crop=crops(), method=st.sampled_from(list(jpeg._SUPPORT)))
def test_the_region_rule_is_one_rule_for_a_sample_and_a_batch(
    crop: tuple[int, int, tuple[float, ...], tuple[int, int]], method: Image.Resampling
) -> None:
    # region_rule is written once over two sets of operations: Python
    # numbers for window() and numpy columns for the C decoder's batch
    width, height, box, size = crop
    scale, bounds, fbox, exact = jpeg.region_rule(SCALARS, width, height, *box, size, method)
    batch = jpeg.regions(np.array([width, 7]), np.array([height, 5]),
                         np.array([box, (0.0, 0.0, 7.0, 5.0)]), size, method)  # fmt: skip
    assert scale == batch.scale[0] and scale in (1, 2, 4, 8)
    assert tuple(map(int, bounds)) == tuple(batch.bounds[0]) and fbox == tuple(batch.fbox[0])
    assert bool(exact) == batch.exact[0]
    left, top, right, bottom = map(int, bounds)
    sw, sh = -(-width // scale), -(-height // scale)
    assert (
        0 <= left < right <= sw and 0 <= top < bottom <= sh or box[0] == box[2] or box[1] == box[3]
    )
    if not exact:  # the region holds the box (to its last bit: the scaled box may
        # end a rounding past the scaled image, whose float32 the resampler takes)
        slack = 1e-9 * max(sw, sh)
        assert left <= fbox[0] and fbox[2] <= right + slack
        assert top <= fbox[1] and fbox[3] <= bottom + slack

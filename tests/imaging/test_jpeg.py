"""Choosing how a JPEG is decoded: the Pillow path where a region or a scaled
decode does not apply."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image

from im2rec.imaging import jpeg
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
        return (0, 0, w, h), (w // 2, h // 2)

    for name, data in cases.items():
        called.clear()
        assert jpeg.region(data, 1, plan, Image.Resampling.BILINEAR) is None, name
        assert not called  # (the plan is left for the Pillow path)
        fast, slow = _with_and_without(monkeypatch, data, 1, plan, Image.Resampling.BILINEAR)
        np.testing.assert_array_equal(fast, slow)
    assert jpeg.region(encode(rgb), -1, plan, Image.Resampling.BILINEAR) is None
    monkeypatch.setenv("IM2REC_NATIVE_JPEG", "0")
    assert (
        not jpeg.enabled() and jpeg.region(encode(rgb), 1, plan, Image.Resampling.BILINEAR) is None
    )

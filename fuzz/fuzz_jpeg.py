"""The JPEG region decoder (``im2rec.imaging._jpeg``): ``header`` and
``decode`` on any bytes, with any region, scale and limit, including
negative and huge numbers. ValueError or OverflowError, never a crash; a
region the decoder accepts has the size it says."""

from __future__ import annotations

import atheris
from _harness import run

with atheris.instrument_imports():
    from im2rec.imaging import _jpeg


def number(fdp: atheris.FuzzedDataProvider) -> int:
    """Mostly small, sometimes negative or past 32 bits."""
    kind = fdp.ConsumeIntInRange(0, 7)
    if kind == 0:
        return fdp.ConsumeIntInRange(-(1 << 40), 1 << 40)
    return fdp.ConsumeIntInRange(0, 300)


def test_one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    denom = fdp.PickValueInList([1, 2, 4, 8, 3, 0, -1])
    left, top = number(fdp), number(fdp)
    right, bottom = left + number(fdp), top + number(fdp)
    gray, rgbx = fdp.ConsumeBool(), fdp.ConsumeBool()
    limit = fdp.PickValueInList([1 << 22, 1000, 0, -5, 1 << 40])
    jpeg = fdp.ConsumeBytes(fdp.remaining_bytes())
    try:
        _jpeg.header(jpeg)
    except ValueError:
        pass
    try:
        got = _jpeg.decode(jpeg, denom, left, top, right, bottom, gray, limit, rgbx)
    except (ValueError, OverflowError):
        return
    if got is not None:
        pixels, x, y, w, h = got
        assert len(pixels) % (w * h) == 0 and len(pixels) // (w * h) in (1, 3, 4)
        assert y == top and h == bottom - top and x <= left and x + w >= right


if __name__ == "__main__":
    run(test_one)

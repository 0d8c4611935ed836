"""The JPEG region decoder (``im2rec.imaging._jpeg``): ``header`` and
``decode`` on any bytes, with any region, scale and limit, including
negative and huge numbers. ValueError or OverflowError, never a crash; a
region the decoder accepts has the size it says. And the training crop
(``crop_plan``, ``crop``) on the same bytes, with any output size, crop
ranges, resize, filter and kernel level: True, None, a drawn box inside
the image, or ValueError."""

from __future__ import annotations

import atheris
from _harness import run

with atheris.instrument_imports():
    import numpy as np

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
    crop_args = (
        fdp.PickValueInList([1, 3]), fdp.ConsumeIntInRange(1, 70), fdp.ConsumeIntInRange(1, 70),
        fdp.PickValueInList([-1, 0, 1, 37, 1 << 15]), fdp.ConsumeFloatInRange(1e-4, 1.0),
        fdp.ConsumeFloatInRange(1.0, 3.0), fdp.ConsumeFloatInRange(1e-3, 1.0),
        fdp.ConsumeFloatInRange(1.0, 1e3), fdp.ConsumeBool(), fdp.ConsumeBool(),
        fdp.PickValueInList([1, 2, 3, 5]),
    )  # fmt: skip
    dtype, vector = fdp.PickValueInList([np.float32, np.uint8]), fdp.ConsumeIntInRange(0, 2)
    jpeg = fdp.ConsumeBytes(fdp.remaining_bytes())
    crop(jpeg, crop_args, dtype, limit, vector)
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


def crop(jpeg: bytes, args: tuple, dtype: type, limit: int, vector: int) -> None:
    scaled = dtype is np.float32
    plan = _jpeg.crop_plan(*args, [0.5] * 3 if scaled else None, [1.0] * 3 if scaled else None)
    out = np.empty((args[0], args[2], args[1]), dtype)
    rng = np.random.default_rng(len(jpeg))
    try:
        got = _jpeg.crop(plan, jpeg, out, rng.bit_generator, max(limit, 0), vector)
    except ValueError:
        return
    if isinstance(got, tuple):  # drawn, left to Pillow: a box inside the image
        width, height = _jpeg.header(jpeg)[:2]
        x0, y0, x1, y1 = got[1]
        assert 0 <= x0 <= x1 <= width * 1.0001 and 0 <= y0 <= y1 <= height * 1.0001
    else:
        assert got is None or got is True


if __name__ == "__main__":
    run(test_one)

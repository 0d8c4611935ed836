"""The normaliser and the splitter (``im2rec.imaging._tensor.normalise`` and
``split``): any geometry and buffer sizes, negative and huge numbers
included. ValueError or OverflowError, never a write or read outside the
buffers."""

from __future__ import annotations

import atheris
from _harness import run

with atheris.instrument_imports():
    import numpy as np

    from im2rec.imaging import _tensor


def number(fdp: atheris.FuzzedDataProvider) -> int:
    kind = fdp.ConsumeIntInRange(0, 9)
    if kind == 0:
        return fdp.ConsumeIntInRange(-(1 << 62), 1 << 62)
    if kind == 1:
        return fdp.PickValueInList([1 << 31, 1 << 32, (1 << 63) - 1, -1])
    return fdp.ConsumeIntInRange(0, 40)


def test_one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    geometry = [number(fdp) for _ in range(6)]
    pixel_bytes = fdp.PickValueInList([1, 3, 4, 2])
    channels = fdp.PickValueInList([1, 3, 2])
    flip = fdp.ConsumeBool()
    as_pixels = fdp.ConsumeBool()
    out = np.zeros(fdp.ConsumeIntInRange(0, 4096), np.uint8 if as_pixels else np.float32)
    pixels = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 16384))
    row_bytes, left, top, width, height = geometry[0], *geometry[2:6]
    try:
        if as_pixels:
            _tensor.split(out, pixels, row_bytes, pixel_bytes, left, top, width, height,
                          channels, flip)  # fmt: skip
        else:
            _tensor.normalise(out, pixels, row_bytes, pixel_bytes, left, top, width, height,
                              channels, [1.0] * 3, [0.5] * 3, flip)  # fmt: skip
    except (ValueError, OverflowError):
        return
    assert as_pixels or np.isfinite(out).all()


if __name__ == "__main__":
    run(test_one)

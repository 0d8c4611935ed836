"""The normaliser, the splitter and the resampler
(``im2rec.imaging._tensor.normalise``, ``split`` and ``resample``): any
geometry, box, filter and buffer sizes, negative, huge and not-a-number
values included. ValueError or OverflowError, never a write or read outside
the buffers."""

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
    if fdp.ConsumeIntInRange(0, 2) == 0:
        resample(fdp, out, pixels, row_bytes, pixel_bytes, width, height, channels, flip)
        return
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


def resample(
    fdp: atheris.FuzzedDataProvider, out: np.ndarray, pixels: bytes, row_bytes: int,
    pixel_bytes: int, width: int, height: int, channels: int, flip: bool,
) -> None:  # fmt: skip
    def coordinate() -> float:
        if fdp.ConsumeIntInRange(0, 7) == 0:
            return fdp.PickValueInList([float("nan"), float("inf"), -1.0, 1e30, -0.0])
        return fdp.ConsumeIntInRange(0, 400) / 8

    box = tuple(coordinate() for _ in range(4))
    method = fdp.PickValueInList([1, 2, 3, 5, 0, 4, 7])
    out_w, out_h = number(fdp), number(fdp)
    scaled = out.dtype == np.float32
    vector = fdp.ConsumeIntInRange(0, 2)  # the portable loops, AVX2, the best
    try:
        _tensor.resample(out, pixels, row_bytes, pixel_bytes, width, height, box, method,
                         channels, out_w, out_h, [1.0] * 3 if scaled else None,
                         [0.5] * 3 if scaled else None, flip, vector)  # fmt: skip
    except (ValueError, OverflowError):
        return
    assert not scaled or np.isfinite(out).all()


if __name__ == "__main__":
    run(test_one)

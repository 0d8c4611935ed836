"""The JPEG region decoder (``im2rec.imaging._jpeg``): ``header`` and
``decode`` on any bytes, with any region, scale and limit, including
negative and huge numbers. ValueError or OverflowError, never a crash; a
region the decoder accepts has the size it says. And the training crop
(``crop_plan``, ``crop``) on the same bytes, with any output size, crop
ranges, resize, filter and kernel level: True, None, a drawn box inside
the image, or ValueError. And ``crop_batch``: the same bytes as a record
(its framing and header from the input too) in a file, read at offsets
and spans around the record's own: every sample done, or the first one
not done named with None, a drawn box or a message, or (drawing a run of
samples together) with Ellipsis; ValueError for its arguments."""

from __future__ import annotations

import os
import struct

import atheris
from _harness import SCRATCH, run

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
    batch(jpeg, crop_args, dtype, limit)
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


MAGIC = 0xCED7230A
RECORDS = os.path.join(SCRATCH, "batch.rec")


def batch(jpeg: bytes, args: tuple, dtype: type, limit: int) -> None:
    """``jpeg`` as a record (magic and length right or not, flag 0-2, a
    label that is a class or not) twice in a file, read in spans that are
    the records or shifted from them. (The choices come from the input's
    length and the crop's options, so the corpus's JPEGs stay JPEGs.)"""
    n = len(jpeg)
    kind, flag, classes = n % 4, n // 4 % 3, n % 5 != 0
    label = (0.0, 3.0, 2.5, -1.0, float("nan"), 2.0**60)[n % 6]
    shift, extra = ((0, 0), (0, 0), (0, 0), (1, 0), (-4, 0), (0, 4), (0, -1))[n // 3 % 7]
    body = struct.pack("<IfQQ", flag, label, 7, 0) + b"\0" * 4 * flag + jpeg
    magic = MAGIC if kind != 1 else MAGIC ^ 1
    length = len(body) if kind != 2 else len(body) + 4
    cflag = (1 << 29) if kind == 3 else 0
    record = struct.pack("<II", magic, length | cflag) + body + b"\0" * (-len(body) % 4)
    with open(RECORDS, "wb") as f:
        f.write(record * 2)
    size = len(record)
    offsets = np.array([0, size + shift], np.int64)
    stops = np.array([size, 2 * size + extra], np.int64)
    scaled = dtype is np.float32
    plan = _jpeg.crop_plan(*args, [0.5] * 3 if scaled else None, [1.0] * 3 if scaled else None)
    out = np.empty((2, args[0], args[2], args[1]), dtype)
    labels = np.zeros(2, np.float32)
    ids = np.zeros(2, np.uint64) if n % 2 else None
    rng = np.random.default_rng(len(jpeg))
    together = n % 3 == 0
    fd = os.open(RECORDS, os.O_RDONLY)
    try:
        done, outcome = _jpeg.crop_batch(
            plan, fd, offsets, stops, out, rng.bit_generator, max(limit, 0), labels, ids, 0,
            1 << 20, classes, together,
        )  # fmt: skip
    except ValueError:
        return
    finally:
        os.close(fd)
    assert 0 <= done <= 2
    if done == 2:
        assert outcome is None and (ids is None or ids.tolist() == [7, 7])
    elif outcome is Ellipsis:  # (drawn past a sample not done: the caller draws again)
        assert together
    else:
        assert outcome is None or isinstance(outcome, (str, tuple))


if __name__ == "__main__":
    run(test_one)

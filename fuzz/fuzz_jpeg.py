"""The JPEG region decoder (``im2rec.imaging._jpeg``): ``header`` and
``decode`` on any bytes, with any region, scale and limit, including
negative and huge numbers. ValueError or OverflowError, never a crash; a
region the decoder accepts has the size it says. And the training crop's
batch (``crop_plan``, ``sizes``, ``render``) on the same bytes, with any
output size, filter and kernel level: the crops planned by im2rec's own
Python (a random-resized crop), and region rows taken from the input,
any numbers: every sample done, or the first one not done named with
False or a message; ValueError for rows that are not a region. And the
same bytes as a record (its framing and header from the input too) in a
file, read by ``recordio.spans.read_singles`` at offsets and spans around
the record's own, then rendered."""

from __future__ import annotations

import os
import struct

import atheris
from _harness import SCRATCH, run

with atheris.instrument_imports():
    import numpy as np
    from PIL import Image

    from im2rec.imaging import _jpeg
    from im2rec.recordio.spans import read_singles
    from im2rec.training.augment import fused, geometry


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
    plan_args = (
        fdp.PickValueInList([1, 3]), fdp.ConsumeIntInRange(1, 70), fdp.ConsumeIntInRange(1, 70),
        fdp.PickValueInList([1, 2, 3, 5]),
    )  # fmt: skip
    dtype, vector = fdp.PickValueInList([np.float32, np.uint8]), fdp.ConsumeIntInRange(0, 2)
    row = [fdp.ConsumeFloatInRange(-4.0, 300.0) for _ in range(11)]
    jpeg = fdp.ConsumeBytes(fdp.remaining_bytes())
    crop(jpeg, plan_args, dtype, limit, vector, np.array([row]))
    batch(jpeg, plan_args, dtype, limit)
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


def plan_of(args: tuple, dtype: type) -> object:
    scaled = dtype is np.float32
    return _jpeg.crop_plan(*args, [0.5] * 3 if scaled else None, [1.0] * 3 if scaled else None)


def planned(args: tuple, sizes: np.ndarray, seed: int) -> np.ndarray:
    """The rows im2rec's Python plans for these images (fused.CropPlan.decide)."""
    rule = geometry.CropRule(args[1], args[2], False, True, (0.08, 1.0), (0.75, 4 / 3), None)
    method = {1: Image.Resampling.LANCZOS, 2: Image.Resampling.BILINEAR,
              3: Image.Resampling.BICUBIC, 5: Image.Resampling.HAMMING}[args[3]]  # fmt: skip
    plan = fused.CropPlan(None, rule, seed % 300 - 1, (True, False), method)
    draws = np.random.default_rng(seed).random((len(sizes), plan.draws))
    return plan.decide(sizes, draws)[0]


def render(plan: object, data: bytes | bytearray, starts: np.ndarray, lengths: np.ndarray,
           rows: np.ndarray, out: np.ndarray, limit: int, vector: int = 2) -> None:  # fmt: skip
    try:
        done, outcome = _jpeg.render(plan, data, starts, lengths, rows, out, limit, vector)
    except ValueError as exc:  # rows that are not a region: the caller's bug
        assert "not a region" in str(exc) or "must be in" in str(exc)
        return
    assert 0 <= done <= len(starts)
    assert (outcome is None) == (done == len(starts))
    assert outcome is None or outcome is False or isinstance(outcome, str)


def crop(jpeg: bytes, args: tuple, dtype: type, limit: int, vector: int, row: np.ndarray) -> None:
    plan = plan_of(args, dtype)
    out = np.empty((args[0], args[2], args[1]), dtype)
    starts, lengths = np.zeros(1, np.int64), np.array([len(jpeg)], np.int64)
    sizes = np.zeros((1, 2), np.int64)
    try:
        taken = _jpeg.sizes(jpeg, starts, lengths, limit, sizes)
    except ValueError:  # a negative limit
        assert limit < 0
        return
    render(plan, jpeg, starts, lengths, row, out, limit, vector)  # rows of any numbers
    if taken:
        assert sizes[0, 0] > 0 and sizes[0, 1] > 0 and sizes[0, 0] * sizes[0, 1] <= limit
        render(plan, jpeg, starts, lengths, planned(args, sizes, len(jpeg)), out, limit, vector)


MAGIC = 0xCED7230A
RECORDS = os.path.join(SCRATCH, "batch.rec")


def batch(jpeg: bytes, args: tuple, dtype: type, limit: int) -> None:
    """``jpeg`` as a record (magic and length right or not, flag 0-2, a
    label that is a class or not) twice in a file, read in spans that are
    the records or shifted from them. (The choices come from the input's
    length and the plan's options, so the corpus's JPEGs stay JPEGs.)"""
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
    fd = os.open(RECORDS, os.O_RDONLY)
    try:
        got = read_singles(fd, offsets, stops, 1 << 20, classes)
    finally:
        os.close(fd)
    assert 0 <= got.taken <= 2 and len(got.starts) == got.taken
    if got.taken:
        assert got.ids.tolist() == [7] * got.taken and flag == 0
    sizes = np.zeros((got.taken, 2), np.int64)
    k = _jpeg.sizes(got.data, got.starts, got.lengths, max(limit, 0), sizes) if got.taken else 0
    if k:
        out = np.empty((k, args[0], args[2], args[1]), dtype)
        render(plan_of(args, dtype), got.data, got.starts[:k], got.lengths[:k],
               planned(args, sizes[:k], n), out, max(limit, 0))  # fmt: skip


if __name__ == "__main__":
    run(test_one)

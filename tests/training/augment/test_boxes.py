"""The detection augmenter's box rules against a line-by-line transcription
of MXNet's C++ (``image_det_aug_default.cc``: ``TryCrop``, ``Project``,
``GenerateCropBox``), on random objects, crops and samplers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from im2rec.errors import ConfigError
from im2rec.training.augment.boxes import (
    F,
    Rect,
    Sampler,
    crop_boxes,
    first_crop,
    mirrored,
    pad_box,
    projected,
    try_crop,
)
from im2rec.training.augment.detection import DetAugmenter

unit = st.floats(0, 1, width=32)


def _area(r: tuple[float, float, float, float]) -> np.float32:
    return F(F(r[2]) * F(r[3]))


def _and(a: tuple, b: tuple) -> tuple:
    """OpenCV's Rect_<float> intersection."""
    x1, y1 = max(a[0], b[0]), max(a[1], b[1])
    w = F(min(F(a[0] + a[2]), F(b[0] + b[2])) - x1)
    h = F(min(F(a[1] + a[3]), F(b[1] + b[3])) - y1)
    return (x1, y1, w, h) if w > 0 and h > 0 else (F(0), F(0), F(0), F(0))


def reference_try_crop(objects, crop, s: Sampler, emit: str, thresh: float):  # type: ignore[no-untyped-def]
    """TryCrop, one object at a time, as MXNet writes it."""
    if len(objects) == 0:
        return objects
    valid = False
    if (s.min_overlap > 0 or s.max_overlap < 1 or s.min_sample_coverage > 0
            or s.max_sample_coverage < 1 or s.min_object_coverage > 0
            or s.max_object_coverage < 1):  # fmt: skip
        for o in objects:
            gt = (o[1], o[2], F(o[3] - o[1]), F(o[4] - o[2]))
            inter = _area(_and(crop, gt))
            if s.min_overlap > 0 or s.max_overlap < 1:
                ovp = F(0) if inter <= 0 else F(inter / F(_area(crop) + _area(gt) - inter))
                if ovp < F(s.min_overlap) or ovp > F(s.max_overlap):
                    continue
            if s.min_sample_coverage > 0 or s.max_sample_coverage < 1:
                c = F(inter / _area(crop))
                if c < F(s.min_sample_coverage) or c > F(s.max_sample_coverage):
                    continue
            if s.min_object_coverage > 0 or s.max_object_coverage < 1:
                with np.errstate(divide="ignore", invalid="ignore"):
                    c = F(inter / _area(gt))
                if c < F(s.min_object_coverage) or c > F(s.max_object_coverage):
                    continue
            valid = True
            break
    else:
        valid = True
    if not valid:
        return None
    kept = []
    for o in objects:
        if emit == "center":
            cx, cy = F(F(o[1] + o[3]) * F(0.5)), F(F(o[2] + o[4]) * F(0.5))
            if not (crop[0] <= cx < F(crop[0] + crop[2]) and crop[1] <= cy < F(crop[1] + crop[3])):
                continue
        else:
            gt = (o[1], o[2], F(o[3] - o[1]), F(o[4] - o[2]))
            with np.errstate(divide="ignore", invalid="ignore"):
                if not F(_area(_and(crop, gt)) / _area(gt)) > F(thresh):
                    continue
        kept.append(o)
    if not kept:
        return None
    return projected(np.asarray(kept, np.float32), Rect(*crop))


def boxes_of(values: list[tuple[float, ...]]) -> np.ndarray:
    rows = []
    for i, (a, b, c, d) in enumerate(values):
        rows.append([i % 3, min(a, c), min(b, d), max(a, c) + 1e-3, max(b, d) + 1e-3, 0])
    return np.asarray(rows, np.float32).reshape(-1, 6)


samplers = st.builds(
    lambda lo, hi, so, oo, over: Sampler(
        min_overlap=min(lo, hi),
        max_overlap=max(lo, hi),
        min_sample_coverage=so,
        min_object_coverage=oo,
        max_sample_coverage=1.0 if over else 0.9,
    ),  # fmt: skip
    st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.7, 1.0]),
    st.sampled_from([0.0, 0.5, 0.9, 1.0]),
    st.sampled_from([0.0, 0.1, 0.5]),
    st.sampled_from([0.0, 0.3, 0.9]),
    st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(unit, unit, unit, unit), max_size=6),
    st.tuples(unit, unit, st.floats(0.0625, 1, width=32), st.floats(0.0625, 1, width=32)),
    samplers,
    st.sampled_from(["center", "overlap"]),
)
def test_try_crop_is_mxnets(
    values: list, crop: tuple[float, ...], sampler: Sampler, emit: str
) -> None:
    objects = boxes_of(values)
    box = Rect(*(F(v) for v in crop))
    ours = try_crop(objects, box, sampler, emit, 0.3)
    theirs = reference_try_crop(objects, tuple(box), sampler, emit, 0.3)
    if theirs is None:
        assert ours is None
    else:
        assert ours is not None and np.array_equal(ours, theirs)


def reference_crop_box(s: Sampler, aspect: np.float32, u: np.ndarray) -> tuple:
    """GenerateCropBox, one crop, its uniforms given."""

    def uniform(a: float, b: float, v: np.float32) -> np.float32:
        return F(F(a) + (F(b) - F(a)) * v)

    scale = F(uniform(s.min_scale, s.max_scale, u[0]) + F(1e-12))
    low = max(F(F(s.min_aspect) / aspect), F(scale * scale))
    high = min(F(F(s.max_aspect) / aspect), F(1.0 / float(F(scale * scale))))
    ratio = F(np.sqrt(uniform(float(low), float(high), u[1])))
    width, height = min(F(1), F(scale * ratio)), min(F(1), F(scale / ratio))
    return (uniform(0, float(F(1) - width), u[2]), uniform(0, float(F(1) - height), u[3]),
            width, height)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0, 0.9), st.floats(0.3, 3), st.floats(0.3, 3))
def test_crop_boxes_are_mxnets_and_lie_inside_the_image(
    seed: int, low: float, aspect: float, span: float
) -> None:
    draws = np.random.default_rng(seed).random((25, 4), np.float32)
    s = Sampler(min_scale=low, max_scale=1.0, min_aspect=aspect, max_aspect=aspect * span + 0.1)
    boxes = crop_boxes(s, F(4 / 3), draws)
    for t in range(25):
        box = tuple(F(v[t]) for v in boxes)
        assert np.allclose(box, reference_crop_box(s, F(4 / 3), draws[t]), rtol=2e-6, atol=1e-7)
        x, y, w, h = box
        assert 0 < w <= 1 and 0 < h <= 1 and x >= 0 and y >= 0
        assert x + w <= 1 + 1e-6 and y + h <= 1 + 1e-6


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(unit, unit, unit, unit), min_size=1, max_size=6),
       st.integers(0, 2**32 - 1), samplers, st.sampled_from(["center", "overlap"]))  # fmt: skip
def test_the_first_crop_is_the_first_mxnet_would_accept(
    values: list, seed: int, sampler: Sampler, emit: str
) -> None:
    objects = boxes_of(values)
    boxes = crop_boxes(Sampler(min_scale=0.1), F(1), np.random.default_rng(seed).random((8, 4)))
    got = first_crop(objects, boxes, sampler, emit, 0.3)
    for t in range(8):  # MXNet's loop: crop after crop until one is accepted
        theirs = reference_try_crop(objects, tuple(F(v[t]) for v in boxes), sampler, emit, 0.3)
        if theirs is not None:
            assert got is not None and got[0] == t and np.array_equal(got[1], theirs)
            return
    assert got is None


@given(st.lists(st.tuples(unit, unit, unit, unit), max_size=5))
def test_mirroring_twice_is_the_identity(values: list) -> None:
    objects = boxes_of(values)
    once = mirrored(objects)
    assert (once[:, 3] >= once[:, 1]).all()
    assert np.allclose(mirrored(once), objects, atol=1e-6)


def test_a_pad_box_holds_the_image_and_small_scales_are_no_pad() -> None:
    draws = iter([0.01, 0.5, 0.25, 0.9, 0.4, 0.6])

    def uniform(a: float, b: float) -> np.float32:
        return F(F(a) + (F(b) - F(a)) * F(next(draws)))

    assert pad_box(3.0, uniform) is None  # 1.02 < 1.05
    box = pad_box(3.0, uniform)
    assert box is not None and box.width == box.height == 2.0  # 1 + 2 * 0.5
    assert (box.x, box.y) == (F(-0.25), F(-0.9))  # 0.25 and 0.9 of the 1 spare
    assert -box.x + 1 <= box.width and -box.y + 1 <= box.height
    inside = projected(np.asarray([[0, 0, 0, 1, 1, 0]], np.float32), box)[0]
    assert math.isclose(inside[3] - inside[1], 1 / box.width, rel_tol=1e-5)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (
            {"num_crop_sampler": 2, "crop_options": {"min_crop_scales": (0.1, 0.2, 0.3)}},
            "3 values for 2 crop samplers",
        ),
        ({"crop_options": {"min_crop_scales": 0.9, "max_crop_scales": 0.5}}, "min_crop_scales <"),
        ({"crop_options": {"min_crop_overlaps": "(0.7)", "max_crop_overlaps": 0.5}}, "overlaps"),
        ({"crop_options": {"min_crop_scales": "nan"}}, "finite"),
        ({"resize_mode": "stretch"}, "resize_mode"),
        ({"crop_emit_mode": "all"}, "crop_emit_mode"),
        ({"inter_method": 5}, "inter_method"),
        ({"rand_crop_prob": -1}, "rand_crop_prob"),
        ({"max_pad_scale": 1e9}, "max_pad_scale"),
        ({"num_crop_sampler": 10**6}, "num_crop_sampler"),
    ],
)
def test_bad_options_are_named(options: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        DetAugmenter((3, 32, 32), **options)


def test_per_sampler_text_is_read_as_mxnet_writes_it() -> None:
    aug = DetAugmenter((3, 32, 32), num_crop_sampler=3,
                       crop_options={"min_crop_scales": "(0.1, 0.3, 0.5)", "max_crop_trials": 7})  # fmt: skip
    assert [s.min_scale for s in aug.samplers] == [0.1, 0.3, 0.5]
    assert [s.trials for s in aug.samplers] == [7, 7, 7]

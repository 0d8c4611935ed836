"""MXNet's photometric augmenters without MXNet: brightness, contrast and
saturation by one factor each, the HSL jitter, PCA lighting noise, and the
random contrast and illumination of the iterator."""

from __future__ import annotations

import colorsys

import numpy as np

from im2rec.training.augment import Augmenter
from im2rec.training.augment.color import EIGVEC, from_hls, to_hls

from ..test_iterator import png
from .test_geometry import run


def flat(value: tuple[int, int, int], size: int = 12) -> bytes:
    return png(np.full((size, size, 3), value, np.uint8))


def test_brightness_scales_every_pixel_by_one_factor() -> None:
    aug = Augmenter((3, 12, 12), brightness=0.5, dtype="uint8")
    ratios = []
    for seed in range(200):
        out = run(aug, flat((100, 60, 20)), seed).astype(float)
        factor = out[0, 0, 0] / 100
        assert np.allclose(out[1], np.rint(60 * factor), atol=1)
        ratios.append(factor)
    assert 0.5 <= min(ratios) < 0.6 and 1.4 < max(ratios) <= 1.5


def test_contrast_keeps_the_grey_mean_and_saturation_the_grey() -> None:
    grey = np.array([[10, 200], [90, 250]], np.uint8).repeat(6, 0).repeat(6, 1)
    payload = png(np.stack([grey] * 3, axis=2))
    for seed in range(20):
        out = run(Augmenter((3, 12, 12), contrast=0.5, dtype="uint8"), payload, seed)
        assert abs(out.astype(float).mean() - grey.mean()) < 1.5
        # a grey image has no saturation to change
        same = run(Augmenter((3, 12, 12), saturation=0.9, dtype="uint8"), payload, seed)
        np.testing.assert_array_equal(same[0], grey)


def test_saturation_moves_colours_toward_mxnet_grey() -> None:
    aug = Augmenter((3, 12, 12), saturation=1.0, dtype="uint8")
    grey = round(0.114 * 200 + 0.587 * 100 + 0.299 * 50)  # BGR data through RGB2GRAY
    outs = [run(aug, flat((200, 100, 50)), seed)[:, 0, 0].astype(int) for seed in range(100)]
    spreads = [int(o.max() - o.min()) for o in outs]
    assert min(spreads) < 20 and max(spreads) > 200  # from nearly grey to twice as vivid
    nearly = outs[int(np.argmin(spreads))]
    assert np.abs(nearly - grey).max() < 20


def test_hls_round_trip_and_colorsys() -> None:
    rgb = np.random.default_rng(1).integers(0, 256, (40, 40, 3)).astype(np.float32)
    h, s, light = to_hls(rgb)
    back = from_hls(h, light, s)
    assert np.abs(back - rgb).max() <= 4  # 8-bit H (2 degree steps), L and S
    r, g, b = rgb[3, 5] / 255
    ch, cl, cs = colorsys.rgb_to_hls(r, g, b)
    assert (h[3, 5], light[3, 5], s[3, 5]) == (round(ch * 180), round(cl * 255), round(cs * 255))


def test_hsl_shifts_lightness() -> None:
    aug = Augmenter((3, 12, 12), random_l=60, dtype="uint8")
    means = {round(float(run(aug, flat((120, 120, 120)), seed).mean())) for seed in range(30)}
    assert min(means) < 110 and max(means) > 130


def test_pca_noise_adds_one_rgb_offset_along_the_eigenvectors() -> None:
    aug = Augmenter((3, 12, 12), pca_noise=0.1, dtype="uint8")
    for seed in range(20):
        out = run(aug, flat((120, 120, 120)), seed).astype(float)
        shift = out[:, 0, 0] - 120
        assert (out == out[:, :1, :1]).all()
        rng = np.random.default_rng(seed)
        alpha = rng.normal(0, 0.1, 3).astype(np.float32)
        assert np.abs(shift - np.trunc(120 + EIGVEC @ alpha) + 120).max() == 0


def test_random_contrast_and_illumination_are_affine_per_image() -> None:
    aug = Augmenter((3, 12, 12), max_random_contrast=0.5, max_random_illumination=10)
    src = np.random.default_rng(2).integers(0, 256, (12, 12, 3), dtype=np.uint8)
    out = run(aug, png(src), 4)
    planes = src.transpose(2, 0, 1).astype(np.float64)
    slope, intercept = np.polyfit(planes.ravel(), out.ravel(), 1)
    assert 0.5 <= slope <= 1.5 and -10 <= intercept <= 10 and slope != 1

"""Drawing a detection sample (im2rec.training.detdraw.draw): a JPEG window
that fills the sample with no colour change is resampled and normalised in
one pass (training.augment.fused), giving the general path's values, for
every crop, pad, filter and resize recipe and kind of JPEG."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from PIL import Image

from im2rec import native
from im2rec.training.augment import fused
from im2rec.training.augment.detection import DetAugmenter
from im2rec.training.detdraw import draw

from ..imaging.test_regions import KINDS

pytest.importorskip("im2rec.imaging._tensor", reason="built without the extension")
#: beside Pillow-SIMD the one-pass path's resampling gives its very bytes
PILLOW_SIMD = Image.Resampling.BICUBIC in fused._OURS

SSD = dict(rand_crop_prob=0.8, num_crop_sampler=3, min_crop_scales=(0.3,) * 3,
           max_crop_scales=(1.0,) * 3, min_crop_aspect_ratios=(0.5,) * 3,
           max_crop_aspect_ratios=(2.0,) * 3, min_crop_overlaps=(0.1, 0.5, 0.9),
           max_crop_overlaps=(1.0,) * 3, max_crop_trials=(25,) * 3)  # fmt: skip
RECIPES: dict[str, dict[str, Any]] = {
    "SSD crops and mirror": dict(SSD, rand_mirror_prob=0.5),
    "SSD crops, pad": dict(SSD, rand_pad_prob=0.5, max_pad_scale=3.0),
    "random filters": dict(SSD, inter_method=10, rand_mirror_prob=0.5),
    "nearest": dict(inter_method=0),
    "shrink": dict(SSD, resize_mode="shrink"),
    "fit": dict(resize_mode="fit", inter_method=2),
    "colour": dict(SSD, max_random_contrast=0.3, random_contrast_prob=0.5,
                   max_random_hue=10, random_hue_prob=0.5),
}  # fmt: skip
NORMALISE = dict(mean=(123.68, 116.28, 103.53), std=(58.395, 57.12, 57.375))
OBJECTS = np.asarray([[1, 0.1, 0.2, 0.6, 0.7, 0], [3, 0.5, 0.4, 0.9, 0.95, 1]], np.float32)


def drawn(aug: DetAugmenter, payloads: list[bytes], seed: int) -> tuple[np.ndarray, list[Any]]:
    rng = np.random.default_rng(seed)
    out = np.empty((len(payloads), *aug.data_shape), np.float32)
    plans = [draw(payload, aug, OBJECTS, out[i], rng) for i, payload in enumerate(payloads)]
    return out, [(p.part, p.size, p.flip, p.objects.tolist()) for p in plans]


@pytest.mark.skipif(native.switched_off(), reason="IM2REC_NO_NATIVE: there is no one-pass path")
@pytest.mark.parametrize("recipe", sorted(RECIPES))
@pytest.mark.parametrize("channels", [3, 1])
def test_one_pass_samples_are_the_general_paths(
    recipe: str, channels: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    aug = DetAugmenter(data_shape=(channels, 60, 72), **RECIPES[recipe], **NORMALISE)
    payloads = [KINDS[kind] for kind in sorted(KINDS) if kind != "tiny"] * 3
    passes = []
    real = fused.render
    monkeypatch.setattr(fused, "render", lambda *a: passes.append(1) or real(*a))
    for seed in range(3):
        got, got_plans = drawn(aug, payloads, seed)
        with monkeypatch.context() as m:  # the general path: Pillow's image, then numpy
            m.setattr(fused, "window", lambda *a: None)
            want, want_plans = drawn(aug, payloads, seed)
        assert got_plans == want_plans
        if PILLOW_SIMD:
            np.testing.assert_array_equal(got, want)
        else:  # plain Pillow rounds its weights otherwise: a level at most
            assert np.abs(got.astype(np.float64) - want).max() <= 1.0001 / 57.0
    if recipe not in ("fit", "shrink"):  # (those leave room around the image: never one pass)
        assert passes, "the one-pass path must be taken"

"""An augmenter's options checked before anything is decoded: finite and in
MXNet's ranges, the combinations MXNet refuses, and ranges resolved as MXNet
resolves them."""

from __future__ import annotations

import numpy as np
import pytest

from im2rec.errors import ConfigError
from im2rec.training.augment import Augmenter

from ...conftest import photo
from ...test_hostile_values import jpeg
from ..test_iterator import png
from .test_geometry import run


def test_mxnet_random_resized_crop_needs_an_area_or_ratio() -> None:
    payload = png(np.asarray(photo(64, 48, 2)))
    plain = Augmenter((3, 16, 16), dtype="uint8")
    alone = Augmenter((3, 16, 16), dtype="uint8", random_resized_crop=True)
    # MXNet's random_resized_crop=True alone changes nothing: a centre crop.
    np.testing.assert_array_equal(run(plain, payload), run(alone, payload, seed=3))
    rrc = Augmenter((3, 16, 16), dtype="uint8", random_resized_crop=True, min_random_area=0.08,
                    min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3)  # fmt: skip
    crops = {run(rrc, payload, seed).tobytes() for seed in range(10)}
    assert len(crops) == 10


@pytest.mark.parametrize(
    "options",
    [{"pca_noise": 1e300}, {"max_random_contrast": 1e300}, {"brightness": 1e39},
     {"max_random_illumination": 1e300}, {"std": (1e-300, 1.0, 1.0)}, {"mean": (1e300, 0, 0)},
     {"scale": 1e300}, {"saturation": -1}],
)  # fmt: skip
def test_colour_options_that_overflow_float32_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="overflow float32"):
        Augmenter(data_shape=(3, 24, 24), **options)  # type: ignore[arg-type]


def test_the_largest_colour_options_still_give_finite_batches() -> None:
    aug = Augmenter(
        data_shape=(3, 24, 24), pca_noise=100, max_random_contrast=100, brightness=100,
        contrast=100, saturation=100, max_random_illumination=1e6, std=(1e-6,) * 3,
        mean=(1e6,) * 3,
    )  # fmt: skip
    data = jpeg(3)
    assert all(np.isfinite(aug(data)).all() for _ in range(40))

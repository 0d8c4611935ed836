"""Checking an :class:`~im2rec.training.augment.Augmenter`'s options before
anything is decoded: every number finite and in the range MXNet's recipes
use (past these the float32 arithmetic overflows into NaN batches), the
combinations MXNet refuses, and the aspect and crop-size ranges resolved
from their MXNet spellings. Each failure is a :class:`ConfigError` naming
the option."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...errors import ConfigError
from .geometry import INTER_METHODS

if TYPE_CHECKING:
    from .augmenter import Augmenter

__all__ = ["DTYPES", "aspect_range", "check", "crop_size"]

DTYPES = ("float32", "uint8", "int8")
#: the largest value of the options that scale colours (MXNet's recipes use
#: 0-1; past these the float32 arithmetic overflows into NaN batches)
_RANGES = {"brightness": 100.0, "contrast": 100.0, "saturation": 100.0, "pca_noise": 100.0,
           "max_random_contrast": 100.0, "max_random_illumination": 1e6}  # fmt: skip
#: mean and scale/std bounds: every normalised value stays far inside float32
_MAX_LEVEL = 1e6

#: Numeric options, checked to be finite numbers.
_NUMBERS = (
    "resize", "max_rotate_angle", "max_aspect_ratio", "max_shear_ratio", "max_crop_size",
    "min_crop_size", "max_random_scale", "min_random_scale", "max_random_area",
    "min_random_area", "max_img_size", "min_img_size", "brightness", "contrast", "saturation",
    "pca_noise", "random_h", "random_s", "random_l", "rotate", "fill_value", "pad",
    "max_random_contrast", "max_random_illumination",
)  # fmt: skip


def check(aug: Augmenter) -> None:
    """Raise a :class:`ConfigError` for the first option out of its range."""
    if aug.inter_method not in INTER_METHODS:
        raise ConfigError(
            f"inter_method must be one of {', '.join(map(str, INTER_METHODS))} "
            f"(0 nearest, 1 bilinear, 2 cubic, 3 area, 4 Lanczos, 9 auto, 10 random), "
            f"not {aug.inter_method}"
        )
    if aug.dtype not in DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, not {aug.dtype!r}")
    channels = aug.data_shape[0]
    try:
        mean = np.asarray(aug.mean, np.float64)[:channels]
        std = np.asarray(aug.std, np.float64)[:channels]
        scale = float(aug.scale)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"mean, std and scale must be numbers: {exc}") from None
    if len(mean) < channels or len(std) < channels or np.any(std == 0):
        raise ConfigError(f"need a mean and a non-zero std for each of {channels} channels")
    if not (np.isfinite(mean).all() and np.isfinite(std).all() and np.isfinite(scale)):
        raise ConfigError(
            f"mean, std and scale must be finite, not mean={mean.tolist()}, "
            f"std={std.tolist()}, scale={scale}"
        )
    for name in _NUMBERS:
        value = getattr(aug, name)
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise ConfigError(f"{name} must be a number, not {value!r}")
        if not np.isfinite(value):
            raise ConfigError(f"{name} must be finite, not {value}")
    if not 0 <= aug.fill_value <= 255:
        raise ConfigError(f"fill_value must be 0-255, not {aug.fill_value}")
    if aug.pad < 0 or aug.pad > 1 << 14:
        raise ConfigError(f"pad must be between 0 and 16384 pixels, not {aug.pad}")
    if not 0 < aug.min_random_area <= aug.max_random_area:
        raise ConfigError("need 0 < min_random_area <= max_random_area")
    if aug.min_random_scale <= 0 or aug.min_random_scale > aug.max_random_scale:
        raise ConfigError("need 0 < min_random_scale <= max_random_scale")
    if aug.max_random_scale * max(aug.data_shape[1:]) > 1 << 16:
        raise ConfigError(f"max_random_scale {aug.max_random_scale} is too large")
    if aug.min_img_size < 0 or aug.min_img_size > min(aug.max_img_size, 1 << 16):
        raise ConfigError("need 0 <= min_img_size <= max_img_size, at most 65536")
    if aug.max_shear_ratio < 0 or aug.max_rotate_angle < 0:
        raise ConfigError("max_shear_ratio and max_rotate_angle must not be negative")
    for name, most in _RANGES.items():
        if not 0 <= getattr(aug, name) <= most:
            raise ConfigError(
                f"{name} must be between 0 and {most:g}, not {getattr(aug, name)!r} "
                "(larger values overflow float32 into NaN batches)"
            )
    if np.abs(mean).max() > _MAX_LEVEL or np.abs(scale / std).max() > _MAX_LEVEL:
        raise ConfigError(
            f"mean and scale/std must be at most {_MAX_LEVEL:g} in size, not "
            f"mean={mean.tolist()}, std={std.tolist()}, scale={scale} (their results would "
            "overflow float32 into NaN batches)"
        )
    if aug.random_resized_crop and (
        (aug.min_random_scale, aug.max_random_scale) != (1.0, 1.0)
        or aug.min_crop_size != -1 or aug.max_crop_size != -1 or aug.rand_crop
    ):  # fmt: skip
        raise ConfigError(
            "random_resized_crop does not combine with min/max_random_scale, "
            "min/max_crop_size or rand_crop (MXNet refuses them too)"
        )


def aspect_range(aug: Augmenter) -> tuple[float, float]:
    """MXNet's aspect range: ``[min_aspect_ratio, max_aspect_ratio]``, or
    ``1 ± max_aspect_ratio`` without a minimum."""
    if aug.min_aspect_ratio is None:
        low, high = 1 - aug.max_aspect_ratio, 1 + aug.max_aspect_ratio
    else:
        low, high = aug.min_aspect_ratio, aug.max_aspect_ratio
    if not 0 < low <= high:
        raise ConfigError(
            f"the aspect ratio range [{low:g}, {high:g}] must be positive and ordered "
            "(min_aspect_ratio <= max_aspect_ratio; without min_aspect_ratio, "
            "max_aspect_ratio < 1)"
        )
    return float(low), float(high)


def crop_size(aug: Augmenter) -> tuple[int, int] | None:
    low, high = aug.min_crop_size, aug.max_crop_size
    if low == -1 and high == -1:
        return None
    low, high = (high, high) if low == -1 else (low, low) if high == -1 else (low, high)
    if not 0 < low <= high:
        raise ConfigError("need 0 < min_crop_size <= max_crop_size")
    return low, high

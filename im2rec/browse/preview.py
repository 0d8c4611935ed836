"""The augmentation preview: one record drawn several times through the
training path's own augmenters, :class:`~im2rec.training.augment.Augmenter`
(``ImageRecordIter``'s) or :class:`~im2rec.training.augment.detection.
DetAugmenter` with :func:`~im2rec.training.detdraw.draw`
(``ImageDetRecordIter``'s and ``RecordDataset(labels="boxes")``'s), with
options the page sets; each draw as a JPEG and, for detection, the boxes
the draw gives, normalised to the drawn image."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = ["CLASSIFY", "DETECT", "Drawn", "preview"]

#: the page's options: (kind, low, high, default); a bool is 0 or 1
CLASSIFY: dict[str, tuple[type, float, float, float]] = {
    "side": (int, 16, 1024, 224),
    "random_resized_crop": (bool, 0, 1, 1),
    "min_random_area": (float, 0.01, 1, 0.08),
    "max_random_area": (float, 0.01, 1, 1),
    "min_aspect_ratio": (float, 0.1, 10, 0.75),
    "max_aspect_ratio": (float, 0.1, 10, 4 / 3),
    "rand_mirror": (bool, 0, 1, 1),
    "brightness": (float, 0, 1, 0.4),
    "contrast": (float, 0, 1, 0.4),
    "saturation": (float, 0, 1, 0.4),
}
DETECT: dict[str, tuple[type, float, float, float]] = {
    "side": (int, 16, 1024, 300),
    "rand_crop_prob": (float, 0, 1, 0.5),
    "min_crop_scale": (float, 0.01, 1, 0.3),
    "max_crop_scale": (float, 0.01, 1, 1),
    "min_crop_aspect": (float, 0.1, 10, 0.5),
    "max_crop_aspect": (float, 0.1, 10, 2),
    "rand_pad_prob": (float, 0, 1, 0.5),
    "max_pad_scale": (float, 1, 8, 4),
    "rand_mirror_prob": (float, 0, 1, 0.5),
    "max_random_hue": (int, 0, 180, 18),
    "max_random_saturation": (int, 0, 255, 32),
    "max_random_illumination": (int, 0, 255, 32),
    "max_random_contrast": (float, 0, 1, 0.5),
    "random_colour_prob": (float, 0, 1, 0.5),
}
#: SSD's crop samplers (MXNet's example/ssd): the least overlap of each
OVERLAPS = (0.1, 0.3, 0.5, 0.7, 0.9)
#: the most draws one request may ask for
MAX_DRAWS = 12


@dataclass(frozen=True)
class Drawn:
    """One draw: a JPEG, its size, and the boxes (``class, corners``
    normalised to it) for detection."""

    jpeg: bytes
    width: int
    height: int
    boxes: list[list[float]]


def options(given: Mapping[str, str], table: dict[str, tuple[type, float, float, float]]) -> dict[
        str, Any]:  # fmt: skip
    """``given``'s values of ``table``'s options, checked (the defaults for
    the rest); :class:`ConfigError` naming one out of its range."""
    out: dict[str, Any] = {}
    for name, (kind, low, high, default) in table.items():
        text = given.get(name)
        try:
            value = default if text is None else float(text)
        except ValueError:
            raise ConfigError(f"{name} must be a number, not {str(text)[:40]!r}") from None
        if not (math.isfinite(value) and low <= value <= high):
            raise ConfigError(f"{name} must be from {low:g} to {high:g}, not {value:g}")
        out[name] = bool(value) if kind is bool else kind(value)
    return out


def preview(
    payload: bytes, label: np.ndarray, detection: bool, given: Mapping[str, str], draws: int,
    seed: int,
) -> list[Drawn]:  # fmt: skip
    """``draws`` samples of the record (``payload``, its label values) as
    training draws them with the page's options, from generator ``seed``."""
    rng = np.random.default_rng(seed)
    if detection:
        return [_detection(payload, label, options(given, DETECT), rng) for _ in range(draws)]
    from ..training.augment import Augmenter

    o = options(given, CLASSIFY)
    side = o.pop("side")
    augmenter = Augmenter(data_shape=(3, side, side), dtype="uint8", **o)
    out = []
    for _ in range(draws):
        pixels = np.empty(augmenter.data_shape, np.uint8)
        augmenter.write(payload, pixels, rng)
        out.append(Drawn(_jpeg(pixels.transpose(1, 2, 0)), side, side, []))
    return out


def _detection(payload: bytes, label: np.ndarray, o: dict[str, Any],
               rng: np.random.Generator) -> Drawn:  # fmt: skip
    from ..recordio.detection import read_label
    from ..training.augment.detection import DetAugmenter
    from ..training.detdraw import draw

    try:
        objects = read_label(label).objects
    except ValueError as exc:
        raise ConfigError(f"this record's label is not a detection label: {exc}") from None
    n = len(OVERLAPS)
    colour = o["random_colour_prob"]
    augmenter = DetAugmenter(
        data_shape=(3, o["side"], o["side"]), rand_crop_prob=o["rand_crop_prob"],
        num_crop_sampler=n, min_crop_scales=(o["min_crop_scale"],) * n,
        max_crop_scales=(o["max_crop_scale"],) * n,
        min_crop_aspect_ratios=(o["min_crop_aspect"],) * n,
        max_crop_aspect_ratios=(o["max_crop_aspect"],) * n, min_crop_overlaps=OVERLAPS,
        max_crop_overlaps=(1.0,) * n, max_crop_trials=(25,) * n,
        rand_pad_prob=o["rand_pad_prob"], max_pad_scale=o["max_pad_scale"],
        rand_mirror_prob=o["rand_mirror_prob"], max_random_hue=o["max_random_hue"],
        random_hue_prob=colour, max_random_saturation=o["max_random_saturation"],
        random_saturation_prob=colour, max_random_illumination=o["max_random_illumination"],
        random_illumination_prob=colour, max_random_contrast=o["max_random_contrast"],
        random_contrast_prob=colour,
    )  # fmt: skip
    out = np.empty(augmenter.data_shape, np.float32)
    plan = draw(payload, augmenter, objects, out, rng)
    width, height = (int(v) for v in plan.size)
    pixels = np.clip(np.rint(out[:, :height, :width]), 0, 255).astype(np.uint8)
    boxes = np.asarray(plan.objects, np.float64)[:, :5].tolist()
    return Drawn(_jpeg(pixels.transpose(1, 2, 0)), width, height, boxes)


def _jpeg(pixels: np.ndarray) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(out, "JPEG", quality=90)
    return out.getvalue()

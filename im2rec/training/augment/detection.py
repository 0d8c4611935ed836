"""MXNet's detection augmenter (``det_aug_default``) as a plan: from an
image's size, its boxes and a random generator, the decisions for one
sample (:class:`DetPlan`), made before any pixel is decoded.

MXNet's order: resize the short side to ``resize``; colour (HSL shifts and
contrast); mirror; pad to a random larger canvas filled with
``fill_value``; a random crop from one of ``num_crop_sampler`` samplers;
the final resize to ``data_shape`` (``resize_mode`` ``force``, ``shrink``
or ``fit``). The pixel sizes after each step are MXNet's integers; the
geometry ends as one window of the stored image drawn into the output, so
the image is resampled once (:mod:`im2rec.training.detfill` renders it).
The box rules are :mod:`.boxes`'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ...errors import ConfigError
from . import geometry
from .boxes import F, Rect, Sampler, crop_boxes, first_crop, mirrored, pad_box, projected

__all__ = ["SAMPLER_OPTIONS", "DetAugmenter", "DetPlan"]

#: MXNet's per-sampler options -> :class:`Sampler` fields
SAMPLER_OPTIONS = {
    "min_crop_scales": "min_scale",
    "max_crop_scales": "max_scale",
    "min_crop_aspect_ratios": "min_aspect",
    "max_crop_aspect_ratios": "max_aspect",
    "min_crop_overlaps": "min_overlap",
    "max_crop_overlaps": "max_overlap",
    "min_crop_sample_coverages": "min_sample_coverage",
    "max_crop_sample_coverages": "max_sample_coverage",
    "min_crop_object_coverages": "min_object_coverage",
    "max_crop_object_coverages": "max_object_coverage",
    "max_crop_trials": "trials",
}
RESIZE_MODES = ("force", "shrink", "fit")
EMIT_MODES = ("center", "overlap")
#: the most crop samplers and tries per sampler (MXNet's recipes use 5-7 and 25-50)
MAX_SAMPLERS, MAX_TRIALS = 64, 1000


class DetPlan(NamedTuple):
    """One sample's decisions. The output image is ``size`` (width, height:
    ``data_shape``'s, or smaller with ``shrink``/``fit``); the stored
    image's window ``box`` (pixels, left, top, right, bottom) lands on its
    part ``part`` (left, top, right, bottom), mirrored when ``flip``, and
    the rest of ``size`` is ``fill_value`` (padding). ``colour`` holds the
    HSL shifts and the contrast change; ``objects`` the boxes after it all."""

    size: tuple[int, int]
    part: tuple[int, int, int, int] | None
    box: tuple[float, float, float, float]
    flip: bool
    colour: tuple[int, int, int, float]
    objects: np.ndarray
    old_size: tuple[int, int]


def _values(name: str, value: Any, count: int, kind: type) -> tuple[Any, ...]:
    """A per-sampler option as ``count`` values: one value (or MXNet's
    ``"(0.1, 0.3)"`` text) given to every sampler, or one each."""
    if isinstance(value, str):
        parts = [p for p in value.strip().strip("()[]").split(",") if p.strip()]
    elif isinstance(value, Sequence | np.ndarray):
        parts = list(value)
    else:
        parts = [value]
    try:
        got = tuple(kind(float(p)) if kind is int else kind(p) for p in parts)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be numbers, not {value!r}") from None
    if len(got) == 1:
        return got * count
    if len(got) != count:
        raise ConfigError(
            f"{name} has {len(got)} values for {count} crop samplers (num_crop_sampler); "
            "give one value, or one for each sampler"
        )
    return got


def _samplers(count: int, given: dict[str, Any]) -> tuple[Sampler, ...]:
    if not 0 <= count <= MAX_SAMPLERS:
        raise ConfigError(f"num_crop_sampler must be 0 to {MAX_SAMPLERS}, not {count}")
    columns = {}
    for option, name in SAMPLER_OPTIONS.items():
        default = getattr(Sampler, name)
        kind = int if name == "trials" else float
        columns[name] = _values(option, given.get(option, default), count, kind)
    out = []
    for i in range(count):
        s = Sampler(**{name: values[i] for name, values in columns.items()})
        numbers = [getattr(s, name) for name in SAMPLER_OPTIONS.values()]
        if not all(math.isfinite(v) for v in numbers):
            raise ConfigError(f"crop sampler {i}: every crop option must be a finite number")
        if not (0 <= s.min_scale < s.max_scale <= 1):
            raise ConfigError(
                f"crop sampler {i}: need 0 <= min_crop_scales < max_crop_scales <= 1, "
                f"not {s.min_scale:g} and {s.max_scale:g}"
            )
        pairs = (("aspect_ratios", s.min_aspect, s.max_aspect),
                 ("overlaps", s.min_overlap, s.max_overlap),
                 ("sample_coverages", s.min_sample_coverage, s.max_sample_coverage),
                 ("object_coverages", s.min_object_coverage, s.max_object_coverage))  # fmt: skip
        for what, low, high in pairs:
            if not 0 <= low <= high:
                raise ConfigError(
                    f"crop sampler {i}: need 0 <= min_crop_{what} <= max_crop_{what}, "
                    f"not {low:g} and {high:g}"
                )
        if not 0 <= s.trials <= MAX_TRIALS:
            raise ConfigError(f"crop sampler {i}: max_crop_trials must be 0 to {MAX_TRIALS}")
        out.append(s)
    return tuple(out)


@dataclass(frozen=True)
class DetAugmenter:
    """MXNet's ``det_aug_default`` options (its names and defaults), checked.

    ``samplers`` is built from ``num_crop_sampler`` and the per-sampler
    options (``min_crop_scales``... ``max_crop_trials``: one value for
    every sampler or one each, MXNet's ``"(a, b)"`` text or a sequence),
    given by their names as ``ImageDetRecordIter`` takes them, or in
    ``crop_options``. ``mean``/``std`` are per channel, as ``Augmenter``
    takes them: one number a channel of ``data_shape`` (R, G, B, and A for
    four), a fourth for three channels allowed and unused; a std of 0
    divides by 1, as MXNet skips it."""

    data_shape: tuple[int, int, int]
    resize: int = -1
    rand_crop_prob: float = 0.0
    num_crop_sampler: int = 1
    crop_emit_mode: str = "center"
    emit_overlap_thresh: float = 0.3
    rand_pad_prob: float = 0.0
    max_pad_scale: float = 1.0
    max_random_hue: int = 0
    random_hue_prob: float = 0.0
    max_random_saturation: int = 0
    random_saturation_prob: float = 0.0
    max_random_illumination: int = 0
    random_illumination_prob: float = 0.0
    max_random_contrast: float = 0.0
    random_contrast_prob: float = 0.0
    rand_mirror_prob: float = 0.0
    fill_value: int = 127
    inter_method: int = 1
    resize_mode: str = "force"
    mean: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)
    std: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)
    crop_options: dict[str, Any] = field(default_factory=dict)
    # MXNet's per-sampler options by their own names (SAMPLER_OPTIONS)
    min_crop_scales: Any = None
    max_crop_scales: Any = None
    min_crop_aspect_ratios: Any = None
    max_crop_aspect_ratios: Any = None
    min_crop_overlaps: Any = None
    max_crop_overlaps: Any = None
    min_crop_sample_coverages: Any = None
    max_crop_sample_coverages: Any = None
    min_crop_object_coverages: Any = None
    max_crop_object_coverages: Any = None
    max_crop_trials: Any = None
    samplers: tuple[Sampler, ...] = field(init=False)

    def __post_init__(self) -> None:
        shape = tuple(self.data_shape)
        if len(shape) != 3 or not all(isinstance(v, int | np.integer) and v > 0 for v in shape):
            raise ConfigError(f"data_shape must be (channels, height, width), not {shape!r}")
        if shape[0] not in (1, 3, 4):
            raise ConfigError(f"data_shape[0] must be 1, 3 or 4 channels, not {shape[0]}")
        object.__setattr__(self, "data_shape", tuple(int(v) for v in shape))
        if self.inter_method not in geometry.INTER_METHODS:
            raise ConfigError(
                f"inter_method must be one of {', '.join(map(str, geometry.INTER_METHODS))}, "
                f"not {self.inter_method}"
            )
        if self.resize_mode not in RESIZE_MODES:
            raise ConfigError(
                f"resize_mode must be one of {RESIZE_MODES}, not {self.resize_mode!r}"
            )
        if self.crop_emit_mode not in EMIT_MODES:
            raise ConfigError(
                f"crop_emit_mode must be one of {EMIT_MODES}, not {self.crop_emit_mode!r}"
            )
        probabilities = ("rand_crop_prob", "rand_pad_prob", "rand_mirror_prob", "random_hue_prob",
                         "random_saturation_prob", "random_illumination_prob",
                         "random_contrast_prob", "emit_overlap_thresh")  # fmt: skip
        for name in probabilities:
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a number of at least 0, not {value!r}")
        bounded = {"max_pad_scale": 64.0, "max_random_hue": 180, "max_random_saturation": 255,
                   "max_random_illumination": 255, "max_random_contrast": 100.0,
                   "fill_value": 255, "resize": 1 << 16}  # fmt: skip
        for name, top in bounded.items():
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value <= top):
                raise ConfigError(f"{name} must be a number of at most {top}, not {value!r}")
        if self.max_pad_scale < 1 and self.rand_pad_prob > 0:
            raise ConfigError(f"max_pad_scale must be at least 1, not {self.max_pad_scale}")
        for name in ("mean", "std"):
            values = tuple(getattr(self, name))
            if not shape[0] <= len(values) <= 4 or not np.isfinite(values).all():
                raise ConfigError(
                    f"{name} needs a finite number for each of the {shape[0]} channels "
                    "(R, G, B, and A for four)"
                )
            object.__setattr__(self, name, values + (0.0,) * (4 - len(values)))
        given = {n: getattr(self, n) for n in SAMPLER_OPTIONS if getattr(self, n) is not None}
        twice = sorted(given.keys() & self.crop_options.keys())
        if twice:
            raise ConfigError(
                f"{', '.join(twice)}: give each crop option once, not also in crop_options"
            )
        object.__setattr__(self, "crop_options", {**self.crop_options, **given})
        object.__setattr__(
            self, "samplers", _samplers(int(self.num_crop_sampler), self.crop_options)
        )

    @property
    def channels(self) -> int:
        return self.data_shape[0]

    @property
    def colour_active(self) -> bool:
        chances = (self.random_hue_prob, self.random_saturation_prob,
                   self.random_illumination_prob, self.random_contrast_prob)  # fmt: skip
        return any(p > 0 for p in chances)

    def coefficients(self) -> tuple[list[float], list[float]]:
        """``k`` and ``mean * k`` per channel: a pixel ``v`` becomes
        ``v * k - mean * k``, ``k`` being ``1 / std`` (1 where std is 0)."""
        c = self.channels
        std = np.asarray(self.std[:c], np.float32)
        k = np.where(std > 0, np.float32(1) / np.where(std > 0, std, 1), np.float32(1))
        mean = np.asarray(self.mean[:c], np.float32)
        return [float(v) for v in k], [float(v) for v in (mean * k).astype(np.float32)]

    # -- the plan -----------------------------------------------------------

    def plan(
        self, width: int, height: int, objects: np.ndarray, rng: np.random.Generator
    ) -> DetPlan:
        """The decisions for an image of ``width`` x ``height`` pixels whose
        boxes are ``objects`` (the ones MXNet keeps), drawing from ``rng``."""

        def uniform(a: float, b: float) -> np.float32:
            value: np.float32 = F(F(a) + (F(b) - F(a)) * F(rng.random()))
            return value

        cols, rows = geometry.resized(width, height, self.resize) if self.resize > 0 else (
            width, height)  # fmt: skip
        colour = self._colour(uniform, rng)
        flip = self.rand_mirror_prob > 0 and rng.random() < self.rand_mirror_prob
        if flip:
            objects = mirrored(objects)
        # the canvas: the image at (left, top) of a (canvas_w, canvas_h) frame
        left = top = 0
        canvas_w, canvas_h = cols, rows
        if self.rand_pad_prob > 0 and self.max_pad_scale > 1 and rng.random() < self.rand_pad_prob:
            pad = pad_box(self.max_pad_scale, uniform)
            if pad is not None:
                objects = projected(objects, pad)
                left, top = int(F(-pad.x) * cols), int(F(-pad.y) * rows)
                right = int(F(F(pad.width + pad.x) - F(1)) * cols)
                bottom = int(F(F(pad.height + pad.y) - F(1)) * rows)
                canvas_w, canvas_h = cols + left + right, rows + top + bottom
        # the window of the canvas the output shows (a crop, or all of it)
        window = (0, 0, canvas_w, canvas_h)
        crop = self._crop(objects, F(F(canvas_w) / F(canvas_h)), uniform, rng)
        if crop is not None:
            box, objects = crop
            window = (int(box.x * canvas_w), int(box.y * canvas_h),
                      int(box.width * canvas_w), int(box.height * canvas_h))  # fmt: skip
        size = self._out_size(max(1, window[2]), max(1, window[3]))
        part, source = _drawn(window, (left, top, cols, rows), size)
        if part is not None and flip:
            source = (cols - source[2], source[1], cols - source[0], source[3])
        sx, sy = width / cols, height / rows
        box_px = (source[0] * sx, source[1] * sy, source[2] * sx, source[3] * sy)
        return DetPlan(size, part, box_px, flip, colour, objects, (window[2], window[3]))

    def _colour(self, uniform: Any, rng: np.random.Generator) -> tuple[int, int, int, float]:
        """MXNet's draws: four shifts in [-max, max] (HSL truncated to
        integers), then each kept with its probability."""
        if not self.colour_active:
            return (0, 0, 0, 0.0)
        h = int(uniform(-1.0, 1.0) * F(self.max_random_hue))
        s = int(uniform(-1.0, 1.0) * F(self.max_random_saturation))
        light = int(uniform(-1.0, 1.0) * F(self.max_random_illumination))
        c = float(uniform(-1.0, 1.0) * F(self.max_random_contrast))
        h = h if rng.random() < self.random_hue_prob else 0
        s = s if rng.random() < self.random_saturation_prob else 0
        light = light if rng.random() < self.random_illumination_prob else 0
        c = c if rng.random() < self.random_contrast_prob else 0.0
        return (h, s, light, c)

    def _crop(
        self, objects: np.ndarray, aspect: np.float32, uniform: Any, rng: np.random.Generator
    ) -> tuple[Rect, np.ndarray] | None:
        """A crop and the objects it keeps, or None: the samplers in a
        random order, each drawing its ``trials`` crops at once; the first
        crop one accepts is taken (MXNet draws them one at a time, until one
        is accepted: the same crop's distribution)."""
        if not (self.rand_crop_prob > 0 and self.samplers and rng.random() < self.rand_crop_prob):
            return None
        for index in rng.permutation(len(self.samplers)).tolist():
            sampler = self.samplers[index]
            boxes = crop_boxes(sampler, aspect, rng.random((sampler.trials, 4), np.float32))
            got = first_crop(objects, boxes, sampler, self.crop_emit_mode,
                             self.emit_overlap_thresh)  # fmt: skip
            if got is not None:
                at, kept = got
                return Rect(*(F(v[at]) for v in boxes)), kept
        return None

    def _out_size(self, cols: int, rows: int) -> tuple[int, int]:
        """The output's (width, height) for a window of ``cols`` x ``rows``."""
        h, w = self.data_shape[1], self.data_shape[2]
        if self.resize_mode == "force" or (
            self.resize_mode == "shrink" and rows <= h and cols <= w
        ):
            return (w, h) if self.resize_mode == "force" else (cols, rows)
        ratio = min(F(h) / F(rows), F(w) / F(cols))
        return max(1, int(ratio * F(cols))), max(1, int(ratio * F(rows)))


def _drawn(
    window: tuple[int, int, int, int],
    image: tuple[int, int, int, int],
    size: tuple[int, int],
) -> tuple[tuple[int, int, int, int] | None, tuple[float, float, float, float]]:
    """Where the image lands in an output of ``size`` showing ``window``
    (x, y, width, height of the canvas), the image being ``image`` (its
    left, top, width, height on the canvas): the output's part (whole
    pixels) and the image's pixels drawn into it; None when the window
    shows only padding."""
    wx, wy, ww, wh = window
    ix, iy, iw, ih = image
    ww, wh = max(ww, 1), max(wh, 1)
    x0, x1 = max(wx, ix), min(wx + ww, ix + iw)
    y0, y1 = max(wy, iy), min(wy + wh, iy + ih)
    ow, oh = size
    px0, px1 = round((x0 - wx) * ow / ww), round((x1 - wx) * ow / ww)
    py0, py1 = round((y0 - wy) * oh / wh), round((y1 - wy) * oh / wh)
    if px1 <= px0 or py1 <= py0:
        return None, (0.0, 0.0, 1.0, 1.0)
    # the image's pixels under the output's whole-pixel part, exactly
    sx0 = min(max(wx + px0 * ww / ow - ix, 0.0), iw)
    sx1 = min(max(wx + px1 * ww / ow - ix, 0.0), iw)
    sy0 = min(max(wy + py0 * wh / oh - iy, 0.0), ih)
    sy1 = min(max(wy + py1 * wh / oh - iy, 0.0), ih)
    return (px0, py0, px1, py1), (sx0, sy0, sx1, sy1)

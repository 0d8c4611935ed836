"""The per-image training pipeline: one record's image bytes in, one
``(C, H, W)`` sample out.

:class:`Augmenter` is what :class:`~im2rec.iterator.ImageRecordIter`'s
workers run for every record, in MXNet's order (spec §5.3): resize the short
side, crop (centre, random, or random-resized), mirror, normalise. It is also
a transform for ``RecordDataset(output="bytes")``.

The geometry is planned from the image's header before any pixel is decoded,
so a single resample goes from the stored pixels to the output, and a JPEG
whose crop shrinks at least 2x is decoded at a reduced DCT scale. With no
resize and an image at least the output size, the crop is cut out without
resampling, so pixels equal the decoder's (and MXNet's).
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from .errors import ConfigError
from .imaging import Box, decode_region, opencv_mode, pixel_limit

__all__ = ["Augmenter"]

#: MXNet's ``inter_method`` codes (OpenCV's) in Pillow terms; 3 is OpenCV's
#: area averaging, whose Pillow counterpart is the box filter.
INTERPOLATION = {
    0: Image.Resampling.NEAREST,
    1: Image.Resampling.BILINEAR,
    2: Image.Resampling.BICUBIC,
    3: Image.Resampling.BOX,
    4: Image.Resampling.LANCZOS,
}
#: data_shape[0] -> OpenCV imread flag (spec §5.3 step 2).
_COLOR = {1: 0, 3: 1, 4: -1}
DTYPES = ("float32", "uint8", "int8")


@dataclass(frozen=True)
class Augmenter:
    """Decode, crop, mirror and normalise one image into ``data_shape``.

    * ``resize > 0``: the short side becomes ``resize`` and the long side
      ``long * resize // short`` (as im2rec and MXNet; it may enlarge).
    * Crop: ``random_resized_crop`` takes a region of ``area`` (fraction of
      the image) and ``ratio`` (width/height, log-uniform) and resizes it to
      the output, with torchvision's RandomResizedCrop rules (10 tries, then
      a centre crop). Otherwise an ``(H, W)`` window at the centre, or at a
      uniform random offset with ``rand_crop``; an image smaller than the
      window is first enlarged, keeping its aspect, to cover it.
    * ``mirror`` flips every image, ``rand_mirror`` half of them.
    * ``float32`` output is ``(pixel - mean) * scale / std`` per channel
      (``mean``/``std`` in R, G, B, A order); ``uint8`` is the raw pixels;
      ``int8`` is ``pixel - round(mean)``, saturated.
    """

    data_shape: tuple[int, int, int]
    resize: int = -1
    rand_crop: bool = False
    random_resized_crop: bool = False
    area: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    rand_mirror: bool = False
    mirror: bool = False
    inter_method: int = 1
    mean: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)
    std: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    scale: float = 1.0
    dtype: str = "float32"
    _k: np.ndarray = field(init=False, repr=False, compare=False)
    _mk: np.ndarray = field(init=False, repr=False, compare=False)
    _mean_int: np.ndarray = field(init=False, repr=False, compare=False)  # for int8

    def __post_init__(self) -> None:
        shape = tuple(self.data_shape)
        if len(shape) != 3 or not all(isinstance(v, int | np.integer) and v > 0 for v in shape):
            raise ConfigError(f"data_shape must be (channels, height, width), not {shape!r}")
        if shape[0] not in _COLOR:
            raise ConfigError(
                f"data_shape[0] must be 1 (gray), 3 (RGB) or 4 (RGBA) channels, not {shape[0]}"
            )
        object.__setattr__(self, "data_shape", tuple(int(v) for v in shape))
        if shape[1] * shape[2] > pixel_limit():
            raise ConfigError(
                f"data_shape {shape!r} asks for {shape[1] * shape[2]:,} pixels per image, more "
                f"than the limit of {pixel_limit():,} (PIL.Image.MAX_IMAGE_PIXELS)"
            )
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.inter_method not in INTERPOLATION:
            raise ConfigError(
                f"inter_method must be 0 (nearest), 1 (bilinear), 2 (bicubic), 3 (area) or "
                f"4 (lanczos), not {self.inter_method!r}"
            )
        if not 0 < self.area[0] <= self.area[1] <= 1:
            raise ConfigError(f"the random crop area must satisfy 0 < min <= max <= 1: {self.area}")
        if not 0 < self.ratio[0] <= self.ratio[1]:
            raise ConfigError(f"the aspect ratio range must satisfy 0 < min <= max: {self.ratio}")
        channels = shape[0]
        try:
            mean = np.asarray(self.mean, np.float64)[:channels]
            std = np.asarray(self.std, np.float64)[:channels]
            scale = float(self.scale)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"mean, std and scale must be numbers: {exc}") from None
        if len(mean) < channels or len(std) < channels or np.any(std == 0):
            raise ConfigError(f"need a mean and a non-zero std for each of {channels} channels")
        if not (np.isfinite(mean).all() and np.isfinite(std).all() and np.isfinite(scale)):
            raise ConfigError(
                f"mean, std and scale must be finite, not mean={mean.tolist()}, "
                f"std={std.tolist()}, scale={scale}"
            )
        k = scale / std
        object.__setattr__(self, "_k", k.astype(np.float32)[:, None, None])
        object.__setattr__(self, "_mk", (mean * k).astype(np.float32)[:, None, None])
        object.__setattr__(self, "_mean_int", np.round(mean).astype(np.int16)[:, None, None])

    @property
    def channels(self) -> int:
        return self.data_shape[0]

    def plan(
        self, width: int, height: int, rng: np.random.Generator
    ) -> tuple[Box, tuple[int, int]]:
        """The region of a ``width`` x ``height`` image to keep, in its own
        pixel coordinates, and the output size ``(W, H)``."""
        out_h, out_w = self.data_shape[1:]
        vw, vh = width, height  # the image after the resize step
        if self.resize > 0:
            r, short = self.resize, min(width, height)
            vw, vh = (r, height * r // width) if width == short else (width * r // height, r)
        if self.random_resized_crop:
            x, y, cw, ch = self._random_area(vw, vh, rng)
        else:
            if vw < out_w or vh < out_h:
                s = max(out_w / vw, out_h / vh)
                vw, vh = max(out_w, round(vw * s)), max(out_h, round(vh * s))
            cw, ch = out_w, out_h
            if self.rand_crop:
                x, y = int(rng.integers(0, vw - cw + 1)), int(rng.integers(0, vh - ch + 1))
            else:
                x, y = (vw - cw) // 2, (vh - ch) // 2
        sx, sy = vw / width, vh / height
        return (x / sx, y / sy, (x + cw) / sx, (y + ch) / sy), (out_w, out_h)

    def _random_area(
        self, width: int, height: int, rng: np.random.Generator
    ) -> tuple[int, int, int, int]:
        # torchvision.transforms.RandomResizedCrop.get_params, draw for draw.
        area = width * height
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target = area * rng.uniform(*self.area)
            aspect = math.exp(rng.uniform(*log_ratio))
            w = round(math.sqrt(target * aspect))
            h = round(math.sqrt(target / aspect))
            if 0 < w <= width and 0 < h <= height:
                x = int(rng.integers(0, width - w + 1))
                y = int(rng.integers(0, height - h + 1))
                return x, y, w, h
        in_ratio = width / height
        if in_ratio < self.ratio[0]:
            w, h = width, round(width / self.ratio[0])
        elif in_ratio > self.ratio[1]:
            w, h = round(height * self.ratio[1]), height
        else:
            w, h = width, height
        return (width - w) // 2, (height - h) // 2, w, h

    def write(self, payload: bytes | memoryview, out: np.ndarray, rng: np.random.Generator) -> None:
        """Decode ``payload`` into ``out`` (``data_shape``, ``dtype``).
        Raises :class:`~im2rec.errors.ImageCodecError` for undecodable data."""
        flip = self.mirror or (self.rand_mirror and rng.random() < 0.5)
        channels = self.channels
        im = decode_region(
            payload,
            _COLOR[channels],
            lambda w, h: self.plan(w, h, rng),
            INTERPOLATION[self.inter_method],
        )
        if channels == 4 and im.mode != "RGBA":
            im = opencv_mode(im, 1).convert("RGBA")  # lenient: MXNet demands stored alpha
        arr = np.asarray(im)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if flip:
            arr = arr[:, ::-1]
        planes = arr.transpose(2, 0, 1)  # HWC -> CHW, still a view
        if self.dtype == "float32":
            np.multiply(planes, self._k, out=out)
            out -= self._mk
        elif self.dtype == "uint8":
            out[...] = planes
        else:
            shifted = planes.astype(np.int16) - self._mean_int
            np.clip(shifted, -128, 127, out=shifted)
            out[...] = shifted

    def __call__(self, payload: bytes | memoryview) -> np.ndarray:
        """A new ``data_shape`` array for ``payload``; the random draws come
        from a per-process generator seeded from :mod:`random` (which torch's
        DataLoader seeds differently in each worker)."""
        out = np.empty(self.data_shape, self.dtype)
        self.write(payload, out, _process_rng())
        return out


_RNG: tuple[int, np.random.Generator] | None = None


def _process_rng() -> np.random.Generator:
    global _RNG
    if _RNG is None or _RNG[0] != os.getpid():
        _RNG = (os.getpid(), np.random.default_rng(random.getrandbits(64)))
    return _RNG[1]

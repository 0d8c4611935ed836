""":class:`Augmenter`, the classification pipeline of one image (the
package's docstring says what it does, in MXNet's order)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from ...errors import ConfigError
from ...imaging.codec import Crop, Plan, opencv_mode, pixel_limit, resize
from ...imaging.columns import SCALARS
from ...imaging.regions import decode_region
from . import fused, geometry, options, reuse
from .color import Photometric
from .geometry import INTERPOLATION, Affine, CropRule
from .seeding import process_rng

__all__ = ["INTERPOLATION", "Augmenter"]

#: data_shape[0] -> OpenCV imread flag (docs/format.md, "One record's
#: pipeline", step 2).
_COLOR = {1: 0, 3: 1, 4: -1}


@dataclass(frozen=True)
class Augmenter:
    """Decode and augment one image into ``data_shape``; the options are
    MXNet's ``ImageRecordIter`` ones, with its defaults and meanings (see
    the README's table). ``mean``/``std`` are per channel (R, G, B, A);
    ``mean_img`` a ``data_shape`` float32 array that replaces ``mean``.

    * ``float32`` output is ``(pixel - mean) * c * scale / std + i * scale /
      std`` per channel, with ``c = 1 + U(±max_random_contrast)`` and ``i =
      U(±max_random_illumination)``; ``uint8`` is the raw pixels; ``int8``
      is ``pixel - round(mean)``, saturated.
    """

    data_shape: tuple[int, int, int]
    resize: int = -1
    rand_crop: bool = False
    random_resized_crop: bool = False
    max_rotate_angle: int = 0
    max_aspect_ratio: float = 0.0
    min_aspect_ratio: float | None = None
    max_shear_ratio: float = 0.0
    max_crop_size: int = -1
    min_crop_size: int = -1
    max_random_scale: float = 1.0
    min_random_scale: float = 1.0
    max_random_area: float = 1.0
    min_random_area: float = 1.0
    max_img_size: float = 1e10
    min_img_size: float = 0.0
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    pca_noise: float = 0.0
    random_h: int = 0
    random_s: int = 0
    random_l: int = 0
    rotate: int = -1
    rotate_list: tuple[int, ...] = ()
    fill_value: int = 255
    inter_method: int = 1
    pad: int = 0
    rand_mirror: bool = False
    mirror: bool = False
    mean: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)
    std: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    scale: float = 1.0
    max_random_contrast: float = 0.0
    max_random_illumination: float = 0.0
    mean_img: np.ndarray | None = field(default=None, compare=False, repr=False)
    dtype: str = "float32"
    _crop: CropRule = field(init=False, repr=False, compare=False)
    _affine: Affine = field(init=False, repr=False, compare=False)
    _photo: Photometric = field(init=False, repr=False, compare=False)
    _mean: np.ndarray = field(init=False, repr=False, compare=False)
    _k: np.ndarray = field(init=False, repr=False, compare=False)
    _mean_int: np.ndarray = field(init=False, repr=False, compare=False)
    _coef: tuple[list[float], list[float]] = field(init=False, repr=False, compare=False)
    _one_pass: bool = field(init=False, repr=False, compare=False)
    _native: Any = field(init=False, repr=False, compare=False)  # fused.crop's plan, or None

    def __post_init__(self) -> None:
        shape = tuple(self.data_shape)
        if len(shape) != 3 or not all(isinstance(v, int | np.integer) and v > 0 for v in shape):
            raise ConfigError(f"data_shape must be (channels, height, width), not {shape!r}")
        if shape[0] not in _COLOR:
            raise ConfigError(
                f"data_shape[0] must be 1 (gray), 3 (RGB) or 4 (RGBA) channels, not {shape[0]}"
            )
        if shape[1] * shape[2] > pixel_limit():
            raise ConfigError(f"data_shape {shape} has more pixels than the limit")
        object.__setattr__(self, "data_shape", tuple(int(v) for v in shape))
        options.check(self)
        ratio = options.aspect_range(self)
        set_ = object.__setattr__
        crop_size = options.crop_size(self)
        set_(self, "_crop", CropRule(
            shape[2], shape[1], self.rand_crop, self.random_resized_crop,
            (self.min_random_area, self.max_random_area), ratio, crop_size,
        ))  # fmt: skip
        set_(self, "_affine", Affine(
            self.max_rotate_angle, self.rotate, tuple(self.rotate_list), self.max_shear_ratio,
            (self.min_random_scale, self.max_random_scale), ratio,
            (self.min_img_size, self.max_img_size), self.random_resized_crop,
        ))  # fmt: skip
        set_(self, "_photo", Photometric(
            self.brightness, self.contrast, self.saturation, self.random_h, self.random_s,
            self.random_l, self.pca_noise,
        ))  # fmt: skip
        if self._photo.needs_colour() and shape[0] == 1:
            raise ConfigError(
                "saturation, random_h/s/l and pca_noise change colours: they need "
                "data_shape[0] 3 or 4"
            )
        c = shape[0]
        mean = np.asarray(self.mean, np.float32)[:c]
        set_(self, "_mean", mean[:, None, None])
        set_(
            self,
            "_k",
            (np.float32(self.scale) / np.asarray(self.std, np.float32)[:c])[:, None, None],
        )
        set_(self, "_mean_int", np.round(mean).astype(np.int16)[:, None, None])
        # float32 output straight from the decoder (augment.fused): the
        # same coefficients as _normalise, as Python floats for the C side
        set_(self, "_coef", ([float(v) for v in self._k.ravel()],
                             [float(v) for v in (self._mean * self._k).ravel()]))  # fmt: skip
        set_(self, "_one_pass", (
            self.dtype in ("float32", "uint8") and self.geometry_planned
            and not self._photo.active() and self.mean_img is None and self.max_random_contrast == 0
            and self.max_random_illumination == 0 and shape[0] in (1, 3) and fused.available()
        ))  # fmt: skip
        set_(self, "_native", self._native_plan())
        if self.mean_img is not None:
            img = np.asarray(self.mean_img, np.float32)
            if img.shape != shape:
                raise ConfigError(
                    f"the mean image is {img.shape}, but data_shape is {shape}: make it again "
                    "for this data_shape (delete the file and ImageRecordIter computes it)"
                )
            set_(self, "mean_img", img)

    def _native_plan(self) -> Any:
        """:func:`fused.crop`'s plan where the whole sample can be made in C:
        the one-pass path, MXNet's random-resized crop and a fixed filter."""
        rule = self._crop
        if not (
            self._one_pass
            and rule.uses_area()
            and self.inter_method in INTERPOLATION
            and isinstance(self.resize, int | np.integer)
        ):
            return None
        return fused.crop_plan(
            self.channels, rule, int(self.resize), (self.rand_mirror, self.mirror),
            INTERPOLATION[self.inter_method], self._coef if self.dtype == "float32" else None,
        )  # fmt: skip

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_native"]  # a capsule: made again where it is unpickled
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        object.__setattr__(self, "_native", self._native_plan())

    @property
    def channels(self) -> int:
        return self.data_shape[0]

    @property
    def geometry_planned(self) -> bool:
        """Whether the crop is planned before decoding (no warp, no padding)."""
        return not self._affine.active() and self.pad == 0

    def write(self, payload: bytes | memoryview, out: np.ndarray, rng: np.random.Generator) -> None:
        """Decode ``payload`` into ``out`` (``data_shape``, ``dtype``).
        Raises :class:`~im2rec.errors.ImageCodecError` for undecodable data,
        and a :class:`ConfigError` for an image the crop options cannot fit
        (smaller than ``max_crop_size``)."""
        done = fused.crop(self._native, payload, out, rng)
        if done is not True:
            self._rest(done, payload, out, rng)

    def writer(self, rng: np.random.Generator) -> fused.Writer:
        """``write(payload, out)``: :meth:`write` with ``rng`` for a batch,
        what it looks up for every sample (the switches, the pixel limit)
        looked up once; the same draws in the same order."""
        return fused.Writer(self._native, self._rest, rng)

    def _rest(
        self, done: Any, payload: bytes | memoryview, out: np.ndarray, rng: np.random.Generator
    ) -> None:
        """:meth:`write` after :func:`fused.crop`: ``(flip, box)`` drawn but
        left to Pillow (finished with those draws), or None, nothing drawn:
        the Python path."""
        if isinstance(done, tuple):
            self._finish(payload, out, rng, *done)
            return
        flip = self.mirror or (self.rand_mirror and rng.random() < 0.5)
        interp = geometry.pick_interp(self.inter_method, rng)
        if self._one_pass:
            plan = self._plan(interp, rng)
            if fused.write(payload, _COLOR[self.channels], plan, out, *self._coef, flip):
                return
        if self.geometry_planned:
            im = self._planned(payload, interp, rng)
        else:
            im = self._warped(payload, interp, rng)
        self._emit(im, out, flip, rng)

    def _finish(
        self,
        payload: bytes | memoryview,
        out: np.ndarray,
        rng: np.random.Generator,
        flip: bool,
        box: geometry.Box,
    ) -> None:
        """The rest of :meth:`write` for a crop :func:`fused.crop` drew but
        left to Pillow (a filter table past the resampler's bound)."""
        size = (self._crop.out_w, self._crop.out_h)
        method = INTERPOLATION[self.inter_method]

        def plan(width: int, height: int) -> Crop:
            return Crop(box, size, method)

        color = _COLOR[self.channels]
        if not fused.write(payload, color, plan, out, *self._coef, flip):
            # (not reached: fused.crop took this JPEG) the general path
            self._emit(decode_region(payload, color, plan), out, flip, rng)

    def _emit(self, im: Image.Image, out: np.ndarray, flip: bool, rng: np.random.Generator) -> None:
        """The decoded crop ``im`` to ``out``: colour changes, mirror, normalisation."""
        if self.channels == 4 and im.mode != "RGBA":
            im = opencv_mode(im, 1).convert("RGBA")  # lenient: MXNet demands stored alpha
        pixels: np.ndarray = np.asarray(im)
        if pixels.ndim == 2:
            pixels = pixels[:, :, None]
        planes = pixels.transpose(2, 0, 1)  # HWC -> CHW, still a view
        if self._photo.active():
            # float levels, in the output itself when it is float32
            work = out if self.dtype == "float32" else np.empty(self.data_shape, np.float32)
            work[...] = planes
            self._photo.apply(work, rng)
            planes = work
        self._normalise(planes, out, flip, rng)

    def _planned(
        self, payload: bytes | memoryview, interp: geometry.Interp, rng: np.random.Generator
    ) -> Image.Image:
        return decode_region(payload, _COLOR[self.channels], self._plan(interp, rng))

    def _plan(self, interp: geometry.Interp, rng: np.random.Generator) -> Plan:
        """The crop, and its resampling, planned from the image's size."""
        rule = self._crop

        def plan(width: int, height: int) -> Crop:
            out = (rule.out_w, rule.out_h)
            if rule.uses_area():  # the batch's rule, for one sample
                draws = rng.random(geometry.RRC_DRAWS).tolist()
                box, sides = geometry.planned_box(SCALARS, width, height, self.resize, rule, draws)
                method = interp((int(sides[0]), int(sides[1])), out)
                return Crop((float(box[0]), float(box[1]), float(box[2]), float(box[3])), out,
                            method)  # fmt: skip
            vw, vh = geometry.resized(width, height, self.resize)
            box, size, cropped = geometry.final_crop(vw, vh, rule, rng, self._too_small)
            if not cropped:  # enlarged to `size` if needed, then the output window
                method = interp((vw, vh), out)
                x, y = geometry.centre_window(*size, rule, rng)
                ex, ey = size[0] / vw, size[1] / vh
                box = (x / ex, y / ey, (x + out[0]) / ex, (y + out[1]) / ey)
            else:
                method = interp((round(box[2] - box[0]), round(box[3] - box[1])), out)
            sx, sy = vw / width, vh / height
            return Crop((box[0] / sx, box[1] / sy, box[2] / sx, box[3] / sy), out, method)

        return plan

    def _warped(
        self, payload: bytes | memoryview, interp: geometry.Interp, rng: np.random.Generator
    ) -> Image.Image:
        def plan(width: int, height: int) -> Crop:
            size = geometry.resized(width, height, self.resize)
            return Crop((0, 0, width, height), size, interp((width, height), size))

        im = decode_region(payload, _COLOR[self.channels], plan)
        if self.channels == 4 and im.mode != "RGBA":
            im = opencv_mode(im, 1).convert("RGBA")
        f = self.fill_value
        fill = {"L": (f,), "RGBA": (f, f, f, 0)}.get(im.mode, (f, f, f))
        if self._affine.active():
            im = geometry.affine_warp(im, self._affine, fill, interp, rng)
        if self.pad:
            im = geometry.pad(im, self.pad, fill)
        rule = self._crop
        out = (rule.out_w, rule.out_h)
        box, size, cropped = geometry.final_crop(im.width, im.height, rule, rng, self._too_small)
        if cropped:
            old = (round(box[2] - box[0]), round(box[3] - box[1]))
            return resize(im, out, interp(old, out), box)
        method = interp(im.size, out)
        if size != im.size:
            im = resize(im, size, method)
        x, y = geometry.centre_window(*size, rule, rng)
        return im.crop((x, y, x + out[0], y + out[1]))

    def _too_small(self, width: int, height: int) -> ConfigError:
        side = self._crop.crop_size[1] if self._crop.crop_size else 0
        return ConfigError(
            f"an image of {width}x{height} pixels (after resize, warp and pad) is smaller than "
            f"max_crop_size {side}; lower max_crop_size or set resize"
        )

    def _normalise(
        self, planes: np.ndarray, out: np.ndarray, flip: bool, rng: np.random.Generator
    ) -> None:
        """``planes`` (C, H, W) pixels -> ``out``, mirrored when ``flip``; the
        mean image is subtracted before mirroring, as MXNet does."""
        if self.dtype == "uint8":
            out[...] = planes[:, :, ::-1] if flip else planes
            return
        if self.dtype == "int8":
            mean = self._mean_int if self.mean_img is None else np.round(self.mean_img)
            shifted = planes.astype(np.int16) - mean.astype(np.int16)
            np.clip(shifted, -128, 127, out=shifted)
            out[...] = shifted[:, :, ::-1] if flip else shifted
            return
        k = self._k
        if self.max_random_contrast > 0:
            k = k * np.float32(1 + rng.uniform(-self.max_random_contrast, self.max_random_contrast))
        if self.mean_img is not None:
            np.subtract(planes, self.mean_img, out=out)
            out *= k
            if flip:
                out[...] = out[:, :, ::-1]
        else:
            np.multiply(planes[:, :, ::-1] if flip else planes, k, out=out)
            out -= self._mean * k
        if self.max_random_illumination > 0:
            illum = rng.uniform(-self.max_random_illumination, self.max_random_illumination)
            out += self._k * np.float32(illum)  # illumination * scale / std

    def __call__(self, payload: bytes | memoryview) -> np.ndarray:
        """A ``data_shape`` array for ``payload``, yours until you drop it
        (then a later call may reuse its memory: :mod:`im2rec.training.augment.reuse`);
        the random draws come from a per-process generator seeded from
        :mod:`random` (which torch's DataLoader seeds differently in each
        worker)."""
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise ConfigError(
                f"Augmenter decodes the stored image bytes itself (only the part its crop "
                f"keeps), and was given {type(payload).__name__}: read the records with "
                "RecordDataset(..., output='bytes')"
            )
        out = reuse.new_array(self.data_shape, self.dtype)
        self.write(payload, out, process_rng())
        return out

    def replace(self, **changes: Any) -> Augmenter:
        """A copy with some options changed."""
        import dataclasses

        names = {f.name for f in dataclasses.fields(self) if f.init}
        kwargs = {name: getattr(self, name) for name in names}
        kwargs.update(changes)
        return Augmenter(**kwargs)

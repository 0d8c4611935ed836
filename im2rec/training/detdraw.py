"""Drawing one detection sample: its image decoded, cropped, padded,
mirrored, coloured and normalised as a
:class:`~im2rec.training.augment.detection.DetPlan` says (:func:`draw`,
what the iterator's workers and :class:`DetTransform` both call), and
:class:`DetTransform`, ``det_aug_default`` for a ``DataLoader``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import native
from ..imaging.codec import Crop, Upright, opencv_mode
from ..imaging.regions import decode_planned
from .augment import fused, geometry
from .augment.color import from_hls, to_hls
from .augment.detection import DetAugmenter, DetPlan
from .augment.seeding import process_rng
from .targets import objects_target

__all__ = ["DetTransform", "draw"]

_tensor: Any = native.load("tensor")  # the one-pass normaliser, when built
#: OpenCV's imdecode flag for each channel count (gray, colour, as stored)
_COLOR = {1: 0, 3: 1, 4: -1}


def draw(
    payload: bytes | memoryview,
    aug: DetAugmenter,
    objects: np.ndarray,
    out: np.ndarray,
    rng: np.random.Generator,
) -> DetPlan:
    """Decode ``payload`` into ``out`` (``(C, H, W)`` float32, normalised)
    as ``aug`` plans it for ``objects`` (rows ``cls, corners normalised,
    extra...``); the plan (its boxes the sample's, normalised to the drawn
    image) is returned. Only the window the plan shows is decoded, at a
    reduced DCT scale when it shrinks at least 2x; nothing, when only
    padding shows. A JPEG window that fills ``out`` with no colour change
    is resampled and normalised in one pass (:mod:`.augment.fused`, the
    same bytes as the general path)."""
    interp = geometry.pick_interp(aug.inter_method, rng)

    def plan(width: int, height: int) -> Crop:
        p = aug.plan(width, height, objects, rng)
        if p.part is None:  # only padding shows: nothing is decoded
            return Crop((0.0, 0.0, 0.0, 0.0), None, note=p)
        size = (p.part[2] - p.part[0], p.part[3] - p.part[1])
        return Crop(p.box, size, interp(p.old_size, p.size), p)

    color = _COLOR[aug.channels]
    decided = fused.window(payload, color, plan)  # (a JPEG's window, four bytes a pixel)
    got = None
    if decided is None:
        im, crop = decode_planned(payload, color, plan)
    else:
        (crop, got), im = decided, None
    p: DetPlan = crop.note
    k, mk = aug.coefficients()
    if got is not None:
        if p.part == (0, 0, out.shape[2], out.shape[1]) and not any(p.colour):
            fused.render(got, out, k, mk, p.flip)  # resampled and normalised in one pass
            return p
        im = got.finish(opencv_mode(got.image(), color))
    width, height = p.size
    if p.part != (0, 0, out.shape[2], out.shape[1]):
        for c in range(out.shape[0]):
            out[c] = -mk[c]  # MXNet's zero pixels where a shrunk image leaves room
            out[c, :height, :width] = aug.fill_value * k[c] - mk[c]
    if im is None or p.part is None:
        return p
    if aug.channels == 4 and im.mode != "RGBA":
        im = opencv_mode(im, 1).convert("RGBA")
    levels = np.asarray(im)
    if levels.ndim == 2:
        levels = levels[:, :, None]
    if any(p.colour):
        levels = _coloured(levels, p.colour)
    x0, y0, x1, y1 = p.part
    whole = (x0, y0, x1, y1) == (0, 0, out.shape[2], out.shape[1])
    if whole and _tensor is not None and levels.flags.c_contiguous:
        h, w, step = levels.shape
        _tensor.normalise(out, levels.data, w * step, step, 0, 0, w, h, out.shape[0], k, mk, p.flip)
    else:
        planes = levels.transpose(2, 0, 1)[: out.shape[0]]
        if p.flip:
            planes = planes[:, :, ::-1]
        region = out[:, y0:y1, x0:x1]
        np.multiply(planes, np.asarray(k, np.float32)[:, None, None], out=region)
        region -= np.asarray(mk, np.float32)[:, None, None]
    return p


def _coloured(pixels: np.ndarray, colour: tuple[int, int, int, float]) -> np.ndarray:
    """MXNet's colour step on 8-bit pixels: hue, lightness and saturation
    shifted in OpenCV's HLS (clipped to 180, 255, 255), then contrast
    ``v * (1 + c)`` rounded and saturated."""
    h, s, light, c = colour
    if pixels.shape[2] < 3:  # gray: only the contrast applies
        h = s = light = 0
    out = pixels.astype(np.float32)
    if h or s or light:
        rgb = out[:, :, :3]
        hh, ss, ll = to_hls(rgb)
        rgb[...] = from_hls(np.clip(hh + h, 0, 180), np.clip(ll + light, 0, 255),
                            np.clip(ss + s, 0, 255))  # fmt: skip
    if abs(c) > 1e-3:
        out = np.rint(out * np.float32(1 + c))
    return np.clip(out, 0, 255).astype(np.uint8)


@dataclass(frozen=True)
class DetTransform:
    """``det_aug_default`` for a ``DataLoader``: the ``transforms`` of
    ``RecordDataset(output="bytes", labels="boxes")``. ``(payload,
    target) -> (image, target)``: the image a ``data_shape`` float32 array
    drawn as :class:`ImageDetRecordIter` draws it (the same rules, one
    :class:`~im2rec.training.augment.detection.DetAugmenter`), the target's
    boxes moved with it, in pixels of the drawn image (the top-left
    ``width`` x ``height`` of the array with ``shrink``/``fit``), the
    objects a crop leaves out dropped. Draws come from a per-process
    generator seeded from :mod:`random`, which each ``DataLoader`` worker
    seeds differently. ``RecordDataset`` draws a batch's images straight
    into shared memory (``out``), which ``RecordDataset.collate_boxes``
    hands to the training process without a copy."""

    augmenter: DetAugmenter

    def __call__(
        self, payload: bytes | memoryview, target: dict[str, Any], out: np.ndarray | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """``target``'s boxes are in pixels of the stored image as it
        decodes upright: ``target["size"]`` (height, width), or read from
        the image's header where the target has no size."""
        boxes = np.asarray(target["boxes"], np.float32).reshape(-1, 4)
        labels = np.asarray(target["labels"]).reshape(-1)
        extra = np.asarray(target.get("extra", np.empty((len(boxes), 0))), np.float32)
        if target.get("size") is not None:
            height, width = (float(v) for v in target["size"])
        else:
            with Upright(payload) as upright:
                width, height = (float(v) for v in upright.size)
        scale = np.asarray([width, height, width, height], np.float32)
        objects = np.column_stack(
            [labels.astype(np.float32), boxes / scale, extra.reshape(len(boxes), -1)]
        )
        image, drawn = self.draw_objects(payload, objects, out)
        return image, {**target, **drawn}

    def draw_objects(
        self, payload: bytes | memoryview, objects: np.ndarray, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """The sample drawn for ``objects`` (rows ``cls, corners normalised,
        extra...``, as a record's label holds them: what ``RecordDataset``
        hands over, so its boxes become pixels once, on the drawn image)."""
        if out is None:
            out = np.empty(self.augmenter.data_shape, np.float32)
        plan = draw(payload, self.augmenter, objects, out, process_rng())
        width, height = plan.size
        return out, {**objects_target(plan.objects, width, height), "size": (height, width)}

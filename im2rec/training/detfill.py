"""What one worker does for one detection batch: each record's image drawn
as its :class:`~im2rec.training.augment.detection.DetPlan` says, and its
label row laid out as MXNet's ``ImageDetRecordIter`` gives it:
``[channels, height, width, L, <the L label values>]`` then
``label_pad_value`` to ``label_pad_width + 4`` values, ``height`` and
``width`` being the drawn image's (``data_shape``'s, or less with
``resize_mode`` ``shrink``/``fit``; the rest of the sample is zero pixels).

:class:`DetFill` is the iterator's :data:`~im2rec.training.batching.Fill`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from .. import native
from ..errors import ConfigError, ImageCodecError, RecordFormatError
from ..executors import check_stop
from ..imaging.codec import opencv_mode
from ..imaging.regions import decode_region
from ..recordio import RecordReader, unpack
from ..recordio.detection import kept, problem, read_label
from .augment import geometry
from .augment.color import from_hls, to_hls
from .augment.detection import DetAugmenter, DetPlan
from .augment.seeding import process_rng
from .filling import BatchJob, BatchResult, unusable
from .targets import objects_target
from .vocabulary import RaggedLabels

__all__ = ["DetFill", "DetTransform", "draw", "label_row"]

_tensor: Any = native.load("tensor")  # the one-pass normaliser, when built
#: OpenCV's imdecode flag for each channel count (gray, colour, as stored)
_COLOR = {1: 0, 3: 1, 4: -1}
Views = tuple[np.ndarray, np.ndarray, np.ndarray]


def draw(
    payload: bytes | memoryview,
    aug: DetAugmenter,
    objects: np.ndarray,
    out: np.ndarray,
    rng: np.random.Generator,
    *,
    pixels: bool = False,
) -> DetPlan:
    """Decode ``payload`` into ``out`` (``(C, H, W)`` float32, normalised)
    as ``aug`` plans it for boxes ``objects`` (normalised, or in pixels of
    the decoded image with ``pixels``); the plan (its boxes the sample's,
    normalised to the drawn image) is returned. Only the window the plan
    shows is decoded, at a reduced DCT scale when it shrinks at least 2x."""
    planned: list[DetPlan] = []
    interp = geometry.pick_interp(aug.inter_method, rng)

    def plan(width: int, height: int) -> tuple[tuple[float, float, float, float], tuple[int, int]]:
        boxes = objects
        if pixels:
            boxes = objects.astype(np.float32)  # (a copy)
            boxes[:, 1:5] /= np.asarray([width, height, width, height], np.float32)
        p = aug.plan(width, height, boxes, rng)
        planned.append(p)
        if p.part is None:  # only padding shows: decode as little as can be
            return (0.0, 0.0, min(1.0, width), min(1.0, height)), (1, 1)
        return p.box, (p.part[2] - p.part[0], p.part[3] - p.part[1])

    def resample() -> Image.Resampling:
        p = planned[0]
        return interp(p.old_size, p.size)

    im = decode_region(payload, _COLOR[aug.channels], plan, resample)
    p = planned[0]
    k, mk = aug.coefficients()
    width, height = p.size
    if p.part != (0, 0, out.shape[2], out.shape[1]):
        for c in range(out.shape[0]):
            out[c] = -mk[c]  # MXNet's zero pixels where a shrunk image leaves room
            out[c, :height, :width] = aug.fill_value * k[c] - mk[c]
    if p.part is None:
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


def label_row(row: np.ndarray, plan: DetPlan, header: np.ndarray, channels: int) -> None:
    """MXNet's label row for a drawn sample, into ``row`` (already the pad
    value): the image's shape, the label's length, the label."""
    objects = plan.objects.ravel()
    length = len(header) + len(objects)
    row[0], row[1], row[2], row[3] = channels, plan.size[1], plan.size[0], length
    row[4 : 4 + len(header)] = header
    row[4 + len(header) : 4 + length] = objects


@dataclass(frozen=True)
class DetFill:
    """``ImageDetRecordIter``'s work for a batch: every record decoded,
    augmented and normalised into the slot, its label row written.
    ``labels`` holds ``path_imglist``'s labels (else the records' own)."""

    augmenter: DetAugmenter
    pad_width: int
    pad_value: float
    labels: RaggedLabels | None = None

    def __call__(self, job: BatchJob, reader: RecordReader, views: Views) -> BatchResult:
        data, rows, ids = views
        rng = np.random.default_rng(job.seed)
        filled = filled_real = 0
        skipped: list[tuple[int, str]] = []
        stops = job.stops.tolist() if job.stops is not None else None
        for n, offset in enumerate(job.offsets.tolist()):
            check_stop()
            try:
                record = (
                    reader.read_span(offset, stops[n]) if stops is not None
                    else reader.read_at(offset, copy=False)
                )  # fmt: skip
                header, payload = unpack(record)
                values = self._values(header, reader.name, offset)
                label = read_label(values)
                objects = label.objects[kept(label.objects)]
                rows[filled] = self.pad_value
                plan = draw(payload, self.augmenter, objects, data[filled], rng)
            except (ImageCodecError, RecordFormatError) as exc:
                if not job.skip_corrupt:
                    raise unusable(exc, reader.name, offset, "rec verify --boxes") from None
                skipped.append((offset, str(exc)))
                continue
            label_row(rows[filled], plan, label.header, self.augmenter.channels)
            ids[filled] = header.id
            filled += 1
            filled_real += n < job.real
        data[filled:] = 0
        rows[filled:] = 0
        ids[filled:] = 0
        return BatchResult(filled, filled_real, skipped)

    def _values(self, header: object, name: str, offset: int) -> np.ndarray:
        """The record's detection label (from ``path_imglist`` or its
        header); RecordFormatError naming the rule it breaks."""
        flag, value, key = header.flag, header.label, header.id  # type: ignore[attr-defined]
        if self.labels is not None:
            try:
                values = self.labels.lookup(int(key))
            except KeyError:
                raise ConfigError(
                    f"{name}: record id {key} (byte {offset:,}) has no line in path_imglist; "
                    "regenerate the list or drop path_imglist to use the packed labels"
                ) from None
        else:
            values = np.asarray(value, np.float32).reshape(-1) if flag > 0 else np.empty(0)
        why = problem(values) if flag > 0 or self.labels is not None else "a single label"
        if why is not None:
            raise RecordFormatError(
                f"its label is not a detection label ({why}); detection recs are packed with "
                "--pack-label from `rec list --boxes` lists (docs/detection.md)"
            )
        if len(values) > self.pad_width:
            raise ConfigError(
                f"{name}: the record at byte {offset:,} has {len(values)} label values, more "
                f"than label_pad_width {self.pad_width}; the file changed since the iterator "
                "measured it: create the iterator again"
            )
        return values


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
        boxes = np.asarray(target["boxes"], np.float32).reshape(-1, 4)
        labels = np.asarray(target["labels"]).reshape(-1)
        extra = np.asarray(target.get("extra", np.empty((len(boxes), 0))), np.float32)
        objects = np.column_stack([labels.astype(np.float32), boxes, extra.reshape(len(boxes), -1)])
        if out is None:
            out = np.empty(self.augmenter.data_shape, np.float32)
        plan = draw(payload, self.augmenter, objects, out, process_rng(), pixels=True)
        width, height = plan.size
        return out, {**target, **objects_target(plan.objects, width, height),
                     "size": (height, width)}  # fmt: skip

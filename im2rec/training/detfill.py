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

import numpy as np

from ..errors import ConfigError, ImageCodecError, RecordFormatError
from ..executors import check_stop
from ..recordio import RecordReader, unpack
from ..recordio.detection import DetLabel, kept, read_label
from .augment.detection import DetAugmenter, DetPlan
from .detdraw import draw
from .filling import BatchJob, BatchResult, unusable
from .listlabels import RaggedLabels

__all__ = ["DetFill", "label_row"]

Views = tuple[np.ndarray, np.ndarray, np.ndarray]


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
                label = self._label(header, reader.name, offset)
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

    def _label(self, header: object, name: str, offset: int) -> DetLabel:
        """The record's detection label (from ``path_imglist`` or its
        header), checked once; RecordFormatError naming the rule it breaks."""
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
        try:
            if flag == 0 and self.labels is None:
                raise ValueError("a single label")
            label = read_label(values)
        except ValueError as why:
            raise RecordFormatError(
                f"its label is not a detection label ({why}); detection recs are packed with "
                "--pack-label from `rec list --boxes` lists (docs/detection.md)"
            ) from None
        if len(values) > self.pad_width:
            raise ConfigError(
                f"{name}: the record at byte {offset:,} has {len(values)} label values, more "
                f"than label_pad_width {self.pad_width}; the file changed since the iterator "
                "measured it: create the iterator again"
            )
        return label

"""``ImageDetRecordIter``: MXNet's detection iterator over a ``.rec`` of
boxes (docs/detection.md, "Training with ImageDetRecordIter").

MXNet's keyword names, so SSD and YOLO recipes run unchanged: the reading
options of :class:`~im2rec.training.iterator.ImageRecordIter` (its workers,
shared-memory ring, parts and shuffling), ``label_width`` (-1: any length),
``label_pad_width``/``label_pad_value``, and ``det_aug_default``'s options
(:class:`~im2rec.training.augment.detection.DetAugmenter`). Each batch is
``.data[0]`` ``(B, C, H, W)`` float32 RGB and ``.label[0]``
``(B, label_pad_width + 4)``, each row ``[C, height, width, L, <the L label
values>]`` then ``label_pad_value`` (:mod:`im2rec.training.detfill`);
:func:`objects_view` gives MXNet SSD's ``(B, max_objects, B_obj)`` view.
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from typing import Any

import numpy as np

from ..errors import ConfigError, RecordFormatError
from ..recordio import RecordReader, unpack
from ..recordio.codec import CFLAG_WHOLE, HEAD_SIZE, decode_flag, decode_length, holds_labels
from ..recordio.detection import MAX_LENGTH
from ..storage.blockcache import BlockCache
from .augment.detection import SAMPLER_OPTIONS, DetAugmenter
from .batching import SlotLayout
from .detfill import DetFill
from .epochs import EpochIterator, ReadOptions
from .listlabels import ragged_lst_labels
from .vocabulary import UnknownOptionWarning

__all__ = ["ImageDetRecordIter", "label_widths", "objects_view"]

#: the detection augmenter's own keywords (DetAugmenter's, but its derived ones)
_AUG = frozenset(
    name for name in inspect.signature(DetAugmenter).parameters
    if name not in ("data_shape", "mean", "std", "crop_options")
) | frozenset(SAMPLER_OPTIONS)  # fmt: skip
_CHANNELS = {f"{kind}_{c}": (kind, i) for kind in ("mean", "std") for i, c in enumerate("rgba")}
#: accepted for MXNet compatibility and ignored (device and threading choices)
_IGNORED = frozenset({"ctx", "device_id", "dev_id", "aug_seq", "dtype"})
#: records whose header flags are read with one block read (larger: one read each)
_BLOCK = 8 << 20
_FLAG_END = HEAD_SIZE + 4  # a record's frame head and its header's flag (the first word)


class ImageDetRecordIter(EpochIterator):
    """Batches of augmented images and their padded box labels from a
    detection ``.rec`` (one packed with ``--pack-label`` from a ``rec list
    --boxes`` list).

    ``label_pad_width`` 0 or -1 (MXNet's default, 0) is the widest label in
    the part, read from every record's header (or ``path_imglist``) when
    the iterator is made, as MXNet does; a ``label_pad_width`` smaller than
    that is widened to it with a warning (MXNet stops). ``shuffle``
    permutes the whole part every epoch (MXNet shuffles within each 8 MB
    chunk it reads). ``mean_img`` is not supported (``mean_r``... are).
    Unknown keywords are ignored with a warning, as in ``ImageRecordIter``.
    """

    def __init__(
        self,
        *,
        path_imgrec: str | os.PathLike[str],
        data_shape: tuple[int, int, int],
        batch_size: int,
        path_imglist: str | os.PathLike[str] = "",
        path_imgidx: str | os.PathLike[str] = "",
        label_width: int = -1,
        label_pad_width: int = 0,
        label_pad_value: float = -1.0,
        shuffle: bool = False,
        seed: int = 0,
        round_batch: bool = True,
        num_parts: int = 1,
        part_index: int = 0,
        preprocess_threads: int | None = None,
        prefetch_buffer: int = 4,
        mean_img: str | os.PathLike[str] = "",
        shuffle_chunk_size: int = 0,
        shuffle_chunk_seed: int = 0,
        seed_aug: int | None = None,
        verbose: bool = True,
        data_name: str = "data",
        label_name: str = "softmax_label",
        on_corrupt: str = "raise",
        storage_options: dict[str, Any] | None = None,
        cache: BlockCache | str | os.PathLike[str] | None = None,
        block_window: int = 4,
        **options: Any,
    ):
        read = ReadOptions.of(locals())
        if label_width == 0 or label_width < -1:
            raise ConfigError(f"label_width must be -1 or at least 1, not {label_width}")
        if label_pad_width < -1:
            raise ConfigError(f"label_pad_width must be -1 or more, not {label_pad_width}")
        if mean_img:
            raise ConfigError(
                "ImageDetRecordIter does not take mean_img; give the per-channel means "
                "(mean_r, mean_g, mean_b) instead"
            )
        self.det_augmenter = _augmenter(data_shape, options)
        self._open(read)
        labels = ragged_lst_labels(os.fspath(path_imglist), label_width) if path_imglist else None
        if labels is not None:
            widest = labels.widest()
        else:
            widest = label_widths(self.path_imgrec, self._offsets, storage_options)
            if label_width > 0 and widest != label_width:
                raise ConfigError(
                    f"{self.path_imgrec}: its records have up to {widest} label values but "
                    f"label_width is {label_width}; use label_width=-1 (any length)"
                )
        if widest > label_pad_width > 0:
            warnings.warn(
                f"ImageDetRecordIter: label_pad_width {label_pad_width} is smaller than the "
                f"widest label, {widest} values; rows are {widest} + 4 wide",
                UserWarning,
                stacklevel=2,
            )
        self.label_pad_width = max(widest, label_pad_width)
        if verbose:
            print(
                f"im2rec: ImageDetRecordIter: {self.path_imgrec}, label padding width "
                f"{self.label_pad_width}",
                file=sys.stderr,
            )
        aug = self.det_augmenter
        width = self.label_pad_width + 4
        fill = DetFill(aug, self.label_pad_width, self.label_pad_value, labels)
        self._start(SlotLayout(batch_size, aug.data_shape, "float32", width), fill,
                    (batch_size, width))  # fmt: skip


def _augmenter(data_shape: tuple[int, int, int], options: dict[str, Any]) -> DetAugmenter:
    """MXNet's keywords as a :class:`DetAugmenter`; unknown ones warned of."""
    mean: list[float] = [0.0] * 4
    std: list[float] = [0.0] * 4
    aug: dict[str, Any] = {}
    crop: dict[str, Any] = {}
    for name, value in options.items():
        if name in _CHANNELS:
            kind, i = _CHANNELS[name]
            (mean if kind == "mean" else std)[i] = float(value)
        elif name in SAMPLER_OPTIONS:
            crop[name] = value
        elif name in _AUG:
            aug[name] = value
        elif name not in _IGNORED:
            warnings.warn(
                f"ImageDetRecordIter ignores the unknown option {name!r}",
                UnknownOptionWarning,
                stacklevel=3,
            )
    return DetAugmenter(
        data_shape,
        mean=tuple(mean),
        std=tuple(std),
        crop_options=crop,
        **aug,
    )


def label_widths(
    path: str, offsets: np.ndarray, storage_options: dict[str, Any] | None = None
) -> int:
    """The most label values any record at ``offsets`` holds (each header's
    ``flag``), read a block of headers at a time: the whole file once for
    small records, as MXNet does; one read a record for large ones. A flag
    counts only where its labels fit in the record's frame and in
    :data:`~im2rec.recordio.detection.MAX_LENGTH` (a damaged header must
    not widen every batch's label rows: that record is refused when read);
    a split record's is read from the record itself."""
    if len(offsets) == 0:
        return 0
    reader = RecordReader(path, storage_options=storage_options)
    try:
        view, size = reader.mapping()
        widest = 0
        order = np.sort(offsets)
        gap = (int(order[-1]) - int(order[0])) / max(1, len(order) - 1)
        n = 0
        while n < len(order):
            first = int(order[n])
            if gap > _BLOCK // 64:
                end = n + 1
            else:
                end = int(np.searchsorted(order, first + _BLOCK, side="right"))
            last = int(order[end - 1])
            stop = min(size, last + _FLAG_END)
            block = np.frombuffer(view.read(first, stop - first), np.uint8)
            at = order[n:end] - first
            at = at[at + _FLAG_END <= len(block)]
            words = block[at[:, None] + np.arange(_FLAG_END)].view("<u4")  # magic, lrec, flag
            lrec, flags = words[:, 1].astype(np.int64), words[:, 2].astype(np.int64)
            whole = decode_flag(lrec) == CFLAG_WHOLE
            fits = whole & holds_labels(flags, decode_length(lrec))
            fits &= flags <= MAX_LENGTH
            if fits.any():
                widest = max(widest, int(flags[fits].max()))
            for offset in at[~whole].tolist():  # a split record: its own header
                try:
                    header, _ = unpack(reader.read_at(first + offset))
                except RecordFormatError:  # (damage: refused, or skipped, when it is read)
                    continue
                if header.flag <= MAX_LENGTH:
                    widest = max(widest, header.flag)
            n = end
        return widest
    finally:
        reader.close()


def objects_view(label: np.ndarray) -> np.ndarray:
    """The ``(B, max_objects, object_width)`` view MXNet's SSD example makes
    of a batch's label rows: the objects of each row (after the 4 values
    the iterator adds and the record's own ``A``-value header), padding
    rows being the iterator's ``label_pad_value``. ``A`` and ``B`` are read from the first row,
    as that example does; every row of a rec made by one listing shares
    them. ``max_objects`` is what the padded width holds."""
    label = np.asarray(label)
    if label.ndim != 2 or label.shape[1] < 4 + 2:
        raise ConfigError(f"need ImageDetRecordIter label rows, (B, width >= 6), not {label.shape}")
    header, width = int(label[0, 4]), int(label[0, 5])
    if header < 2 or width < 5:
        raise ConfigError(
            f"the first row's A = {label[0, 4]:g} and B = {label[0, 5]:g} are not a detection "
            "label's header and object widths"
        )
    start = 4 + header
    count = max(0, (label.shape[1] - start) // width)
    objects = label[:, start : start + count * width].reshape(len(label), count, width)
    return objects

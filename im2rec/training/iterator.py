"""``ImageRecordIter``: MXNet's batch iterator over a ``.rec``, without MXNet.

It takes MXNet's keyword names (docs/format.md, "ImageRecordIter, Options") and yields batches with
``.data[0]`` ``(B, C, H, W)`` RGB, ``.label[0]`` and ``.pad``. Worker
processes decode straight into shared memory (:mod:`im2rec.training.batching`); the
parent only orders the work (running into the next epoch when this one's is
all under way) and lends each finished batch, a view of its slot that goes
back to the workers when the caller drops it.

Where MXNet has a bug, this does the sane thing (docs/format.md, "Quirks and bugs"): the last
batch's ``pad`` is right with ``round_batch=False`` and its empty slots are
zeros; ``pad`` is never stale; ``reset()`` always starts the next epoch at
its first record; unknown keyword arguments raise.
"""

from __future__ import annotations

import inspect
import os
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError
from ..storage.blockcache import BlockCache
from .augment import Augmenter
from .batching import SlotLayout
from .epochs import EpochIterator, ReadOptions
from .filling import ImageFill
from .listlabels import lst_labels
from .vocabulary import DataBatch, DataDesc, MXArray, augmenter_options, mean_image

__all__ = [
    "DataBatch",
    "DataDesc",
    "ImageRecordInt8Iter",
    "ImageRecordIter",
    "ImageRecordUInt8Iter",
    "MXArray",
]


class ImageRecordIter(EpochIterator):
    """Batches of decoded, augmented images from a ``.rec`` file.

    MXNet's keyword arguments, every one (see the README's table): the
    reading options below, and the augmentation options of
    :class:`~im2rec.training.augment.Augmenter` by MXNet's names (``mean_r``...,
    ``std_r``..., ``brightness``, ``max_rotate_angle``, ``mean_img``...).
    Beyond them: ``on_corrupt="skip"`` drops undecodable records (counted
    in ``skipped``) instead of raising; a record with fewer labels than
    ``label_width`` (multi-label records of different lengths) has its row
    padded with ``label_pad_value`` (-1, the detection iterator's default),
    where MXNet stops; more labels than ``label_width`` is an error, as in
    MXNet. Unknown keywords are ignored with a warning, as MXNet ignores
    them (silently).
    """

    def __init__(
        self,
        *,
        path_imgrec: str | os.PathLike[str],
        data_shape: tuple[int, int, int],
        batch_size: int,
        path_imgidx: str | os.PathLike[str] = "",
        path_imglist: str | os.PathLike[str] = "",
        label_width: int = 1,
        label_pad_value: float = -1.0,
        shuffle: bool = False,
        seed: int = 0,
        round_batch: bool = True,
        num_parts: int = 1,
        part_index: int = 0,
        preprocess_threads: int | None = None,
        prefetch_buffer: int = 4,
        dtype: str | None = None,
        mean_img: str | os.PathLike[str] = "",
        shuffle_chunk_size: int = 0,
        shuffle_chunk_seed: int = 0,
        seed_aug: int | None = None,
        verbose: bool = True,
        data_name: str = "data",
        label_name: str = "softmax_label",
        on_corrupt: Literal["raise", "skip"] = "raise",
        storage_options: dict[str, Any] | None = None,
        cache: BlockCache | str | os.PathLike[str] | None = None,
        block_window: int = 4,
        **options: Any,
    ):
        read = ReadOptions.of(locals())
        if label_width < 1:
            raise ConfigError(f"label_width must be at least 1, not {label_width}")
        dtype = dtype or "float32"
        aug = augmenter_options(options, _KEYWORDS)
        self.augmenter = Augmenter(tuple(data_shape), dtype=dtype, **aug)  # type: ignore[arg-type]
        if mean_img and dtype != "uint8":  # MXNet's uint8 iterator has no mean image

            def compute() -> np.ndarray:
                return _mean_over_part(
                    path_imgrec=path_imgrec, path_imgidx=path_imgidx, data_shape=data_shape,
                    batch_size=batch_size, num_parts=num_parts, part_index=part_index,
                    preprocess_threads=preprocess_threads, seed=seed, seed_aug=seed_aug,
                    on_corrupt=on_corrupt, **options,
                )  # fmt: skip

            image = mean_image(os.fspath(mean_img), compute, verbose)
            self.augmenter = self.augmenter.replace(mean_img=image)
        self._open(read)
        self._labels = lst_labels(os.fspath(path_imglist), label_width) if path_imglist else None
        layout = SlotLayout(
            batch_size, self.augmenter.data_shape, self.augmenter.dtype, label_width
        )
        label_shape = (batch_size,) if label_width == 1 else (batch_size, label_width)
        self._start(layout, ImageFill(self.augmenter), label_shape)


def _mean_over_part(**kwargs: Any) -> np.ndarray:
    """MXNet's mean image: the mean of every sample of the part as the
    iterator makes it (augmented, normalised with ``mean_r``... but no mean
    image), in float32."""
    total: np.ndarray | None = None
    count = 0
    with ImageRecordIter(**kwargs, shuffle=False, round_batch=False, dtype="float32",
                         verbose=False) as it:  # fmt: skip
        for batch in it:
            real = batch.data[0][: len(batch.data[0]) - batch.pad]
            part_sum = real.sum(axis=0, dtype=np.float64)
            total = part_sum if total is None else total + part_sum
            count += len(real)
    assert total is not None and count
    return (total / count).astype(np.float32)


class ImageRecordUInt8Iter(ImageRecordIter):
    """MXNet's ``ImageRecordUInt8Iter``: raw uint8 pixels."""

    def __init__(self, **kwargs: Any):
        _fixed_dtype(kwargs, "uint8")
        super().__init__(**kwargs)


class ImageRecordInt8Iter(ImageRecordIter):
    """MXNet's ``ImageRecordInt8Iter``: ``pixel - round(mean)``, saturated to int8."""

    def __init__(self, **kwargs: Any):
        _fixed_dtype(kwargs, "int8")
        super().__init__(**kwargs)


def _fixed_dtype(kwargs: dict[str, Any], dtype: str) -> None:
    given = kwargs.setdefault("dtype", dtype)
    if given != dtype:
        raise ConfigError(f"this iterator makes {dtype} batches; use ImageRecordIter for {given}")


#: The keywords ImageRecordIter takes (for "did you mean" suggestions).
_KEYWORDS = [p for p in inspect.signature(ImageRecordIter.__init__).parameters if p != "self"]

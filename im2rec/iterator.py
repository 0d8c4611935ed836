"""``from im2rec.iterator import ImageRecordIter``, as written before 0.2: the code now
lives in :mod:`im2rec.training.iterator` (see :mod:`im2rec.training`)."""

from .training.iterator import (
    DataBatch,
    DataDesc,
    ImageRecordInt8Iter,
    ImageRecordIter,
    ImageRecordUInt8Iter,
    MXArray,
)

__all__ = [
    "DataBatch",
    "DataDesc",
    "ImageRecordInt8Iter",
    "ImageRecordIter",
    "ImageRecordUInt8Iter",
    "MXArray",
]

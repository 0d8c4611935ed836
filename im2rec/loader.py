"""``from im2rec.loader import RecordDataset``, as written before 0.2: the code now
lives in :mod:`im2rec.training.dataset` (see :mod:`im2rec.training`)."""

from .training.dataset import RecordDataset

__all__ = ["RecordDataset"]

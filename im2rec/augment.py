"""``from im2rec.augment import Augmenter``, as written before 0.2: the code now
lives in :mod:`im2rec.training.augment` (see :mod:`im2rec.training`)."""

from .training.augment import INTERPOLATION, Augmenter

__all__ = ["INTERPOLATION", "Augmenter"]

"""The per-image training pipeline: one record's image bytes in, one
``(C, H, W)`` sample out, with MXNet's ``ImageRecordIter`` options.

:class:`Augmenter` is what :class:`~im2rec.training.iterator.ImageRecordIter`'s
workers run for every record, in MXNet's order (docs/format.md, "One
record's pipeline"): decode, resize the short side, affine warp, pad, crop
(centre, random, random size, or random-resized),
brightness/contrast/saturation, HSL, PCA noise, then mirror and normalise
(mean image or per-channel mean, std, scale, random contrast and
illumination). It is also a transform for ``RecordDataset(output="bytes")``,
so a PyTorch ``DataLoader`` gets MXNet's recipe without the iterator.

Without an affine warp or padding, the geometry is planned from the image's
header before any pixel is decoded, so a single resample goes from the
stored pixels to the output and a JPEG whose crop shrinks at least 2x is
decoded at a reduced DCT scale. With no resize and an image at least the
output size, the crop is cut out without resampling, so pixels equal the
decoder's (and MXNet's).
"""

from .augmenter import INTERPOLATION, Augmenter
from .seeding import process_rng

__all__ = ["INTERPOLATION", "Augmenter", "process_rng"]

"""Detection samples the way torchvision's detection models take them:
``RecordDataset(labels="boxes")``'s targets and their collate.

A target is ``{"boxes": (N, 4) float32 corners xmin, ymin, xmax, ymax in
pixels of the decoded image, "labels": (N,) int64 classes, "extra": (N,
B - 5) float32, the object's values after its box}`` (numpy arrays; the
collate makes them tensors). Empty boxes are dropped, as MXNet's detection
iterator drops them and as torchvision's models refuse them. The layout is
:mod:`im2rec.recordio.detection`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import DatasetError
from ..recordio.detection import kept, problem, read_label

__all__ = ["detection_collate", "detection_target", "image_size"]


def detection_target(
    values: Any, size: Callable[[], tuple[float, float]], where: str
) -> dict[str, Any]:
    """The target of a record whose label is ``values``, for an image of
    ``size()`` (width, height; asked only of a detection label);
    DatasetError naming ``where`` (the record) when the label is not one."""
    why = "a single label" if values is None else problem(values)
    if why is not None:
        raise DatasetError(
            f"{where}: its label is not a detection label ({why}); labels='boxes' reads recs "
            "packed with --pack-label from `rec list --boxes` lists (docs/detection.md)"
        )
    objects = read_label(values).objects
    objects = objects[kept(objects)]
    width, height = size()
    scale = np.asarray([width, height, width, height], np.float32)
    return {
        "boxes": np.ascontiguousarray(objects[:, 1:5] * scale, np.float32),
        "labels": objects[:, 0].astype(np.int64),
        "extra": np.ascontiguousarray(objects[:, 5:], np.float32),
    }


def image_size(output: str, image: Any, header: Any, payload: bytes) -> tuple[float, float]:
    """The decoded image's (width, height): of the image itself, or for
    ``output="bytes"`` from the label's header (``A >= 4``: GluonCV's and
    ``rec list --boxes``'s width and height) or the image's own header."""
    if output == "pil":
        return float(image.width), float(image.height)
    if output == "numpy":
        return float(image.shape[1]), float(image.shape[0])
    if header.flag >= 4 and int(header.label[0]) >= 4:
        return float(header.label[2]), float(header.label[3])
    from ..imaging.codec import ROTATED, exif_orientation, open_image

    with open_image(payload) as im:  # (the header only: no pixels)
        width, height = im.size
        if exif_orientation(im) in ROTATED:  # decoded upright, as RecordDataset decodes
            width, height = height, width
    return float(width), float(height)


def detection_collate(batch: Any) -> tuple[Any, list[dict[str, Any]]]:
    """``collate_fn`` for detection samples: ``(images, targets)``, the
    images one tensor when they have one shape (else a list, as torchvision's
    detection models take them), the targets a list of dicts of tensors, one
    a sample, so each image keeps its own number of objects."""
    from torch.utils.data import default_collate

    images = [image for image, _ in batch]
    shapes = {tuple(np.shape(image)) for image in images}
    stacked = default_collate(images) if len(shapes) == 1 else [_tensor(i) for i in images]
    targets = [
        {k: _tensor(v) if isinstance(v, np.ndarray) else v for k, v in target.items()}
        if isinstance(target, dict) else target
        for _, target in batch
    ]  # fmt: skip
    return stacked, targets


def _tensor(value: Any) -> Any:
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value))  # (a copy: record views are read-only)
    return value

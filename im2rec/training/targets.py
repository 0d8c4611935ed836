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

__all__ = [
    "collate_targets",
    "detection_collate",
    "detection_target",
    "image_size",
    "objects_target",
]


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
    return objects_target(objects[kept(objects)], *size())


def objects_target(objects: np.ndarray, width: float, height: float) -> dict[str, Any]:
    """The target of ``objects`` (rows ``cls, xmin, ymin, xmax, ymax,
    extra...``, corners normalised) on an image of ``width`` x ``height``."""
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
    a sample, so each image keeps its own number of objects. Each array
    field of the targets is one tensor for the whole batch, each target's a
    view of it: a ``DataLoader`` worker then hands the main process one
    shared block a field, not one a sample."""
    from torch.utils.data import default_collate

    from .loading import Batch, collate

    if isinstance(batch, Batch):  # drawn into shared memory: moved without a copy
        return collate(batch, labels=collate_targets)  # type: ignore[no-any-return]
    images = [image for image, _ in batch]
    shapes = {tuple(np.shape(image)) for image in images}
    stacked = default_collate(images) if len(shapes) == 1 else [_tensor(i) for i in images]
    return stacked, collate_targets([target for _, target in batch])


def collate_targets(targets: list[Any]) -> list[Any]:
    """The targets of a batch with their arrays as tensors (see
    :func:`detection_collate`)."""
    targets = [dict(target) if isinstance(target, dict) else target for target in targets]
    dicts = [t for t in targets if isinstance(t, dict)]
    for key in {k for t in dicts for k, v in t.items() if isinstance(v, np.ndarray)}:
        _views(dicts, key)
    return targets


def _views(targets: list[dict[str, Any]], key: str) -> None:
    """``targets[i][key]`` (numpy arrays) as views of one tensor, when
    their trailing shapes and dtypes agree (else one tensor each)."""
    arrays = [t.get(key) for t in targets]
    if not all(isinstance(a, np.ndarray) and a.ndim >= 1 for a in arrays):
        for t in targets:
            if isinstance(t.get(key), np.ndarray):
                t[key] = _tensor(t[key])
        return
    if len({(a.shape[1:], a.dtype) for a in arrays}) != 1:  # type: ignore[union-attr]
        for t, a in zip(targets, arrays, strict=True):
            t[key] = _tensor(a)
        return
    whole = _tensor(np.concatenate(arrays))  # type: ignore[arg-type]
    start = 0
    for t, a in zip(targets, arrays, strict=True):
        end = start + len(a)  # type: ignore[arg-type]
        t[key] = whole[start:end]
        start = end


def _tensor(value: Any) -> Any:
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value))  # (a copy: record views are read-only)
    return value

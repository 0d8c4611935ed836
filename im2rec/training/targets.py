"""Detection samples the way torchvision's detection models take them:
``RecordDataset(labels="boxes")``'s targets and their collate.

A target is ``{"boxes": (N, 4) float32 corners xmin, ymin, xmax, ymax in
pixels of the image the sample holds (the decoded one; for undecoded bytes,
the stored image as it would decode, upright; never the size a label's
header names), "labels": (N,) int64 classes, "extra": (N,
B - 5) float32, the object's values after its box, "size": the image's
(height, width)}``. The arrays are tensors, and where torchvision is
installed ``boxes`` is a ``tv_tensors.BoundingBoxes`` (``XYXY``, its canvas
the image), so ``torchvision.transforms.v2`` moves them with the image
(numpy arrays where torch is not installed). Empty boxes are dropped, as
MXNet's detection iterator drops them and as torchvision's models refuse
them. The layout is :mod:`im2rec.recordio.detection`'s.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import DatasetError
from ..recordio.detection import kept, read_label

__all__ = [
    "collate_targets",
    "detection_collate",
    "detection_objects",
    "detection_target",
    "image_size",
    "is_v2",
    "objects_target",
    "tensor_target",
    "tv_tensors",
    "v2_image",
]


def detection_target(
    values: Any, size: Callable[[], tuple[float, float]], where: str
) -> dict[str, Any]:
    """The target of a record whose label is ``values``, for an image of
    ``size()`` (width, height; asked only of a detection label);
    DatasetError naming ``where`` (the record) when the label is not one."""
    return objects_target(detection_objects(values, where), *size())


def detection_objects(values: Any, where: str) -> np.ndarray:
    """The objects MXNet keeps of a record's label ``values`` (rows ``cls,
    corners normalised, extra...``; none for a header alone, an image
    ``rec list --keep-empty`` kept), the label checked once; DatasetError
    naming ``where`` (the record) when it is not a detection label."""
    try:
        if values is None:
            raise ValueError("a single label")
        objects = read_label(values, alone=True).objects  # (checked here, once)
    except ValueError as why:
        raise DatasetError(
            f"{where}: its label is not a detection label ({why}); labels='boxes' reads recs "
            "packed with --pack-label from `rec list --boxes` lists (docs/detection.md)"
        ) from None
    shown: np.ndarray = objects[kept(objects)]
    return shown


def objects_target(objects: np.ndarray, width: float, height: float) -> dict[str, Any]:
    """The target of ``objects`` (rows ``cls, xmin, ymin, xmax, ymax,
    extra...``, corners normalised) on an image of ``width`` x ``height``
    (numpy arrays: see :func:`tensor_target`)."""
    scale = np.asarray([width, height, width, height], np.float32)
    return {
        "boxes": np.ascontiguousarray(objects[:, 1:5] * scale, np.float32),
        "labels": objects[:, 0].astype(np.int64),
        "extra": np.ascontiguousarray(objects[:, 5:], np.float32),
        "size": (round(height), round(width)),
    }


@functools.cache
def tv_tensors() -> Any:
    """``torchvision.tv_tensors``, or None where torchvision is not
    installed, or does not import beside this torch (a warning says why,
    once a process)."""
    try:
        from torchvision import tv_tensors as module
    except ImportError:
        return None
    except Exception as exc:  # noqa: BLE001 - a torchvision built for another torch
        warnings.warn(
            f"torchvision is installed but does not import ({exc}); detection targets are "
            "plain tensors (install the torchvision release made for this torch)",
            stacklevel=2,
        )
        return None
    return module


def is_v2(transform: Any) -> bool:
    """Whether ``transform`` is a ``torchvision.transforms.v2`` transform
    (looked up only where the caller has imported v2 already)."""
    v2 = sys.modules.get("torchvision.transforms.v2")
    return v2 is not None and isinstance(transform, v2.Transform)


def v2_image(array: np.ndarray) -> Any:
    """An ``HxWxC`` image array as v2 takes images: a ``tv_tensors.Image``
    (``CxHxW``, sharing the array's memory where it is writable). v2 passes
    a numpy array through untouched and takes the first plain tensor of a
    sample for the image, which for a detection sample is its labels."""
    import torch

    tv = tv_tensors()
    if not array.flags.writeable:
        array = array.copy()
    tensor = torch.from_numpy(array).permute(2, 0, 1)
    return tensor if tv is None else tv.Image(tensor)


def tensor_target(target: dict[str, Any]) -> dict[str, Any]:
    """``target`` as torch takes it: its arrays tensors, and ``boxes`` a
    ``BoundingBoxes`` on the canvas ``target["size"]`` where torchvision is
    installed; ``target`` itself (numpy arrays) where torch is not."""
    try:
        import torch  # noqa: F401 - (imported by the collate anyway)
    except ImportError:
        return target
    out = {key: _tensor(value) for key, value in target.items()}
    tv = tv_tensors()
    return out if tv is None else _with_bounding_boxes(out, tv)


def _with_bounding_boxes(target: dict[str, Any], tv: Any) -> dict[str, Any]:
    boxes, size = target.get("boxes"), target.get("size")
    if size is not None and boxes is not None and not isinstance(boxes, tv.BoundingBoxes):
        target["boxes"] = tv.BoundingBoxes(
            boxes, format="XYXY", canvas_size=(int(size[0]), int(size[1]))
        )
    return target


def image_size(output: str, image: Any, payload: bytes) -> tuple[float, float]:
    """The (width, height) of the pixels the sample's boxes are on: the
    decoded image's, or for ``output="bytes"`` the stored image's as
    ``RecordDataset`` would decode it (upright), read from its header. Never
    the width and height a label's header holds: those are the annotation's,
    and an image packed with ``--resize`` has other ones."""
    if output == "pil":
        return float(image.width), float(image.height)
    if output == "numpy":
        return float(image.shape[1]), float(image.shape[0])
    from ..imaging.codec import Upright

    with Upright(payload) as upright:  # (the header only: no pixels)
        width, height = upright.size  # decoded upright, as RecordDataset decodes
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
    """The targets of a batch with their arrays as tensors, and ``boxes``
    ``BoundingBoxes`` where torchvision is installed (see
    :func:`detection_collate`)."""
    import torch

    targets = [dict(target) if isinstance(target, dict) else target for target in targets]
    dicts = [t for t in targets if isinstance(t, dict)]
    arrays = (np.ndarray, torch.Tensor)
    for key in {k for t in dicts for k, v in t.items() if isinstance(v, arrays)}:
        _views(dicts, key)
    tv = tv_tensors()
    if tv is not None:
        for target in dicts:
            _with_bounding_boxes(target, tv)
    return targets


def _views(targets: list[dict[str, Any]], key: str) -> None:
    """``targets[i][key]`` (numpy arrays or tensors) as views of one tensor,
    when their trailing shapes and dtypes agree (else one tensor each); a
    ``tv_tensors`` value stays one, over its view."""
    import torch

    values = [_tensor(t.get(key)) for t in targets]
    if not all(isinstance(v, torch.Tensor) and v.ndim >= 1 for v in values) or (
        len({(tuple(v.shape[1:]), v.dtype) for v in values}) != 1
    ):
        for t, v in zip(targets, values, strict=True):
            if key in t:
                t[key] = v
        return
    whole = torch.cat([v.as_subclass(torch.Tensor) for v in values])
    tv, start = tv_tensors(), 0
    for t, v in zip(targets, values, strict=True):
        end = start + len(v)
        view = whole[start:end]
        t[key] = tv.wrap(view, like=v) if tv is not None and type(v) is not torch.Tensor else view
        start = end


def _tensor(value: Any) -> Any:
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value))  # (a copy: record views are read-only)
    return value

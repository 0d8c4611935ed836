"""What the annotation readers share: options, bounded reads, class
numbering, box checks (the package's docstring says the rules)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from ...errors import ConfigError, DatasetError, MissingFileError
from ...recordio.detection import make_label
from ...storage import read_bytes
from ..entries import BOX_OBJECT, BoxEntries

__all__ = [
    "FORMATS",
    "BoxEntries",
    "BoxOptions",
    "Crowd",
    "Format",
    "MAX_OBJECTS",
    "check_box",
    "class_labels",
    "image_label",
    "read_text",
]

Format = Literal["voc", "coco", "yolo"]
Crowd = Literal["skip", "flag"]
FORMATS: tuple[Format, ...] = ("voc", "coco", "yolo")
#: the most objects one image may have (COCO's most is under 100)
MAX_OBJECTS = 10_000


class BoxOptions:
    """What the readers take: ``keep_empty`` lists images with no object
    (their label is the header alone, which MXNet's detection iterator
    refuses); ``crowd`` says what COCO's ``iscrowd`` boxes become."""

    def __init__(
        self,
        fmt: Format,
        *,
        image_set: str | None = None,
        annotations: str | None = None,
        classes: list[str] | None = None,
        keep_empty: bool = False,
        crowd: Crowd = "flag",
    ) -> None:
        if fmt not in FORMATS:
            raise ConfigError(f"--boxes {fmt!r}: one of {', '.join(FORMATS)}")
        self.fmt, self.image_set, self.annotations = fmt, image_set, annotations
        self.classes, self.keep_empty, self.crowd = classes, keep_empty, crowd


def read_text(path: str, limit: int, what: str) -> str:
    """A whole annotation file (at most ``limit`` bytes) as text; one clear
    error naming it when it is missing, too large or not UTF-8."""
    try:
        data = read_bytes(path, limit=limit)
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such {what}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start:,})") from None


def class_labels(names: list[str], given: list[str] | None, where: str) -> dict[str, int]:
    """Class name -> label: the ``given`` order (a classes file), else the
    names found, sorted (VOC's 20 classes sorted are GluonCV's order)."""
    order = given if given is not None else sorted(set(names))
    labels = {name: i for i, name in enumerate(order)}
    if len(labels) != len(order):
        raise ConfigError(f"{where}: a class name appears twice in the classes given")
    return labels


def check_box(
    where: str, box: tuple[float, float, float, float], size: tuple[float, float]
) -> tuple[float, float, float, float]:
    """A box in pixels ``(xmin, ymin, xmax, ymax)`` of an image ``size``
    (width, height), normalised to [0, 1]; DatasetError naming ``where``
    (a file and an object) when it is empty or leaves the image."""
    width, height = size
    x0, y0, x1, y1 = box
    if not all(np.isfinite(box)) or not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
        raise DatasetError(
            f"{where}: the box ({x0:g}, {y0:g}, {x1:g}, {y1:g}) is empty or leaves the "
            f"{width:g}x{height:g} image; fix or remove the object"
        )
    return (x0 / width, y0 / height, x1 / width, y1 / height)


def image_label(objects: Sequence[tuple[float, ...]], size: tuple[float, float]) -> np.ndarray:
    """An image's detection label: header ``4, 6, width, height``, then its
    objects (rows of six)."""
    return make_label(np.asarray(objects, np.float32).reshape(-1, BOX_OBJECT), size)

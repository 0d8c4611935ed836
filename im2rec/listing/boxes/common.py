"""What the annotation readers share: options, bounded reads, class
numbering, box checks (the package's docstring says the rules)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ...errors import ConfigError, DatasetError, MissingFileError
from ...recordio.detection import make_label
from ...storage import read_bytes
from ...storage.files import split_lines
from ..classmap import check_class_names
from ..entries import BOX_OBJECT, BoxEntries

__all__ = [
    "FORMATS",
    "BoxEntries",
    "BoxOptions",
    "CONVENTIONS",
    "Convention",
    "Crowd",
    "Format",
    "MAX_CLASSES",
    "NO_OBJECT",
    "MAX_OBJECTS",
    "MAX_SIDE",
    "NOT_THERE",
    "absent",
    "check_there",
    "check_box",
    "check_size",
    "finite",
    "class_labels",
    "class_order",
    "image_label",
    "read_names",
    "read_text",
]

Format = Literal["voc", "coco", "yolo"]
Crowd = Literal["skip", "flag"]
Convention = Literal["im2rec", "gluoncv"]
FORMATS: tuple[Format, ...] = ("voc", "coco", "yolo")
CONVENTIONS: tuple[Convention, ...] = ("im2rec", "gluoncv")
#: what images with no object are counted as (``Scan.passed``), left out
#: (MXNet's detection iterator refuses them) unless --keep-empty
NO_OBJECT = "images with no object"
#: the most objects one image may have (COCO's most is under 100)
MAX_OBJECTS = 10_000
#: the most classes a set may number (Objects365 has 365, LVIS 1,203,
#: Open Images 600): a class number past it is damage, and would make as
#: many class names
MAX_CLASSES = 1 << 16
#: the largest image side an annotation may give (float32 holds every whole
#: number up to it, and the label's header is float32)
MAX_SIDE = 1 << 24


class BoxOptions:
    """What the readers take: ``keep_empty`` lists images with no object
    (their label is the header alone, which MXNet's detection iterator
    refuses); ``crowd`` says what COCO's ``iscrowd`` boxes become;
    ``convention`` ``"gluoncv"`` reads boxes as GluonCV's VOC and COCO
    readers do where they differ from im2rec's (docs/detection.md)."""

    def __init__(
        self,
        fmt: Format,
        *,
        image_set: str | None = None,
        annotations: str | None = None,
        classes: list[str] | None = None,
        keep_empty: bool = False,
        crowd: Crowd = "flag",
        convention: Convention = "im2rec",
    ) -> None:
        if fmt not in FORMATS:
            raise ConfigError(f"--boxes {fmt!r}: one of {', '.join(FORMATS)}")
        if convention not in CONVENTIONS:
            raise ConfigError(f"--convention {convention!r}: one of {', '.join(CONVENTIONS)}")
        self.fmt, self.image_set, self.annotations = fmt, image_set, annotations
        self.classes, self.keep_empty, self.crowd = classes, keep_empty, crowd
        self.convention = convention


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


def class_order(given: list[str], where: str) -> dict[str, int]:
    """Class name -> label for the classes ``given`` in label order (a
    classes file, ``--classes``): each a name a class map carries, none
    twice (:func:`~im2rec.listing.classmap.check_class_names`)."""
    check_class_names((name, f"{where}: class {k}") for k, name in enumerate(given))
    return {name: i for i, name in enumerate(given)}


def class_labels(names: list[str], given: list[str] | None, where: str) -> dict[str, int]:
    """Class name -> label: the ``given`` order (a classes file), else the
    names found, sorted (VOC's 20 classes sorted are GluonCV's order)."""
    if given is not None:
        return class_order(given, where)
    return class_order(sorted(set(names)), where)


def read_names(path: str, what: str) -> list[str]:
    """The class names of a file of a name a line (``classes.txt``, a
    ``--classes`` file), in label order: lines cut only at line ends
    (:func:`~im2rec.storage.files.split_lines`), stripped, blank ones
    skipped; each checked, none twice (:func:`class_order`)."""
    names = [line.strip() for line in split_lines(read_text(path, 16 << 20, what))]
    names = [name for name in names if name]
    class_order(names, path)
    return names


def finite(value: Any) -> bool:
    """Whether ``value`` is a number (not a bool) that is finite as a float
    (JSON's integers have no bound: ``10**400`` is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


#: the skip reason of an image an annotation file names that is not there
NOT_THERE = "image the annotations name is not in the folder"


def absent(root: str, paths: Sequence[str]) -> set[str]:
    """Which of ``paths`` (relative to ``root``) are not files there: each
    folder read once (``os.scandir``), not a ``stat`` a file, so checking a
    set's millions of images costs as many folder reads as it has folders."""
    by_folder: dict[str, list[tuple[str, str]]] = {}
    for path in paths:  # (relative, "/"-separated: relative_name made them)
        folder, _, name = path.rpartition("/")
        by_folder.setdefault(folder, []).append((path, name))
    gone: set[str] = set()
    for folder, names in by_folder.items():
        try:
            with os.scandir(os.path.join(root, folder)) as found:
                files = {e.name for e in found if not e.is_dir()}
        except OSError:  # (no such folder, or not one: none of its images is there)
            files = set()
        gone.update(p for p, name in names if name not in files)
    return gone


def check_there(root: str, entries: BoxEntries, source: str) -> tuple[BoxEntries, list[str]]:
    """``entries`` without the images that are not in ``root``, and those
    (for the report); DatasetError when none is: ``root`` is not the folder
    the annotations' images are in."""
    paths = entries.paths_at(range(len(entries)))
    gone = absent(root, paths)
    if not gone:
        return entries, []
    if len(gone) == len(paths):
        raise DatasetError(
            f"{root}: none of the {len(paths):,} images {source} names is in it (the first: "
            f"{paths[0]}); give the folder those images are in"
        )
    return entries.subset([k for k, p in enumerate(paths) if p not in gone]), [
        p for p in paths if p in gone
    ]


def check_size(where: str, width: float, height: float) -> tuple[float, float]:
    """An image's ``(width, height)`` from an annotation: finite, from 1 to
    :data:`MAX_SIDE`; DatasetError naming ``where`` otherwise."""
    if not all(finite(v) and 1 <= v <= MAX_SIDE for v in (width, height)):
        raise DatasetError(
            f"{where}: the image size {width!r:.20} x {height!r:.20} is not a size in pixels (1 to "
            f"{MAX_SIDE:,}); fix the annotation"
        )
    return float(width), float(height)


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

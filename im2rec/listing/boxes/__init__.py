"""Annotation sets into detection lists: Pascal VOC, COCO and YOLO folders
read into entries whose labels are detection labels
(:mod:`im2rec.recordio.detection`), for ``rec list --boxes``.

Each reader returns a :class:`~im2rec.listing.walking.Scan` whose
``entries`` are :class:`BoxEntries` (paths relative to the root, and each
image's label vector: ``4, 6, width, height`` then ``cls, xmin, ymin, xmax,
ymax, flag`` per object, coordinates in [0, 1]; ``flag`` is VOC's
``difficult`` or COCO's ``iscrowd``, 0 for YOLO) and whose ``classes`` are
the class names in label order. Images come in a fixed order (the
annotation file's, or sorted names); the listing then shuffles and splits
them as it does folders. A path read from an annotation file must be a
plain relative path inside the root; every file read is bounded in size;
a bad annotation is one :class:`~im2rec.errors.DatasetError` naming the
file and the object.
"""

from __future__ import annotations

import os

from ...errors import DatasetError, MissingFileError
from ..walking import Scan
from .common import FORMATS, BoxOptions, Convention, Crowd, Format, read_names, read_text

__all__ = [
    "FORMATS",
    "BoxOptions",
    "Convention",
    "Crowd",
    "Format",
    "read_boxes",
    "read_names",
    "read_text",
]


def read_boxes(root: str, options: BoxOptions) -> Scan:
    """The annotation set under ``root`` as a Scan of :class:`BoxEntries`."""
    if not os.path.isdir(root):
        if not os.path.exists(root):
            raise MissingFileError(f"{root}: no such folder")
        raise DatasetError(f"{root}: is a file, not an annotation set's folder")
    if options.fmt == "voc":
        from .voc import read_voc

        return read_voc(root, options)
    if options.fmt == "coco":
        from .coco import read_coco

        return read_coco(root, options)
    from .yolo import read_yolo

    return read_yolo(root, options)

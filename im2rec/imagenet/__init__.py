"""ILSVRC2012 (ImageNet) preparation, as GluonCV's ``imagenet.py`` does it:
:func:`prepare_imagenet` (``rec imagenet``)."""

from __future__ import annotations

from .preparing import CHECKSUMS, ImagenetOptions, ImagenetResult, prepare_imagenet
from .valmap import ValMap, bundled_val_map, load_devkit, load_val_map

__all__ = [
    "CHECKSUMS",
    "ImagenetOptions",
    "ImagenetResult",
    "ValMap",
    "bundled_val_map",
    "load_devkit",
    "load_val_map",
    "prepare_imagenet",
]

"""im2rec: MXNet RecordIO image datasets without MXNet.

``from im2rec import recordio`` is a drop-in for ``mxnet.recordio``; the
modern reader/writer classes live there too. See the README for the format.
"""

from __future__ import annotations

from . import recordio
from .errors import (
    ConfigError,
    DuplicateKeyError,
    Im2RecError,
    ImageCodecError,
    IndexFormatError,
    MissingFileError,
    ModeError,
    RecordFormatError,
    RecordTooLargeError,
    TruncatedRecordError,
    UnknownOptionError,
)
from .recordio import (
    IndexedRecordReader,
    IndexedRecordWriter,
    IRHeader,
    RecordReader,
    RecordWriter,
    load_index,
    pack,
    unpack,
)
from .version import __version__

# The training readers need Pillow; load them on first use so that
# `import im2rec` (and the `rec` command's start-up) stays light.
_LAZY = {
    "Augmenter": "training.augment",
    "ImageDetRecordIter": "training.detiter",
    "ImageRecordIter": "training.iterator",
    "ImageRecordInt8Iter": "training.iterator",
    "ImageRecordUInt8Iter": "training.iterator",
    "RecordDataset": "training.dataset",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'im2rec' has no attribute {name!r}")


__all__ = [
    "Augmenter",
    "ConfigError",
    "DuplicateKeyError",
    "IRHeader",
    "Im2RecError",
    "ImageCodecError",
    "ImageDetRecordIter",
    "ImageRecordInt8Iter",
    "ImageRecordIter",
    "ImageRecordUInt8Iter",
    "IndexFormatError",
    "IndexedRecordReader",
    "IndexedRecordWriter",
    "MissingFileError",
    "ModeError",
    "RecordFormatError",
    "RecordDataset",
    "RecordReader",
    "RecordTooLargeError",
    "RecordWriter",
    "TruncatedRecordError",
    "UnknownOptionError",
    "__version__",
    "load_index",
    "pack",
    "recordio",
    "unpack",
]

"""im2rec: MXNet RecordIO image datasets without MXNet.

``from im2rec import recordio`` is a drop-in for ``mxnet.recordio``; the
modern reader/writer classes live there too. See the README for the format.
"""

from __future__ import annotations

from . import recordio
from .errors import (
    DuplicateKeyError,
    Im2RecError,
    ImageCodecError,
    IndexFormatError,
    MissingFileError,
    ModeError,
    RecordFormatError,
    RecordTooLargeError,
    TruncatedRecordError,
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

__version__ = "0.1.0"

__all__ = [
    "DuplicateKeyError",
    "IRHeader",
    "Im2RecError",
    "ImageCodecError",
    "IndexFormatError",
    "IndexedRecordReader",
    "IndexedRecordWriter",
    "MissingFileError",
    "ModeError",
    "RecordFormatError",
    "RecordReader",
    "RecordTooLargeError",
    "RecordWriter",
    "TruncatedRecordError",
    "__version__",
    "load_index",
    "pack",
    "recordio",
    "unpack",
]

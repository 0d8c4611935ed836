"""The RecordIO core: MXNet's ``.rec``/``.idx`` format without MXNet.

Two layers share one implementation:

* the drop-in API, with ``mx.recordio``'s names and semantics:
  :class:`MXRecordIO`, :class:`MXIndexedRecordIO`, :class:`IRHeader`,
  :func:`pack`, :func:`unpack`, :func:`pack_img`, :func:`unpack_img`;
* the modern API: :class:`RecordWriter` / :class:`IndexedRecordWriter`
  (atomic, context managers), :class:`RecordReader` /
  :class:`IndexedRecordReader` (``pread``-based: thread-, fork- and
  pickle-safe, and a file truncated under them is an error, not SIGBUS),
  :func:`load_index`, :func:`build_index`, :func:`read_index_entries`.

This package uses only the standard library and numpy, and imports numpy on
first use (multi-label records, index arrays), so tools that only walk
headers start fast; image coding (``pack_img``/``unpack_img``) imports
Pillow on first use.
"""

from __future__ import annotations

from .framing import MAGIC, MAX_RECORD_SIZE, frame, read_record
from .header import HEADER_SIZE, IRHeader, pack, unpack
from .index import RecordIndex, load_index, read_index_entries
from .mx import MXIndexedRecordIO, MXRecordIO, pack_img, unpack_img
from .reader import IndexedRecordReader, RecordReader, build_index
from .writer import IndexedRecordWriter, RecordWriter, default_index_path

__all__ = [
    "HEADER_SIZE",
    "MAGIC",
    "MAX_RECORD_SIZE",
    "IRHeader",
    "IndexedRecordReader",
    "IndexedRecordWriter",
    "MXIndexedRecordIO",
    "MXRecordIO",
    "RecordIndex",
    "RecordReader",
    "RecordWriter",
    "build_index",
    "default_index_path",
    "frame",
    "load_index",
    "pack",
    "pack_img",
    "read_index_entries",
    "read_record",
    "unpack",
    "unpack_img",
]

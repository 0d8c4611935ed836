"""RecordIO to WebDataset tar shards and back: ``rec export`` and ``rec import``.

Export writes one sample per record, in file order: the image bytes
unchanged as ``KEY.jpg`` (``.png``, ... from their signature; ``.bin`` when
unknown; none for a record without payload), ``KEY.cls`` with the label when
it is one whole number, and ``KEY.json`` with the whole header (``flag``,
``label`` as a list, ``id``, ``id2``) and the record's ``.idx`` key, so that
nothing is lost. ``KEY`` is the header id, zero-padded to nine digits; when
ids do not increase (an id seen twice, or InsightFace's header record 0
after the images) the record's position is added (``000000000-25``), since
WebDataset merges consecutive members that share a key.

:mod:`.wds_export` writes them (``export_webdataset``); :mod:`.wds_import`
reads them back (``import_webdataset``): byte-identical ``.rec``/``.idx``
from shards written here, records from other shards' images and labels.
Both are here too.

Neither decodes an image, so both stream in one process at disk speed.
"""

from __future__ import annotations

from .wds_export import ExportResult, export_webdataset
from .wds_import import ImportResult, import_webdataset

__all__ = ["ExportResult", "ImportResult", "export_webdataset", "import_webdataset"]

"""The rows of a row group of ``rec export --to parquet``, gathered a
record at a time and made into an Arrow table of the columns
:func:`~.hublabels.schema` declares (from numpy buffers:
:mod:`.arrow_columns`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DatasetError
from ..imaging.headers import image_extension, image_size
from ..recordio import IRHeader
from . import hubboxes
from .arrow_columns import BinaryColumn, fixed_lists, lists, strings, values
from .hublabels import LabelColumn

__all__ = ["NotFitting", "Rows"]


class NotFitting(Exception):
    """A record whose label the columns guessed from the first one cannot hold."""


class Rows:
    """The rows of one row group: :meth:`add` each record, then
    :meth:`table` (which starts the next group)."""

    def __init__(
        self, pa: Any, column: LabelColumn, schema: Any, *, keep_header: bool,
        keep_mxnet: bool, rec: str, buffer: int,
    ) -> None:  # fmt: skip
        self.pa, self.column, self.schema, self.rec = pa, column, schema, rec
        self.keep_header, self.keep_mxnet = keep_header, keep_mxnet
        self.images = BinaryColumn(pa, buffer)
        self.next_object = 0  # (object ids count across the dataset)
        self._clear()

    def _clear(self) -> None:
        self.data: list[bytes | memoryview] = []
        self.paths: list[str] = []
        self.labels: list[Any] = []
        self.heads: list[IRHeader] = []
        self.keys: list[Any] = []
        self.offsets: list[int] = []
        self.sizes: list[tuple[int, int]] = []
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.data)

    def add(self, offset: int, header: IRHeader, image: bytes | memoryview, key: Any) -> None:
        """Add a record (:class:`NotFitting` when its label does not fit the column)."""
        column = self.column
        if not column.fits(header.flag, header.label):
            raise NotFitting
        self.data.append(image)
        self.paths.append(f"{header.id}{image_extension(bytes(image[:16])) or '.bin'}")
        if column.listed:
            self.labels.append(np.asarray(header.label, np.float32).reshape(-1))
        else:
            self.labels.append(float(header.label))
        if column.kind == "detection":
            size = image_size(image)
            self.sizes.append((size[1], size[0]) if size else (0, 0))
        self.heads.append(header)
        self.keys.append(key)
        self.offsets.append(offset)
        self.bytes += len(image) + 64

    def table(self) -> Any:
        """The rows added as a table (and an empty group started)."""
        pa, column = self.pa, self.column
        image = pa.StructArray.from_arrays(
            [self.images.array(self.data), strings(pa, self.paths)], names=["bytes", "path"]
        )
        arrays = [image]
        if column.kind == "detection":
            arrays += self._detection()
        elif column.listed:
            counts = np.fromiter(map(len, self.labels), np.int64, len(self.labels))
            flat = np.concatenate(self.labels) if self.labels else np.empty(0, np.float32)
            kind = pa.int64() if column.kind == "multi" else pa.float32()
            arrays.append(lists(pa, counts, values(pa, kind, flat.astype(kind.to_pandas_dtype()))))
        else:
            kind = pa.float32() if column.kind == "float" else pa.int64()
            arrays.append(values(pa, kind, np.array(self.labels, kind.to_pandas_dtype())))
        if self.keep_mxnet:
            stored = [np.asarray(h.label, np.float32).reshape(-1) for h in self.heads]
            counts = np.fromiter(map(len, stored), np.int64, len(stored))
            arrays.append(lists(pa, counts, values(pa, pa.float32(), np.concatenate(stored))))
        if self.keep_header:
            arrays.append(self._rec())
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        self._clear()
        return table

    def _rec(self) -> Any:
        pa = self.pa
        known = np.array([k is not None for k in self.keys], bool)
        fields = [
            values(pa, pa.uint32(), np.array([h.flag for h in self.heads], np.uint32)),
            values(pa, pa.uint64(), np.array([h.id for h in self.heads], np.uint64)),
            values(pa, pa.uint64(), np.array([h.id2 for h in self.heads], np.uint64)),
            values(pa, pa.uint64(), np.array([k or 0 for k in self.keys], np.uint64), known),
        ]
        names = ["flag", "id", "id2", "key"]
        if self.column.kind == "detection":
            heads = [label[: int(label[0])] for label in self.labels]
            counts = np.fromiter(map(len, heads), np.int64, len(heads))
            fields.append(lists(pa, counts, values(pa, pa.float32(), np.concatenate(heads))))
            names.append("label_head")
        return pa.StructArray.from_arrays(fields, names=names)

    def _detection(self) -> list[Any]:
        """``image_id``, ``width``, ``height`` and ``objects`` (:mod:`.hubboxes`)."""
        pa = self.pa
        if not self.column.fit_boxes(self.labels):
            raise NotFitting
        size = np.array(self.sizes, np.int64).reshape(-1, 2)
        width, height = size[:, 0], size[:, 1]
        found, exact = hubboxes.objects(self.labels, width, height)
        if not self.keep_mxnet and not exact.all():
            i = int(np.argmin(exact))
            why = ("its image's size cannot be read from its header" if not width[i] else
                   "a box of it would not come back exactly from pixels (a degenerate "
                   "empty box)")  # fmt: skip
            raise DatasetError(
                f"{self.rec}: record at offset {self.offsets[i]:,} (id {self.heads[i].id}): "
                f"{why}, so its boxes cannot be given in pixels; export with "
                "--keep-mxnet-label to keep each label as it is stored"
            )
        known = width > 0
        m = len(found.category)
        counts = found.counts
        ids = np.arange(self.next_object, self.next_object + m, dtype=np.int64)
        self.next_object += m
        fields = [
            lists(pa, counts, values(pa, pa.int64(), ids)),
            lists(pa, counts, values(pa, pa.float64(), found.area)),
            lists(pa, counts, fixed_lists(pa, values(pa, pa.float64(), found.bbox.ravel()), 4)),
            lists(pa, counts, values(pa, pa.int64(), found.category)),
        ]
        names = ["id", "area", "bbox", "category"]
        if self.column.extra:
            extra = values(pa, pa.float32(), found.extra)
            fields.append(lists(pa, counts, lists(pa, found.extra_counts, extra)))
            names.append("extra")
        objects = pa.StructArray.from_arrays(fields, names=names, mask=_mask(pa, ~known))
        ids_ = np.array([h.id for h in self.heads], np.uint64).view(np.int64)
        return [values(pa, pa.int64(), ids_), values(pa, pa.int32(), width, known),
                values(pa, pa.int32(), height, known), objects]  # fmt: skip


def _mask(pa: Any, null: np.ndarray) -> Any:
    """A boolean array, True where a row is null (StructArray's ``mask``),
    or None when none is."""
    if not null.any():
        return None
    bits = pa.py_buffer(np.packbits(null, bitorder="little"))
    return pa.Array.from_buffers(pa.bool_(), len(null), [None, bits])

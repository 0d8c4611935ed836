"""``rec import parquet``: Parquet shards back to ``.rec``/``.idx`` (the
layout is :mod:`.parquet`'s). A folder ``rec export --to parquet
--keep-header`` wrote gives back its ``.rec``/``.idx`` byte for byte;
from other Parquet files (datasets others publish) the image and label
columns are found from the features (:mod:`.hubcolumns`), a detection
``objects`` column becoming detection labels (:mod:`.hubboxes`).

What a file says is bounded before it is believed (docs/security.md,
"Archives"): every file is opened as a regular file at once, all of them
before the output is made; rows are decoded a batch at a time
(:mod:`.parquet_reading`), so memory stays flat whatever a row group's
size; and a file whose rows decode to more than
:data:`~im2rec.formats.tars.MAX_INFLATION` times its size (and
:data:`~im2rec.formats.tars.INFLATE_SLACK`) is refused as a compression
bomb, the same rule as compressed tar shards."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DatasetError, RecordFormatError
from ..imaging.headers import image_size
from ..listing.classmap import class_map_text
from ..progress import with_progress
from ..recordio import MAX_RECORD_SIZE, IndexedRecordWriter, IRHeader, pack
from ..recordio.detection import Labels, problem
from ..recordio.header import stored_label
from ..storage.atomic import write_file
from . import hubboxes
from .arrow_columns import integers, list_lengths
from .hubcolumns import Columns, find_columns, read_objects
from .hublabels import detection_rows
from .parquet import arrow
from .parquet_reading import Source, row_groups
from .tars import INFLATE_SLACK, MAX_INFLATION

__all__ = ["ParquetImport", "import_parquet"]

#: (records done, 0, bytes written)
Progress = Callable[[int, int, int], None]
MAX_LABELS = 1 << 20


@dataclass
class ParquetImport:
    rec: Path
    idx: Path
    files: int = 0
    records: int = 0
    #: the columns read: image, and label, objects or mxnet_label
    columns: dict[str, str] = field(default_factory=dict)
    #: the class map written from the labels' ClassLabel names
    classes: Path | None = None
    #: why no class map was written where the labels have names
    classes_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rec": str(self.rec), "idx": str(self.idx), "files": self.files,
                "records": self.records, "columns": self.columns,
                "classes": None if self.classes is None else str(self.classes),
                "classes_note": self.classes_note}  # fmt: skip


@with_progress("importing", " records", done=0)
def import_parquet(
    files: list[str],
    prefix: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    image_column: str | None = None,
    label_column: str | None = None,
    objects_column: str | None = None,
    on_progress: Progress | None = None,
    progress: bool = False,
) -> ParquetImport:
    """``PREFIX.rec``/``.idx`` from Parquet ``files`` (one split's shards, in
    order): those ``rec export --keep-header`` wrote give back their
    ``.rec``/``.idx`` byte for byte; others get ids and keys counted from
    0. The image and label columns are found from the files' features
    (:func:`~.hubcolumns.find_columns`) unless named; a detection column
    (``objects``) becomes detection labels; the labels' class names become
    ``PREFIX.classes.tsv``."""
    pa, pq = arrow()
    base = os.fspath(prefix).removesuffix(".rec")
    result = ParquetImport(Path(f"{base}.rec"), Path(f"{base}.idx"), len(files))
    sources = [Source(pq, name) for name in files]  # (all opened before the output is made)
    writer: IndexedRecordWriter | None = None
    try:
        chosen = [find_columns(pa, s.parquet.schema_arrow, s.name, image=image_column,
                               label=label_column, objects=objects_column)
                  for s in sources]  # fmt: skip
        for source, columns in zip(sources, chosen, strict=True):
            if columns.read != chosen[0].read:
                raise DatasetError(
                    f"{source.name}: its columns ({', '.join(columns.read)}) are not the first "
                    f"file's ({', '.join(chosen[0].read)}); import one dataset's split at a time"
                )
        names = chosen[0].names if chosen else None
        classes = Path(f"{base}.classes.tsv")
        existing = [p for p in (result.rec, result.idx, classes) if p.exists()
                    and (p != classes or names)]  # fmt: skip
        if existing and not overwrite:
            raise DatasetError(f"{existing[0]}: already exists; pass --overwrite to replace it")
        writer = IndexedRecordWriter(result.rec, result.idx)
        for source, columns in zip(sources, chosen, strict=True):
            result.columns = {"image": columns.image, **{k: v for k, v in (
                ("label", columns.mxnet_label or columns.label), ("objects", columns.objects)
            ) if v is not None}}  # fmt: skip
            _import_file(pa, source, columns, writer, result, on_progress)
        if not result.records:
            raise DatasetError(f"{len(files)} Parquet file(s) hold no rows; nothing was written")
        writer.close()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    finally:
        for source in sources:
            source.close()
    if names:
        try:
            text = class_map_text(list(names))
        except ValueError as exc:
            result.classes_note = f"no class map written: {exc}"
        else:
            write_file(classes, text)
            result.classes = classes
    return result


def _import_file(
    pa: Any, source: Source, columns: Columns, writer: IndexedRecordWriter,
    result: ParquetImport, on_progress: Progress | None,
) -> None:  # fmt: skip
    """Write the records of one Parquet file."""
    name = source.name
    inflated = 0
    for batch in row_groups(source, source.parquet.num_row_groups, columns.read):
        inflated += batch.nbytes
        if inflated > source.inflation_limit:
            raise DatasetError(
                f"{name}: its rows decode past {source.inflation_limit:,} bytes "
                f"({MAX_INFLATION}x its size and {INFLATE_SLACK >> 20} MiB); refusing it "
                "as a compression bomb (a real dataset of images compresses little)"
            )
        images = _images(batch.column(columns.image), name, result.records)
        headers = _headers(pa, batch.column(columns.rec), name, result.records) \
            if columns.rec else None  # fmt: skip
        if columns.objects is not None:
            heads = None if headers is None else headers.label_heads
            labels = _boxes(pa, batch.column(columns.objects), images, heads, name, result.records)
        else:
            labels = _labels(pa, batch.column(columns.mxnet_label or columns.label), name,
                             result.records)  # fmt: skip
        rows = headers.rows if headers is not None else None
        for i, data in enumerate(images):
            rec = None if rows is None else rows[i]
            key, head, image = _row(data, labels[i], rec, result.records, name)
            if len(head) + len(image) >= MAX_RECORD_SIZE:
                raise RecordFormatError(
                    f"{name}: row {result.records:,} is {len(image):,} bytes, more "
                    "than a record holds"
                )
            # (the image, a view of the batch's column, is written
            # as it is: nothing changes the batch)
            writer.write_key(key, head, image, copy=False)
            result.records += 1
            if on_progress is not None:
                on_progress(result.records, 0, writer.tell())


def _boxes(
    pa: Any, column: Any, images: list[memoryview], heads: list[np.ndarray] | None, name: str,
    first: int,
) -> list[np.ndarray]:  # fmt: skip
    """Each row's detection label from its ``objects`` (:mod:`.hubboxes`),
    normalised by its image's size as stored (read from its header); its
    header ``heads`` (``rec.label_head``) where ``rec export --keep-header``
    kept them."""
    where = f"{name}: rows {first:,} to {first + len(images) - 1:,}"
    found = read_objects(pa, column, where)
    size = np.zeros((len(images), 2), np.int64)
    for i, data in enumerate(images):
        hw = image_size(data)
        if hw is None and found.counts[i]:
            raise DatasetError(
                f"{name}: row {first + i:,}: its image's size cannot be read from its header, "
                "so its boxes (in pixels) cannot be normalised"
            )
        size[i] = hw[::-1] if hw else (0, 0)
    # (a row without objects: as wide as the others', else one extra value
    # where the column has them, as rec list's VOC difficult and COCO iscrowd)
    kind = column.type.value_type if pa.types.is_list(column.type) else column.type
    extra = int(found.extra_counts[0]) if len(found.extra_counts) else \
        int(kind.get_field_index("extra") >= 0)  # fmt: skip
    try:
        labels = hubboxes.labels(found, size[:, 0], size[:, 1], heads, extra)
    except ValueError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    bad = ~detection_rows(Labels.of(labels)).good  # (the batch at once)
    if bad.any():
        i = int(np.argmax(bad))
        raise DatasetError(f"{name}: row {first + i:,}: {problem(labels[i])}")
    return labels


def _labels(pa: Any, column: Any, name: str, first: int) -> list[Any]:
    """A batch's labels as Python values; a list longer than
    :data:`MAX_LABELS` is refused before it is made into Python floats."""
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        lengths = list_lengths(column)
        if len(lengths) and int(lengths.max()) > MAX_LABELS:
            at = first + int(np.argmax(lengths))
            raise DatasetError(
                f"{name}: row {at:,} has a label list of {int(lengths.max()):,} values "
                f"(at most {MAX_LABELS:,})"
            )
    labels: list[Any] = column.to_pylist()
    return labels


def _images(column: Any, name: str, first: int) -> list[memoryview]:
    """A batch's image bytes, as views of the column's buffer (no copy):
    the ``bytes`` of ``{bytes, path}`` structs, or a binary column."""
    import pyarrow as pa

    if pa.types.is_struct(column.type):
        if column.type.get_field_index("bytes") < 0:
            raise DatasetError(f"{name}: its image column has no 'bytes' field")
        column = column.field("bytes")
    if pa.types.is_null(column.type):
        column = pa.nulls(len(column), pa.binary())  # (no bytes at all: named below)
    if pa.types.is_binary(column.type):
        width = np.int32
    elif pa.types.is_large_binary(column.type):
        width = np.int64
    else:
        raise DatasetError(f"{name}: its image column holds {column.type}, not image bytes")
    if column.null_count:
        at = first + int(np.argmax(column.is_null().to_numpy(zero_copy_only=False)))
        raise DatasetError(
            f"{name}: row {at:,} has no image bytes (an image stored by path only); "
            "load it with datasets and save it with its bytes"
        )
    _, offsets_buffer, data_buffer = column.buffers()
    offsets = np.frombuffer(offsets_buffer, width)[column.offset : column.offset + len(column) + 1]
    data = memoryview(data_buffer).cast("B") if data_buffer is not None else memoryview(b"")
    bounds = offsets.tolist()
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@dataclass
class _Headers:
    """A batch's ``rec`` column: each row's ``(flag, id, id2, key)`` (key
    None where the row has none) and, where every row has one, its
    detection label's header values (``label_head``)."""

    rows: list[tuple[int, int, int, int | None]]
    label_heads: list[np.ndarray] | None


def _headers(pa: Any, column: Any, name: str, first: int) -> _Headers:
    """The ``rec`` column of a batch (a struct :func:`~.hubcolumns.find_columns`
    took for ``rec export --keep-header``'s), checked a batch at a time:
    a row without ``flag``, ``id`` or ``id2``, or with a field that is not
    a whole number from 0 to 2**64 - 1, is a DatasetError naming it."""
    n = len(column)
    kind = column.type
    fields = dict(zip((kind.field(i).name for i in range(kind.num_fields)), column.flatten(),
                      strict=True))  # fmt: skip
    bad = np.zeros(n, bool)
    found: list[list[Any]] = []
    for part in ("flag", "id", "id2", "key"):
        array = fields.get(part)
        if array is None:  # (find_columns took the column for its flag, id and id2)
            found.append([None] * n)
            continue
        if not pa.types.is_integer(array.type):
            bad[:] = True
            break
        numbers, valid = integers(pa, array)
        if part != "key":
            bad |= ~valid
        bad |= valid & (numbers < 0)  # (an unsigned type: none)
        listed: list[Any] = numbers.tolist()
        if not valid.all():  # (a key may be missing: the row's number is its key)
            listed = [v if ok else None for v, ok in zip(listed, valid.tolist(), strict=True)]
        found.append(listed)
    if bad.any():
        at = first + int(np.argmax(bad))
        raise DatasetError(
            f"{name}: row {at:,}: its rec column is not rec export's "
            "(flag, id, id2, key: whole numbers from 0 to 2**64 - 1)"
        )
    heads = None
    label_head = fields.get("label_head")
    if label_head is not None and not _numbers_list(pa, label_head.type):
        raise DatasetError(
            f"{name}: rows {first:,} to {first + n - 1:,}: their rec.label_head is "
            f"{label_head.type}, not rec export's list of numbers (a detection label's header): "
            "import a file rec export wrote, or one without a rec column"
        )
    if label_head is not None and not label_head.null_count:
        listed_heads = label_head.to_pylist()
        if all(listed_heads):
            heads = [np.asarray(values, np.float32) for values in listed_heads]
    return _Headers(list(zip(*found, strict=True)), heads)


#: every whole number up to this far from 0 is a float32 (beyond, some are not)
_HELD = 1 << 24


def _check_held(values: list[Any], number: int, name: str) -> None:
    """A DatasetError naming row ``number`` where a label value would not
    be stored as it is: a whole number float32 turns into another (two
    classes or identities merged), or one past float32's range."""
    for value in values:
        try:
            stored = stored_label(value)
        except OverflowError:
            raise DatasetError(
                f"{name}: row {number:,}: its label {value!r} does not fit float32 (largest "
                "about 3.4e38; RecordIO stores labels as float32)"
            ) from None
        if stored is None:
            shown = value if isinstance(value, int) else f"{value:.0f}"
            raise DatasetError(
                f"{name}: row {number:,}: its label {shown} is a whole number float32 cannot "
                f"hold (RecordIO stores labels as float32: it would read back as "
                f"{int(np.float32(value))}); number the classes from 0"
            )


def _numbers_list(pa: Any, kind: Any) -> bool:
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind)) and bool(
        pa.types.is_integer(kind.value_type) or pa.types.is_floating(kind.value_type)
    )


def _row(
    data: memoryview, label: Any, rec: tuple[int, int, int, int | None] | None, number: int,
    name: str,
) -> tuple[int, bytes, memoryview]:  # fmt: skip
    """``(key, header bytes, image bytes)`` of one row (its label a number,
    a list of numbers, or float32 values checked already; its ``rec``
    fields checked by :func:`_headers`)."""
    if isinstance(label, np.ndarray):
        pass
    elif isinstance(label, list):
        if not 0 < len(label) <= MAX_LABELS or not all(isinstance(v, int | float) for v in label):
            raise DatasetError(f"{name}: row {number:,} has a label list of {len(label):,} values")
        if not all(-_HELD <= v <= _HELD for v in label):  # (NaN too: max() would hide it)
            _check_held(label, number, name)
    elif not isinstance(label, int | float) or isinstance(label, bool):
        raise DatasetError(f"{name}: row {number:,}: its label {label!r} is not a number")
    elif not -_HELD <= label <= _HELD:
        _check_held([label], number, name)
    if rec is not None:
        flag, rid, id2, key = rec
        values = label if isinstance(label, list | np.ndarray) else [label]
        if flag != (len(values) if flag else 0) or (not flag and len(values) != 1):
            raise DatasetError(f"{name}: row {number:,}: rec.flag {flag} does not fit its label")
        if isinstance(values, np.ndarray):
            value: Any = values if flag else float(values[0])
        else:
            value = [float(v) for v in values] if flag else float(values[0])
        header = IRHeader(flag, value, rid, id2)
        return (number if key is None else key), pack(header, b""), data
    if isinstance(label, np.ndarray):
        header = IRHeader(len(label), label, number, 0)
    elif isinstance(label, list):
        header = IRHeader(len(label), [float(v) for v in label], number, 0)
    else:
        header = IRHeader(0, float(label), number, 0)
    return number, pack(header, b""), data

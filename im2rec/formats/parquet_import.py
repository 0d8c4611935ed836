"""``rec import parquet``: Parquet shards back to ``.rec``/``.idx`` (the
layout is :mod:`.parquet`'s). A folder ``rec export --to parquet`` wrote
gives back its ``.rec``/``.idx`` byte for byte; other Parquet files (those
``datasets`` keeps in its cache) need an ``image`` and a ``label`` column.
Rows are read a batch at a time, so memory stays flat."""

from __future__ import annotations

import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DatasetError, RecordFormatError
from ..recordio import MAX_RECORD_SIZE, IndexedRecordWriter, IRHeader, pack
from ..recordio.framing import needs_split
from .parquet import arrow

__all__ = ["ParquetImport", "import_parquet"]

#: (records done, 0, bytes written)
Progress = Callable[[int, int, int], None]
MAX_LABELS = 1 << 20
#: row groups read at once, on threads
READERS = 2


@dataclass
class ParquetImport:
    rec: Path
    idx: Path
    files: int = 0
    records: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"rec": str(self.rec), "idx": str(self.idx), "files": self.files,
                "records": self.records}  # fmt: skip


def import_parquet(
    files: list[str],
    prefix: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    on_progress: Progress | None = None,
) -> ParquetImport:
    """``PREFIX.rec``/``.idx`` from Parquet ``files`` (one split's shards, in
    order): those ``rec export`` wrote give back their ``.rec``/``.idx``
    byte for byte; others need an ``image`` column (``{bytes, path}``
    structs, or binary) and a ``label`` column (whole numbers, floats or
    lists of them), and get ids and keys counted from 0."""
    _, pq = arrow()
    base = os.fspath(prefix).removesuffix(".rec")
    result = ParquetImport(Path(f"{base}.rec"), Path(f"{base}.idx"), len(files))
    existing = [p for p in (result.rec, result.idx) if p.exists()]
    if existing and not overwrite:
        raise DatasetError(f"{existing[0]}: already exists; pass --overwrite to replace it")
    writer = IndexedRecordWriter(result.rec, result.idx)
    try:
        for name in files:
            parquet = _open(pq, name)
            names = parquet.schema_arrow.names
            if "image" not in names or "label" not in names:
                raise DatasetError(
                    f"{name}: no 'image' and 'label' columns (it has {', '.join(names)})"
                )
            columns = ["image", "label"] + (["rec"] if "rec" in names else [])
            for batch in row_groups(pq, name, parquet.num_row_groups, columns):
                images = _images(batch.column("image"), name, result.records)
                labels = batch.column("label").to_pylist()
                recs = batch.column("rec").to_pylist() if "rec" in names else None
                for i, data in enumerate(images):
                    rec = None if recs is None else recs[i]
                    key, head, image = _row(data, labels[i], rec, result.records, name)
                    if len(head) + len(image) >= MAX_RECORD_SIZE:
                        raise RecordFormatError(
                            f"{name}: row {result.records:,} is {len(image):,} bytes, more "
                            "than a record holds"
                        )
                    # (the image, a view of the batch's column, is written
                    # as it is: nothing changes the batch)
                    writer.write_key(key, head, image, split=needs_split(head, image), copy=False)
                    result.records += 1
                    if on_progress is not None:
                        on_progress(result.records, 0, writer.tell())
        if not result.records:
            raise DatasetError(f"{len(files)} Parquet file(s) hold no rows; nothing was written")
        writer.close()
    except BaseException:
        writer.abort()
        raise
    return result


def row_groups(pq: Any, name: str, count: int, columns: list[str]) -> Iterator[Any]:
    """The record batches (128 rows at most) of the ``count`` row groups of
    the Parquet file ``name``, in order. Row groups are read :data:`READERS`
    at a time, each reader thread with its own file (pyarrow reads and
    decodes without the GIL): the disk serves one while another is decoded
    and the main thread writes a third. At most ``2 * READERS`` row groups
    are held."""
    with ThreadPoolExecutor(READERS, thread_name_prefix="im2rec-parquet") as pool:
        local = threading.local()

        def read(group: int) -> Any:
            if not hasattr(local, "file"):
                local.file = _open(pq, name)
            with _pyarrow_reading(f"{name}: row group {group}"):
                return local.file.read_row_group(group, columns=columns)

        pending: deque[Future[Any]] = deque()
        groups = iter(range(count))
        try:
            for group in itertools.islice(groups, 2 * READERS):
                pending.append(pool.submit(read, group))
            while pending:
                table = pending.popleft().result()
                for group in itertools.islice(groups, 1):
                    pending.append(pool.submit(read, group))
                yield from table.to_batches(max_chunksize=128)
        finally:
            for future in pending:
                future.cancel()


@contextmanager
def _pyarrow_reading(where: str) -> Iterator[None]:
    """What pyarrow raises on a file it cannot read (ArrowException, or a
    plain OSError for a damaged page header) as one DatasetError naming
    ``where``; a missing file passes through."""
    import pyarrow as pa

    try:
        yield
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DatasetError(
            f"{where}: pyarrow cannot read it ({why}); the file is damaged or not Parquet: "
            "download or export it again"
        ) from None


def _open(pq: Any, name: str) -> Any:
    """``pq.ParquetFile(name)``; DatasetError naming the file when it is not
    one pyarrow reads."""
    with _pyarrow_reading(name):
        return pq.ParquetFile(name)


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
    data = memoryview(data_buffer) if data_buffer is not None else memoryview(b"")
    bounds = offsets.tolist()
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _row(
    data: memoryview, label: Any, rec: Any, number: int, name: str
) -> tuple[int, bytes, memoryview]:
    """``(key, header bytes, image bytes)`` of one row."""
    if isinstance(label, list):
        if not 0 < len(label) <= MAX_LABELS or not all(isinstance(v, int | float) for v in label):
            raise DatasetError(f"{name}: row {number:,} has a label list of {len(label):,} values")
    elif not isinstance(label, int | float) or isinstance(label, bool):
        raise DatasetError(f"{name}: row {number:,}: its label {label!r} is not a number")
    if rec is not None:
        flag, rid, id2, key = (rec.get(k) for k in ("flag", "id", "id2", "key"))
        whole = [v for v in (flag, rid, id2, key) if v is not None]
        if (
            flag is None
            or rid is None
            or id2 is None
            or not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64 for v in whole
            )
        ):
            raise DatasetError(
                f"{name}: row {number:,}: its rec column is not rec export's "
                "(flag, id, id2, key: whole numbers from 0 to 2**64 - 1)"
            )
        values = label if isinstance(label, list) else [label]
        if flag != (len(values) if flag else 0) or (not flag and len(values) != 1):
            raise DatasetError(f"{name}: row {number:,}: rec.flag {flag} does not fit its label")
        value: Any = [float(v) for v in values] if flag else float(values[0])
        header = IRHeader(flag, value, rid, id2)
        return (number if key is None else key), pack(header, b""), data
    if isinstance(label, list):
        header = IRHeader(len(label), [float(v) for v in label], number, 0)
    else:
        header = IRHeader(0, float(label), number, 0)
    return number, pack(header, b""), data

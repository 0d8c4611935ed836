"""``rec import parquet``: Parquet shards back to ``.rec``/``.idx`` (the
layout is :mod:`.parquet`'s). A folder ``rec export --to parquet`` wrote
gives back its ``.rec``/``.idx`` byte for byte; other Parquet files (those
``datasets`` keeps in its cache) need an ``image`` and a ``label`` column.

What a file says is bounded before it is believed (docs/security.md,
"Archives"): every file is opened as a regular file at once (a FIFO would
never end), all of them before the output is made; rows are decoded a
batch at a time (at most 128 rows, fewer where the row group's columns
could make a batch larger than :data:`BATCH_BYTES`: a dictionary page
repeats one value for every row), so memory stays flat whatever a row
group's size; and a file whose rows decode to more than
:data:`~im2rec.formats.tars.MAX_INFLATION` times its size (and
:data:`~im2rec.formats.tars.INFLATE_SLACK`) is refused as a compression
bomb, the same rule as compressed tar shards."""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DatasetError, RecordFormatError
from ..progress import with_progress
from ..recordio import MAX_RECORD_SIZE, IndexedRecordWriter, IRHeader, pack
from ..recordio.framing import needs_split
from ..storage.files import open_regular
from .parquet import arrow
from .tars import INFLATE_SLACK, MAX_INFLATION

__all__ = ["ParquetImport", "import_parquet"]

#: (records done, 0, bytes written)
Progress = Callable[[int, int, int], None]
MAX_LABELS = 1 << 20
#: row groups read at once, on threads
READERS = 2
#: the most rows a batch holds
BATCH_ROWS = 128
#: what a batch's columns may decode to, as far as the row group's sizes tell
BATCH_BYTES = 64 << 20
#: batches a row group's reader may hold ready
_READY = 2
#: row groups of at most this many bytes (as stored) are read whole, in a
#: few requests (pyarrow's pre-buffering; docs/measured.md); a file with
#: larger ones is read through a 1 MiB buffer
PREBUFFER_BYTES = 32 << 20


@dataclass
class ParquetImport:
    rec: Path
    idx: Path
    files: int = 0
    records: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"rec": str(self.rec), "idx": str(self.idx), "files": self.files,
                "records": self.records}  # fmt: skip


@with_progress("importing", " records", done=0)
def import_parquet(
    files: list[str],
    prefix: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    on_progress: Progress | None = None,
    progress: bool = False,
) -> ParquetImport:
    """``PREFIX.rec``/``.idx`` from Parquet ``files`` (one split's shards, in
    order): those ``rec export`` wrote give back their ``.rec``/``.idx``
    byte for byte; others need an ``image`` column (``{bytes, path}``
    structs, or binary) and a ``label`` column (whole numbers, floats or
    lists of them), and get ids and keys counted from 0."""
    pa, pq = arrow()
    base = os.fspath(prefix).removesuffix(".rec")
    result = ParquetImport(Path(f"{base}.rec"), Path(f"{base}.idx"), len(files))
    existing = [p for p in (result.rec, result.idx) if p.exists()]
    if existing and not overwrite:
        raise DatasetError(f"{existing[0]}: already exists; pass --overwrite to replace it")
    sources = [_Source(pq, name) for name in files]  # (all opened before the output is made)
    writer: IndexedRecordWriter | None = None
    try:
        writer = IndexedRecordWriter(result.rec, result.idx)
        for source in sources:
            name, parquet = source.name, source.parquet
            names = parquet.schema_arrow.names
            if "image" not in names or "label" not in names:
                raise DatasetError(
                    f"{name}: no 'image' and 'label' columns (it has {', '.join(names)})"
                )
            columns = ["image", "label"] + (["rec"] if "rec" in names else [])
            inflated = 0
            for batch in row_groups(source, parquet.num_row_groups, columns):
                inflated += batch.nbytes
                if inflated > source.inflation_limit:
                    raise DatasetError(
                        f"{name}: its rows decode past {source.inflation_limit:,} bytes "
                        f"({MAX_INFLATION}x its size and {INFLATE_SLACK >> 20} MiB); refusing it "
                        "as a compression bomb (a real dataset of images compresses little)"
                    )
                images = _images(batch.column("image"), name, result.records)
                labels = _labels(pa, batch.column("label"), name, result.records)
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
        if writer is not None:
            writer.abort()
        raise
    finally:
        for source in sources:
            source.close()
    return result


class _Source:
    """An input Parquet file: opened at once as a regular file (a FIFO or a
    device is refused before anything waits on it), then read by pyarrow
    through that very file (``/proc/self/fd``), once a reader thread; a row
    group whole where every one is at most :data:`PREBUFFER_BYTES`, else a
    buffer at a time."""

    def __init__(self, pq: Any, name: str) -> None:
        self.name = name
        self.fd, size = open_regular(name, "is a folder, not a Parquet file")
        self.inflation_limit = MAX_INFLATION * size + INFLATE_SLACK
        self._pq = pq
        self._handles: list[Any] = []
        self._whole = True  # (the first open reads the metadata, to decide)
        self.parquet = self.open()
        meta = self.parquet.metadata
        self._whole = all(
            sum(rg.column(j).total_compressed_size for j in range(rg.num_columns))
            <= PREBUFFER_BYTES
            for rg in (meta.row_group(i) for i in range(meta.num_row_groups))
        )

    def open(self) -> Any:
        """A new ``ParquetFile`` of the file (each reader thread has its own)."""
        import pyarrow as pa

        proc = f"/proc/self/fd/{self.fd}"
        with _pyarrow_reading(self.name):
            if os.path.exists(proc):
                handle: Any = pa.OSFile(proc)
            else:  # (no /proc: the path opened again, for a file offset of its own)
                fd, _ = open_regular(self.name, "is a folder, not a Parquet file")
                handle = pa.PythonFile(os.fdopen(fd, "rb"), mode="r")
            self._handles.append(handle)
            if self._whole:
                return self._pq.ParquetFile(handle, pre_buffer=True)
            return self._pq.ParquetFile(handle, pre_buffer=False, buffer_size=1 << 20)

    def batch_rows(self, group: int, columns: list[str]) -> int:
        """How many rows a batch of row group ``group`` holds: at most
        :data:`BATCH_ROWS`, and few enough that the columns' chunks (their
        decoded size, as the file states it, and a row's worst case where a
        dictionary repeats a value) stay within :data:`BATCH_BYTES`."""
        meta = self.parquet.metadata.row_group(group)
        rows = max(1, meta.num_rows)
        per_row = 0.0
        for j in range(meta.num_columns):
            chunk = meta.column(j)
            if chunk.path_in_schema.split(".")[0] not in columns:
                continue
            size = max(0, int(chunk.total_uncompressed_size))
            weight = 8 if chunk.path_in_schema.startswith("label") else 1  # (Python floats)
            if chunk.has_dictionary_page:  # every row may be the largest value
                per_row += weight * min(size, MAX_RECORD_SIZE)
            else:
                per_row += weight * size / rows
        return max(1, min(BATCH_ROWS, int(BATCH_BYTES // max(per_row, 1.0))))

    def close(self) -> None:
        for handle in self._handles:
            handle.close()
        os.close(self.fd)


def row_groups(source: _Source, count: int, columns: list[str]) -> Iterator[Any]:
    """The record batches of the ``count`` row groups of ``source``, in
    order, each of :meth:`_Source.batch_rows` rows. Row groups are read
    :data:`READERS` at a time, each reader thread with its own file (pyarrow
    reads and decodes without the GIL): the disk serves one while another is
    decoded and the main thread writes a third. A reader holds at most
    :data:`_READY` batches ready, so memory is a few batches, whatever the
    row groups' sizes."""
    with ThreadPoolExecutor(READERS, thread_name_prefix="im2rec-parquet") as pool:
        local = threading.local()
        stop = threading.Event()

        def read(group: int, ready: queue.Queue[Any]) -> None:
            try:
                if not hasattr(local, "file"):
                    local.file = source.open()
                rows = source.batch_rows(group, columns)
                with _pyarrow_reading(f"{source.name}: row group {group}"):
                    for batch in local.file.iter_batches(
                        batch_size=rows, row_groups=[group], columns=columns, use_threads=False
                    ):
                        if not _put(ready, batch, stop):
                            return
                _put(ready, _END, stop)
            except BaseException as exc:  # noqa: BLE001 - raised where the batch is taken
                _put(ready, exc, stop)

        pending: deque[queue.Queue[Any]] = deque()
        groups = iter(range(count))

        def start() -> None:
            for group in itertools.islice(groups, 1):
                ready: queue.Queue[Any] = queue.Queue(_READY)
                pool.submit(read, group, ready)
                pending.append(ready)

        try:
            for _ in range(READERS):
                start()
            while pending:
                ready = pending[0]
                while (item := ready.get()) is not _END:
                    if isinstance(item, BaseException):
                        raise item
                    yield item
                pending.popleft()
                start()
        finally:
            stop.set()


_END = object()  # a row group's last batch was handed over


def _put(ready: queue.Queue[Any], item: Any, stop: threading.Event) -> bool:
    """Hand ``item`` to the main thread, waiting for room; False once the
    main thread has stopped taking (an error, or the caller stopped)."""
    while not stop.is_set():
        try:
            ready.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _labels(pa: Any, column: Any, name: str, first: int) -> list[Any]:
    """A batch's labels as Python values; a list longer than
    :data:`MAX_LABELS` is refused before it is made into Python floats."""
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        import pyarrow.compute as pc

        lengths = pc.list_value_length(column).fill_null(0).to_numpy(zero_copy_only=False)
        if len(lengths) and int(lengths.max()) > MAX_LABELS:
            at = first + int(np.argmax(lengths))
            raise DatasetError(
                f"{name}: row {at:,} has a label list of {int(lengths.max()):,} values "
                f"(at most {MAX_LABELS:,})"
            )
    labels: list[Any] = column.to_pylist()
    return labels


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

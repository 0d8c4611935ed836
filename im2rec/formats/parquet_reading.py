"""Reading Parquet files for ``rec import parquet`` with bounded memory:
each file opened at once as a regular file (a FIFO would never end), its
row groups read :data:`READERS` at a time on threads, each as record
batches of at most :data:`BATCH_ROWS` rows (fewer where the row group's
columns could make a batch larger than :data:`BATCH_BYTES`: a dictionary
page repeats one value for every row), so memory stays flat whatever a
row group's size; what pyarrow cannot read is one DatasetError naming the
file and row group."""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from ..errors import DatasetError
from ..recordio import MAX_RECORD_SIZE
from ..storage.files import open_regular
from .tars import INFLATE_SLACK, MAX_INFLATION

__all__ = [
    "BATCH_BYTES", "BATCH_ROWS", "PREBUFFER_BYTES", "READERS", "RUN_BYTES", "RUN_GROUPS", "Source",
    "row_groups",
]  # fmt: skip

#: row groups read at once, on threads
READERS = 2
#: the most rows a batch holds
BATCH_ROWS = 128
#: what a batch's columns may decode to, as far as the row group's sizes tell
BATCH_BYTES = 64 << 20
#: batches a row group's reader may hold ready
_READY = 2
#: consecutive row groups are read in one call while their stored bytes
#: stay within this and they are at most RUN_GROUPS (the Hub's image datasets
#: have 100 rows a group: small images make small groups, and each call
#: costs about a quarter of a millisecond; docs/measured.md)
RUN_BYTES = 8 << 20
RUN_GROUPS = 64
#: row groups of at most this many bytes (as stored) are read whole, in a
#: few requests (pyarrow's pre-buffering; docs/measured.md); a file with
#: larger ones is read through a 1 MiB buffer
PREBUFFER_BYTES = 32 << 20


class Source:
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
            _stored(meta, group) <= PREBUFFER_BYTES for group in range(meta.num_row_groups)
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
            weight = 1 if chunk.path_in_schema.startswith(columns[0]) else 8  # (Python floats)
            if chunk.has_dictionary_page:  # every row may be the largest value
                per_row += weight * min(size, MAX_RECORD_SIZE)
            else:
                per_row += weight * size / rows
        return max(1, min(BATCH_ROWS, int(BATCH_BYTES // max(per_row, 1.0))))

    def runs(self, count: int) -> Iterator[range]:
        """The first ``count`` row groups in runs read together (at most
        :data:`RUN_GROUPS` of at most :data:`RUN_BYTES` in all, as stored)."""
        meta = self.parquet.metadata
        start = size = 0
        for group in range(count):
            stored = _stored(meta, group)
            if group > start and (size + stored > RUN_BYTES or group - start >= RUN_GROUPS):
                yield range(start, group)
                start, size = group, 0
            size += stored
        if count > start:
            yield range(start, count)

    def close(self) -> None:
        for handle in self._handles:
            handle.close()
        os.close(self.fd)


def row_groups(source: Source, count: int, columns: list[str]) -> Iterator[Any]:
    """The record batches of the ``count`` row groups of ``source``, in
    order, each of :meth:`Source.batch_rows` rows. Row groups are read
    :data:`READERS` at a time, each reader thread with its own file (pyarrow
    reads and decodes without the GIL): the disk serves one while another is
    decoded and the main thread writes a third. A reader holds at most
    :data:`_READY` batches ready, so memory is a few batches, whatever the
    row groups' sizes."""
    with ThreadPoolExecutor(READERS, thread_name_prefix="im2rec-parquet") as pool:
        local = threading.local()
        stop = threading.Event()

        def read(run: range, ready: queue.Queue[Any]) -> None:
            try:
                if not hasattr(local, "file"):
                    local.file = source.open()
                rows = min(source.batch_rows(group, columns) for group in run)
                batches = local.file.iter_batches(
                    batch_size=rows, row_groups=list(run), columns=columns, use_threads=False
                )
                try:
                    with _pyarrow_reading(f"{source.name}: row group {run[0]}"):
                        for batch in batches:
                            if not _put(ready, batch, stop):
                                return
                except DatasetError:
                    _name_the_group(local.file, source.name, run, columns)
                    raise
                _put(ready, _END, stop)
            except BaseException as exc:  # noqa: BLE001 - raised where the batch is taken
                _put(ready, exc, stop)

        pending: deque[queue.Queue[Any]] = deque()
        runs = source.runs(count)

        def start() -> None:
            for run in itertools.islice(runs, 1):
                ready: queue.Queue[Any] = queue.Queue(_READY)
                pool.submit(read, run, ready)
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


def _stored(meta: Any, group: int) -> int:
    """Row group ``group``'s bytes as stored (its column chunks, compressed)."""
    chunks = meta.row_group(group)
    return sum(max(0, chunks.column(j).total_compressed_size) for j in range(chunks.num_columns))


_END = object()  # a run's last batch was handed over


def _name_the_group(parquet: Any, name: str, run: range, columns: list[str]) -> None:
    """Which row group of a run pyarrow cannot read, as the DatasetError to
    raise (each read again alone: a failure is rare, a run a few MiB)."""
    for group in run:
        with _pyarrow_reading(f"{name}: row group {group}"):
            for _ in parquet.iter_batches(row_groups=[group], columns=columns, use_threads=False):
                pass


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

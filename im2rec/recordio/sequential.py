"""Every record of a local ``.rec`` in file order, read in large chunks a
thread ahead of their use: for the commands that convert a whole file
(``rec export --to parquet``). The disk serves the next chunks while this
one's records are handled, and each byte is read once (a header read, then
a body read, for each record reads a file of 100 kB records about 1.6
times over).

Each record's payload is a view of the chunk it lies in (memory that
lives while a view of it does: chunks are never reused). A
record that runs past its chunk's end is read alone, where it starts; an
error (a damaged or cut record) is raised by that same read, so it names
the byte of the file, not of the chunk.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from ..errors import RecordFormatError
from ..storage.files import FileView
from .framing import read_record
from .reader import RecordReader

__all__ = ["CHUNK", "sequential_records"]

#: bytes read at once (the size of a kernel read-ahead window on common disks)
CHUNK = 8 << 20
#: chunks read ahead of the one in use
AHEAD = 2


def sequential_records(
    reader: RecordReader, chunk: int = CHUNK
) -> Iterator[tuple[int, memoryview]]:
    """``(offset, payload)`` of every record of ``reader``'s file, in file
    order. A URL (no local file) is read record by record."""
    view, size = reader.mapping()
    if type(view) is not FileView:
        yield from _one_by_one(view, size, reader.name)
        return
    pos = 0
    for base, data in _chunks(view, size, chunk):
        end = base + len(data)
        if pos >= end:  # (a record read alone ran past this chunk)
            continue
        local = memoryview(data)
        while pos < end:
            try:
                payload, nxt = read_record(local, pos - base, len(data), reader.name)
                nxt += base
            except RecordFormatError:  # past the chunk's end, or damaged: read where it is
                payload, nxt = read_record(view, pos, size, reader.name)
            yield pos, memoryview(payload)  # (a view already, of the chunk)
            pos = nxt


def _one_by_one(view: object, size: int, name: str) -> Iterator[tuple[int, memoryview]]:
    pos = 0
    while pos < size:
        payload, nxt = read_record(view, pos, size, name)  # type: ignore[arg-type]
        yield pos, memoryview(payload)
        pos = nxt


def _chunks(view: FileView, size: int, chunk: int) -> Iterator[tuple[int, memoryview]]:
    """``(start, data)`` of the file's consecutive chunks, each read on a
    thread (``pread`` runs without the GIL) while earlier ones are used,
    into memory placed for the kernel's copy (``FileView.read_placed``)."""
    with ThreadPoolExecutor(1, thread_name_prefix="im2rec-read") as pool:
        pending: deque[tuple[int, Future[memoryview]]] = deque()
        start = 0

        def submit() -> None:
            nonlocal start
            if start < size:
                n = min(chunk, size - start)
                pending.append((start, pool.submit(view.read_placed, start, n)))
                start += n

        for _ in range(AHEAD + 1):
            submit()
        try:
            while pending:
                base, future = pending.popleft()
                data = future.result()  # (a file cut short since it was opened: named there)
                submit()
                yield base, data
        finally:
            for _, future in pending:
                future.cancel()

"""Readers over ``.rec`` files.

A reader reads with ``pread`` through a :class:`~im2rec.storage.files.FileView`
(no shared file position), so any number of threads may read at once and a
forked child keeps using the parent's open file. It does not memory-map the
file: a mapped file truncated by another process kills the reader with
SIGBUS, while a short ``pread`` becomes a
:class:`~im2rec.errors.TruncatedRecordError`. Pickling sends only the paths
(and a loaded index): the copy opens the file again on first use, which is
what ``DataLoader`` workers under ``spawn`` need.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from ..errors import MissingFileError, RecordFormatError
from ..storage.files import FileView, pread
from .codec import CFLAG_WHOLE, MAGIC, decode_flag, frame_size
from .framing import iter_heads, read_record, unpack_head
from .index import RecordIndex, load_index
from .views import KeyView

if TYPE_CHECKING:  # (numpy: the header walks of `rec info` start without it)
    from ..storage.blockcache import BlockCache

__all__ = [
    "SPAN_LIMIT",
    "SPAN_MISSES",
    "IndexedRecordReader",
    "RecordReader",
    "build_index",
    "rising",
]

#: the largest span :meth:`RecordReader.read_span` reads at once (a larger
#: record is read as any other: header first, then its payload)
SPAN_LIMIT = 4 << 20
#: spans that were not one whole record after which a reader reads as any other
SPAN_MISSES = 64


class RecordReader:
    """Sequential and by-offset access to the records of one ``.rec`` file:
    a local path, or a URL (``s3://...``, ``https://...``: see
    :mod:`im2rec.storage`; ``storage_options`` go to its fsspec backend)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | bytes,
        *,
        storage_options: dict[str, Any] | None = None,
        cache: BlockCache | None = None,
    ):
        from .. import storage

        location = os.fsdecode(path)
        self.location = location
        self.storage_options = storage_options
        self.cache = cache if storage.is_url(location) else None
        # a URL keeps its text: Path() would fold "s3://b/x" into "s3:/b/x"
        self.path = (
            Path(location) if not storage.is_url(location) else Path(location.split("://")[-1])
        )
        self.name = location if storage.is_url(location) else str(self.path)
        self._lock = threading.Lock()
        self._view: FileView | None = None
        self._size = 0
        self._span_misses = 0  # (see read_span)
        self._ensure_open()

    def _ensure_open(self) -> FileView:
        with self._lock:
            if self._view is None:
                from ..storage import open_view

                self._view = open_view(self.location, self.storage_options, cache=self.cache)
                self._size = self._view.size
                self._opened(self._view)
            return self._view

    def _opened(self, view: FileView) -> None:
        """Called once the file is open (the indexed reader aligns a cached
        view's blocks to its records)."""

    @property
    def remote(self) -> bool:
        from ..storage import is_url

        return is_url(self.location)

    @property
    def size(self) -> int:
        """File size in bytes (when it was opened)."""
        self._ensure_open()
        return self._size

    def read_at(self, offset: int, *, copy: bool = True) -> bytes:
        """The record whose first header is at byte ``offset``.

        ``copy`` is accepted for compatibility and ignored: records are
        read into new ``bytes``.
        """
        view = self._view if self._view is not None else self._ensure_open()
        return read_record(view, offset, self._size, self.name)[0]

    def read_span(self, offset: int, stop: int) -> bytes | memoryview:
        """The payload of the record at ``offset`` when the next record
        starts at ``stop`` (an index whose offsets rise says so): the span
        read at once, the payload a view of it. The training loaders' path:
        one ``pread`` a record instead of two. A span that is not exactly one
        whole record (a gap, a split record, damage, a URL) is read as
        :meth:`read_at` reads it, and fails as it fails. After
        :data:`SPAN_MISSES` such spans (an ``.idx`` listing only some of
        the file's records makes every span hold several) this reader stops
        trying: each miss read up to :data:`SPAN_LIMIT` bytes for nothing."""
        view = self._view if self._view is not None else self._ensure_open()
        size = stop - offset
        if (
            type(view) is FileView
            and 8 <= size <= SPAN_LIMIT
            and stop <= self._size
            and self._span_misses < SPAN_MISSES
        ):
            data = pread(view.fd, size, offset)
            if _whole_record(data, size):
                return memoryview(data)[8 : 8 + (unpack_head(data, 0)[1])]
            self._span_misses += 1
        return self.read_at(offset)

    def span_fd(self) -> int | None:
        """The open file's descriptor where records can be read in spans as
        :meth:`read_span` reads them, by other code (the training loaders'
        C loop): a local file, and fewer than :data:`SPAN_MISSES` spans
        found not to be one whole record. None otherwise."""
        view = self._view if self._view is not None else self._ensure_open()
        if type(view) is not FileView or self._span_misses >= SPAN_MISSES:
            return None
        return view.fd

    def read_next(self, offset: int) -> tuple[bytes | None, int]:
        """``(record, next_offset)`` for the record at ``offset``, or
        ``(None, offset)`` at the end of the file."""
        view = self._view if self._view is not None else self._ensure_open()
        if offset >= self._size:
            return None, offset
        return read_record(view, offset, self._size, self.name)

    def __iter__(self) -> Iterator[bytes]:
        """Every record, in file order."""
        view = self._ensure_open()
        pos, end = 0, self._size
        while pos < end:
            data, pos = read_record(view, pos, end, self.name)
            yield data

    def mapping(self) -> tuple[FileView, int]:
        """The file's bytes (read on demand) and its size, for code that walks
        frames itself."""
        return self._ensure_open(), self._size

    def heads(self) -> Iterator[tuple[int, int]]:
        """``(offset, next_offset)`` of every record, reading only headers."""
        return iter_heads(self._ensure_open(), self._size, self.name)

    def close(self) -> None:
        with self._lock:
            view, self._view = self._view, None
        if view is not None:
            view.close()

    def __enter__(self) -> RecordReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if getattr(self._view, "portable", False):  # a cached view travels: no new lookup
            state.update(_lock=None)
        else:
            state.update(_lock=None, _view=None, _size=0)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def rising(offsets: Any) -> bool:
    """Whether ``offsets`` strictly rise (looked at a million at a time: no
    temporary the size of a 100M-record index)."""
    import numpy as np

    step = 1 << 20
    for start in range(0, max(len(offsets) - 1, 0), step):
        part = np.asarray(offsets[start : start + step + 1])
        if not bool(np.all(part[1:] > part[:-1])):
            return False
    return True


class _Stops:
    """``stops[i]``: offset ``i + 1``, or the file's size after the last."""

    __slots__ = ("offsets", "size", "last")

    def __init__(self, offsets: Any, size: int) -> None:
        self.offsets, self.size, self.last = offsets, size, len(offsets) - 1

    def __getitem__(self, position: int) -> int:
        if position < 0:
            position += self.last + 1
        return self.size if position == self.last else int(self.offsets[position + 1])


def build_index(reader: RecordReader) -> RecordIndex:
    """Index a ``.rec`` by walking its headers: keys 0..N-1, like rec2idx.py."""
    import numpy as np

    offsets = np.fromiter((head for head, _ in reader.heads()), dtype=np.int64)
    return RecordIndex(np.arange(len(offsets), dtype=np.int64), offsets, f"{reader.name} (scanned)")


class IndexedRecordReader(RecordReader):
    """Random access to a ``.rec`` through its ``.idx``.

    ``reader[i]`` is the i-th record in index order, ``reader.read_key(k)``
    the record stored under key ``k``. Without an ``.idx`` beside the file,
    ``missing_index="scan"`` walks the file once to index it in memory
    (keys 0..N-1); the default raises :class:`MissingFileError`, as does an
    ``idx`` path that was given and does not exist (a typo is not scanned
    around).
    """

    def __init__(
        self,
        rec: str | os.PathLike[str] | bytes,
        idx: str | os.PathLike[str] | bytes | None = None,
        *,
        key_type: Callable[[str], Any] = int,
        missing_index: Literal["error", "scan"] = "error",
        storage_options: dict[str, Any] | None = None,
        cache: BlockCache | None = None,
    ):
        if missing_index not in ("error", "scan"):
            raise ValueError(f"missing_index must be 'error' or 'scan', not {missing_index!r}")
        super().__init__(rec, storage_options=storage_options, cache=cache)
        from ..storage import exists, sibling

        index_location = sibling(self.location, ".idx") if idx is None else os.fsdecode(idx)
        self.index_path = index_location if self.remote else Path(index_location)
        self.index_scanned = (
            missing_index == "scan" and idx is None and not exists(index_location, storage_options)
        )
        if self.index_scanned:
            self.index = build_index(self)
        else:
            try:
                self.index = load_index(index_location, key_type, storage_options=storage_options)
            except MissingFileError:
                fix = (
                    "check the path (without idx, the .idx beside the .rec is used)"
                    if idx is not None
                    else "rebuild it (`rec index REC`), or pass missing_index='scan' to index "
                    "in memory"
                )
                raise MissingFileError(
                    f"{self.index_path}: index not found for {self.name}; {fix}"
                ) from None
            self.index.check_within(self._size, self.name)
        self._offsets = self.index.offsets
        self._stops: Any = False  # not looked at yet (see stops)
        if self._view is not None:
            self._opened(self._view)

    def _opened(self, view: FileView) -> None:
        align = getattr(view, "align", None)  # a cached view's blocks begin at records
        if align is not None and getattr(self, "index", None) is not None:
            align(self.index.offsets)

    def __getstate__(self) -> dict[str, Any]:
        # (the offsets are the index's: sent once, with it, so that a mapped
        # index travels as the name of its copy)
        return {**super().__getstate__(), "_offsets": None, "_stops": False}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._offsets = self.index.offsets

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def keys(self) -> KeyView:
        """Keys in ``.idx`` order: a read-only sequence over the index's array
        (``list(reader.keys)`` makes a list)."""
        return self.index.key_view()

    def __getitem__(self, position: int) -> bytes:
        return self._read_checked(int(self._offsets[position]), position, True)

    @property
    def stops(self) -> _Stops | None:
        """Where each record's span ends (the next offset, the last at the
        file's end) when the index's offsets rise, as ``im2rec pack`` and
        MXNet write them; else None. Looked at once per process; a view of
        the offsets, no copy."""
        if self._stops is False:
            offsets = self._offsets
            self._stops = None
            if rising(offsets) and (len(offsets) == 0 or int(offsets[-1]) < self._size):
                self._stops = _Stops(offsets, self._size)
        stops: _Stops | None = self._stops
        return stops

    def read_position(self, position: int) -> bytes | memoryview:
        """``reader[position]``'s payload as the training loaders read it:
        in one ``pread`` (:meth:`read_span`) where the offsets rise, and
        then a view rather than ``bytes``."""
        offset = int(self._offsets[position])
        stops = self.stops
        if stops is None:
            return self._read_checked(offset, position, False)
        try:
            return self.read_span(offset, stops[position])
        except RecordFormatError as exc:
            raise type(exc)(f"{exc} [{self.index.name}: entry {position}]") from None

    def spans(self, positions: Any) -> tuple[int, Any, Any] | None:
        """``(fd, starts, stops)`` (int64 arrays) for the records at
        ``positions`` (an int64 array, each in range): where each begins and
        where its span ends, so that other code (the training loaders' C
        loop) reads each as :meth:`read_position` does, in one ``pread``.
        None where that does not apply (:meth:`span_fd`; offsets that do
        not rise)."""

        fd = self.span_fd()
        bounds = None if fd is None else self.span_bounds(positions)
        return None if fd is None or bounds is None else (fd, *bounds)

    def span_bounds(self, positions: Any) -> tuple[Any, Any] | None:
        """``(starts, stops)`` of :meth:`spans`, for any file (a store's
        too), or None where the index's offsets do not rise or
        :data:`SPAN_MISSES` spans were not one whole record."""
        import numpy as np

        if self._view is None:
            self._ensure_open()
        if self.stops is None or self._span_misses >= SPAN_MISSES:
            return None
        offsets = np.asarray(self._offsets, np.int64)
        after = positions + 1  # stops[i] is offset i + 1, the file's size after the last
        ends = np.where(after < len(offsets), offsets[np.minimum(after, len(offsets) - 1)],
                        self._size)  # fmt: skip
        return np.ascontiguousarray(offsets[positions]), np.ascontiguousarray(ends, np.int64)

    def whole_span(self, start: int, stop: int) -> bytes | None:
        """The file's bytes ``start:stop`` (a store's too, through its block
        cache) when they are exactly one whole record, framing and all, as
        :meth:`read_span` checks them; else None, counted as one of its
        misses (after :data:`SPAN_MISSES`, :meth:`span_bounds` says None)."""
        view = self._view if self._view is not None else self._ensure_open()
        size = stop - start
        if 8 <= size <= SPAN_LIMIT and stop <= self._size:
            data = bytes(view[start:stop])
            if _whole_record(data, size):
                return data
        self._span_misses += 1
        return None

    def read_key(self, key: Any, *, copy: bool = True) -> bytes:
        """The record stored under ``key`` (``KeyError`` if there is none)."""
        return self._read_checked(self.index.offset_of(key), key, copy, by_key=True)

    def _read_checked(self, offset: int, where: Any, copy: bool, by_key: bool = False) -> bytes:
        try:
            return self.read_at(offset, copy=copy)
        except RecordFormatError as exc:
            what = f"key {where!r}" if by_key else f"entry {where}"
            raise type(exc)(f"{exc} [{self.index.name}: {what}]") from None

    def __iter__(self) -> Iterator[bytes]:
        """Every indexed record, in ``.idx`` order."""
        for position in range(len(self._offsets)):
            yield self[position]


def _whole_record(data: bytes, size: int) -> bool:
    """Whether ``data`` (a span read to be ``size`` bytes) is exactly one
    whole record: cflag 0, so lrec is its length, filling the span."""
    if len(data) != size:
        return False
    magic, lrec = unpack_head(data, 0)
    return bool(magic == MAGIC and decode_flag(lrec) == CFLAG_WHOLE and frame_size(lrec) == size)

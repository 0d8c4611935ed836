"""Writers for ``.rec`` (and ``.idx``) files.

By default a writer writes to a hidden temporary file beside the target and
renames it into place on :meth:`close`, so a run that fails or is interrupted
never leaves a file that looks complete: use it as a context manager, and an
exception inside the ``with`` block removes the temporary file instead.
``atomic=False`` writes in place, as MXNet did (the drop-in API uses it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from ..errors import DuplicateKeyError, ModeError
from ..storage.copying import write_all
from ..storage.files import FileRange
from .codec import aligned
from .framing import frame, frame_parts, needs_split, whole_frame
from .keyset import KeySet
from .output import Output

Chunk = bytes | bytearray | memoryview

__all__ = ["IndexedRecordWriter", "RecordWriter", "default_index_path", "write_all"]

_BUFFER = 1 << 20
_SMALL = 1 << 14  # records below this are joined into one buffer before writing

# Bumped in every forked child, so a writer can tell it was inherited without
# a getpid() system call per record.
_forks = [0]


def _count_fork() -> None:
    _forks[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)


def _nbytes(piece: Chunk | FileRange) -> int:
    return piece.nbytes if type(piece) is memoryview else len(piece)


def default_index_path(rec: str | os.PathLike[str]) -> Path:
    """``train.rec`` → ``train.idx`` (MXNet's and DALI's convention)."""
    return Path(rec).with_suffix(".idx")


class RecordWriter:
    """Append records to a ``.rec`` file.

    >>> with RecordWriter(tmp / "data.rec") as w:  # doctest: +SKIP
    ...     offset = w.write(b"payload")
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        atomic: bool = True,
        temp: str | os.PathLike[str] | None = None,
        append: bool = False,
        hashing: bool = False,
    ):
        self._out = Output(path, atomic, temp=temp, append=append, hashing=hashing)
        self._extend: Callable[[list[Any]], object] | None = self._out.pending.extend
        self._append = self._out.pending.append
        self._pos = self._flushed = self._out.size
        self._pid = os.getpid()
        self._generation = _forks[0]

    @property
    def path(self) -> Path:
        return self._out.path

    @property
    def closed(self) -> bool:
        return self._extend is None

    @property
    def temp_path(self) -> Path:
        """Where the data goes until :meth:`close` (the target itself when
        writing in place)."""
        return self._out.tmp

    def write(
        self, data: Chunk, *more: Chunk | FileRange, split: bool | None = None, copy: bool = True
    ) -> int:
        """Append one record holding ``data`` (followed by ``more``, e.g. an
        image record's header, then its image bytes: written as they are,
        never joined, except that a record of two pieces under 16 KiB is
        framed joined, as one piece is: cheaper than its pieces); return the
        byte offset where it starts. ``split``:
        :func:`~im2rec.recordio.framing.needs_split` of the pieces, when the
        caller knows it (a large record is then not scanned again). ``copy=False``:
        the caller leaves the pieces' bytes as they are until the writer is
        flushed or closed, so mutable buffers are kept, not copied."""
        extend = self._extend
        if extend is None or self._generation != _forks[0]:
            raise self._unusable()
        if more and type(body := more[-1]) is FileRange:
            head = cast("tuple[Chunk, ...]", more[:-1])
            return self._write_range(data, *head, body=body, split=split)
        pos = self._pos
        if not more and len(data) < _SMALL:  # a small record is cheaper joined than in pieces
            framed = frame(data)
            self._append(framed)
            size = len(framed)
        elif len(more) == 1 and _nbytes(data) + _nbytes(more[0]) < _SMALL:  # (a header, an image)
            framed = frame(b"".join((data, cast("Chunk", more[0]))))
            self._append(framed)
            size = len(framed)
        else:
            parts, size = frame_parts(data, *cast("tuple[Chunk, ...]", more), split=split,
                                      copy=copy)  # fmt: skip
            extend(parts)
        self._pos = end = pos + size
        if end - self._flushed >= _BUFFER:
            self.flush()
        return pos

    def _write_range(self, *head: Chunk, body: FileRange, split: bool | None) -> int:
        """:meth:`write` of a record whose last piece is still in a file: the
        header pieces are written, then the kernel copies the body file to
        file (as ``cat`` does), a buffer's worth of records at a time on the
        output's copying thread. A record that must be split (or may have
        to: nobody scanned the body), or a writer that hashes what it
        writes, reads the body instead."""
        n = sum(p.nbytes if type(p) is memoryview else len(p) for p in head)
        if split is None and body.magic is not None and aligned(n):
            split = body.magic or needs_split(*head)
        if split is not False or self._out.hasher is not None:
            return self.write(*head, bytes(body), split=split)
        before, after = whole_frame(n + len(body))
        pos, out = self._pos, self._out
        self._pos = end = pos + len(before) + n + len(body) + len(after)
        if body.data is not None and not out.pending and end - self._flushed < _BUFFER:
            # a body in a reader's memory is written at once, while it is
            # still in the CPU's cache (1 MiB at a time would have left it);
            # the .rec only: the
            # .idx lines follow at the next flush
            out.write_now([before, *head, body.data, after])
            return pos
        out.pending.extend((before, *head, body, after))
        if end - self._flushed >= _BUFFER:
            self.flush()
        elif body.data is not None:
            out.flush()
        return pos

    def flush(self) -> None:
        """Write buffered records to the (temporary) file."""
        for out in self._outputs():
            out.flush()
        self._flushed = self._pos

    def tell(self) -> int:
        """Offset at which the next record will start."""
        return self._pos

    def _outputs(self) -> list[Output]:
        return [self._out]

    def close(self) -> None:
        """Flush and, for an atomic writer, move the file(s) into place: all
        of them once every one is written, none if a write fails. A failure
        (disk full) is raised with the temporary files kept, for the caller
        to :meth:`suspend` (keep them, to resume) or :meth:`abort`."""
        self._extend = None
        outputs = self._outputs()
        for out in outputs:
            out.settle()
        for out in outputs:
            out.publish()

    def abort(self) -> None:
        """Stop writing; an atomic writer removes its temporary file(s)."""
        self._extend = None
        for out in self._outputs():
            out.discard()

    def suspend(self) -> None:
        """Stop writing but keep the temporary file(s) as they are, so that a
        later writer opened with ``temp=..., append=True`` can continue."""
        self._extend = None
        for out in self._outputs():
            out.suspend()

    def sha256(self) -> str:
        """Hex SHA-256 of the ``.rec`` (``hashing=True``), once closed."""
        if self._out.hasher is None:
            raise ModeError(f"{self.path}: opened without hashing=True")
        return self._out.hasher.hexdigest()

    def _unusable(self) -> ModeError:
        if self._extend is None:
            return ModeError(f"{self.path}: the writer is closed")
        return ModeError(
            f"{self.path}: this writer was opened in process {self._pid}; writing "
            "from another (forked) process would interleave records: open a "
            "writer in each process, on its own file"
        )

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            try:
                self.close()
            except BaseException:
                self.abort()  # a with-block that fails leaves nothing behind
                raise
        else:
            self.abort()

    def __reduce__(self) -> Any:
        raise TypeError(
            f"{self.path}: writers cannot be pickled (they own an open output "
            "file); pass the path and open a writer in the other process"
        )

    def __del__(self) -> None:
        if getattr(self, "_generation", None) == _forks[0]:
            for out in self._outputs():
                out.release()


class IndexedRecordWriter(RecordWriter):
    """A :class:`RecordWriter` that also writes ``key<TAB>offset`` lines to a
    ``.idx`` (default: the ``.rec`` path with suffix ``.idx``).

    Keys must be unique; ``key_type`` converts them (as in MXNet) before they
    are written.
    """

    def __init__(
        self,
        rec: str | os.PathLike[str],
        idx: str | os.PathLike[str] | None = None,
        *,
        key_type: Callable[[Any], Any] = int,
        atomic: bool = True,
        temp: str | os.PathLike[str] | None = None,
        idx_temp: str | os.PathLike[str] | None = None,
        append: bool = False,
        hashing: bool = False,
        existing_keys: Iterable[Any] = (),
        check_keys: bool = True,
    ):
        super().__init__(rec, atomic=atomic, temp=temp, append=append, hashing=hashing)
        idx_path = default_index_path(rec) if idx is None else idx
        try:
            self._idx = Output(
                idx_path, atomic, text=True, temp=idx_temp, append=append, hashing=hashing
            )
        except BaseException:
            self._out.discard()
            raise
        self._idx_append = self._idx.pending.append
        self.key_type = key_type
        # The written keys: a bit or two a record for dense integer keys
        # (KeySet); a caller whose keys are unique by construction (rec
        # pack checks its list) can skip it.
        self._keys: KeySet | None = KeySet(existing_keys) if check_keys else None

    @property
    def index_path(self) -> Path:
        return self._idx.path

    def write_key(
        self, key: Any, data: Chunk, *more: Chunk | FileRange, split: bool | None = None,
        copy: bool = True,
    ) -> int:  # fmt: skip
        """Append one record under ``key`` (its bytes: ``data`` then
        ``more``, ``split`` and ``copy``, as for :meth:`write`); return its
        offset."""
        return self.write_typed(self.key_type(key), data, *more, split=split, copy=copy)

    def write_typed(
        self, key: Any, data: Chunk, *more: Chunk | FileRange, split: bool | None = None,
        copy: bool = True,
    ) -> int:  # fmt: skip
        """:meth:`write_key` of a key already of ``key_type`` (the drop-in
        ``write_idx`` converts it once, as MXNet does). The per-record path
        of small records: one key lookup, one call to frame."""
        keys = self._keys
        if keys is not None and not keys.insert(key):
            raise DuplicateKeyError(
                f"{self.index_path}: key {key!r} was already written; keys must be unique"
            )
        try:
            pos = self.write(data, *more, split=split, copy=copy) if more else self.write(data)
        except BaseException:
            if keys is not None:
                keys.discard_new(key)  # not written: it may come again
            raise
        self._idx_append(f"{key}\t{pos}\n")  # format_index_line, inlined: per-record path
        return pos

    def _outputs(self) -> list[Output]:
        # The .idx lands last: its presence means the pair is complete. It is
        # also flushed after the .rec, so it never points past written data.
        return [self._out, self._idx] if hasattr(self, "_idx") else [self._out]

    def index_sha256(self) -> str:
        """Hex SHA-256 of the ``.idx`` (``hashing=True``), once closed."""
        if self._idx.hasher is None:
            raise ModeError(f"{self.index_path}: opened without hashing=True")
        return self._idx.hasher.hexdigest()

    def __enter__(self) -> IndexedRecordWriter:
        return self

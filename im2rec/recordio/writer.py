"""Writers for ``.rec`` (and ``.idx``) files.

By default a writer writes to a hidden temporary file beside the target and
renames it into place on :meth:`close`, so a run that fails or is interrupted
never leaves a file that looks complete: use it as a context manager, and an
exception inside the ``with`` block removes the temporary file instead.
``atomic=False`` writes in place, as MXNet did (the drop-in API uses it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import DuplicateKeyError, ModeError
from .framing import frame

__all__ = ["IndexedRecordWriter", "RecordWriter", "default_index_path"]

_BUFFER = 1 << 20

# Bumped in every forked child, so a writer can tell it was inherited without
# a getpid() system call per record.
_forks = [0]


def _count_fork() -> None:
    _forks[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)


def default_index_path(rec: str | os.PathLike[str]) -> Path:
    """``train.rec`` → ``train.idx`` (MXNet's and DALI's convention)."""
    return Path(rec).with_suffix(".idx")


class _Output:
    """One output file, written in place or through a temporary name.

    Buffers in a plain list and writes with ``os.write``: unlike a Python file
    object, nothing here flushes on garbage collection, so a copy inherited by
    a forked child can never write the parent's pending bytes a second time.
    """

    def __init__(self, path: str | os.PathLike[str], atomic: bool, text: bool = False):
        self.path = Path(os.fsdecode(path))
        self.atomic = atomic
        self.text = text
        self.tmp = (
            self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp") if atomic else self.path
        )
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
        self.fd: int | None = os.open(self.tmp, flags, 0o666)
        self.pending: list[Any] = []  # bytes, or str lines for a text output

    @property
    def closed(self) -> bool:
        return self.fd is None

    def flush(self) -> None:
        if not self.pending or self.fd is None:
            return
        joined = "".join(self.pending).encode() if self.text else b"".join(self.pending)
        self.pending.clear()
        view = memoryview(joined)
        while view:
            view = view[os.write(self.fd, view) :]

    def finish(self) -> None:
        if self.fd is None:
            return
        self.flush()
        os.close(self.fd)
        self.fd = None
        if self.atomic:
            os.replace(self.tmp, self.path)

    def discard(self) -> None:
        self.pending.clear()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.atomic:
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass

    def release(self) -> None:
        """Garbage-collected while open: an atomic output never finished, so
        drop it; in place (MXNet's way) keep what was written."""
        if self.fd is not None:
            self.discard() if self.atomic else self.finish()


class RecordWriter:
    """Append records to a ``.rec`` file.

    >>> with RecordWriter(tmp / "data.rec") as w:  # doctest: +SKIP
    ...     offset = w.write(b"payload")
    """

    def __init__(self, path: str | os.PathLike[str], *, atomic: bool = True):
        self._out = _Output(path, atomic)
        self._append: Callable[[bytes], object] | None = self._out.pending.append
        self._pos = 0
        self._flushed = 0
        self._pid = os.getpid()
        self._generation = _forks[0]

    @property
    def path(self) -> Path:
        return self._out.path

    @property
    def closed(self) -> bool:
        return self._append is None

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Append one record; return the byte offset where it starts."""
        append = self._append
        if append is None or self._generation != _forks[0]:
            raise self._unusable()
        framed = frame(data)
        pos = self._pos
        append(framed)
        self._pos = end = pos + len(framed)
        if end - self._flushed >= _BUFFER:
            self.flush()
        return pos

    def flush(self) -> None:
        """Write buffered records to the (temporary) file."""
        for out in self._outputs():
            out.flush()
        self._flushed = self._pos

    def tell(self) -> int:
        """Offset at which the next record will start."""
        return self._pos

    def _outputs(self) -> list[_Output]:
        return [self._out]

    def close(self) -> None:
        """Flush and, for an atomic writer, move the file(s) into place."""
        self._append = None
        for out in self._outputs():
            out.finish()

    def abort(self) -> None:
        """Stop writing; an atomic writer removes its temporary file(s)."""
        self._append = None
        for out in self._outputs():
            out.discard()

    def _unusable(self) -> ModeError:
        if self._append is None:
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
            self.close()
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
    ):
        super().__init__(rec, atomic=atomic)
        try:
            self._idx = _Output(default_index_path(rec) if idx is None else idx, atomic, text=True)
        except BaseException:
            self._out.discard()
            raise
        self._idx_append = self._idx.pending.append
        self.key_type = key_type
        self._keys: set[Any] = set()

    @property
    def index_path(self) -> Path:
        return self._idx.path

    def write_key(self, key: Any, data: bytes | bytearray | memoryview) -> int:
        """Append one record under ``key``; return its offset."""
        key = self.key_type(key)
        if key in self._keys:
            raise DuplicateKeyError(
                f"{self.index_path}: key {key!r} was already written; keys must be unique"
            )
        pos = self.write(data)
        self._keys.add(key)
        self._idx_append(f"{key}\t{pos}\n")  # format_index_line, inlined: per-record path
        return pos

    def _outputs(self) -> list[_Output]:
        # The .idx lands last: its presence means the pair is complete.
        return [self._out, self._idx] if hasattr(self, "_idx") else [self._out]

    def __enter__(self) -> IndexedRecordWriter:
        return self

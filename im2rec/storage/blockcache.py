"""Remote files read through whole blocks kept in a local folder.

A training epoch over an object store reading each record with its own
ranged request pays the store's latency (10-50 ms) per sample. A
:class:`CachedView` instead fetches whole blocks (tens of MB, one request
each, several at once ahead of the reader when told which come next) into
a folder, and serves every read from there. The blocks of a ``.rec`` begin
at record boundaries (:meth:`CachedView.align`), so no record straddles two
and an epoch that reads blocks one after another requests each once.

The folder (:class:`BlockCache`) is shared: DataLoader workers, ranks on
one machine and later runs of one user use the same blocks. It must be
that user's own (:func:`~im2rec.storage.private.private_folder`: made with
mode 0700; one writable by others is refused), as must each object's
subfolder, named from its URL, so no block, stamp or link in it can be
planted; nothing there is reached through a link. The subfolder holds a
stamp (the object's size and ETag, or else its ``Last-Modified``) that
must match the object's when a view opens it, or its blocks are removed;
blocks are written to a temporary name and renamed, under a per-block
lock, so two processes never fetch one block twice and never read half of
one. A view serves the version of the object it opened: every block it
fetches is checked to be of that version (an object replaced while it is
read is an error, never a mix of two versions). Past ``budget`` bytes, the
least recently used blocks go (a process still reading one keeps its open
file).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, OutputError
from .atomic import AtomicGroup, create_output
from .bounded import Version, version_of
from .files import FileView, pread_at_least
from .private import open_own, private_folder

__all__ = ["BlockCache", "CachedView"]


@dataclass(frozen=True)
class BlockCache:
    """Where fetched blocks go, and how much of them to keep.

    ``folder`` (made if missing) may be shared by any number of processes;
    ``budget`` bytes of blocks are kept, the least recently used leaving
    first; ``block_bytes`` is the size of a block (a block holds whole
    records: it ends before the first record past that size); ``ahead``
    blocks are fetched at once when a reader says which come next."""

    folder: str
    budget: int = 20 << 30
    block_bytes: int = 32 << 20
    ahead: int = 4

    def __post_init__(self) -> None:
        if not 1 << 16 <= self.block_bytes <= 1 << 32:
            raise ConfigError(f"block_bytes must be 64 KiB to 4 GiB, not {self.block_bytes:,}")
        if self.budget < 2 * self.block_bytes:
            raise ConfigError(
                f"the cache budget ({self.budget:,} bytes) must hold at least two blocks "
                f"({2 * self.block_bytes:,} bytes); raise it or use smaller blocks"
            )
        if not 1 <= self.ahead <= 64:
            raise ConfigError(f"ahead must be 1 to 64 blocks, not {self.ahead}")
        object.__setattr__(self, "folder", os.path.abspath(os.path.expanduser(self.folder)))

    def object_folder(self, url: str) -> Path:
        digest = hashlib.sha256(url.encode()).hexdigest()[:24]
        return Path(self.folder) / digest

    def used(self) -> int:
        """Bytes of blocks in the folder now."""
        return sum(size for _, size, _ in self._blocks())

    def _blocks(self) -> Iterator[tuple[float, int, Path]]:
        """``(last use, size, path)`` of every block in the folder (links,
        which no process of im2rec makes there, are not followed)."""
        with os.scandir(self.folder) as objects:
            for entry in objects:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                with os.scandir(entry.path) as files:
                    for f in files:
                        if _BLOCK.fullmatch(f.name) and f.is_file(follow_symlinks=False):
                            with contextlib.suppress(FileNotFoundError):
                                st = f.stat(follow_symlinks=False)
                                yield st.st_mtime, st.st_size, Path(f.path)

    def evict(self, keep: Path) -> None:
        """Remove the least recently used blocks until the folder is within
        budget (never ``keep``, the block just fetched)."""
        blocks = sorted(self._blocks())
        total = sum(size for _, size, _ in blocks)
        for _, size, path in blocks:
            if total <= self.budget:
                break
            if path == keep:
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                total -= size


#: the names im2rec writes in an object's folder: blocks, their temporary
#: files, and the blocks' bounds (with their temporary files)
_BLOCK = re.compile(r"[0-9]{1,19}-[0-9]{1,19}\.blk")
_OURS = re.compile(r"[0-9]{1,19}-[0-9]{1,19}\.(blk|[0-9]{1,10}\.part)|\.?blocks-[0-9]{1,19}\.npy")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class CachedView(FileView):
    """A remote file's bytes, read through whole blocks in a
    :class:`BlockCache`. ``requests`` and ``bytes_fetched`` count what this
    process fetched."""

    #: pickled whole (its settings and block bounds), not opened again
    portable = True

    def __init__(
        self,
        url: str,
        size: int,
        storage_options: dict[str, Any] | None,
        cache: BlockCache,
        version: Version | None = None,
    ) -> None:
        super().__init__(-1, size, url)
        self.url, self.storage_options, self.cache = url, storage_options, cache
        #: what every block fetched must be of (the object as opened)
        self.version = version or Version(size)
        self.home = cache.object_folder(url)
        # block k is bytes starts[k]..starts[k+1] (the last one to the end)
        self.starts = np.arange(0, max(size, 1), cache.block_bytes, dtype=np.int64)
        self.requests = 0
        self.bytes_fetched = 0
        self._after_fork()

    def _after_fork(self) -> None:
        self._pid = os.getpid()
        self._used: set[int] = set()  # blocks this process has read (their use time set)
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[int, Future[int]] = {}
        self._mutex = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_used", "_pool", "_pending", "_mutex", "_lock"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._after_fork()

    @classmethod
    def open(cls, url: str, storage_options: dict[str, Any] | None, cache: BlockCache,
             details: dict[str, Any]) -> CachedView:  # fmt: skip
        """The view of ``url`` (``details``: its size and tags, looked up),
        clearing its blocks from the folder if the object has changed."""
        version = version_of(details)
        view = cls(url, version.size, storage_options, cache, version)
        stamp = {"url": url, "size": version.size, "tag": version.tag}
        private_folder(cache.folder)
        private_folder(view.home)
        with view._locked("stamp"):
            path = view.home / "stamp.json"
            held = _read_small(path, 1 << 16)
            try:
                held = json.loads(held) if held is not None else None
            except ValueError:
                held = None
            if held != stamp:  # another object, or never cached: its blocks are stale
                for name in os.listdir(view.home):
                    if _OURS.fullmatch(name):  # (only ours: the folder may hold nothing else)
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(view.home / name)
                with AtomicGroup() as group:
                    group.write_text(path, json.dumps(stamp))
            else:  # the blocks' bounds, as a process that knew the records left them
                view._load_layout()
        return view

    def _load_layout(self) -> None:
        """The blocks' bounds another process left (:meth:`align`), if sane."""
        import io

        most = 8 * (2 * len(self.starts) + 2) + 1024  # (bounds begin at records: fewer)
        data = _read_small(self._layout(), most)
        if data is None:
            return
        with contextlib.suppress(OSError, ValueError):
            starts = np.load(io.BytesIO(data), allow_pickle=False)
            if starts.dtype == np.int64 and starts.ndim == 1 and len(starts) >= 1:
                if starts[0] == 0 and np.all(np.diff(starts) > 0) and starts[-1] < self.size:
                    self.starts = starts

    def _layout(self) -> Path:
        return self.home / f"blocks-{self.cache.block_bytes}.npy"

    def align(self, offsets: np.ndarray) -> None:
        """Begin the blocks at record boundaries: block k starts at the first
        record at or past ``k * block_bytes`` (``offsets``: every record's
        first byte), so a record is never split between two blocks."""
        ordered = np.unique(np.asarray(offsets, np.int64))
        cuts = np.arange(0, max(self.size, 1), self.cache.block_bytes, dtype=np.int64)
        at = np.searchsorted(ordered, cuts)
        starts = np.unique(np.concatenate(([0], ordered[at[at < len(ordered)]])))
        starts = starts[starts < max(self.size, 1)]
        if np.array_equal(starts, self.starts):
            return
        self.starts = starts
        # Left for the processes that read this object without its index (an
        # ImageRecordIter's workers): they open it with the same bounds.
        with contextlib.suppress(OSError):
            tmp = self.home / f".blocks-{os.getpid()}.npy"
            with os.fdopen(create_output(tmp), "wb") as f:
                np.save(f, starts, allow_pickle=False)
            os.replace(tmp, self._layout())

    def block_of(self, position: int | np.ndarray) -> Any:
        """The block holding byte ``position`` (an array of them too)."""
        return np.searchsorted(self.starts, position, side="right") - 1

    def span(self, block: int) -> tuple[int, int]:
        end = int(self.starts[block + 1]) if block + 1 < len(self.starts) else self.size
        return int(self.starts[block]), end

    # -- blocks on disk ---------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        # (lock files are never removed: removing one another process holds
        # or waits on would let a third take it at the same time)
        # Not filelock: it opens its file following links and truncating it,
        # where every file of the cache is opened O_NOFOLLOW (docs/security.md).
        path, flags = self.home / f"{name}.lock", os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:  # (a link there: it goes, never followed)
            if exc.errno != errno.ELOOP:
                raise
            os.unlink(path)
            fd = os.open(path, flags | os.O_EXCL, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # (closing releases the lock)

    def _path(self, block: int) -> Path:
        start, end = self.span(block)
        return self.home / f"{start}-{end}.blk"

    def _open(self, block: int) -> int:
        """A new descriptor of ``block``'s file (the caller closes it),
        fetched first if no process has. Each read opens the file anew: a
        descriptor kept across reads could be closed under another thread's
        read, and the kernel would hand its number to another file."""
        if self._pid != os.getpid():
            self._after_fork()
        with self._mutex:
            pending = self._pending.pop(block, None)
        if pending is not None:
            pending.result()
        path = self._path(block)
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
        except FileNotFoundError:  # (never fetched, or evicted since: however often, one open)
            fd = self._fetch(block, keep_open=True)
        if block not in self._used:
            self._used.add(block)
            with contextlib.suppress(OSError):
                os.utime(path)  # its last use, for eviction
        return fd

    def _fetch(self, block: int, keep_open: bool = False) -> int:
        """One request for the whole block, unless another process (or
        thread) fetched it while this one waited for its lock. With
        ``keep_open``, a descriptor of the block opened under the lock is
        returned (the caller closes it): a block another process evicts
        meanwhile stays readable through it, so no reader under load is
        told the block is not there; -1 otherwise."""
        from .remote import read_range

        path = self._path(block)
        with self._locked(f"block-{block % 64}"):  # 64 locks an object: bounded files
            try:
                fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
            except FileNotFoundError:
                pass
            else:
                if keep_open:
                    return fd
                os.close(fd)
                return -1
            start, end = self.span(block)
            data = read_range(self.url, start, end, self.storage_options, self.version)
            with self._mutex:
                self.requests += 1
                self.bytes_fetched += len(data)
            if len(data) < end - start:
                raise self._shrunk(start + len(data))
            fd = self._store(path, data)
        self.cache.evict(keep=path)
        if keep_open:
            return fd
        os.close(fd)
        return -1

    def _store(self, path: Path, data: bytes) -> int:
        """``data`` written as the block ``path`` (a temporary file renamed
        into place); a descriptor of it. A disk that fills up (or a quota,
        or a file-size limit) is one error naming the cache folder, and no
        temporary file is left."""
        tmp = path.with_suffix(f".{os.getpid()}.part")
        fd = create_output(tmp, readable=True)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.replace(tmp, path)
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise OutputError(
                    f"{self.cache.folder}: no room for a {len(data):,}-byte block of {self.url} "
                    f"({exc.strerror}); free space there, or give the cache a smaller budget "
                    "(BlockCache(budget=...)) or another folder"
                ) from None
            raise
        return fd

    def prefetch(self, blocks: Iterable[int]) -> None:
        """Start fetching ``blocks`` (those not held yet) in the background,
        :attr:`BlockCache.ahead` at a time."""
        if self._pid != os.getpid():
            self._after_fork()
        with self._mutex:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    self.cache.ahead, thread_name_prefix="im2rec-blocks"
                )
            for block in blocks:
                block = int(block)
                pending = self._pending.get(block)
                if pending is not None and not pending.done():
                    continue
                # A fetch that is done no longer marks its block: in a process
                # that asks but never reads (a sampler's), the mark was never
                # cleared, and a block evicted since was not fetched again.
                self._pending.pop(block, None)
                if self._path(block).exists():
                    continue
                self._pending[block] = self._pool.submit(self._fetch, block)

    def wait(self) -> None:
        """Until the blocks being fetched in the background are in."""
        with self._mutex:
            pending = list(self._pending.values())
        for future in pending:
            future.result()

    def held(self) -> set[int]:
        """The blocks of this object in the folder now."""
        starts = {int(s): k for k, s in enumerate(self.starts)}
        found = set()
        for path in self.home.glob("*.blk"):
            start = int(path.stem.split("-")[0])
            if start in starts and self._path(starts[start]) == path:
                found.add(starts[start])
        return found

    # -- FileView's interface ---------------------------------------------

    def read(self, start: int, n: int) -> bytes:
        n = max(0, min(n, self.size - start))
        parts = []
        while n > 0:
            block = int(self.block_of(start))
            first, end = self.span(block)
            take = min(n, end - start)
            data = self._pread(block, take, start - first)
            if len(data) < take:  # the block file was cut short: fetch it again
                with contextlib.suppress(FileNotFoundError):
                    self._path(block).unlink()
                data = self._pread(block, take, start - first)
                if len(data) < take:
                    raise self._shrunk(start + len(data))
            parts.append(data)
            start, n = start + take, n - take
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _pread(self, block: int, n: int, at: int) -> bytes:
        fd = self._open(block)
        try:
            return pread_at_least(fd, n, at, n)
        finally:
            os.close(fd)

    def window(self, start: int, need: int = 8) -> tuple[bytes, int]:
        block = int(self.block_of(start))
        end = self.span(block)[1]
        return self.read(start, max(need, min(self.STREAM, end - start))), 0

    def close(self) -> None:
        with self._mutex:
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():  # (a forked child has no threads)
            pool.shutdown(wait=False, cancel_futures=True)

    def __del__(self) -> None:
        try:  # (no module globals here: at interpreter exit they may be gone)
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass


def _read_small(path: Path, most: int) -> bytes | None:
    """A file of this user's of at most ``most`` bytes, whole; None for no
    such file (or a larger one, a link, another user's)."""
    fd = open_own(path)
    if fd is None:
        return None
    try:
        data = os.read(fd, most + 1)
    finally:
        os.close(fd)
    return data if len(data) <= most else None

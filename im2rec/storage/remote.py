"""Remote files through fsspec: ranged reads with read-ahead, retries, and
errors that name the URL.

:class:`RemoteView` is a :class:`~im2rec.storage.files.FileView` whose bytes
come from ranged requests. Its read-ahead follows the access pattern: a jump
(a record by key, a ``DataLoader`` worker's next sample) fetches the bytes
asked for and at most ``BLOCK`` more, so reading a few records does not
download the file; a read that continues where the last one ended switches
to aligned ``CHUNK``-byte requests with the next ``AHEAD`` chunks fetched in
the background, so a scan streams. At most ``KEEP`` chunks are cached.

Transient errors (throttling, a dropped connection, a server error) are
retried ``RETRIES`` times with backoff; a missing object or bucket, or a
refusal, is one :class:`~im2rec.errors.Im2RecError` naming the URL at once.
A view is used by one process: a forked child (a ``DataLoader`` worker)
gets a filesystem object of its own on first use.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ..errors import Im2RecError, MissingFileError, TruncatedRecordError
from .bounded import (
    Version,
    backend_options,
    get_range,
    http_modified,
    timeouts_of,
    version_of,
    with_deadline,
)
from .files import FileView

__all__ = ["RemoteError", "RemoteView", "filesystem", "read_range", "require_fsspec"]

T = TypeVar("T")


class RemoteError(Im2RecError, OSError):
    """The store refused or failed a request (after retries)."""


def require_fsspec() -> Any:
    try:
        import fsspec
    except ImportError:
        raise Im2RecError(
            "reading URLs needs the remote extra: pip install 'im2rec[remote]' (fsspec and "
            "s3fs; add gcsfs for gs://)"
        ) from None
    return fsspec


_FILESYSTEMS: dict[tuple[int, str, str], Any] = {}
_LOCK = threading.Lock()


def _new_lock() -> None:
    # A DataLoader forks its workers while a block cache's threads may be
    # fetching in the parent: one of them may hold this lock at that moment,
    # and the child's copy would stay held for ever.
    global _LOCK
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock)


def filesystem(url: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """``(fsspec filesystem, path within it)`` for ``url``; one filesystem
    per process, protocol and options (a forked child makes its own: the
    parent's connections and event loop are not its to use)."""
    fsspec = require_fsspec()
    try:
        protocol = fsspec.core.split_protocol(url)[0] or "file"
        cls = fsspec.get_filesystem_class(protocol)
    except (ImportError, ValueError) as exc:
        raise Im2RecError(f"{url}: no fsspec backend for it ({exc})") from None
    options = backend_options(protocol, storage_options)
    # (the AWS_* variables too: a client made for one endpoint or profile
    # must not serve another set in the same process later)
    settings = sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))
    key = (os.getpid(), protocol, repr((sorted(options.items()), settings)))
    with _LOCK:
        fs = _FILESYSTEMS.get(key)
        if fs is None:
            try:
                fs = fsspec.filesystem(protocol, skip_instance_cache=True, **options)
            except ImportError as exc:
                raise Im2RecError(
                    f"{url}: the fsspec backend for {protocol}:// is not installed ({exc})"
                ) from None
            _FILESYSTEMS[key] = fs
    return fs, cls._strip_protocol(url)


RETRIES = 4
BACKOFF = 0.2  # seconds before the first retry; doubled after each

#: S3 error codes (botocore's ``Error.Code``) that are a refusal or a miss
_DENIED_CODES = frozenset({"AccessDenied", "Forbidden", "InvalidAccessKeyId", "ExpiredToken",
                           "SignatureDoesNotMatch", "AllAccessDisabled", "401", "403"})  # fmt: skip
_MISSING_CODES = frozenset({"NoSuchBucket", "NoSuchKey", "NotFound", "404"})
#: client errors that are worth another try: a timeout, throttling
_TRANSIENT_4XX = frozenset({408, 425, 429})


def _status(exc: BaseException) -> tuple[int | None, str | None]:
    """The HTTP status and S3 error code the store answered with, where
    ``exc`` or an error it was raised from carries them: aiohttp's
    ``ClientResponseError.status`` (fsspec's HTTP backend; it raises
    FileNotFoundError *from* one when a lookup is refused), botocore's
    ``ClientError.response`` (s3fs raises PermissionError or
    FileNotFoundError from one)."""
    seen: BaseException | None = exc
    for _ in range(8):  # (a chain is short; a cycle is not followed)
        if seen is None:
            break
        status = getattr(seen, "status", None)
        if isinstance(status, int) and not isinstance(status, bool):
            return status, None
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            error, meta = response.get("Error"), response.get("ResponseMetadata")
            code = error.get("Code") if isinstance(error, dict) else None
            http = meta.get("HTTPStatusCode") if isinstance(meta, dict) else None
            status = http if isinstance(http, int) else None
            return status, (code if isinstance(code, str) else None)
        seen = seen.__cause__ or seen.__context__
    return None, None


def _classify(url: str, exc: BaseException) -> Im2RecError | None:
    """The error to raise at once for ``exc``, or None when it is worth a
    retry: decided by the exception's type and the status or error code the
    store answered with (:func:`_status`), never by its message's words."""
    status, code = _status(exc)
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, PermissionError) or status in (401, 403) or code in _DENIED_CODES:
        return RemoteError(
            f"{url}: access denied ({text}); check the credentials (AWS_ACCESS_KEY_ID / "
            "AWS_PROFILE, or storage_options) and the bucket's permissions"
        )
    if isinstance(exc, FileNotFoundError) or status == 404 or code in _MISSING_CODES:
        return MissingFileError(
            f"{url}: not found (no such object, or no such bucket); check the URL"
        )
    if status is not None and 400 <= status < 500 and status not in _TRANSIENT_4XX:
        return RemoteError(f"{url}: the store refused the request (HTTP {status}: {text})")
    return None


def read_range(
    url: str,
    start: int,
    end: int,
    storage_options: dict[str, Any] | None = None,
    expect: Version | None = None,
) -> bytes:
    """At most ``end - start`` bytes from ``start`` of the object at ``url``
    (fewer where it ends), retried on transient errors, bounded in time,
    checked to be those bytes, of the version ``expect`` where given
    (:mod:`.bounded`)."""
    fs, path = filesystem(url, storage_options)
    protocol = url.partition("://")[0].lower()
    limits = timeouts_of(storage_options)
    return call(url, f"reading bytes {start:,}-{end:,}",
                lambda: get_range(fs, protocol, url, path, start, end, limits, expect))  # fmt: skip


def call(url: str, what: str, fn: Callable[[], T]) -> T:
    """``fn()``, retried (tenacity) on transient errors with backoff; one
    error naming ``url`` else. An :class:`Im2RecError` is never retried."""
    try:
        import tenacity
    except ImportError:
        raise Im2RecError(
            "reading URLs needs the remote extra: pip install 'im2rec[remote]' "
            "(tenacity is missing)"
        ) from None

    def transient(exc: BaseException) -> bool:
        return (
            isinstance(exc, Exception)
            and not isinstance(exc, Im2RecError)
            and (_classify(url, exc) is None)
        )

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(RETRIES + 1),
        wait=tenacity.wait_exponential(multiplier=BACKOFF, max=60),
        retry=tenacity.retry_if_exception(transient),
        reraise=True,
    )
    try:
        return retrying(fn)
    except Im2RecError:
        raise
    except Exception as exc:  # noqa: BLE001 - every backend raises its own
        final = _classify(url, exc)
        if final is not None:
            raise final from None
        raise RemoteError(
            f"{url}: {what} failed {RETRIES + 1} times ({type(exc).__name__}: {exc}); "
            "check the network and the endpoint (AWS_ENDPOINT_URL), then run again"
        ) from None


class RemoteView(FileView):
    """A remote file's first ``size`` bytes, read with ranged requests."""

    BLOCK = 16 << 10  # read ahead on a jump: a header and a small record in one request
    CHUNK = 8 << 20  # a scan's request size
    AHEAD = 4  # chunks fetched ahead of a scan, concurrently
    KEEP = 8  # chunks kept (64 MiB)
    GAP = 1 << 20  # a forward step this short, twice in a row, is a scan (a header walk)

    def __init__(
        self,
        url: str,
        size: int,
        storage_options: dict[str, Any] | None,
        version: Version | None = None,
    ):
        super().__init__(-1, size, url)
        self.url = url
        self.storage_options = storage_options
        #: what every response must be of (the object as opened)
        self.version = version or Version(size)
        self.bytes_fetched = 0  # counted for the benchmark's transfer budget
        self.requests = 0
        self._pid = os.getpid()
        self._cursor = -(1 << 40)  # where the last read ended: a read from there is a scan
        self._streak = 0  # short forward steps in a row
        self._block_is_chunk = False  # whether _block is a scan's chunk (else a jump's bytes)
        self._chunks: OrderedDict[int, bytes] = OrderedDict()
        self._pending: dict[int, Future[bytes]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._mutex = threading.Lock()

    @classmethod
    def open(cls, url: str, storage_options: dict[str, Any] | None = None) -> RemoteView:
        details = cls.lookup(url, storage_options)
        return cls(url, details["size"], storage_options, version_of(details))

    @staticmethod
    def lookup(url: str, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
        """What the store says of ``url`` (its ``size`` checked, and whatever
        tags it gives: ETag, modification time)."""
        fs, path = filesystem(url, storage_options)

        def info() -> dict[str, Any]:
            if not getattr(fs, "async_impl", False):
                found: dict[str, Any] = fs.info(path)
                return found
            from fsspec.asyn import sync

            limits = timeouts_of(storage_options)
            looked_up: dict[str, Any] = sync(
                fs.loop, with_deadline, fs._info(path), url, "looking it up", limits
            )
            return looked_up

        try:
            details = call(url, "looking it up", info)
        except MissingFileError:
            if not url.startswith(("http://", "https://")):
                raise
            # fsspec's HTTP lookup calls every failure "not found": a byte of
            # the file tells a refusal (403) or a server error from a 404
            read_range(url, 0, 1, storage_options)
            raise
        if details.get("type") == "directory":
            raise Im2RecError(f"{url}: is a folder (a prefix), not a .rec file")
        size = details.get("size")
        if not isinstance(size, int) or size < 0:
            raise RemoteError(
                f"{url}: the server did not say how large the object is (no Content-Length, "
                f"size {size!r}); im2rec reads records by byte range and needs the size: serve "
                "it with a Content-Length (any static file server does)"
            )
        if url.startswith(("http://", "https://")) and version_of(details).tag is None:
            limits = timeouts_of(storage_options)
            modified = call(url, "looking it up", lambda: http_modified(fs, url, limits))
            if modified:
                details = {**details, "Last-Modified": modified}
        return details

    # -- fetching ------------------------------------------------------------

    def _get(self, start: int, end: int) -> bytes:
        data = read_range(self.url, start, end, self.storage_options, self.version)
        with self._mutex:
            self.bytes_fetched += len(data)
            self.requests += 1
        if len(data) < end - start:
            raise self._shrunk(start + len(data))
        return data

    def _forked(self) -> None:
        """In a forked child (a DataLoader worker): the parent's read-ahead
        threads and their futures do not exist here; start afresh."""
        if self._pid != os.getpid():
            self._pid, self._pool, self._pending = os.getpid(), None, {}
            self._mutex = threading.Lock()

    def _chunk(self, index: int) -> bytes:
        self._forked()
        with self._mutex:
            data = self._chunks.get(index)
            if data is not None:
                self._chunks.move_to_end(index)
                return data
            future = self._pending.pop(index, None)
        start = index * self.CHUNK
        data = (
            future.result()
            if future is not None
            else self._get(start, min(start + self.CHUNK, self.size))
        )
        with self._mutex:
            self._chunks[index] = data
            while len(self._chunks) > self.KEEP:
                self._chunks.popitem(last=False)
        return data

    def _ahead(self, index: int) -> None:
        last = (self.size - 1) // self.CHUNK
        self._forked()
        with self._mutex:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.AHEAD)
            for i in range(index + 1, min(index + 1 + self.AHEAD, last + 1)):
                if i not in self._chunks and i not in self._pending:
                    start = i * self.CHUNK
                    end = min(start + self.CHUNK, self.size)
                    self._pending[i] = self._pool.submit(self._get, start, end)

    def _scan(self, start: int, n: int, ahead: bool) -> bytes:
        """``n`` bytes from ``start`` out of the scan's chunks (copied once),
        the next chunks fetched ``ahead`` while a scan goes on."""
        first, last = start // self.CHUNK, (start + n - 1) // self.CHUNK
        off = start - first * self.CHUNK
        if first == last:
            chunk = self._chunk(first)
            if ahead:
                self._ahead(first)
            return chunk[off : off + n]
        parts = [self._chunk(i) for i in range(first, last + 1)]
        if ahead:
            self._ahead(last)
        return b"".join(parts)[off : off + n]

    def _scanning(self, start: int) -> bool:
        """Whether a record read from ``start`` continues a scan: the second
        short step forward in a row (a pass over the records, or a walk over
        their headers). One record right after another is not yet a scan:
        among many random reads a few land next to the one before, and each
        would otherwise fetch chunks nobody reads."""
        step = start - self._cursor
        self._streak = self._streak + 1 if 0 <= step <= self.GAP else 0
        return self._streak >= 2

    def _held(self, start: int) -> bool:
        """Whether a chunk a scan fetched holds ``start`` (reading it is free)."""
        index = start // self.CHUNK
        return index in self._chunks or index in self._pending

    def _get_counted(self, start: int, n: int, ahead: int) -> bytes:
        """One request for ``n`` bytes from ``start`` and ``ahead`` more (a jump)."""
        n = max(0, min(n, self.size - start))
        return self._get(start, min(start + max(n, ahead), self.size)) if n else b""

    # -- FileView's interface ---------------------------------------------

    def read(self, start: int, n: int) -> bytes:
        n = max(0, min(n, self.size - start))
        base, block = self._block
        off = start - base
        if 0 <= off and off + n <= len(block):
            self._cursor = start + n
            return block[off : off + n]
        if 0 <= off < len(block) and not self._block_is_chunk:
            # the rest of a record begun in a jump's block: the same record,
            # so no step of a scan
            data = block[off:] + self._get_counted(base + len(block), n - (len(block) - off), 0)
        elif (scanning := self._scanning(start)) or self._held(start):
            data = self._scan(start, n, ahead=scanning)
        else:
            data = self._get_counted(start, n, 0)
        self._cursor = start + len(data)
        return data[:n]

    def window(self, start: int, need: int = 8) -> tuple[bytes, int]:
        base, block = self._block
        off = start - base
        if off >= 0 and off + need <= len(block):
            self._cursor = start + need
            return block, off
        if (scanning := self._scanning(start)) or self._held(start):
            index = start // self.CHUNK
            chunk = self._chunk(index)
            if scanning:
                self._ahead(index)
            off = start - index * self.CHUNK
            if off + need <= len(chunk) or index * self.CHUNK + len(chunk) >= self.size:
                self._block, self._block_is_chunk = (index * self.CHUNK, chunk), True  # no copy
                self._cursor = start + min(need, len(chunk) - off)
                return chunk, off
            data = self._scan(start, need, ahead=scanning)  # a header across two chunks
        else:
            data = self._get_counted(start, need, self.BLOCK)
        self._cursor = start + len(data)
        if len(data) < need and start + len(data) < self.size:
            raise self._shrunk(start + len(data))
        self._block, self._block_is_chunk = (start, data), False
        return data, 0

    def _pread(self, start: int, n: int, need: int) -> bytes:
        return self.read(start, n)

    def _shrunk(self, at: int) -> TruncatedRecordError:
        return TruncatedRecordError(
            f"{self.url}: the object ends at byte {at:,}, but it had {self.size:,} bytes when it "
            "was opened: it was replaced or cut while being read; open it again"
        )

    def close(self) -> None:
        with self._mutex:
            pool, self._pool = self._pool, None
            self._pending.clear()
            self._chunks.clear()
        if pool is not None and self._pid == os.getpid():
            pool.shutdown(wait=False, cancel_futures=True)
        self._block = (0, b"")

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit anything may be gone
            pass

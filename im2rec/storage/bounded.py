"""Requests to a store that a server cannot stretch (docs/security.md,
"Servers"): at most the bytes asked for are read, a connection that cannot
be made or goes quiet is given up, and every request has an overall
deadline, so a server that lies about sizes, sends for ever or trickles
bytes costs a bounded amount of memory and time, and the error names the
URL that stalled.

``http(s)://`` and ``s3://`` are read here over the fsspec backend's own
connections (aiohttp for HTTP, aiobotocore for S3): a ranged ``GET`` whose
body is read piece by piece up to the range's length, then closed. Other
protocols go through the backend's ``cat_file``, with its own limits.

The bytes received are the bytes asked for, or an error: a partial
response (206) must say, in its ``Content-Range``, exactly the range asked
for (shorter only where the object ends); a server that sends another
range, or none, is refused (:class:`WrongRange`), and one that stops
before the range's end is retried as a dropped connection. Given the
:class:`Version` of the object a reader opened (its size, and its ETag or
else its ``Last-Modified``), every response must be of that version, or
:class:`ObjectChanged` says the object was replaced while being read.

The limits (seconds) are :class:`Timeouts`: the defaults below, the
environment (``IM2REC_CONNECT_TIMEOUT``, ``IM2REC_IDLE_TIMEOUT``,
``IM2REC_READ_DEADLINE``), or ``storage_options={"timeouts": {"connect":
5, "idle": 30, "read": 120}}``, which take precedence.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import ConfigError, Im2RecError

__all__ = [
    "ObjectChanged",
    "Stalled",
    "Timeouts",
    "Version",
    "WrongRange",
    "backend_options",
    "get_range",
    "http_modified",
    "timeouts_of",
    "version_of",
    "with_deadline",
]

T = TypeVar("T")


class Stalled(Im2RecError, OSError):
    """A request to a store got no connection, or no bytes for the idle
    timeout, or did not finish within its deadline. (Not a TimeoutError:
    fsspec turns those into its own, which would lose the message.)"""


class WrongRange(Im2RecError, OSError):
    """A server answered a range request with other bytes than those asked
    for (another range, or a partial response that does not say which)."""


class ObjectChanged(Im2RecError, OSError):
    """The object is not the version a reader opened: it was replaced."""


@dataclass(frozen=True)
class Version:
    """What identifies an object's content, as its store states it: its size,
    and its ETag or, where there is none, its ``Last-Modified`` (HTTP's is
    to the second: a rewrite of the same size within one second cannot be
    told from the original by any client)."""

    size: int
    etag: str | None = None
    modified: str | None = None

    @property
    def tag(self) -> str | None:
        """One string for the ETag or the modification time."""
        if self.etag is not None:
            return f"ETag={self.etag}"
        return None if self.modified is None else f"Last-Modified={self.modified}"

    def check(self, url: str, size: int | None, etag: Any, modified: Any) -> None:
        """ObjectChanged unless a response of this size (None: unsaid), ETag
        and modification time (None: unsaid) may be of this version."""
        said = (
            (size is not None and size != self.size)
            or (self.etag is not None and etag is not None and str(etag) != self.etag)
            or (
                self.etag is None
                and self.modified is not None
                and modified is not None
                and str(modified) != self.modified
            )
        )
        if said:
            raise ObjectChanged(
                f"{url}: the object changed while it was being read (now {size!r} bytes, "
                f"ETag {etag!r}, modified {modified!r}; it was {self.size:,} bytes, "
                f"{self.tag or 'no tag'}): open it again to read the new one"
            )


#: the names backends give the ETag and the modification time in a lookup
_ETAGS = ("ETag", "etag")
_MODIFIED = ("Last-Modified", "LastModified", "last_modified", "mtime", "updated")


def version_of(details: dict[str, Any]) -> Version:
    """The :class:`Version` an fsspec lookup (``info``) describes."""
    etag = next((details[k] for k in _ETAGS if details.get(k) is not None), None)
    if etag is None and details.get("md5Hash") is not None:  # (GCS)
        etag = details["md5Hash"]
    modified = next((details[k] for k in _MODIFIED if details.get(k) is not None), None)
    return Version(
        int(details["size"]),
        None if etag is None else str(etag),
        None if modified is None else str(modified),
    )


@dataclass(frozen=True)
class Timeouts:
    #: seconds to make a connection
    connect: float = 10.0
    #: seconds without a byte before a response is given up
    idle: float = 30.0
    #: seconds for a whole request, headers to last byte (a read of an
    #: 8 MiB chunk at 70 kB/s still finishes)
    read: float = 120.0


_ENV = {"connect": "IM2REC_CONNECT_TIMEOUT", "idle": "IM2REC_IDLE_TIMEOUT",
        "read": "IM2REC_READ_DEADLINE"}  # fmt: skip


def timeouts_of(storage_options: dict[str, Any] | None) -> Timeouts:
    """The limits for these options: ``storage_options["timeouts"]``, then
    the environment, then the defaults; each a positive number."""
    given = dict((storage_options or {}).get("timeouts") or {})
    unknown = set(given) - set(_ENV)
    if unknown:
        raise ConfigError(
            f"storage_options['timeouts']: unknown {', '.join(sorted(unknown))} (known: "
            "connect, idle, read)"
        )
    values: dict[str, float] = {}
    for name, env in _ENV.items():
        raw = given.get(name, os.environ.get(env))
        if raw is None:
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = -1.0
        if not 0 < value <= 86_400:
            raise ConfigError(
                f"the {name} timeout must be a number of seconds in (0, 86400], not {raw!r} "
                f"({env} or storage_options['timeouts'])"
            )
        values[name] = value
    return Timeouts(**values)


def backend_options(protocol: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """The options for fsspec's filesystem: the user's, without ours, with
    the connect and idle timeouts given to the backend's client unless the
    user configured the client himself."""
    options = {k: v for k, v in (storage_options or {}).items() if k != "timeouts"}
    limits = timeouts_of(storage_options)
    if protocol in ("http", "https") and "client_kwargs" not in options:
        import aiohttp

        timeout = aiohttp.ClientTimeout(sock_connect=limits.connect, sock_read=limits.idle)
        options["client_kwargs"] = {"timeout": timeout}
    elif protocol in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("connect_timeout", limits.connect)
        config.setdefault("read_timeout", limits.idle)
        options["config_kwargs"] = config
    return options


def _stalled(url: str, what: str, limits: Timeouts, why: str) -> Stalled:
    return Stalled(
        f"{url}: {what} stalled ({why}; limits: connect {limits.connect:g} s, idle "
        f"{limits.idle:g} s, whole request {limits.read:g} s); check the network or the "
        "server, or allow more with storage_options={'timeouts': {...}} or "
        "IM2REC_READ_DEADLINE / IM2REC_IDLE_TIMEOUT"
    )


async def with_deadline(aw: Awaitable[T], url: str, what: str, limits: Timeouts) -> T:
    """``aw``, cancelled with :class:`Stalled` when it takes longer than the
    read deadline or its client's own timeouts fire."""
    try:
        return await asyncio.wait_for(aw, limits.read)
    except asyncio.TimeoutError as exc:  # (the client's own timeouts are TimeoutErrors too)
        why = str(exc) or f"no answer within {limits.read:g} s"
        raise _stalled(url, what, limits, why) from None


#: a server that ignores ``Range`` sends the object from its start: at most
#: this much is read and dropped to reach an offset (else: an error)
MAX_SKIP = 64 << 20


async def _read_up_to(read: Any, want: int) -> bytes:
    """At most ``want`` bytes of a body, in pieces (``read(n)`` is the
    body's): whatever the server sends after them is never read."""
    pieces, got = [], 0
    while got < want:
        piece = await read(min(want - got, 1 << 20))
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
    return b"".join(pieces)


#: ``Content-Range: bytes FIRST-LAST/TOTAL`` (TOTAL may be ``*``); numbers
#: of at most 19 digits (an int64), so a hostile one costs nothing to read
_CONTENT_RANGE = re.compile(r"bytes ([0-9]{1,19})-([0-9]{1,19})/([0-9]{1,19}|\*)")


def _partial(url: str, said: str | None, start: int, end: int) -> tuple[int, int | None]:
    """``(bytes it holds, the object's size or None)`` of a partial
    response whose ``Content-Range`` is ``said``, for bytes ``start`` to
    ``end`` asked for: :class:`WrongRange` unless it is that range, or the
    part of it before the object's end."""
    found = _CONTENT_RANGE.fullmatch((said or "").strip())
    if found is not None:
        first, last = int(found[1]), int(found[2])
        total = None if found[3] == "*" else int(found[3])
        whole = last == end - 1 or (total is not None and last == total - 1 < end - 1)
        if first == start and first <= last and whole and (total is None or last < total):
            return last - first + 1, total
    raise WrongRange(
        f"{url}: asked for bytes {start:,}-{end - 1:,}, the server answered with other bytes "
        f"(Content-Range: {said!r}); they are refused, as they are not the bytes asked for: "
        "the server (or a proxy before it) does not serve byte ranges as HTTP says"
    )


async def _read_exactly(url: str, read: Any, want: int) -> bytes:
    """``want`` bytes of a body; a body that stops short is a dropped
    connection (OSError, retried)."""
    data = await _read_up_to(read, want)
    if len(data) < want:
        raise ConnectionResetError(
            f"{url}: the response stopped after {len(data):,} of the {want:,} bytes it said"
        )
    return data


async def _http_range(fs: Any, url: str, start: int, end: int, expect: Version | None) -> bytes:
    session = await fs.set_session()
    headers = {"Range": f"bytes={start}-{end - 1}"}
    async with session.get(fs.encode_url(url), headers=headers) as response:
        status = response.status
        if status in (401, 403):
            raise PermissionError(f"HTTP {status} Forbidden")
        if status == 404:
            raise FileNotFoundError(url)
        if status == 416:  # the range starts at or past the end
            return b""
        if status >= 400:
            raise OSError(f"HTTP {status}")  # (5xx: retried)
        if status not in (200, 206):
            raise WrongRange(f"{url}: HTTP {status} in answer to a range request")
        tags = response.headers.get("ETag"), response.headers.get("Last-Modified")
        if status == 206:
            want, total = _partial(url, response.headers.get("Content-Range"), start, end)
            if expect is not None:
                expect.check(url, total, *tags)
            return await _read_exactly(url, response.content.read, want)
        # 200: the whole object, from byte 0 (a server that ignores Range)
        if expect is not None:
            length = response.headers.get("Content-Length")
            expect.check(url, int(length) if length and length.isdigit() else None, *tags)
        if start:  # reach the range by reading past it
            if start > MAX_SKIP:
                raise ConnectionRefusedError(
                    f"{url}: the server sent the whole object for a range request (it does not "
                    "serve byte ranges); im2rec reads .rec files by range"
                )
            await _read_up_to(response.content.read, start)
        return await _read_up_to(response.content.read, end - start)


async def _s3_range(
    fs: Any, url: str, path: str, start: int, end: int, expect: Version | None
) -> bytes:
    bucket, key, version = fs.split_path(path)
    extra = {"VersionId": version} if version else {}
    response = await fs._call_s3(  # noqa: SLF001 - s3fs's request, with its retries and errors
        "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **extra
    )
    body = response["Body"]
    try:
        want, total = _partial(url, response.get("ContentRange"), start, end)
        if expect is not None:
            expect.check(url, total, response.get("ETag"), response.get("LastModified"))
        return await _read_exactly(url, body.read, want)
    finally:
        body.close()


async def _http_modified(fs: Any, url: str) -> str | None:
    session = await fs.set_session()
    async with session.head(fs.encode_url(url), allow_redirects=True) as response:
        if response.status >= 400:
            raise OSError(f"HTTP {response.status}")
        modified: str | None = response.headers.get("Last-Modified")
        return modified


def http_modified(fs: Any, url: str, limits: Timeouts) -> str | None:
    """The ``Last-Modified`` of ``url`` as a ``HEAD`` says (fsspec before
    2024.x left it out of its lookup), within the limits."""
    from fsspec.asyn import sync

    result: str | None = sync(fs.loop, with_deadline, _http_modified(fs, url), url,
                              "looking it up", limits)  # fmt: skip
    return result


def get_range(fs: Any, protocol: str, url: str, path: str, start: int, end: int,
              limits: Timeouts, expect: Version | None = None) -> bytes:  # fmt: skip
    """Bytes ``start`` to ``end`` of an object: at most ``end - start``,
    fewer where it ends; :class:`Stalled` past the limits; over HTTP(S)
    and S3, checked to be those bytes (:class:`WrongRange`) of ``expect``
    (:class:`ObjectChanged`), see the module doc."""
    if end <= start:
        return b""
    what = f"reading bytes {start:,}-{end:,}"
    if protocol in ("http", "https"):
        request: Any = _http_range(fs, url, start, end, expect)
    elif protocol in ("s3", "s3a"):
        request = _s3_range(fs, url, path, start, end, expect)
    else:
        data: bytes = fs.cat_file(path, start=start, end=end)
        return data[: end - start]
    from fsspec.asyn import sync

    result: bytes = sync(fs.loop, with_deadline, request, url, what, limits)
    return result

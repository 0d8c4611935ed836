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

The limits (seconds) are :class:`Timeouts`: the defaults below, the
environment (``IM2REC_CONNECT_TIMEOUT``, ``IM2REC_IDLE_TIMEOUT``,
``IM2REC_READ_DEADLINE``), or ``storage_options={"timeouts": {"connect":
5, "idle": 30, "read": 120}}``, which take precedence.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import ConfigError, Im2RecError

__all__ = ["Stalled", "Timeouts", "backend_options", "get_range", "timeouts_of", "with_deadline"]

T = TypeVar("T")


class Stalled(Im2RecError, OSError):
    """A request to a store got no connection, or no bytes for the idle
    timeout, or did not finish within its deadline. (Not a TimeoutError:
    fsspec turns those into its own, which would lose the message.)"""


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


async def _http_range(fs: Any, url: str, start: int, end: int) -> bytes:
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
        if status != 206 and start:
            # the whole object, from byte 0: reach the range by reading past it
            if start > MAX_SKIP:
                raise ConnectionRefusedError(
                    f"{url}: the server sent the whole object for a range request (it does not "
                    "serve byte ranges); im2rec reads .rec files by range"
                )
            await _read_up_to(response.content.read, start)
        return await _read_up_to(response.content.read, end - start)


async def _s3_range(fs: Any, path: str, start: int, end: int) -> bytes:
    bucket, key, version = fs.split_path(path)
    extra = {"VersionId": version} if version else {}
    response = await fs._call_s3(  # noqa: SLF001 - s3fs's request, with its retries and errors
        "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **extra
    )
    body = response["Body"]
    try:
        return await _read_up_to(body.read, end - start)
    finally:
        body.close()


def get_range(fs: Any, protocol: str, url: str, path: str, start: int, end: int,
              limits: Timeouts) -> bytes:  # fmt: skip
    """Bytes ``start`` to ``end`` of an object: at most ``end - start``,
    fewer where it ends; :class:`Stalled` past the limits."""
    if end <= start:
        return b""
    what = f"reading bytes {start:,}-{end:,}"
    if protocol in ("http", "https"):
        request: Any = _http_range(fs, url, start, end)
    elif protocol in ("s3", "s3a"):
        request = _s3_range(fs, path, start, end)
    else:
        data: bytes = fs.cat_file(path, start=start, end=end)
        return data[: end - start]
    from fsspec.asyn import sync

    result: bytes = sync(fs.loop, with_deadline, request, url, what, limits)
    return result

"""Where files are: the one place that opens a file for reading, local or
remote.

A location is a local path or a URL (``s3://bucket/key``, ``gs://...``,
``https://...``, ``file://...`` or any protocol an installed fsspec backend
knows). Local paths never import fsspec; URLs need the ``remote`` extra
(``pip install 'im2rec[remote]'``, which brings fsspec and s3fs; gcsfs and
others are the user's to add). Credentials and endpoints come the
ecosystem's way: ``AWS_*`` variables and files (``AWS_ENDPOINT_URL`` for
S3-compatible servers), fsspec's ``FSSPEC_*`` configuration, or
``storage_options`` in the API.

Remote ``.rec`` files are read through :class:`~.remote.RemoteView`: ranged
reads, a small read-ahead for random access, large chunks fetched ahead for
sequential scans, a bounded cache, retries of transient errors, and one
clear error naming the URL for the rest.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DatasetError, MissingFileError
from .files import FileView, open_regular

__all__ = [
    "Location",
    "exists",
    "is_url",
    "local_path",
    "open_view",
    "read_bytes",
    "sibling",
    "write_bytes",
]

#: A path or a URL, as users give them.
Location = str | os.PathLike[str]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(location: Location | bytes) -> bool:
    """Whether ``location`` is a URL (``file://`` counts: it goes through
    fsspec like the others, so it tests the remote code path locally)."""
    if isinstance(location, bytes):
        location = os.fsdecode(location)
    return isinstance(location, str) and bool(_URL.match(location))


def local_path(location: Location | bytes) -> Path:
    """A local path as a :class:`Path` (``ValueError`` for a URL)."""
    if is_url(location):
        raise ValueError(f"{location!r} is a URL, not a local path")
    return Path(os.fsdecode(location))


def sibling(location: Location, suffix: str) -> str:
    """``location`` with its suffix replaced (``x.rec`` -> ``x.idx``), for
    paths and URLs alike."""
    text = os.fspath(location)
    if not is_url(text):
        return str(Path(text).with_suffix(suffix))
    head, _, name = text.rpartition("/")
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return f"{head}/{stem}{suffix}"


def exists(location: Location, storage_options: dict[str, Any] | None = None) -> bool:
    if not is_url(location):
        return Path(location).exists()
    from .remote import filesystem

    fs, path = filesystem(os.fspath(location), storage_options)
    return bool(fs.exists(path))


def open_view(
    location: Location | bytes,
    storage_options: dict[str, Any] | None = None,
    directory_error: str = "is a directory, not a .rec file",
    cache: Any = None,
) -> FileView:
    """A view of a ``.rec`` (see :class:`FileView`): local files are read with
    ``pread``, URLs with ranged requests, or through whole blocks kept in
    ``cache`` (a :class:`~im2rec.storage.blockcache.BlockCache`)."""
    if isinstance(location, bytes):
        location = os.fsdecode(location)
    if is_url(location):
        from .remote import RemoteView

        if cache is not None:
            from .blockcache import CachedView

            url = os.fspath(location)
            return CachedView.open(
                url, storage_options, cache, RemoteView.lookup(url, storage_options)
            )
        return RemoteView.open(os.fspath(location), storage_options)
    if storage_options:
        raise ConfigError("storage_options apply to URLs, not to local paths")
    path = Path(location)
    try:
        fd, size = open_regular(path, directory_error)
    except FileNotFoundError:
        raise MissingFileError(f"{path}: record file not found") from None
    return FileView(fd, size, str(path))


#: Small files read whole (indexes, lists, manifests): an upper bound, so a
#: wrong URL to a large object is an error, not a download.
MAX_SMALL = 1 << 30


def read_bytes(
    location: Location, storage_options: dict[str, Any] | None = None, limit: int = MAX_SMALL
) -> bytes:
    """A whole small file (an ``.idx``, a list): ``FileNotFoundError`` when it
    is not there (local) or :class:`MissingFileError` (remote), and
    :class:`DatasetError` when it holds more than ``limit`` bytes (checked
    before reading)."""
    if not is_url(location):
        from .files import open_regular

        fd, size = open_regular(location)
        with os.fdopen(fd, "rb") as f:
            if size > limit:
                raise DatasetError(f"{location}: {size:,} bytes, more than {limit:,} expected")
            return f.read()
    view = open_view(location, storage_options)
    try:
        if view.size > limit:
            raise DatasetError(f"{location}: {view.size:,} bytes, more than {limit:,} expected")
        return view.read(0, view.size)
    finally:
        view.close()


def write_bytes(
    location: Location, data: bytes, storage_options: dict[str, Any] | None = None
) -> None:
    """Publish a small file whole: locally through a temporary file renamed
    into place; in a store as one upload (an object appears complete or not
    at all)."""
    if not is_url(location):
        from .atomic import write_file

        write_file(location, data)
        return
    from .remote import call, filesystem

    url = os.fspath(location)
    fs, path = filesystem(url, storage_options)
    call(url, "writing it", lambda: fs.pipe_file(path, data))

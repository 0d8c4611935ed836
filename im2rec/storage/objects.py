"""Writing to a store: whole objects published through a temporary key,
removals, listings, and the local spool where a pack for a store is made.

An object store has no rename and no partial files: an upload appears when
it completes, or not at all. :func:`publish` still uploads to a temporary
key (``.NAME.<token>.uploading`` beside the target) and moves it into place,
so a target never names an upload in progress on backends without atomic
uploads; a group of outputs is published in the order given, the manifest
last, so a manifest in the store means the files it names are complete.

A pack whose outputs go to a store is made in a local *spool* folder first
(``$IM2REC_SPOOL``, else ``spool`` in :func:`~.private.cache_home`), one
subfolder per list URL, of the user's own (mode 0700: ``--resume``
continues what is there, which nobody else may have planted): an
interrupted run's partial output stays there for ``--resume`` and goes
once it is published.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, MissingFileError, OutputError
from . import is_url
from .files import parse_json
from .private import cache_home, private_folder

__all__ = [
    "fetch",
    "list_names",
    "publish",
    "read_manifest",
    "remove",
    "size_of",
    "spool_for",
    "url_join",
]


def url_join(base: str, name: str) -> str:
    """``base/name`` for a URL prefix and a relative name."""
    return f"{base.rstrip('/')}/{name}"


def spool_for(url: str) -> Path:
    """The local folder where outputs for the store at ``url`` are made."""
    base = os.environ.get("IM2REC_SPOOL") or str(cache_home() / "spool")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", url.rstrip("/").rsplit("/", 1)[-1])[:60]
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    folder = Path(base) / f"{name}-{digest}"
    try:
        private_folder(folder)
    except OutputError:
        raise
    except OSError as exc:
        raise ConfigError(
            f"cannot make the spool folder {folder} for {url} ({exc.strerror}); "
            "set IM2REC_SPOOL to a writable folder with room for the output"
        ) from None
    return folder


def publish(
    pairs: Sequence[tuple[Path, str]], storage_options: dict[str, Any] | None = None
) -> None:
    """Upload each local file to its URL, in order (the manifest last)."""
    for local, url in pairs:
        _publish_one(local, url, storage_options)


def _publish_one(local: Path, url: str, storage_options: dict[str, Any] | None) -> None:
    from .remote import call, filesystem

    fs, path = filesystem(url, storage_options)
    head, _, name = path.rpartition("/")
    temp = f"{head}/.{name}.{uuid.uuid4().hex[:12]}.uploading"
    try:
        call(url, "uploading it", lambda: fs.put_file(os.fspath(local), temp))
        call(url, "publishing it", lambda: fs.mv(temp, path))
    except BaseException:
        with contextlib.suppress(Exception):  # the upload's own error is the one to see
            fs.rm_file(temp)
        raise


def fetch(url: str, limit: int, storage_options: dict[str, Any] | None = None) -> bytes:
    """A whole object of fewer than ``limit`` bytes, or its first ``limit``
    bytes (a larger one is not downloaded to be refused)."""
    from .remote import read_range

    return read_range(url, 0, limit, storage_options)


def read_manifest(url: str, storage_options: dict[str, Any] | None = None) -> Any:
    """A JSON manifest in the store: None when there is none, ``{}`` when it
    does not parse (the checks that use it then say it is unreadable)."""
    from . import read_bytes

    try:
        return parse_json(read_bytes(url, storage_options, limit=1 << 24), url)
    except MissingFileError:
        return None
    except ValueError:
        return {}


def remove(url: str, storage_options: dict[str, Any] | None = None) -> None:
    """Delete one object, when it is there (a store may not say whether it
    was: S3's delete succeeds either way)."""
    from .remote import call, filesystem

    fs, path = filesystem(url, storage_options)
    with contextlib.suppress(MissingFileError):
        call(url, "removing it", lambda: fs.rm_file(path))


def size_of(url: str, storage_options: dict[str, Any] | None = None) -> int | None:
    """An object's (or a local file's) size in bytes, or None when it is not there."""
    from .remote import call, filesystem

    if not is_url(url):
        try:
            return os.stat(url).st_size
        except FileNotFoundError:
            return None

    fs, path = filesystem(url, storage_options)
    try:
        return int(call(url, "looking it up", lambda: fs.size(path)))
    except MissingFileError:
        return None


def list_names(prefix: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """Names of the objects directly under the URL prefix ``prefix`` (or
    of the entries of a local folder)."""
    from .remote import call, filesystem

    if not is_url(prefix):
        try:
            return sorted(os.listdir(prefix))
        except FileNotFoundError:
            return []
    fs, path = filesystem(prefix, storage_options)
    try:
        found = call(prefix, "listing it", lambda: fs.ls(path.rstrip("/"), detail=False))
    except MissingFileError:
        return []
    return sorted(str(p).rstrip("/").rsplit("/", 1)[-1] for p in found)

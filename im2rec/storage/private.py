"""Folders and files of this user's own: where im2rec keeps what it reads
back and trusts (the binary copies of parsed indexes, fetched blocks).

A cache is trusted because nobody else could have written it: its folder
is made with mode 0700, and a folder found there is used only if it is a
folder itself (not a link to one), owned by this user and writable by
nobody else; a file read back is opened without following a link and
must be a regular file of this user's with one link. Another user can
then neither plant a file in it nor replace one (docs/security.md,
"Caches").

The caches live under :func:`cache_home`: ``$IM2REC_CACHE_DIR``, else
``$XDG_CACHE_HOME/im2rec``, else ``~/.cache/im2rec``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import OutputError

__all__ = ["cache_home", "cache_name", "open_own", "private_folder"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def cache_home() -> Path:
    """The folder im2rec's caches go in (see the module doc); not made here."""
    base = os.environ.get("IM2REC_CACHE_DIR")
    if base:
        return Path(base).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "im2rec"


def cache_name(folder: str, path: str | os.PathLike[str], suffix: str) -> str:
    """Where what im2rec keeps of the file at ``path`` goes in the cache's
    ``folder``: named for this machine and the file's real path."""
    import hashlib

    real = os.path.realpath(os.fspath(path))
    where = f"{os.uname().nodename if hasattr(os, 'uname') else ''}\0{real}"
    digest = hashlib.sha256(where.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(cache_home(), folder, f"{digest}{suffix}")


def private_folder(path: str | os.PathLike[str]) -> Path:
    """``path``, made (mode 0700, its parents as usual) unless it is there;
    :class:`OutputError` naming it when what is there is not a folder of
    this user's that nobody else may write."""
    folder = Path(path)
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        os.makedirs(folder.parent, exist_ok=True)
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass  # (another process of ours made it meanwhile: checked below)
        info = os.lstat(folder)
    why = _not_private(info)
    if why:
        fix = "`chmod go-w` it, or " if "written by others" in why else ""
        raise OutputError(
            f"{folder}: {why}, so what im2rec keeps there could be planted or replaced by "
            f"another user; {fix}use a folder of your own (made for you if it does not exist)"
        )
    return folder


def _not_private(info: os.stat_result) -> str:
    if stat.S_ISLNK(info.st_mode):
        return "is a symlink, not a folder"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        return f"belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"may be written by others (mode {stat.S_IMODE(info.st_mode):o})"
    return ""


def open_own(path: str | os.PathLike[str], dir_fd: int | None = None) -> int | None:
    """A read-only descriptor of ``path`` when it is a regular file of this
    user's with one link, reached without following a link; else None (no
    such file, or one that is not to be trusted)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    info = os.fstat(fd)
    mine = not hasattr(os, "geteuid") or info.st_uid == os.geteuid()
    if not stat.S_ISREG(info.st_mode) or not mine or info.st_nlink != 1:
        os.close(fd)
        return None
    return fd

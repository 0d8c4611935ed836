"""Names that come from files, and the writes they lead to.

A class map, a ``.lst``, a tar or a record can name a folder ``../../x`` or
``/etc``; an output folder may already hold a symlink that leads out of it.
:func:`relative_name` refuses every name that is not a plain relative path,
and :class:`ConfinedWriter` writes files below one root through directory
file descriptors opened with ``O_NOFOLLOW``, so a symlink on the way is an
error instead of a write somewhere else. Names arrive already checked; the
descriptors make the check hold for the whole write, whatever is on disk.
"""

from __future__ import annotations

import errno
import os
import re
import string
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from ..errors import DatasetError, OutputError
from .atomic import create_output
from .copying import write_all

__all__ = ["ConfinedWriter", "all_plain", "is_plain", "plain_path", "relative_name", "shown"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_MAX_NAME = 4096  # PATH_MAX on Linux: a longer name cannot be created anyway
_MAX_PART = 255  # NAME_MAX: the longest file or folder name


#: names that need no more checking: plain relative paths of printable
#: ASCII, no empty, "." or ".." part, no "/" at either end (what nearly
#: every name is)
_PLAIN = re.compile(r"[A-Za-z0-9_+=@,-](?:[A-Za-z0-9_+=@,.-]|/(?![./]|$))*")
#: the characters of such names, dropped (str.translate) to see what else is there
_PLAIN_CHARS = str.maketrans(
    dict.fromkeys(map(ord, string.ascii_letters + string.digits + "_+=@,.-/"))
)


def _parts(name: str) -> list[str]:
    """A name's parts, backslashes read as separators (as on Windows)."""
    return name.replace("\\", "/").split("/")


def _absolute(name: str) -> bool:
    return name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":" and name[0].isalpha())


def is_plain(name: str) -> bool:
    """Whether ``name`` needs no checking at all: a relative path of
    printable ASCII parts, none empty, ``.`` or ``..`` (what nearly every
    name is); :func:`relative_name` gives it back as it is."""
    return len(name) <= _MAX_PART and _PLAIN.fullmatch(name) is not None


def all_plain(names: Sequence[str]) -> bool:
    """Whether every one of ``names`` :func:`is_plain` (one pass of the
    pattern over them all)."""
    if not names or max(map(len, names)) > _MAX_PART:
        return not names
    text = "\n" + "\n".join(names) + "\n"  # (each name between newlines: _PLAIN's rules)
    return (
        text.count("\n") == len(names) + 1
        and not text.translate(_PLAIN_CHARS).strip("\n")
        and not any(bad in text for bad in ("\n\n", "\n.", "\n/", "//", "/.", "/\n"))
    )


def plain_path(name: str) -> bool:
    """Whether ``name`` is a relative path of plain parts: not absolute, no
    empty, ``.`` or ``..`` part (the strict form, for names that must be
    exactly what they say: object keys, archive members)."""
    if is_plain(name):
        return True
    return not _absolute(name) and not any(p in ("", ".", "..") for p in _parts(name))


def relative_name(name: str, where: str) -> str:
    """``name`` as a relative path of plain components (``a/b/c``);
    :class:`DatasetError` naming ``where`` (a file and line) otherwise.

    Refused: empty names, absolute paths, ``..`` anywhere (also between
    backslashes, a separator on Windows), and what a ``.lst`` or TSV line
    cannot carry: NUL, TAB, newlines, leading whitespace (readers strip it)
    and text that is not UTF-8. ``.`` components are dropped.
    """

    def refuse(why: str) -> DatasetError:
        return DatasetError(
            f"{where}: the name {shown(name)} {why}; names read from files must be relative paths "
            "inside the output folder (fix the file, or remove the entry)"
        )

    if is_plain(name):
        return name
    if len(name) > _MAX_NAME:
        raise refuse("is longer than a path can be")
    if not name.strip():
        raise refuse("is empty")
    if _absolute(name):
        raise refuse("is an absolute path")
    if any(ch in name for ch in "\0\t\n\r"):
        raise refuse("holds a NUL, TAB or newline, which a list line cannot carry")
    if name[0].isspace():
        raise refuse("starts with whitespace, which list readers strip")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise refuse("is not UTF-8 text") from None
    parts = [p for p in _parts(name) if p not in ("", ".")]
    if ".." in parts:
        raise refuse("leads out of the folder with '..'")
    if not parts:
        raise refuse("names no file or folder")
    if any(len(p.encode("utf-8")) > _MAX_PART for p in parts):
        raise refuse(f"has a part longer than {_MAX_PART} bytes, which file systems refuse")
    return "/".join(parts)


def shown(name: str, limit: int = 120) -> str:
    """``repr(name)``, cut to about ``limit`` characters for a message."""
    return repr(name) if len(name) <= limit else repr(name[:limit]) + "..."


class ConfinedWriter:
    """Writes files below ``root``, never through a symlink.

    ``write(rel, data)`` creates the folders of ``rel`` one at a time and
    opens each (and then the file) relative to its parent with
    ``O_NOFOLLOW``: a component that is a symlink, placed there before or
    during the run, raises :class:`DatasetError` instead of being followed.
    ``rel`` must come from :func:`relative_name` (or be made by im2rec).
    Folder descriptors are cached, so writing many files into a few
    folders costs one ``open`` per file.
    """

    OPEN_FOLDERS = 256

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self._dirs: dict[str, int] = {"": os.open(self.root, os.O_RDONLY | _DIRECTORY)}

    def _folder(self, rel: str) -> int:
        fd = self._dirs.get(rel)
        if fd is not None:
            return fd
        parent, _, name = rel.rpartition("/")
        parent_fd = self._folder(parent)
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            pass
        try:
            fd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=parent_fd)
        except OSError as exc:
            raise self._not_followed(rel, exc) from None
        self._dirs[rel] = fd
        if len(self._dirs) > self.OPEN_FOLDERS:  # 85,742 identity folders: stay under ulimit -n
            oldest = next(k for k in self._dirs if k)
            os.close(self._dirs.pop(oldest))
        return fd

    def write(self, rel: str, data: bytes | memoryview) -> Path:
        """Write ``data`` to ``root/rel`` as a new file (one already there is
        replaced, not written through: it may be a hard link to a file
        elsewhere); returns the path."""
        folder, _, name = rel.rpartition("/")
        parent = self._folder(folder)
        try:
            fd = create_output(name, mode=0o644, dir_fd=parent)
        except OutputError:  # a folder or link where the file goes
            raise self._not_followed(rel, OSError(errno.ELOOP, "in the way")) from None
        except OSError as exc:
            raise self._not_followed(rel, exc) from None
        try:
            write_all(fd, [data])
        finally:
            os.close(fd)
        return self.root / rel

    def _not_followed(self, rel: str, exc: OSError) -> OSError | DatasetError:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK, errno.EISDIR):
            return DatasetError(
                f"{self.root / rel}: a symlink, or a file where a folder belongs (or the "
                f"reverse), is in the way inside {self.root}; im2rec does not write through "
                "links: remove it, or write into an empty folder"
            )
        return OSError(exc.errno, exc.strerror, str(self.root / rel))  # the whole path, not a part

    def close(self) -> None:
        dirs, self._dirs = self._dirs, {}
        for fd in dirs.values():
            os.close(fd)

    def __enter__(self) -> ConfinedWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

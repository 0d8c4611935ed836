"""Walking a bucket prefix as ``rec list`` walks a folder: the same
``(folder, sorted image names)`` sequence, in ``os.walk``'s top-down order
with sorted folders (im2rec.py's), so the same tree gives the same ``.lst``
whether it is on disk or in a store.

Object stores have no folders, only keys: a "folder" is every key prefix
ending in ``/``. One listing request per 1,000 keys fetches them all
(``fs.find``); the tree is then walked in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..errors import MissingFileError
from ..storage.confined import plain_path

__all__ = ["walk_prefix"]


def _is_image(name: str, exts: frozenset[str]) -> bool:
    # the rule of listing._list_folder: the suffix from the last dot, unless
    # only dots come before it
    dot = name.rfind(".")
    return dot > 0 and name[dot:].lower() in exts and bool(name[:dot].strip("."))


def walk_prefix(
    url: str, exts: Iterable[str], recursive: bool, refused: list[str] | None = None
) -> Iterator[tuple[str, list[str]]]:
    """``(folder relative to url, sorted image names)`` for every folder
    under ``url``, top-down, folders sorted by code point. A key is a name,
    not a path: one whose parts are empty, ``.`` or ``..`` (``a/../x.jpg``,
    ``a//x.jpg``) would become a list path or class that leaves the root, so
    it is left out (and added to ``refused``)."""
    from ..storage.remote import call, filesystem

    fs, base = filesystem(url)
    base = base.rstrip("/")

    def find() -> list[str]:
        found: list[str] = fs.find(base, withdirs=False, detail=False)
        return found

    keys = call(url, "listing it", find)
    if not keys:
        raise MissingFileError(f"{url}: no objects under this prefix; check the URL")
    wanted = frozenset(exts)
    files: dict[str, list[str]] = {".": []}
    children: dict[str, set[str]] = {".": set()}
    for key in keys:
        rel = key[len(base) :].lstrip("/")
        if not rel or key[: len(base)] != base:
            continue
        *parts, name = rel.split("/")
        if not plain_path(rel.rstrip("/")):  # (a folder marker "a/" is no image: skipped below)
            if refused is not None:
                refused.append(rel)
            continue
        folder = "."
        for part in parts:
            child = part if folder == "." else f"{folder}/{part}"
            children[folder].add(child)
            files.setdefault(child, [])
            children.setdefault(child, set())
            folder = child
        if _is_image(name, wanted):
            files[folder].append(name)
    stack = ["."]
    while stack:
        folder = stack.pop()
        yield folder, sorted(files[folder])
        if not recursive:
            return
        # popped in sorted order: push the largest first
        stack.extend(sorted(children[folder], key=lambda c: c.rsplit("/", 1)[-1], reverse=True))

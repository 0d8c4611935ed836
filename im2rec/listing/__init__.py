"""Folders and buckets into ``.lst`` files, and the ``.lst`` format itself.

Modules: :mod:`.making` (``rec list``: walk, split, write the lists),
:mod:`.entries` (what a walk found, compactly), :mod:`.buckets` (a bucket
prefix walked as a folder is), :mod:`.lstfile` (reading and writing ``.lst``
lines, class maps).
"""

from .making import (
    DEFAULT_EXTS,
    IM2REC_SEED,
    Entry,
    ListOptions,
    ListResult,
    Scan,
    make_lists,
    plan_lists,
    scan_folder,
)

__all__ = [
    "DEFAULT_EXTS",
    "IM2REC_SEED",
    "Entry",
    "ListOptions",
    "ListResult",
    "Scan",
    "make_lists",
    "plan_lists",
    "scan_folder",
]

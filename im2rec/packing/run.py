"""The entry points of a pack: :func:`pack_list` (a list on disk or in a
store) and :func:`pack_files` (a local list in either layout). They sit
above the plain pipeline (:mod:`.pipeline`), the face layout (:mod:`.faces`)
and lists in a store (:mod:`.remote`), which each use only what is below
them."""

from __future__ import annotations

import os
from pathlib import Path

from ..executors import LocalExecutor
from ..progress import with_progress
from ..storage import is_url
from ..storage.atomic import exclusive
from .encoding import PackOptions
from .layouts import pack_files
from .outcome import PackResult
from .pipeline import PackRun, Progress
from .remote import pack_remote
from .resuming import PartialFiles

__all__ = ["pack_files", "pack_list"]


@with_progress("packing", " images", done=0, total=1)
def pack_list(
    lst: str | os.PathLike[str],
    options: PackOptions,
    *,
    root: str | os.PathLike[str] | None = None,
    executor: LocalExecutor | None = None,
    resume: bool = False,
    on_progress: Progress | None = None,
    progress: bool = False,
    overwrite: bool = True,
) -> PackResult:
    """Pack one ``.lst`` into ``.rec``/``.idx`` beside it (see module doc).
    With ``overwrite=False``, a finished ``.rec`` made from another version
    of the list, another root or other options (or not by im2rec) is a
    :class:`~im2rec.errors.DatasetError` instead of being replaced.
    Raises :class:`~im2rec.storage.atomic.BusyError` while another process packs
    the same list."""
    run = PackRun(options, root, executor, resume, on_progress, overwrite)
    if is_url(lst):
        return pack_remote(os.fspath(lst), run)
    files = PartialFiles(Path(lst))
    with exclusive(files.lst, "packing"):
        return pack_files(files, run)

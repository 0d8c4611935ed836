"""A local list packed in the layout its options ask for: the plain
pipeline, or InsightFace's face layout (a plain pack, then renumbered)."""

from __future__ import annotations

from ..errors import DatasetError
from .faces import pack_faces, staging_files
from .outcome import PackResult
from .pipeline import PackRun, pack_plain
from .resuming import PartialFiles

__all__ = ["check_interrupted", "pack_files"]


def check_interrupted(files: PartialFiles, run: PackRun) -> None:
    """Refuse to start over where an interrupted run left partial output,
    unless ``run`` resumes it or may overwrite it: at ImageNet's scale that
    output is hours of work."""
    if run.resume or run.overwrite:
        return
    staged = staging_files(files) if run.options.layout == "insightface" else files
    try:
        size = staged.rec_tmp.stat().st_size
    except FileNotFoundError:
        return
    raise DatasetError(
        f"{staged.rec_tmp}: an interrupted run of {files.lst.name} left {size:,} bytes of "
        "partial output; run the same command with --resume to continue it, or with "
        "--overwrite to start over"
    )


def pack_files(files: PartialFiles, run: PackRun) -> PackResult:
    """:func:`~im2rec.packing.pack_list` of a local list, the caller holding
    its lock."""
    check_interrupted(files, run)
    if run.options.layout == "insightface":
        return pack_faces(files, run)
    return pack_plain(files, run)

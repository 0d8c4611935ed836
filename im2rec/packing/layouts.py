"""A local list packed in the layout its options ask for: the plain
pipeline, or InsightFace's face layout (a plain pack, then renumbered)."""

from __future__ import annotations

from .faces import pack_faces
from .outcome import PackResult
from .pipeline import PackRun, pack_plain
from .resuming import PartialFiles

__all__ = ["pack_files"]


def pack_files(files: PartialFiles, run: PackRun) -> PackResult:
    """:func:`~im2rec.packing.pack_list` of a local list, the caller holding
    its lock."""
    if run.options.layout == "insightface":
        return pack_faces(files, run)
    return pack_plain(files, run)

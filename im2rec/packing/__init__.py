"""Packing a ``.lst`` into ``.rec``/``.idx`` (docs/format.md, "im2rec.py, Packing").

Modules: :mod:`.run` (the entry points), :mod:`.layouts` (which layout),
:mod:`.pipeline` (one list in the plain layout: partial files, ordered
writing, the manifest), :mod:`.encoding` (one image to one record),
:mod:`.outcome` (results and how a run stopped), :mod:`.faces` and
:mod:`.faces_plan` (InsightFace's layout), :mod:`.remote` (lists and
outputs in a store).

Stages: read the list (:mod:`im2rec.listing.lstfile`); encode each image in a worker
(:class:`Encoder`: read the file, optionally re-encode it, prepend the
header); write the records in list order (:func:`pack_list`). A bad image is
a :class:`Failure` (data, not an exception): it is counted, written to the
failure report, and the run goes on.

Crash safety: records go to ``NAME.rec.partial`` / ``NAME.idx.partial``, the
``.idx`` flushed after the ``.rec``; ``NAME.rec.partial.json`` records what
the partial output was made from. Only a finished run renames them to
``NAME.rec`` / ``NAME.idx``. ``resume=True`` cuts the partial files back to
the last record that is complete in both and continues from the list entry
after it; since encoding is deterministic, the result is byte-identical to an
uninterrupted run.
"""

from .encoding import MAX_SIDE, Encoder, Failure, Packed, PackOptions
from .outcome import (
    DiskFullError,
    PackInterrupted,
    PackResult,
    all_failed,
    likely_cause,
    result_from_manifest,
)
from .pipeline import FETCHERS, PackRun, Progress, resolve_root, run_state
from .run import pack_files, pack_list

__all__ = [
    "DiskFullError",
    "Encoder",
    "FETCHERS",
    "Failure",
    "MAX_SIDE",
    "PackInterrupted",
    "PackOptions",
    "PackResult",
    "PackRun",
    "Packed",
    "Progress",
    "all_failed",
    "likely_cause",
    "pack_files",
    "pack_list",
    "resolve_root",
    "result_from_manifest",
    "run_state",
]

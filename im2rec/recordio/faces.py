"""InsightFace's face layout, as far as reading it needs: which record is
its header record. The layout is described, written and converted by
:mod:`im2rec.formats.insightface`; this rule lives with the format core so
that the readers (``RecordDataset``, ``rec info``) need nothing above it."""

from __future__ import annotations

from typing import Any

from .codec import image_start
from .header import IRHeader

__all__ = ["MAX_IDENTITIES", "face_header", "layout_record"]

#: The most identities a layout may claim (Glint360K has 360,232): a bound
#: on what a hostile header record makes a reader allocate.
MAX_IDENTITIES = 10_000_000


def layout_record(flag: Any, lrec: Any) -> Any:
    """Whether the whole record with this header flag and length word is one
    of the layout's header or identity records: two labels and no image
    (ints, or int arrays and an array of answers)."""
    return (flag == 2) & (lrec == image_start(2))


def face_header(header: IRHeader, payload: bytes, records: int) -> tuple[int, int] | None:
    """``(first identity record, end)`` when this is the layout's header
    record (two labels, no image, a range that fits ``records``), else None."""
    if header.flag != 2 or payload:
        return None
    first, end = (float(v) for v in header.label)
    if not (first.is_integer() and end.is_integer() and 1 < first <= end <= records):
        return None
    return int(first), int(end)

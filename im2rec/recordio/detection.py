"""The detection label layout: boxes in a record's label, as MXNet's
``ImageDetRecordIter`` reads them (docs/format.md, "Detection labels").

A detection label is a float32 vector ``A, B, [extra header], (cls, xmin,
ymin, xmax, ymax, [extra]) x N``: ``A`` the header's width (at least 2;
GluonCV writes 4, adding the image's width and height), ``B`` each object's
width (at least 5; 6 with a ``difficult`` flag), coordinates normalised to
[0, 1]. MXNet reads ``A`` and ``B`` as C ``int`` casts (truncated), wants at
least 7 values and a whole number of objects after the header, and drops an
object whose box is empty (``xmax <= xmin`` or ``ymax <= ymin``).

Every value must also be a finite number, each object's class a class
number (a whole number from 0 to ``MAX_CLASS - 1``; -1 only on an empty
box, the padding row MXNet's and GluonCV's tools write) and each corner
within :data:`CORNER_RANGE` (normalised corners are in [0, 1]; a corner
far outside is pixels, or damage): MXNet reads such labels without a word,
and a NaN class becomes an arbitrary integer, a huge corner an infinite
pixel box. :func:`problem` refuses them, so every reader does.

This module is the one home of that layout: :func:`make_label` writes it,
:func:`read_label` splits it and :func:`problem` says why a vector is not
one; the listing, the inspectors and the loaders all go through them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "CORNER_RANGE",
    "MAX_CLASS",
    "MAX_LENGTH",
    "MIN_HEADER",
    "MIN_LENGTH",
    "MIN_OBJECT",
    "DetLabel",
    "kept",
    "make_label",
    "outside",
    "problem",
    "read_label",
]

MIN_HEADER = 2  # A and B themselves
MIN_OBJECT = 5  # class, xmin, ymin, xmax, ymax
MIN_LENGTH = MIN_HEADER + MIN_OBJECT  # MXNet's CHECK_GE(label_width, 7)
#: the widest header or object this reads (MXNet sets none; a width past
#: this is damage, and bounds the arrays made from it)
MAX_WIDTH = 4096
#: the most values a detection label may hold (1 MiB; the listing's
#: 10,000 objects of 6 values are 60,002): a loader pads every label row
#: of a batch to the longest, so one record must not decide gigabytes
MAX_LENGTH = 1 << 18
#: one past the largest class number (float32 holds every whole number below it)
MAX_CLASS = 1 << 24
#: where a corner may lie: normalised corners are in [0, 1], and a little
#: outside from rounding or a careless tool is reported by ``rec verify
#: --boxes``; one outside this range is not a corner of the image
CORNER_RANGE = (-1.0, 2.0)


class DetLabel(NamedTuple):
    """A detection label split: ``header`` (its ``A`` values, ``A`` and
    ``B`` first) and ``objects`` (``(N, B)``, each row ``cls, xmin, ymin,
    xmax, ymax, extra...``), float32, every object as stored."""

    header: np.ndarray
    objects: np.ndarray

    @property
    def header_width(self) -> int:
        return len(self.header)

    @property
    def object_width(self) -> int:
        return int(self.objects.shape[1])


def _width(value: float) -> int | None:
    """A width field as MXNet's ``static_cast<int>`` reads it, or None when
    it is not a finite number in range."""
    if not math.isfinite(value) or not -1 < value < MAX_WIDTH + 1:
        return None
    return int(value)  # (truncates toward zero, as the cast does)


def problem(values: Sequence[float] | np.ndarray) -> str | None:
    """Why ``values`` is not a detection label MXNet would read, in words
    naming the rule, or None when it is one."""
    n = len(values)
    if n < MIN_LENGTH:
        return f"{n} label values; a detection label has at least {MIN_LENGTH} (A, B, one object)"
    if n > MAX_LENGTH:
        return f"{n:,} label values; a detection label has at most {MAX_LENGTH:,}"
    a, b = _width(float(values[0])), _width(float(values[1]))
    if a is None or a < MIN_HEADER:
        return f"header width A = {float(values[0]):g}; it must be at least {MIN_HEADER}"
    if b is None or b < MIN_OBJECT:
        return f"object width B = {float(values[1]):g}; it must be at least {MIN_OBJECT}"
    if a > n:
        return f"header width A = {a} but the label has only {n} values"
    if (n - a) % b:
        return (
            f"{n - a} values after the {a}-value header are not a whole number of {b}-value objects"
        )
    return _number_problem(np.asarray(values, np.float64), a, b)


def _number_problem(array: np.ndarray, a: int, b: int) -> str | None:
    """Why the numbers of a well-laid-out label cannot be used (module doc)."""
    finite = np.isfinite(array)
    if not finite.all():
        k = int(np.argmin(finite))
        return f"label value {k} is {array[k]:g}; every value must be a finite number"
    objects = array[a:].reshape(-1, b)
    cls = objects[:, 0]
    whole = (cls == np.floor(cls)) & (cls >= 0) & (cls < MAX_CLASS)
    whole |= (cls == -1) & ~kept(objects)
    if not whole.all():
        k = int(np.argmin(whole))
        return (
            f"object {k}'s class {cls[k]:g} is not a class number (a whole number from 0 to "
            f"{MAX_CLASS - 1:,})"
        )
    low, high = CORNER_RANGE
    corners = objects[:, 1:5]
    near = ((corners >= low) & (corners <= high)).all(axis=1)
    if not near.all():
        k = int(np.argmin(near))
        shown = ", ".join(f"{v:g}" for v in corners[k].tolist())
        return (
            f"object {k}'s corners ({shown}) are not normalised to the image (they belong in "
            "[0, 1]; pixels?)"
        )
    return None


def read_label(values: Sequence[float] | np.ndarray) -> DetLabel:
    """``values`` split into header and objects; ``ValueError`` naming the
    rule when it is not a detection label (:func:`problem`)."""
    why = problem(values)
    if why is not None:
        raise ValueError(why)
    array = np.asarray(values, np.float32)
    a, b = int(array[0]), int(array[1])
    return DetLabel(array[:a].copy(), array[a:].reshape(-1, b).copy())


def kept(objects: np.ndarray) -> np.ndarray:
    """Which objects MXNet keeps: a box that is not empty (``xmax > xmin``
    and ``ymax > ymin``; a NaN coordinate is empty)."""
    keep = np.greater(objects[:, 3], objects[:, 1]) & np.greater(objects[:, 4], objects[:, 2])
    return np.asarray(keep)


def outside(objects: np.ndarray) -> np.ndarray:
    """Which objects have a coordinate outside [0, 1] (or not a number)."""
    boxes = objects[:, 1:5]
    return np.asarray(~((boxes >= 0) & (boxes <= 1)).all(axis=1))


def make_label(
    objects: np.ndarray | Sequence[Sequence[float]], extra_header: Sequence[float] = ()
) -> np.ndarray:
    """The float32 label of ``objects`` (rows ``cls, xmin, ymin, xmax, ymax,
    extra...``, all of one width) after the header ``A, B, *extra_header``.
    An image with no object has a label of its header alone: MXNet's
    iterator refuses it (fewer than 7 values), so a listing leaves such
    images out unless asked to keep them."""
    rows = np.asarray(objects, np.float32)
    if rows.size == 0 and rows.ndim != 2:  # (no rows, and so no width: the narrowest)
        rows = rows.reshape(0, MIN_OBJECT)
    if rows.ndim != 2 or not MIN_OBJECT <= rows.shape[1] <= MAX_WIDTH:
        raise ValueError(f"objects must be rows of {MIN_OBJECT} to {MAX_WIDTH} values")
    header = [MIN_HEADER + len(extra_header), rows.shape[1], *extra_header]
    return np.concatenate([np.asarray(header, np.float32), rows.reshape(-1)])

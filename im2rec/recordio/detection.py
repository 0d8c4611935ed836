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

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .runs import runs

__all__ = [
    "CORNER_RANGE",
    "MAX_CLASS",
    "MAX_LENGTH",
    "MIN_HEADER",
    "MIN_LENGTH",
    "MIN_OBJECT",
    "DetLabel",
    "Faults",
    "Group",
    "Labels",
    "check",
    "claims_boxes",
    "headers_alone",
    "kept",
    "make_label",
    "outside",
    "problem",
    "problems",
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


class Labels(NamedTuple):
    """Many labels at once, in order: label ``i`` is ``values[starts[i] :
    starts[i] + counts[i]]`` (``starts`` rising, the labels not
    overlapping). ``values`` may be any float dtype: a record's float32
    labels, or the float64 a caller's numbers become."""

    values: np.ndarray
    starts: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, rows: Sequence[np.ndarray]) -> Labels:
        """The labels ``rows`` (float32 arrays), one after another."""
        counts = np.fromiter(map(len, rows), np.int64, len(rows))
        starts = np.zeros(len(rows), np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        values = np.concatenate(rows) if len(rows) else np.empty(0, np.float32)
        return cls(values.astype(np.float32, copy=False), starts, counts)


class Faults(NamedTuple):
    """What :func:`check` found of each label: ``code`` 0 for a detection
    label MXNet reads (else the first rule broken, :data:`_RULES`); ``at``
    the value (code 7) or object (8, 9) named; ``a`` and ``b`` the widths
    read (meaningful from code 5 on)."""

    code: np.ndarray
    at: np.ndarray
    a: np.ndarray
    b: np.ndarray


# the rules in the order they are checked: a label's code is the first broken
_SHORT, _LONG, _BAD_A, _BAD_B, _A_PAST, _RAGGED, _NOT_FINITE, _NOT_CLASS, _NOT_CORNER = range(1, 10)


def claims_boxes(head: Any, count: Any) -> Any:
    """Whether a label of ``count`` values whose first is ``head`` claims
    to be a detection label (long enough, its header width at least 2),
    so that a fault of the layout is reported rather than the values read
    as class numbers: a bool, or a bool array for arrays."""
    return (count >= MIN_LENGTH) & (head >= MIN_HEADER)


def _widths(values: np.ndarray) -> np.ndarray:
    """Width fields as MXNet's ``static_cast<int>`` reads them (truncated
    toward zero), -1 where one is not a finite number in range."""
    ok = np.isfinite(values) & (values > -1) & (values < MAX_WIDTH + 1)
    return np.where(ok, np.trunc(np.where(ok, values, 0)), -1).astype(np.int64)


def _layout(n: Any, a: Any, b: Any) -> tuple[tuple[int, Any], ...]:
    """The layout's rules, each ``(rule, broken)``, in the order checked:
    ``n`` values, widths ``a`` and ``b`` (ints, or int arrays)."""
    some_b = b + (b < 1) * (1 - b)  # (b, or 1 where b is no width: no division by 0)
    return (
        (_SHORT, n < MIN_LENGTH), (_LONG, n > MAX_LENGTH), (_BAD_A, a < MIN_HEADER),
        (_BAD_B, b < MIN_OBJECT), (_A_PAST, a > n), (_RAGGED, (n - a) % some_b != 0),
    )  # fmt: skip


def _inside(low: Any, high: Any, least: float, most: float) -> bool:
    """Whether columns whose smallest and largest values are ``low`` and
    ``high`` lie in [least, most] (NaN does not); False when they are not
    known (None)."""
    return low is not None and bool((low >= least).all() and (high <= most).all())


def _classes_ok(cls: np.ndarray, keep: np.ndarray, low: Any, high: Any) -> np.ndarray:
    """Class numbers: whole, from 0 below MAX_CLASS; -1 only on an empty box."""
    if _inside(low, high, 0, MAX_CLASS - 1) and np.array_equal(cls, np.floor(cls)):
        return np.ones(len(cls), bool)
    whole = (cls == np.floor(cls)) & (cls >= 0) & (cls < MAX_CLASS)
    return np.asarray(whole | ((cls == -1) & ~keep))


def _corners_ok(corners: np.ndarray, low: Any, high: Any) -> np.ndarray:
    least, most = CORNER_RANGE
    if _inside(low, high, least, most):
        return np.ones(len(corners), bool)
    return np.asarray(((corners >= least) & (corners <= most)).all(axis=1))


class Group(NamedTuple):
    """Objects of labels of one layout: row ``k`` of ``objects`` belongs to
    label ``owner[k]``; ``low`` and ``high`` are each column's smallest and
    largest value (NaN where one is NaN), for quick answers about them all,
    or None for a group of a few objects; ``kept`` is :func:`kept` of the
    objects. The objects of a large group are in column order (Fortran's:
    a column is contiguous, as the rules and the statistics read them)."""

    owner: np.ndarray
    objects: np.ndarray
    low: np.ndarray | None
    high: np.ndarray | None
    kept: np.ndarray


#: objects from which a group's column bounds are worked out (for fewer,
#: the rules are quicker asked of each object)
_BOUNDED = 256


def _bounds(objects: np.ndarray) -> tuple[Any, Any]:
    if not len(objects) or len(objects) < _BOUNDED:
        return None, None
    return objects.min(axis=0), objects.max(axis=0)


def _first_by_owner(owner: np.ndarray, where: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(owners, first position)`` of the rising positions ``where``
    owned by ``owner`` (one entry an owner)."""
    owners, first = np.unique(owner, return_index=True)
    return owners, where[first]


def check(labels: Labels) -> tuple[Faults, list[Group]]:
    """Every label checked against the layout's rules at once (the rules'
    one statement; :func:`problem` is a batch of one), and the objects of
    the labels whose layout holds, a group per ``(A, B)``: ``(owner,
    objects)``, row ``k`` of ``objects`` belonging to label ``owner[k]``
    (whose code may still say a number is wrong)."""
    values, starts, n = labels
    size = len(values)
    last = max(size - 1, 0)
    pad = values if size else np.zeros(1, values.dtype)
    a, b = _widths(pad[np.minimum(np.concatenate((starts, starts + 1)), last)]).reshape(2, -1)
    code = np.zeros(len(n), np.int8)
    if len(n) == 1:  # (a label alone, as the loaders check them: in ints, quicker)
        code[0] = next((rule for rule, no in _layout(int(n[0]), int(a[0]), int(b[0])) if no), 0)
    else:
        for rule, where in reversed(_layout(n, a, b)):  # (the last written: the first broken)
            code[where] = rule
    at = np.zeros(len(n), np.int64)
    laid = code == 0
    finite = np.isfinite(values)
    if not finite.all():
        wrong = np.flatnonzero(~finite)
        owner = np.searchsorted(starts, wrong, "right") - 1
        wrong, owner = wrong[owner >= 0], owner[owner >= 0]  # (none before the first label)
        owners, first = _first_by_owner(owner, wrong)
        hit = laid[owners] & (first < starts[owners] + n[owners])
        code[owners[hit]] = _NOT_FINITE
        at[owners[hit]] = first[hit] - starts[owners[hit]]
    groups = []
    key = a * (MAX_WIDTH + 2) + b  # (a, b) as one number
    layouts = key[laid]
    one = len(layouts) and (layouts == layouts[0]).all()  # (the usual: one layout)
    for pair in layouts[:1].tolist() if one else np.unique(layouts).tolist():
        pa, pb = divmod(pair, MAX_WIDTH + 2)
        chosen = np.flatnonzero(laid) if one else np.flatnonzero(laid & (key == pair))
        rows = (n[chosen] - pa) // pb
        if len(chosen) == 1:  # (a label alone: its objects are a slice)
            start = int(starts[chosen[0]]) + pa
            objects = values[start : start + int(rows[0]) * pb].reshape(-1, pb)
        else:
            objects = runs(values, starts[chosen] + pa, rows * pb)[0].reshape(-1, pb)
        if len(objects) >= _BOUNDED:  # (each column's work in one contiguous run)
            objects = np.asfortranarray(objects)
        owner = np.repeat(chosen, rows)
        low, high = _bounds(objects)
        keep = kept(objects)
        groups.append(Group(owner, objects, low, high, keep))
        fine = code[owner] == 0 if code.any() else True
        some = low is not None
        classes = _classes_ok(objects[:, 0], keep, low[0] if some else None,
                              high[0] if some else None)  # fmt: skip
        corners = _corners_ok(objects[:, 1:5], low[1:5] if some else None,
                              high[1:5] if some else None)  # fmt: skip
        for rule, ok in ((_NOT_CLASS, classes), (_NOT_CORNER, corners)):
            if ok.all():
                continue
            bad = np.flatnonzero(~ok & fine)
            if len(bad):
                owners, first = _first_by_owner(owner[bad], bad)
                code[owners] = rule
                at[owners] = first - _first_row(owner, owners)
                fine = code[owner] == 0
    return Faults(code, at, a, b), groups


def _first_row(owner: np.ndarray, owners: np.ndarray) -> np.ndarray:
    """The row where each of ``owners``' objects start in ``owner`` (rising)."""
    return np.searchsorted(owner, owners, "left")


def _say(code: int, at: int, values: np.ndarray, a: int, b: int) -> str:
    """The words for a label's fault (:func:`check`), naming its values."""
    n = len(values)
    if code == _SHORT:
        return f"{n} label values; a detection label has at least {MIN_LENGTH} (A, B, one object)"
    if code == _LONG:
        return f"{n:,} label values; a detection label has at most {MAX_LENGTH:,}"
    if code == _BAD_A:
        return f"header width A = {float(values[0]):g}; it must be at least {MIN_HEADER}"
    if code == _BAD_B:
        return f"object width B = {float(values[1]):g}; it must be at least {MIN_OBJECT}"
    if code == _A_PAST:
        return f"header width A = {a} but the label has only {n} values"
    if code == _RAGGED:
        return (
            f"{n - a} values after the {a}-value header are not a whole number of {b}-value objects"
        )
    if code == _NOT_FINITE:
        return f"label value {at} is {float(values[at]):g}; every value must be a finite number"
    row = values[a + at * b : a + at * b + b]
    if code == _NOT_CLASS:
        return (
            f"object {at}'s class {float(row[0]):g} is not a class number (a whole number from 0 "
            f"to {MAX_CLASS - 1:,})"
        )
    shown = ", ".join(f"{v:g}" for v in row[1:5].tolist())
    return (
        f"object {at}'s corners ({shown}) are not normalised to the image (they belong in "
        "[0, 1]; pixels?)"
    )


def problems(labels: Labels, faults: Faults, which: np.ndarray) -> list[str]:
    """The words for the faults of labels ``which`` (:func:`check`)."""
    out = []
    for i in which.tolist():
        start = int(labels.starts[i])
        values = labels.values[start : start + int(labels.counts[i])]
        out.append(_say(int(faults.code[i]), int(faults.at[i]), values,
                        int(faults.a[i]), int(faults.b[i])))  # fmt: skip
    return out


def problem(values: Sequence[float] | np.ndarray) -> str | None:
    """Why ``values`` is not a detection label MXNet would read, in words
    naming the rule, or None when it is one."""
    one, faults = _checked(values)
    if not faults.code[0]:
        return None
    return problems(one, faults, np.zeros(1, np.int64))[0]


def _checked(values: Sequence[float] | np.ndarray) -> tuple[Labels, Faults]:
    """``values`` as a batch of one label, and :func:`check`'s faults of it."""
    array = np.asarray(values, np.float64).reshape(-1)
    one = Labels(array, np.zeros(1, np.int64), np.array([len(array)], np.int64))
    return one, check(one)[0]


def headers_alone(labels: Labels, faults: Faults) -> np.ndarray:
    """Which of ``labels`` (:func:`check`'s ``faults`` of them) are a header
    alone: ``A`` finite values, widths the layout allows, no object; what
    ``rec list --keep-empty`` writes for an image with no object. MXNet's
    iterator refuses it (fewer than 7 values); GluonCV's reader and
    torchvision's models take it as an image of no objects."""
    alone = (labels.counts == faults.a) & (faults.a >= MIN_HEADER) & (faults.b >= MIN_OBJECT)
    if alone.any():  # (and every value finite: counted on arrays, not a label at a time)
        which = np.flatnonzero(alone)
        first, last = labels.starts[which], labels.starts[which] + labels.counts[which]
        wrong = np.concatenate(([0], np.cumsum(~np.isfinite(labels.values))))
        alone[which] = wrong[last] == wrong[first]
    return np.asarray(alone)


def read_label(values: Sequence[float] | np.ndarray, *, alone: bool = False) -> DetLabel:
    """``values`` split into header and objects; ``ValueError`` naming the
    rule when it is not a detection label (:func:`problem`). With ``alone``,
    a header alone (:func:`headers_alone`) reads as a label of no objects."""
    one, faults = _checked(values)
    if faults.code[0] and not (alone and headers_alone(one, faults)[0]):
        raise ValueError(problems(one, faults, np.zeros(1, np.int64))[0])
    array = np.asarray(values, np.float32)
    a, b = int(array[0]), int(array[1])
    return DetLabel(array[:a].copy(), array[a:].reshape(-1, b).copy())


def kept(objects: np.ndarray) -> np.ndarray:
    """Which objects MXNet keeps: a box that is not empty (``xmax > xmin``
    and ``ymax > ymin``; a NaN coordinate is empty)."""
    keep = np.greater(objects[:, 3], objects[:, 1]) & np.greater(objects[:, 4], objects[:, 2])
    return np.asarray(keep)


def outside(objects: np.ndarray, low: Any = None, high: Any = None) -> np.ndarray:
    """Which objects have a coordinate outside [0, 1] (or not a number);
    ``low`` and ``high``: each column's bounds, when known (:class:`Group`)."""
    boxes = objects[:, 1:5]
    if low is not None and _inside(low[1:5], high[1:5], 0, 1):
        return np.zeros(len(objects), bool)
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

"""Counts of a bounded number of distinct values, a batch at a time: what
``rec info`` counts of labels, label widths, classes and objects per image,
in memory that stays small however many distinct values a file holds."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Tally"]

_SMALL = 1 << 16  # whole numbers below this are counted with bincount


class Tally:
    """How often each value came, for at most ``limit`` distinct values: a
    value is counted when it is counted already or fewer than ``limit``
    are; the times of the others are summed in :attr:`left`. Values come in
    batches (:meth:`add`), each batch's in rising order; NaN is one value,
    and -0.0 is 0.0 (whichever a batch held first)."""

    def __init__(self, limit: int, dtype: Any = np.int64) -> None:
        self.limit = limit
        self.values = np.empty(0, dtype)  # (rising)
        self.times = np.empty(0, np.int64)
        self.left = 0

    def add(self, values: np.ndarray, times: np.ndarray) -> int:
        """Count ``values`` (distinct, rising; NaN last) ``times`` each;
        returns the times left uncounted."""
        values = np.asarray(values, self.values.dtype)
        if values.dtype.kind == "f":
            values = values + values.dtype.type(0)  # (-0.0 + 0.0 is 0.0: one zero)
        times = np.asarray(times, np.int64)
        at = np.searchsorted(self.values, values)
        if len(at) and at[-1] < len(self.values):  # (the usual: every value counted already)
            if (self.values[at] == values).all():
                self.times[at] += times
                return 0
        known = at < len(self.values)
        same = self.values[at[known]]
        equal = same == values[known]
        if values.dtype.kind == "f":
            equal |= np.isnan(same) & np.isnan(values[known])
        known[known] = equal
        self.times[at[known]] += times[known]
        new = np.flatnonzero(~known)
        taken = new[: max(self.limit - len(self.values), 0)]
        left = int(times[new[len(taken) :]].sum())
        if len(taken):
            values = np.concatenate((self.values, values[taken]))
            order = np.argsort(values, kind="stable")
            self.values = values[order]
            self.times = np.concatenate((self.times, times[taken]))[order]
        self.left += left
        return left

    def add_all(self, values: np.ndarray) -> int:
        """Count every value of ``values`` (any order); the times left uncounted."""
        if not len(values):
            return 0
        if values.dtype.kind in "iu" and 0 <= values.min() and values.max() < _SMALL:
            times = np.bincount(values)  # (small whole numbers: counted in place, no sort)
            found = np.flatnonzero(times)
            return self.add(found, times[found])
        found, times = np.unique(values, return_counts=True)
        return self.add(found, times)

    def counts(self) -> dict[Any, int]:
        """Value (a Python number) to times, in rising order."""
        return dict(zip(self.values.tolist(), self.times.tolist(), strict=True))

"""Runs of values copied out of an array, one after another: the labels of
a block's records (:meth:`~im2rec.recordio.blocks.Block.labels`), the
objects of many detection labels (:func:`~im2rec.recordio.detection.check`).

4-byte values are copied by ``_words.gather`` (a ``memcpy`` a run) where
the C extension is built; anything else by numpy's indexing (the same
runs: tests check one against the other).
"""

from __future__ import annotations

import numpy as np

from .. import native

__all__ = ["runs"]

_gather = getattr(native.load("words"), "gather", None)


def runs(
    values: np.ndarray, first: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``values[first[i] : first[i] + counts[i]]`` for each ``i``, one after
    another (of ``values``' dtype), and where each run starts in them. The
    runs must lie inside ``values`` (a 1-D array); ``counts`` not negative."""
    first, counts = first.astype(np.int64), counts.astype(np.int64)
    starts = np.cumsum(counts) - counts
    total = int(counts.sum())
    if _gather is not None and values.itemsize == 4 and values.flags.c_contiguous:
        out = np.empty(total, values.dtype)
        _gather(values, first * 4, counts, out)
        return out, starts
    at = np.repeat(first - starts, counts) + np.arange(total)
    return values[at], starts

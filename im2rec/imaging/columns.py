"""Arithmetic written once for one sample or for a batch.

A planning rule (where a crop is decoded, where a random crop lands) is
written as a function over ``ops`` and runs either on Python numbers
(:data:`SCALARS`: one sample, microseconds) or on numpy columns, one value
per sample (:data:`ARRAYS`: a batch, for the C decoder). Both give the same
numbers: Python's floats and numpy's float64 round alike, and the integer
operations (floor division, truncation) agree on the whole numbers used
here; the property tests compare both forms.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["ARRAYS", "SCALARS"]

#: the largest count a rule's ``count`` gives (far past any image side)
_MOST = 1 << 62


class _Scalars:
    """The operations on Python numbers (one sample)."""

    ceil, floor, sqrt = staticmethod(math.ceil), staticmethod(math.floor), staticmethod(math.sqrt)
    trunc = int
    maximum, minimum = staticmethod(max), staticmethod(min)

    @staticmethod
    def where(test: Any, yes: Any, no: Any) -> Any:
        return yes if test else no

    @staticmethod
    def either(a: Any, b: Any) -> Any:
        return a or b

    @staticmethod
    def every(*tests: Any) -> bool:
        return all(tests)

    @staticmethod
    def negate(test: Any) -> bool:
        return not test

    @staticmethod
    def done(tests: Any) -> bool:
        return bool(tests)

    @staticmethod
    def count(value: Any) -> int:
        """A whole number from 1 to 2**62 (a divisor)."""
        return min(max(int(value), 1), _MOST)

    @staticmethod
    def like(value: Any, fill: Any) -> Any:
        return fill

    @staticmethod
    def fill(
        missing: Any, columns: Sequence[Any], make: Callable[..., Sequence[Any]], *inputs: Any
    ) -> Sequence[Any]:
        """``make(*inputs)`` where ``missing``, else ``columns``."""
        return make(*inputs) if missing else columns

    @staticmethod
    def first_fit(
        attempt: Callable[..., Sequence[Any]], width: Any, height: Any, draws: Sequence[float],
        tries: int,
    ) -> tuple[tuple[Any, Any, Any, Any], bool]:  # fmt: skip
        """The first of ``tries`` attempts (each ``attempt(width, height,
        *its draws)`` -> ``(x, y, w, h, fits)``, its draws the next equal
        share of ``draws``) that fits: its box ``(x, y, x + w, y + h)``, and
        True; zeros and False where none does."""
        step = len(draws) // tries
        for t in range(tries):
            x, y, w, h, fits = attempt(width, height, *draws[step * t : step * (t + 1)])
            if fits:
                return (x, y, x + w, y + h), True
        return (0, 0, 0, 0), False


class _Arrays:
    """The operations on numpy columns (one value per sample)."""

    ceil, floor, sqrt = staticmethod(np.ceil), staticmethod(np.floor), staticmethod(np.sqrt)
    trunc = staticmethod(np.trunc)
    maximum, minimum = staticmethod(np.maximum), staticmethod(np.minimum)
    where, either = staticmethod(np.where), staticmethod(np.logical_or)
    negate = staticmethod(np.logical_not)

    @staticmethod
    def every(*tests: Any) -> Any:
        return np.logical_and.reduce(np.broadcast_arrays(*tests))

    @staticmethod
    def done(tests: Any) -> bool:
        return bool(np.all(tests))

    @staticmethod
    def count(value: Any) -> Any:
        return np.clip(value, 1, _MOST).astype(np.int64)

    @staticmethod
    def like(value: Any, fill: Any) -> Any:
        return np.full(np.shape(value), fill)

    @staticmethod
    def fill(
        missing: Any, columns: Sequence[Any], make: Callable[..., Sequence[Any]], *inputs: Any
    ) -> Sequence[Any]:
        """``make`` on each sample's inputs where ``missing`` (a few: a
        loop), else ``columns``."""
        out = [np.array(column, np.float64) for column in columns]
        for i in np.flatnonzero(missing):
            for column, value in zip(out, make(*(a[i].item() for a in inputs)), strict=True):
                column[i] = value
        return out

    @staticmethod
    def first_fit(
        attempt: Callable[..., Sequence[Any]], width: Any, height: Any, draws: Any, tries: int
    ) -> tuple[tuple[Any, Any, Any, Any], Any]:
        """The scalar form's first fitting attempt for each row, every
        attempt computed at once: ``draws`` ``(n, tries * k)``."""
        d = np.asarray(draws, np.float64).reshape(len(draws), tries, -1)
        w0, h0 = np.asarray(width)[:, None], np.asarray(height)[:, None]
        x, y, w, h, fits = attempt(w0, h0, *np.moveaxis(d, 2, 0))
        found = fits.any(axis=1)
        rows, first = np.arange(len(d)), fits.argmax(axis=1)
        picked = [np.where(found, v[rows, first], 0.0) for v in (x, y, w, h)]
        return (picked[0], picked[1], picked[0] + picked[2], picked[1] + picked[3]), found


SCALARS, ARRAYS = _Scalars(), _Arrays()

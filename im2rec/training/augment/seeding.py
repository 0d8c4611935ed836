"""The generator a process draws its augmentation from when none is given."""

from __future__ import annotations

import os
import random

import numpy as np

__all__ = ["process_rng"]

_RNG: tuple[int, np.random.Generator] | None = None


def process_rng() -> np.random.Generator:
    """This process's generator for :meth:`Augmenter.__call__`, seeded from
    :mod:`random` on first use (torch's DataLoader seeds that differently in
    each worker); a forked child makes its own."""
    global _RNG
    if _RNG is None or _RNG[0] != os.getpid():
        _RNG = (os.getpid(), np.random.default_rng(random.getrandbits(64)))
    return _RNG[1]

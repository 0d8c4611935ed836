"""The generator a process draws augmentation from when none is given: one
per process, seeded from :mod:`random` (which torch's DataLoader seeds in
each worker), and a forked child's its own."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from im2rec.training.augment import seeding
from im2rec.training.augment.seeding import process_rng


def test_one_generator_a_process_seeded_from_random(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seeding, "_RNG", None)
    state = random.getstate()
    try:
        random.seed(5)
        expected = np.random.default_rng(random.getrandbits(64)).integers(1 << 30)
        random.seed(5)
        assert process_rng().integers(1 << 30) == expected
    finally:
        random.setstate(state)
    assert process_rng() is process_rng()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own() -> None:
    parent = process_rng()
    pid = os.fork()
    if pid == 0:  # (the parent's generator is in the child's memory too: not to be shared)
        os._exit(0 if process_rng() is not parent and process_rng() is process_rng() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

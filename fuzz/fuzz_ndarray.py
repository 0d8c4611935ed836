"""MXNet NDArray files (``augment.ndarray_file.load_ndarrays``, the mean
image): any bytes. A DatasetError, never another exception, and never more
memory than the file's size allows."""

from __future__ import annotations

import atheris
from _harness import run, scratch_file

with atheris.instrument_imports():
    from im2rec.errors import DatasetError
    from im2rec.training.augment.ndarray_file import load_ndarrays


def test_one(data: bytes) -> None:
    try:
        for _, array in load_ndarrays(scratch_file(data, "mean.bin")):
            assert array.nbytes <= len(data)
    except DatasetError:
        pass


if __name__ == "__main__":
    run(test_one)

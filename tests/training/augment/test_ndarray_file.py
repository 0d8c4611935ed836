"""MXNet's NDArray list files without MXNet: round trips, and sizes in a
hostile file refused before anything is allocated."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import numpy as np
import pytest

from im2rec.errors import DatasetError
from im2rec.training.augment.ndarray_file import MAX_ARRAYS, load_ndarrays, save_ndarrays


def refused(tmp_path: Path, data: bytes, match: str) -> None:
    (tmp_path / "bad.nd").write_bytes(data)
    with pytest.raises(DatasetError, match=match):
        load_ndarrays(tmp_path / "bad.nd")


def test_ndarray_file_round_trip_and_hostile_sizes(tmp_path: Path) -> None:
    arrays = [("mean_img", np.arange(24, dtype=np.float32).reshape(2, 3, 4)),
              ("x", np.array([1, 2], np.int64))]  # fmt: skip
    save_ndarrays(tmp_path / "a.nd", arrays)
    loaded = load_ndarrays(tmp_path / "a.nd")
    assert [n for n, _ in loaded] == ["mean_img", "x"]
    for (_, want), (_, got) in zip(arrays, loaded, strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    data = (tmp_path / "a.nd").read_bytes()
    refused(tmp_path, data[:60], "not a whole MXNet NDArray file")
    huge = bytearray(data)
    huge[16:24] = (1 << 60).to_bytes(8, "little")  # the array count
    refused(tmp_path, bytes(huge), "holds at most 1,024")
    huge[16:24] = (1000).to_bytes(8, "little")  # few enough, but more than the bytes hold
    refused(tmp_path, bytes(huge), "more than its")
    wrap = bytearray(data)  # 2**32 * 2**32 * 4: a product that wraps to 0 in 64 bits
    wrap[36:44] = wrap[44:52] = (1 << 32).to_bytes(8, "little")
    refused(tmp_path, bytes(wrap), "ends inside array 0's values")
    dims = bytearray(data)
    dims[36:44] = (1 << 40).to_bytes(8, "little")  # the first dimension
    refused(tmp_path, bytes(dims), "ends inside array 0's values")


def test_a_mean_image_file_of_millions_of_empty_arrays_is_refused_at_once(tmp_path: Path) -> None:
    # 40 MB of 4-byte "none" arrays: each became a Python object (1.3 GB)
    count = 10_000_000
    path = tmp_path / "mean.bin"
    path.write_bytes(struct.pack("<QQQ", 0x112, 0, count) + bytes(4 * count) + bytes(8))
    t0 = time.perf_counter()
    with pytest.raises(DatasetError, match=f"claims 10,000,000 arrays.*at most {MAX_ARRAYS:,}"):
        load_ndarrays(path)
    assert time.perf_counter() - t0 < 5


def test_a_mean_image_file_still_round_trips(tmp_path: Path) -> None:
    image = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    save_ndarrays(tmp_path / "mean.bin", [("mean_img", image)])
    [(name, back)] = load_ndarrays(tmp_path / "mean.bin")
    assert name == "mean_img" and np.array_equal(back, image)

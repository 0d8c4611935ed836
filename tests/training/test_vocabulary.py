"""ImageRecordIter's vocabulary: its batch objects answer as MXNet's do, and
its rules for which records an iterator reads (shuffled chunks visit byte
ranges in a new order each epoch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from im2rec import ImageRecordInt8Iter, ImageRecordIter, ImageRecordUInt8Iter
from im2rec.errors import ConfigError

from .augment.test_geometry import SRC, write_rec


def test_batches_answer_asnumpy_and_the_typed_iterators(tmp_path: Path) -> None:
    rec = write_rec(tmp_path / "b.rec", [SRC] * 6)
    kw: dict[str, Any] = dict(path_imgrec=str(rec), data_shape=(3, 12, 12), batch_size=3,
                              preprocess_threads=1, verbose=False, mean_r=100)  # fmt: skip
    with ImageRecordIter(**kw) as it:
        batch = it.next()
        data = batch.data[0]
        assert isinstance(data.asnumpy(), np.ndarray) and type(data.asnumpy()) is np.ndarray
        assert data.asnumpy().shape == (3, 3, 12, 12) and data.dtype == np.float32
        assert data.astype(np.uint8).dtype == np.uint8
        assert batch.label[0].asnumpy().tolist() == [0.0, 1.0, 2.0]
        assert it.provide_data[0].shape == (3, 3, 12, 12)
    with ImageRecordUInt8Iter(**kw) as it:
        assert it.next().data[0].dtype == np.uint8
    with ImageRecordInt8Iter(**kw) as it:
        out = it.next().data[0]
        assert out.dtype == np.int8
        want = np.clip(SRC[2:14, 4:16, 0].astype(int) - 100, -128, 127)
        np.testing.assert_array_equal(out[0, 0], want)
    with pytest.raises(ConfigError, match="makes uint8 batches"):
        ImageRecordUInt8Iter(**kw, dtype="float32")


def test_shuffle_chunks_visit_byte_ranges_in_a_new_order_each_epoch(tmp_path: Path) -> None:
    big = [np.random.default_rng(i).integers(0, 256, (300, 300, 3), dtype=np.uint8)
           for i in range(12)]  # fmt: skip
    rec = write_rec(tmp_path / "c.rec", big)  # ~270 kB each: a 1 MB chunk holds ~3
    kw: dict[str, Any] = dict(path_imgrec=str(rec), data_shape=(3, 8, 8), batch_size=12,
                              preprocess_threads=1, verbose=False, shuffle_chunk_size=1,
                              shuffle_chunk_seed=5, dtype="uint8")  # fmt: skip
    with ImageRecordIter(**kw) as it:
        orders = []
        for _ in range(3):
            orders.append([int(v) for v in it.next().index])
            it.reset()
    ids = [[int(v) for v in order] for order in orders]
    for order in orders:  # records of a chunk stay together and in file order
        runs = np.split(np.array(order), np.where(np.diff(order) != 1)[0] + 1)
        assert len(runs) > 1 and sorted(sum((r.tolist() for r in runs), [])) == list(range(12))
    assert len({tuple(o) for o in ids}) > 1

"""Fixtures the tests of formats share."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.recordio.framing import MAGIC_BYTES

from .test_webdataset import image


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """Every kind of record a .rec holds: JPEG and PNG, whole and fractional
    labels, several labels, no payload, a payload that is no image and holds
    the magic word (a split record), ids that repeat and go back."""
    path = tmp_path / "mixed.rec"
    with IndexedRecordWriter(path) as w:
        for i in range(12):
            w.write_key(i, pack((0, float(i % 3), i, 0), image("JPEG", i)))
        w.write_key(12, pack((0, 0.5, 12, 7), image("PNG", 12)))
        w.write_key(13, pack((0, [1.0, 2.5, -1.0], 13, 0), image("JPEG", 13)))
        w.write_key(14, pack((0, [3.0, 4.0], 0, 0), b""))  # id 0 again, no image
        w.write_key(15, pack((0, 2.0, 15, 0), b"abcd" + MAGIC_BYTES + b"xyz" * 5))
        w.write_key(16, pack((0, 1.0, 15, 0), image("JPEG", 16)))  # the same id twice
    return path

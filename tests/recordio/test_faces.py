"""Which record of a face layout is its header record: two whole labels, no
image, and a range of identity records that fits the file."""

from __future__ import annotations

import numpy as np
import pytest

from im2rec.recordio.faces import face_header
from im2rec.recordio.header import IRHeader


def header(flag: int, *label: float) -> IRHeader:
    return IRHeader(flag, np.array(label, dtype=np.float32), 0, 0)


def test_the_header_record_gives_its_identity_range() -> None:
    assert face_header(header(2, 900, 1000), b"", 1000) == (900, 1000)


@pytest.mark.parametrize(
    ("record", "payload", "records"),
    [
        (header(2, 900, 1000), b"\xff\xd8", 1000),  # an image: a sample, not the header
        (header(3, 900, 1000, 1), b"", 1000),  # three labels
        (header(2, 900.5, 1000), b"", 1000),  # not whole
        (header(2, 900, 1001), b"", 1000),  # past the file's records
        (header(2, 1, 10), b"", 1000),  # the range starts at the header itself
        (header(2, 20, 10), b"", 1000),  # backwards
    ],
)
def test_anything_else_is_not_a_header(record: IRHeader, payload: bytes, records: int) -> None:
    assert face_header(record, payload, records) is None

"""A batch's records read at once for the C decoder (recordio/spans.py):
exactly the whole single-label records from the first, with their labels,
ids and images as the per-record path reads them, stopping at the first
span that is anything else."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from im2rec.recordio import IndexedRecordWriter, pack, unpack
from im2rec.recordio.reader import IndexedRecordReader
from im2rec.recordio.spans import read_singles


def write(path: Path, records: list[tuple[Any, bytes]]) -> tuple[np.ndarray, np.ndarray]:
    """The .rec of (label, image) records; each record's offset and stop."""
    with IndexedRecordWriter(path) as w:
        for key, (label, image) in enumerate(records):
            w.write_key(key, pack((0, label, key * 7 + 2**40, 0), image))
    offsets = np.asarray(IndexedRecordReader(path).index.offsets, np.int64)
    stops = np.append(offsets[1:], path.stat().st_size)
    return offsets, stops


def read(path: Path, offsets: np.ndarray, stops: np.ndarray, limit: int = 1 << 20,
         classes: bool = False) -> Any:  # fmt: skip
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_singles(fd, offsets, stops, limit, classes)
    finally:
        os.close(fd)


labels_ = st.one_of(
    st.integers(0, 1000).map(float),
    st.floats(-1e6, 1e6, width=32),
    st.lists(st.integers(0, 9).map(float), min_size=2, max_size=3),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    records=st.lists(st.tuples(labels_, st.binary(max_size=70)), min_size=1, max_size=12),
    classes=st.booleans(),
)
def test_it_reads_what_the_per_record_path_reads(
    tmp_path: Path, records: list[tuple[Any, bytes]], classes: bool
) -> None:
    path = tmp_path / "any.rec"
    offsets, stops = write(path, records)
    got = read(path, offsets, stops, classes=classes)
    want = 0  # the whole single-label records from the first (class indices with classes)
    for label, _ in records:
        if isinstance(label, list) or (classes and not (label >= 0 and label.is_integer())):
            break
        want += 1
    assert got.taken == want
    reader = IndexedRecordReader(path)
    for j in range(got.taken):
        header, image = unpack(reader.read_span(int(offsets[j]), int(stops[j])))
        start, n = int(got.starts[j]), int(got.lengths[j])
        assert bytes(got.data[start : start + n]) == image
        assert got.labels[j] == np.float32(header.label) and got.ids[j] == header.id


def test_it_stops_at_a_span_it_cannot_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "a.rec"
    offsets, stops = write(path, [(float(i), bytes(40 + i)) for i in range(4)])
    assert read(path, offsets, stops).taken == 4
    for bad_offsets, bad_stops, limit, count in (
        (offsets, stops, 40, 0),  # past the span limit
        (np.append(offsets[:2], -8), stops[:3], 1 << 20, 2),  # a negative offset
        (offsets[:2], np.array([stops[0], stops[1] + 4]), 1 << 20, 1),  # two records' worth
        (offsets[:2], np.array([stops[0], stops[1] - 4]), 1 << 20, 1),  # part of one
        (offsets[:2], offsets[:2] + 8, 1 << 20, 0),  # shorter than a header
        (offsets[3:] + 4, stops[3:] + 4, 1 << 20, 0),  # not at a record (and past the end)
        (offsets[3:], stops[3:] + 10**12, 1 << 62, 0),  # past the file's end
    ):
        assert read(path, bad_offsets, bad_stops, limit).taken == count


def test_an_empty_batch_and_a_closed_file(tmp_path: Path) -> None:
    path = tmp_path / "a.rec"
    offsets, stops = write(path, [(1.0, b"x" * 9)])
    assert read(path, offsets[:0], stops[:0]).taken == 0
    got = read_singles(-1, offsets, stops, 1 << 20, False)  # (EBADF: not read)
    assert got.taken == 0


def test_a_split_record_is_left_to_the_per_record_path(tmp_path: Path) -> None:
    # an image holding the magic word at an aligned offset is written in parts
    magic = (0xCED7230A).to_bytes(4, "little")
    path = tmp_path / "a.rec"
    offsets, stops = write(path, [(0.0, b"abcd"), (1.0, b"\0" * 8 + magic + b"\0" * 4)])
    assert read(path, offsets, stops).taken == 1


@pytest.mark.parametrize("label", [float("nan"), float("inf"), -1.0, 2.0**53, 0.5])
def test_labels_that_are_not_class_indices_stop_it_with_classes(
    tmp_path: Path, label: float
) -> None:
    path = tmp_path / "a.rec"
    offsets, stops = write(path, [(3.0, b"a"), (label, b"b")])
    assert read(path, offsets, stops, classes=True).taken == 1
    assert read(path, offsets, stops, classes=False).taken == 2

"""Records read in chunks a thread ahead (``rec export --to parquet``'s
reader): the same offsets and payloads as a record-by-record walk, for any
chunk size, and the same errors, naming the byte of the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from im2rec.errors import RecordFormatError, TruncatedRecordError
from im2rec.recordio import RecordReader, RecordWriter, sequential
from im2rec.recordio.framing import MAGIC_BYTES

pieces = st.sampled_from([b"", b"ab", MAGIC_BYTES, b"\x00" * 3, bytes(range(7))])
records = st.lists(
    st.one_of(st.binary(max_size=300), st.lists(pieces, max_size=12).map(b"".join)),
    max_size=25,
)


def _walk(path: Path) -> list[tuple[int, bytes]]:
    reader = RecordReader(path)
    return [(head, bytes(reader.read_at(head))) for head, _ in reader.heads()]


@given(data=records, chunk=st.integers(1, 400))
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_chunks_give_what_a_walk_gives(tmp_path: Path, data: list[bytes], chunk: int) -> None:
    # records of every size against chunks smaller and larger than them,
    # split records (magic words inside) among them
    path = tmp_path / "s.rec"
    with RecordWriter(path) as w:
        for record in data:
            w.write(record)
    got = [(head, bytes(payload)) for head, payload in
           sequential.sequential_records(RecordReader(path), chunk)]  # fmt: skip
    assert got == _walk(path)
    assert [payload for _, payload in got] == data


@pytest.mark.parametrize("damage", ["cut", "magic"])
def test_a_damaged_file_fails_as_a_walk_fails(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "d.rec"
    with RecordWriter(path) as w:
        for i in range(40):
            w.write(bytes([i]) * (100 + 37 * i))
    heads = [head for head, _ in RecordReader(path).heads()]
    data = bytearray(path.read_bytes())
    if damage == "cut":
        data = data[: heads[30] + 50]
    else:
        data[heads[17] : heads[17] + 4] = b"\x00\x00\x00\x00"
    path.write_bytes(bytes(data))
    with pytest.raises(RecordFormatError) as walked:
        list(RecordReader(path))
    for chunk in (64, 1000, 1 << 20):
        with pytest.raises(RecordFormatError) as chunked:
            list(sequential.sequential_records(RecordReader(path), chunk))
        assert str(chunked.value) == str(walked.value)
        assert f"{heads[30 if damage == 'cut' else 17]:,}" in str(chunked.value)


def test_a_file_cut_while_it_is_read_is_named(tmp_path: Path) -> None:
    # cut between its open and its read, at a record's end: the chunk comes
    # short, which a walk of the records alone would not notice
    path = tmp_path / "c.rec"
    with RecordWriter(path) as w:
        for i in range(10):
            w.write(bytes([i]) * 1000)
    heads = [head for head, _ in RecordReader(path).heads()]
    reader = RecordReader(path)
    reader.mapping()  # (opened: its size is taken)
    os.truncate(path, heads[6])
    with pytest.raises(TruncatedRecordError, match="another program truncated"):
        list(sequential.sequential_records(reader, 4096))

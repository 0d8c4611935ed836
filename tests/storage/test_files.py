"""Opening input files: only regular files, never waiting on a FIFO or a
device; ranges of files that are checked against the file when they are
copied; bounded reads of small files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from im2rec.errors import DatasetError, Im2RecError, TruncatedRecordError
from im2rec.recordio import (
    RecordWriter,
)
from im2rec.storage.files import split_lines

from ..writing import ranges_of


def test_a_range_of_a_file_that_shrank_is_an_error(tmp_path: Path) -> None:
    (whole,) = ranges_of(tmp_path, [b"x" * 5000])
    os.truncate(whole.name, 3000)
    with pytest.raises(TruncatedRecordError, match="ends at byte 3,000.*truncated or rewrote"):
        bytes(whole)
    with pytest.raises(TruncatedRecordError, match="ends at byte 3,000"), \
            RecordWriter(tmp_path / "out.rec") as w:  # fmt: skip
        w.write(b"head", whole, split=False)
    assert not (tmp_path / "out.rec").exists()


def test_small_local_files_are_bounded_before_they_are_read(tmp_path: Path) -> None:
    from im2rec.storage import read_bytes

    small = tmp_path / "small"
    small.write_bytes(b"x" * 100)
    assert read_bytes(small, limit=100) == b"x" * 100
    with pytest.raises(DatasetError, match="small: 100 bytes, more than 99 expected"):
        read_bytes(small, limit=99)
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "none")
    with pytest.raises(Im2RecError, match="is a folder"):
        read_bytes(tmp_path)


#: Every character Python's str.splitlines cuts at; only \n and \r (and
#: \r\n) end a line of a list, a class map or a report.
SEPARATORS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def test_split_lines_cuts_only_at_line_ends() -> None:
    text = f"a{SEPARATORS}b\r\nc\rd\n\ne"
    assert split_lines(text) == [f"a{SEPARATORS}b", "c", "d", "", "e"]
    assert split_lines("x\n") == ["x"] and split_lines("") == []


@pytest.mark.parametrize("start", [0, 4, 16, 60, 64, 4100])
def test_placed_reads_give_the_files_bytes_at_the_offsets_alignment(
    tmp_path: Path, start: int
) -> None:
    """A placed read holds the file's bytes, starts at an address that
    agrees with its offset modulo READ_ALIGN (where the kernel's copy is
    quickest), and a file cut short under it is named, not read short."""
    import numpy as np

    from im2rec.storage.files import READ_ALIGN, FileView, open_regular, placed, read_room

    data = os.urandom(10_000)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    fd, size = open_regular(path)
    view = FileView(fd, size, str(path))
    got = view.read_placed(start, 5_000)
    assert bytes(got) == data[start : start + 5_000]
    assert np.frombuffer(got, np.uint8).ctypes.data % READ_ALIGN == start % READ_ALIGN
    assert bytes(view.read_placed(9_000, 5_000)) == data[9_000:]  # (fewer past the end)
    room = read_room(100)
    for offset in (start, start + 1, start + 63):
        part = placed(room, offset, 100)
        assert len(part) == 100
        assert np.frombuffer(part, np.uint8).ctypes.data % READ_ALIGN == offset % READ_ALIGN
    os.truncate(path, 6_000)
    with pytest.raises(TruncatedRecordError, match="truncated or rewrote"):
        view.read_placed(start, 8_000)
    view.close()

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

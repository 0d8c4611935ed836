"""The text form of an index (``.idx``): parsing with its fast path and
tolerated variants, errors naming the line, and writing it back."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from im2rec.errors import IndexFormatError
from im2rec.recordio import load_index
from im2rec.recordio.index import read_index_entries
from im2rec.recordio.index_text import _parse_fast


def write(tmp_path: Path, text: str | bytes, name: str = "t.idx") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_fast_path_is_taken_for_plain_files() -> None:
    assert _parse_fast(b"1\t2\n3\t4\n") is not None
    assert _parse_fast(b"1\t2\n3\t4") is not None  # no final newline
    for odd in (b"1\t2\t9\n3\t4\n", b"1 2\n", b"1\t2\r\n", b"1\t2\n\n", b"a\t2\n", b"1\t\t2\n"):
        assert _parse_fast(odd) is None, odd


@pytest.mark.parametrize(
    "text",
    [
        "0\t0\r\n1\t12\r\n",  # CRLF
        "0\t0\n1\t12",  # no final newline
        "0\t0\n\n1\t12\n\n",  # blank lines are skipped
        "0 0\n1 12\n",  # space-separated, as the C++ reader accepts
        "0\t0\textra\n1\t12\tmore\n",  # extra fields ignored, as MXNet
    ],
)
def test_tolerated_variants(tmp_path: Path, text: str) -> None:
    index = load_index(write(tmp_path, text))
    assert index.key_list() == [0, 1] and index.offsets.tolist() == [0, 12]
    assert read_index_entries(tmp_path / "t.idx") == ([0, 1], [0, 12])


def test_entries_leave_duplicates_and_odd_offsets_to_the_caller(tmp_path: Path) -> None:
    # load_index refuses these; rec verify wants them back to report each one
    path = write(tmp_path, "0\t0\n0\t13\n2\t-4\n")
    assert read_index_entries(path) == ([0, 0, 2], [0, 13, -4])
    assert read_index_entries(write(tmp_path, "a\t0\n", "s.idx"), key_type=str) == (["a"], [0])


@pytest.mark.parametrize(
    ("text", "message"),
    [("0\t0\n1\n", r"t.idx:2: expected `key<TAB>offset`"), ("0\tx\n", r"t.idx:1: offset 'x'")],
)
def test_entries_name_a_malformed_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(IndexFormatError, match=message):
        read_index_entries(write(tmp_path, text))


@settings(max_examples=60)
@given(
    st.lists(st.integers(-(2**63) + 1, 2**63 - 2), unique=True, max_size=40),
    st.data(),
)
def test_round_trip_through_text(
    tmp_path_factory: pytest.TempPathFactory, keys: list[int], data: st.DataObject
) -> None:
    offsets = [4 * data.draw(st.integers(0, 2**40)) for _ in keys]
    path = tmp_path_factory.mktemp("idx") / "r.idx"
    path.write_text("".join(f"{k}\t{o}\n" for k, o in zip(keys, offsets, strict=True)))
    index = load_index(path)
    assert index.key_list() == keys and index.offsets.tolist() == offsets
    assert read_index_entries(path) == (keys, offsets)
    for k, o in zip(keys, offsets, strict=True):
        assert index.offset_of(k) == o

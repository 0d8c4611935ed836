"""``.idx`` loading: fast path, line-by-line path, and every malformed case."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from im2rec.errors import DuplicateKeyError, IndexFormatError, MissingFileError
from im2rec.recordio import load_index
from im2rec.recordio.index import RecordIndex


def write(tmp_path: Path, text: str | bytes, name: str = "t.idx") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_fast_path_parses_im2rec_style_index(tmp_path: Path) -> None:
    index = load_index(write(tmp_path, "0\t0\n4\t12\n7\t24\n"))
    assert isinstance(index.keys, np.ndarray)
    assert index.key_list() == [0, 4, 7] and index.offsets.tolist() == [0, 12, 24]
    assert index.offset_of(4) == 12 and index.offset_map() == {0: 0, 4: 12, 7: 24}


def test_index_built_from_lists_saves_without_arrays(tmp_path: Path) -> None:
    index = RecordIndex([5, 3], [0, 12], "rebuilt")
    assert len(index) == 2
    index.save(tmp_path / "r.idx")
    assert (tmp_path / "r.idx").read_text() == "5\t0\n3\t12\n"
    assert index.offsets.dtype == np.int64 and index.offsets.tolist() == [0, 12]
    assert index.offset_of(3) == 12


def test_string_keys(tmp_path: Path) -> None:
    index = load_index(write(tmp_path, "a\t0\nb\t12\n"), key_type=str)
    assert index.key_list() == ["a", "b"] and index.offset_of("b") == 12


def test_huge_integer_keys_take_the_exact_path(tmp_path: Path) -> None:
    index = load_index(write(tmp_path, f"{2**64 - 1}\t0\n{2**63}\t12\n"))
    assert index.key_list() == [2**64 - 1, 2**63]


def test_sparse_keys_use_a_dict(tmp_path: Path) -> None:
    index = load_index(write(tmp_path, "5\t0\n10000000\t12\n"))
    assert index.offset_of(10_000_000) == 12
    with pytest.raises(KeyError):
        index.offset_of(6)


def test_missing_key_is_key_error(tmp_path: Path) -> None:
    index = load_index(write(tmp_path, "0\t0\n2\t12\n"))
    for key in (1, 3, -1):
        with pytest.raises(KeyError):
            index.offset_of(key)
    assert index.offset_of(2.0) == 12  # non-int keys look up like a dict, as MXNet


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0\t0\n5\n", r"t.idx:2: expected `key<TAB>offset`, got '5'"),
        ("0\t0\nx\t12\n", r"t.idx:2: key 'x' does not parse as int"),
        ("0\t0\n1\t1.5\n", r"t.idx:2: offset '1.5' is not an integer byte position"),
        ("0\t0\n\n1\t-4\n", r"t.idx:3: key 1 has offset -4, which cannot start a record"),
        ("0\t0\n1\t13\n", r"t.idx:2: key 1 has offset 13, which cannot start a record"),
        ("0\t0\n1\t12\n0\t24\n", r"t.idx:3: key 0 appears again \(first on line 1\)"),
        (b"0\t0\n\xff\t12\n", r"t.idx:2: not UTF-8 text"),
    ],
    ids=["one-field", "bad-key", "bad-offset", "negative", "unaligned", "duplicate", "binary"],
)
def test_malformed_lines_name_the_line(tmp_path: Path, text: str | bytes, message: str) -> None:
    with pytest.raises(IndexFormatError, match=message) as info:
        load_index(write(tmp_path, text))
    assert str(tmp_path / "t.idx") in str(info.value)


def test_duplicates_found_on_the_fast_path_too(tmp_path: Path) -> None:
    lines = "".join(f"{k}\t{4 * i}\n" for i, k in enumerate([3, 1, 2, 1]))
    with pytest.raises(
        DuplicateKeyError, match=r"t.idx:4: key 1 appears again \(first on line 2\)"
    ):
        load_index(write(tmp_path, lines))
    sparse = "".join(f"{k}\t{4 * i}\n" for i, k in enumerate([10**12, 5, 10**12]))
    with pytest.raises(DuplicateKeyError, match="t.idx:3"):
        load_index(write(tmp_path, sparse))


def test_missing_index_file(tmp_path: Path) -> None:
    with pytest.raises(MissingFileError, match="index file not found") as info:
        load_index(tmp_path / "nope.idx")
    assert isinstance(info.value, FileNotFoundError)


def test_offsets_past_the_end(tmp_path: Path) -> None:
    index = load_index(write(tmp_path, "0\t0\n1\t40\n"))
    index.check_within(48, "t.rec")
    with pytest.raises(
        IndexFormatError, match=r"key 1 points to byte 40, past the end of t.rec \(44 bytes\)"
    ):
        index.check_within(44, "t.rec")


def test_empty_index(tmp_path: Path) -> None:
    index = load_index(write(tmp_path, ""))
    assert len(index) == 0 and index.key_list() == []
    index.check_within(0, "t.rec")


def test_record_index_pickles(tmp_path: Path) -> None:
    import pickle

    index = load_index(write(tmp_path, "0\t0\n1\t12\n"))
    copy = pickle.loads(pickle.dumps(index))
    assert isinstance(copy, RecordIndex) and copy.offset_of(1) == 12


@pytest.mark.parametrize("offset", ["1" * 30, "4" * 25, str(1 << 63)])
def test_an_offset_past_int64_is_a_format_error_not_an_overflow(
    tmp_path: Path, offset: str
) -> None:
    # found by fuzz/fuzz_records.py: numpy's int64 conversion raised OverflowError
    idx = tmp_path / "x.idx"
    idx.write_text(f"0 {offset}\n")  # (a space: the general parser's path)
    with pytest.raises(IndexFormatError, match=f"has offset {offset}, which cannot start"):
        load_index(idx)

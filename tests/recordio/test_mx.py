"""The drop-in ``mx.recordio`` API: MXNet's semantics (docs/format.md, "The Python API")
and the deliberate differences listed in the README."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from im2rec import recordio
from im2rec.errors import DuplicateKeyError, ModeError, RecordFormatError
from im2rec.recordio import MXIndexedRecordIO, MXRecordIO, frame


@pytest.fixture
def paths(tmp_path: Path) -> tuple[str, str]:
    return str(tmp_path / "t.idx"), str(tmp_path / "t.rec")


def write_three(paths: tuple[str, str]) -> None:
    w = MXIndexedRecordIO(*paths, "w")
    for i in range(3):
        w.write_idx(i, b"abcd")
    assert w.tell() == 36
    w.close()


def test_public_names() -> None:
    for name in (
        "MXRecordIO",
        "MXIndexedRecordIO",
        "IRHeader",
        "pack",
        "unpack",
        "pack_img",
        "unpack_img",
    ):
        assert hasattr(recordio, name)


def test_indexed_write_and_read(paths: tuple[str, str]) -> None:
    write_three(paths)
    assert Path(paths[0]).read_text() == "0\t0\n1\t12\n2\t24\n"
    r = MXIndexedRecordIO(*paths, "r")
    assert r.keys == [0, 1, 2] and r.idx == {0: 0, 1: 12, 2: 24}
    assert r.read_idx(1) == b"abcd"
    assert r.read() == b"abcd"  # read() continues after the record read_idx returned
    assert r.read() is None and r.read() is None
    r.close()


def test_sequential_read_and_reset(paths: tuple[str, str]) -> None:
    write_three(paths)
    r = MXRecordIO(paths[1], "r")
    assert [r.read() for _ in range(4)] == [b"abcd"] * 3 + [None]
    r.reset()
    assert r.read() == b"abcd"


def test_writer_truncates_and_reset_truncates_again(paths: tuple[str, str]) -> None:
    Path(paths[1]).write_bytes(b"old data")
    w = MXRecordIO(paths[1], "w")
    assert Path(paths[1]).read_bytes() == b""  # 'w' truncates at open, as MXNet
    w.write(b"x")
    w.reset()
    w.close()
    assert Path(paths[1]).read_bytes() == b""


def test_unclosed_writer_is_flushed_when_collected(paths: tuple[str, str]) -> None:
    # im2rec.py and the upstream tests never call close(); `del` must flush.
    w = MXIndexedRecordIO(*paths, "w")
    w.write_idx(0, b"abcd")
    del w
    assert Path(paths[1]).read_bytes() == frame(b"abcd")
    assert Path(paths[0]).read_text() == "0\t0\n"


def test_flags_and_types(paths: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match="Invalid flag x"):
        MXRecordIO(paths[1], "x")
    w = MXRecordIO(paths[1], "w")
    with pytest.raises(TypeError):
        w.write("text")  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match=r"opened for writing \('w'\)"):
        w.read()
    w.write(bytearray(b"ba"))
    w.write(memoryview(b"mv"))
    w.close()
    r = MXRecordIO(paths[1], "r")
    with pytest.raises(AssertionError, match=r"opened for reading \('r'\)"):
        r.write(b"x")
    assert [r.read(), r.read()] == [b"ba", b"mv"]


def test_path_like_and_bytes_paths(tmp_path: Path) -> None:
    w = MXIndexedRecordIO(tmp_path / "p.idx", os.fsencode(tmp_path / "p.rec"), "w")
    w.write_idx(0, b"x")
    w.close()
    assert MXIndexedRecordIO(tmp_path / "p.idx", tmp_path / "p.rec", "r").read_idx(0) == b"x"


def test_closed_object_says_closed(paths: tuple[str, str]) -> None:
    write_three(paths)
    r = MXRecordIO(paths[1], "r")
    r.close()
    r.close()  # idempotent
    with pytest.raises(ModeError, match="the reader is closed"):
        r.read()


def test_tell_on_both_modes(paths: tuple[str, str]) -> None:
    write_three(paths)
    r = MXIndexedRecordIO(*paths, "r")
    r.seek(2)
    assert r.tell() == 24
    assert r.read() == b"abcd" and r.tell() == 36


def test_key_type_str(paths: tuple[str, str]) -> None:
    w = MXIndexedRecordIO(*paths, "w", key_type=str)
    w.write_idx(5, b"x")
    w.close()
    r = MXIndexedRecordIO(*paths, "r", key_type=str)
    assert r.keys == ["5"] and r.read_idx("5") == b"x"


def test_keys_list_can_be_shuffled_in_place(paths: tuple[str, str]) -> None:
    write_three(paths)
    r = MXIndexedRecordIO(*paths, "r")
    r.keys.reverse()
    assert r.keys == [2, 1, 0]
    assert [r.read_idx(k) for k in r.keys] == [b"abcd"] * 3


def test_edits_to_idx_dict_are_honoured(paths: tuple[str, str]) -> None:
    write_three(paths)
    r = MXIndexedRecordIO(*paths, "r")
    r.idx[99] = 12
    assert r.read_idx(99) == b"abcd"


def test_missing_key(paths: tuple[str, str]) -> None:
    write_three(paths)
    with pytest.raises(KeyError):
        MXIndexedRecordIO(*paths, "r").read_idx(7)


# -- deliberate differences from MXNet -------------------------------------
def test_no_sticky_eof(paths: tuple[str, str]) -> None:
    """MXNet P1: after EOF, read_idx returned None until reset(). Fixed."""
    write_three(paths)
    r = MXIndexedRecordIO(*paths, "r")
    while r.read() is not None:
        pass
    assert r.read_idx(0) == b"abcd"


def test_pickled_reader_leaves_original_open(paths: tuple[str, str]) -> None:
    """MXNet P8: pickling closed the original. Here both keep working."""
    write_three(paths)
    r = MXIndexedRecordIO(*paths, "r")
    r.read_idx(2)
    copy = pickle.loads(pickle.dumps(r))
    assert copy.read() == b"abcd"  # the copy starts at record 0
    assert r.read() is None  # the original keeps its position
    assert copy.read_idx(1) == b"abcd" and r.read_idx(1) == b"abcd"


def test_pickling_a_writer_refuses_and_truncates_nothing(paths: tuple[str, str]) -> None:
    """MXNet P8: the unpickled writer truncated the files. Here pickling fails."""
    w = MXIndexedRecordIO(*paths, "w")
    w.write_idx(0, b"abcd")
    with pytest.raises(TypeError, match="writer cannot be pickled"):
        pickle.dumps(w)
    w.write_idx(1, b"efgh")
    w.close()
    assert Path(paths[0]).read_text() == "0\t0\n1\t12\n"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.slow
def test_forked_child_reads_but_cannot_write(paths: tuple[str, str]) -> None:
    """MXNet P9: read() raised in a child. Reading works; writing still refuses."""
    write_three(paths)
    r = MXIndexedRecordIO(*paths, "r")
    w = MXRecordIO(paths[1] + ".out", "w")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = r.read() == b"abcd" and r.read_idx(2) == b"abcd"
        try:
            w.write(b"x")
            ok = False
        except ModeError:
            pass
        os.write(write_end, b"ok" if ok else b"bad")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read_end, 8) == b"ok"
    w.close()


def test_truncated_split_record_raises(paths: tuple[str, str]) -> None:
    """MXNet returned None for a file ending after a cflag-1 part."""
    w = MXRecordIO(paths[1], "w")
    w.write(b"abcd" + recordio.framing.MAGIC_BYTES + b"xy")
    w.close()
    data = Path(paths[1]).read_bytes()
    Path(paths[1]).write_bytes(data[:12])
    with pytest.raises(
        RecordFormatError, match="truncated inside the split record that starts at byte 0"
    ):
        MXRecordIO(paths[1], "r").read()


def test_duplicate_keys_refused_on_write(paths: tuple[str, str]) -> None:
    w = MXIndexedRecordIO(*paths, "w")
    w.write_idx(1, b"x")
    with pytest.raises(DuplicateKeyError, match="key 1 was already written"):
        w.write_idx(1, b"y")
    with pytest.raises(TypeError):
        w.write_idx(2, 3.5)  # type: ignore[arg-type]  # not written: key 2 stays free
    w.write_idx(2, b"z")
    w.close()
    r = MXIndexedRecordIO(*paths, "r")
    assert (r.keys[:], r.read_idx(1), r.read_idx(2)) == ([1, 2], b"x", b"z")


def test_key_type_runs_once_a_key(paths: tuple[str, str]) -> None:
    """MXNet calls key_type once in write_idx; a key_type that is not
    idempotent must not be applied twice."""
    w = MXIndexedRecordIO(*paths, "w", key_type=lambda k: int(k) + 10)
    w.write_idx("1", b"x")
    assert list(w.idx) == w.keys == [11]
    w.close()
    assert Path(paths[0]).read_text() == "11\t0\n"

"""One output file of a writer: it appears only when finished (a temporary name
renamed into place) or is written in place, is flushed in chunks as it
grows, and a Ctrl-C, an exception or a collection leaves either every record
handed over or nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from im2rec.errors import TruncatedRecordError
from im2rec.recordio import IndexedRecordWriter, RecordWriter, frame
from im2rec.storage import copying as copying_module

from ..writing import ranges_of


def test_writes_appear_only_when_closed(tmp_path: Path) -> None:
    target = tmp_path / "a.rec"
    with RecordWriter(target) as w:
        assert w.write(b"one") == 0
        assert w.write(b"two!") == 12
        assert w.tell() == 24
        assert not target.exists()  # still under a temporary name
    assert target.read_bytes() == frame(b"one") + frame(b"two!")
    assert os.listdir(tmp_path) == ["a.rec"]


def test_exception_leaves_no_output_and_no_temp(tmp_path: Path) -> None:
    (tmp_path / "a.rec").write_bytes(b"previous run")
    with pytest.raises(RuntimeError), IndexedRecordWriter(tmp_path / "a.rec") as w:
        w.write_key(0, b"x")
        raise RuntimeError("boom")
    assert sorted(os.listdir(tmp_path)) == ["a.rec"]
    assert (tmp_path / "a.rec").read_bytes() == b"previous run"  # old output untouched


def test_keyboard_interrupt_cleans_up(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), RecordWriter(tmp_path / "a.rec") as w:
        w.write(b"x")
        raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_unclosed_atomic_writer_is_discarded_on_collection(tmp_path: Path) -> None:
    w = RecordWriter(tmp_path / "a.rec")
    w.write(b"x")
    del w
    assert os.listdir(tmp_path) == []


def test_in_place_writer_keeps_data_when_collected(tmp_path: Path) -> None:
    w = RecordWriter(tmp_path / "a.rec", atomic=False)
    w.write(b"x")
    del w
    assert (tmp_path / "a.rec").read_bytes() == frame(b"x")


def test_large_output_is_flushed_in_chunks(tmp_path: Path) -> None:
    with RecordWriter(tmp_path / "big.rec") as w:
        for _ in range(40):
            w.write(b"x" * 100_000)
        tmp = tmp_path / f".big.rec.{os.getpid()}.tmp"
        assert tmp.stat().st_size >= 3_000_000  # flushed as it goes, not held in memory
    assert (tmp_path / "big.rec").stat().st_size == 40 * (8 + 100_000)


@pytest.mark.parametrize("written", [0, 1000, 5000])
def test_ctrl_c_in_the_middle_of_a_flush_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: int
) -> None:
    """Ctrl-C while buffered records are being written (after ``written``
    bytes of them reached the file): suspend() writes the rest, so the
    partial output holds every record handed to the writer, in order."""
    real_writev = copying_module._writev

    def interrupted(fd: int, buffers: list[bytes]) -> int:
        if written:
            real_writev(fd, [memoryview(b"".join(buffers))[:written]])
        raise KeyboardInterrupt

    records = [bytes([i]) * (97 * i + 5) for i in range(60)]
    w = IndexedRecordWriter(tmp_path / "a.rec", temp=tmp_path / "a.rec.partial",
                            idx_temp=tmp_path / "a.idx.partial", hashing=True)  # fmt: skip
    offsets = [w.write_key(i, r) for i, r in enumerate(records)]
    monkeypatch.setattr(copying_module, "_writev", interrupted)
    with pytest.raises(KeyboardInterrupt):
        w.flush()
    monkeypatch.setattr(copying_module, "_writev", real_writev)
    w.suspend()
    assert (tmp_path / "a.rec.partial").read_bytes() == b"".join(map(frame, records))
    lines = (tmp_path / "a.idx.partial").read_text().splitlines()
    assert lines == [f"{i}\t{o}" for i, o in enumerate(offsets)]


def test_missing_output_folder_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        RecordWriter(tmp_path / "no" / "such" / "a.rec")


def test_a_writer_stopped_while_copying_leaves_nothing(tmp_path: Path) -> None:
    """Batches are copied on a thread: an error in the caller, or a range
    that cannot be copied, stops the writer after the batch under way, and
    the temporary file is removed."""
    ranges = ranges_of(tmp_path, [bytes(300_000)] * 12)
    with pytest.raises(RuntimeError), IndexedRecordWriter(tmp_path / "a.rec") as w:
        for i, body in enumerate(ranges):
            w.write_key(i, b"head", body, split=False)
        raise RuntimeError("boom")
    os.truncate(ranges[0].name, 1_000_000)
    with pytest.raises(TruncatedRecordError), IndexedRecordWriter(tmp_path / "a.rec") as w:
        for i, body in enumerate(ranges):
            w.write_key(i, b"head", body, split=False)
    assert sorted(os.listdir(tmp_path)) == ["source.bin"]

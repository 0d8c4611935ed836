"""An output's writeback starts while it is written: a large ``.rec``
reaches the disk without waiting for a ``sync`` (seen through FIEMAP: its
extents stop being delayed allocations), small outputs start no thread,
the thread ends and closes its descriptor when the output closes, and a
file that takes no writeback (a pipe) is left alone without an error."""

from __future__ import annotations

import array
import fcntl
import os
import struct
import threading
from pathlib import Path

import pytest

from im2rec.recordio import IndexedRecordWriter, RecordWriter
from im2rec.storage.writeback import WRITEBACK_BYTES, Writeback

from ..polling import poll

_FS_IOC_FIEMAP = 0xC020660B
_HEAD = struct.Struct("=QQIIII")  # struct fiemap, before its extents
_EXTENT = struct.Struct("=QQQQQIIII")  # struct fiemap_extent
_DELALLOC = 0x4  # FIEMAP_EXTENT_DELALLOC: not yet given blocks, so not yet written back


def _delayed(path: Path, length: int) -> int | None:
    """Bytes of the first ``length`` of ``path`` still delayed allocations
    (written into the page cache, not yet to the disk); None where the
    file system does not say (no FIEMAP)."""
    count = 512
    buf = array.array("B", _HEAD.pack(0, length, 0, 0, count, 0) + bytes(_EXTENT.size * count))
    with open(path, "rb") as f:
        try:
            fcntl.ioctl(f.fileno(), _FS_IOC_FIEMAP, buf)
        except OSError:
            return None
    mapped = _HEAD.unpack_from(buf)[3]
    delayed = 0
    for i in range(mapped):
        logical, _, size, _, _, flags, *_ = _EXTENT.unpack_from(buf, _HEAD.size + i * _EXTENT.size)
        if flags & _DELALLOC:
            delayed += max(0, min(logical + size, length) - logical)
    return delayed


def _threads() -> int:
    return sum(t.name == "im2rec-writeback" for t in threading.enumerate())


def _open_in(folder: Path) -> list[str]:
    """This process's descriptors open on files in ``folder`` (other
    descriptors come and go with the libraries a test run loads)."""
    found = []
    for fd in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else ():
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # (closed since it was listed, as listdir's own is)
            continue
        if target.startswith(f"{folder}{os.sep}"):
            found.append(target)
    return found


def test_a_large_output_is_on_the_disk_without_a_sync(tmp_path: Path) -> None:
    size = 4 * WRITEBACK_BYTES
    control = tmp_path / "control.bin"
    with open(control, "wb") as f:  # written as any program writes: left for the flusher
        f.write(os.urandom(size))
    if not _delayed(control, size):
        pytest.skip("this file system allocates at write time: writeback cannot be seen")
    record = os.urandom(1 << 20)
    w = IndexedRecordWriter(tmp_path / "a.rec")
    try:
        for key in range(size >> 20):
            w.write_key(key, record)
        w.flush()
        written = 3 * WRITEBACK_BYTES  # (asked for once each WRITEBACK_BYTES has come)
        assert poll(lambda: _delayed(w.temp_path, written) == 0), (
            "the writer's pages are still waiting for a sync"
        )
    finally:
        w.close()
    assert _delayed(control, size), "(the control was written back too: nothing was shown)"


def test_small_outputs_start_no_thread_and_large_ones_end_theirs(tmp_path: Path) -> None:
    with RecordWriter(tmp_path / "small.rec") as w:
        for _ in range(64):
            w.write(bytes(1024))
        assert _threads() == 0 or poll(lambda: _threads() == 0)
    big = RecordWriter(tmp_path / "big.rec")
    for _ in range(3 * WRITEBACK_BYTES >> 20):
        big.write(bytes(1 << 20))
    big.flush()
    assert _threads() == 1
    if os.path.isdir("/proc/self/fd"):  # the writer's and the thread's own
        assert len(_open_in(tmp_path)) == 2, _open_in(tmp_path)
    big.close()
    assert poll(lambda: _threads() == 0), "the writeback thread outlived its output"
    assert poll(lambda: not _open_in(tmp_path)), "its duplicate descriptor was left open"
    assert (tmp_path / "big.rec").stat().st_size > 3 * WRITEBACK_BYTES


def test_a_pipe_takes_no_writeback_and_says_nothing(tmp_path: Path) -> None:
    read, write = os.pipe()
    try:
        wb = Writeback(write)
        wb.written(WRITEBACK_BYTES)  # (a pipe has no pages to write back)
        assert poll(lambda: _threads() == 0)
        wb.written(2 * WRITEBACK_BYTES)  # asked again after its thread ended: nothing happens
        wb.close()
        os.write(write, b"still open")
        assert os.read(read, 10) == b"still open"
    finally:
        os.close(read)
        os.close(write)


def test_a_parquet_shard_is_on_the_disk_without_a_sync(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow.parquet")
    from im2rec.formats.parquet import export_parquet
    from im2rec.recordio import IRHeader, pack

    control = tmp_path / "control.bin"
    control.write_bytes(os.urandom(WRITEBACK_BYTES))
    if not _delayed(control, WRITEBACK_BYTES):
        pytest.skip("this file system allocates at write time: writeback cannot be seen")
    with IndexedRecordWriter(tmp_path / "a.rec") as w:
        for key in range(4 * WRITEBACK_BYTES // 500_000):
            w.write_key(key, pack(IRHeader(0, float(key % 3), key, 0), os.urandom(500_000)))
    os.sync()  # (the .rec's own pages: not what is looked at)
    done = export_parquet(tmp_path / "a.rec", tmp_path / "hub")
    shard = Path(done.shards[0])
    written = 3 * WRITEBACK_BYTES
    assert shard.stat().st_size > written
    assert poll(lambda: _delayed(shard, written) == 0), "the shard waits for a sync"

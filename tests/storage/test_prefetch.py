"""A command's inputs are read into the page cache while it starts: the
first bytes of each file named, in order, up to a limit in all; what is
not a regular local file is skipped without an error. A walk of frame
heads has the file read in order ahead of it, so far and no further.
Residency is seen with mincore()."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from im2rec.recordio import IndexedRecordWriter, IRHeader, RecordReader, pack
from im2rec.recordio.walking import walk_records
from im2rec.storage import prefetch as prefetch_module
from im2rec.storage.prefetch import follow, prefetch

from ..polling import poll

_MB = 1 << 20


#: ``cached(path, offset)``: whether the page at ``offset`` of a file is
#: in the page cache, asked with mincore() over a mapping never touched (a
#: read that fails rather than wait, RWF_NOWAIT, starts the very read it
#: reports missing); the test and its probe process share it
CACHED = """
import ctypes, mmap, os

def cached(path, offset):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    page = mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, page, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset - offset % page)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap")
        try:
            vec = ctypes.create_string_buffer(1)
            if libc.mincore(address, page, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            return bool(vec.raw[0] & 1)
        finally:
            libc.munmap(address, page)
    finally:
        os.close(fd)
"""
_names: dict[str, object] = {}
exec(CACHED, _names)


def _cached(path: Path, offset: int) -> bool:
    return bool(_names["cached"](path, offset))  # type: ignore[operator]


def _evicted(path: Path, size: int) -> Path:
    """``path``, ``size`` bytes on the disk and out of the page cache (or a
    skip where this file system cannot show it)."""
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    return _evict(path, size)


def _evict(path: Path, size: int) -> Path:
    """``path`` (``size`` bytes) on the disk and out of the page cache."""
    if not sys.platform.startswith("linux"):
        pytest.skip("mincore() answers only on Linux")
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if _cached(path, 0) or _cached(path, size - 4096):
        pytest.skip("this file system keeps the file cached (or says nothing of it)")
    return path


def test_the_first_bytes_of_each_file_are_read_in_order_up_to_the_limit(tmp_path: Path) -> None:
    first = _evicted(tmp_path / "a.rec", 4 * _MB)
    second = _evicted(tmp_path / "b.rec", 32 * _MB)
    prefetch([tmp_path / "missing.rec", first, second], limit=12 * _MB)
    assert poll(lambda: _cached(first, 0) and _cached(first, 4 * _MB - 4096))
    assert poll(lambda: _cached(second, 0) and _cached(second, 8 * _MB - 4096))
    time.sleep(0.2)  # (what a too-large request would have read by now)
    assert not _cached(second, 28 * _MB), "read past the limit"


def test_what_is_not_a_local_regular_file_is_left_alone(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # (opening it to read would wait for a writer for ever)
    kept = _evicted(tmp_path / "c.rec", 2 * _MB)
    prefetch(["s3://bucket/data.rec", fifo, tmp_path, kept])
    assert poll(lambda: _cached(kept, 0))
    prefetch([kept], limit=0)  # (nothing to do)


@pytest.mark.parametrize(
    ("args", "module"),
    [
        (["export", "{src}.rec", "--to", "parquet", "-o", "{out}"], "im2rec.formats.parquet"),
        (["export", "{src}.rec", "--to", "webdataset", "-o", "{out}/%06d.tar"],
         "im2rec.formats.wds_export"),
        (["import", "parquet", "{src}.parquet", "-o", "{out}"], "im2rec.formats.parquet_import"),
        (["import", "webdataset", "{src}.tar", "-o", "{out}"], "im2rec.formats.wds_import"),
    ],
)  # fmt: skip
def test_converting_commands_read_their_input_while_they_start(
    tmp_path: Path, args: list[str], module: str
) -> None:
    """Through the real CLI: each command has started reading its input
    when it loads its format's modules (a process that stops it there
    waits for the file's pages, reading nothing itself, and exits 3 when
    they come)."""
    src, out = tmp_path / "data", tmp_path / "out"
    given = [a.format(src=src, out=out) for a in args]
    data = _evicted(Path(given[1] if given[0] == "export" else given[2]), 8 * _MB)
    probe = f"""
import sys, time
path, last = {str(data)!r}, {8 * _MB - 4096}
class Stop:
    def find_spec(self, name, path_=None, target=None):
        if name == {module!r}:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not (cached(path, 0) and cached(path, last)):
                time.sleep(0.02)
            raise SystemExit(3 if cached(path, 0) and cached(path, last) else 4)
sys.meta_path.insert(0, Stop())
from im2rec.cli import main
main({[*given, "-q"]!r})
"""
    done = subprocess.run([sys.executable, "-c", CACHED + probe], capture_output=True, text=True)
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert not out.exists()


def test_a_follower_reads_in_order_ahead_of_the_walk_and_no_further(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It reads up to FOLLOW_AHEAD past where the walk says it is, goes on
    when told the walk moved, and its thread ends when stopped."""
    monkeypatch.setattr(prefetch_module, "FOLLOW_AHEAD", 4 * _MB)
    path = _evicted(tmp_path / "walked.rec", 64 * _MB)
    fd = os.open(path, os.O_RDONLY)
    try:
        ahead = follow(fd, 64 * _MB, 0)
        assert ahead is not None
        assert poll(lambda: _cached(path, 3 * _MB))
        time.sleep(0.2)  # (what a follower not held back would have read by now)
        assert not _cached(path, 40 * _MB), "read past FOLLOW_AHEAD"
        ahead.tell(32 * _MB)  # (the walk jumped: the follower goes on from there)
        assert poll(lambda: _cached(path, 35 * _MB))
        assert not _cached(path, 20 * _MB), "read what the walk had passed"
        ahead.stop()
        assert not _follower_threads(), "a thread was left behind the walk"
    finally:
        os.close(fd)


def _follower_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "im2rec-follow"]


def test_a_walk_of_heads_over_a_cold_file_reads_it_ahead(tmp_path: Path) -> None:
    """walk_records over large records: while the walk is suspended a few
    MB in, the bytes tens of MB past it come into the page cache (each head
    alone would otherwise be read from the disk when reached); closing the
    walk ends the follower's thread before it returns, and a walk to its
    end leaves none either."""
    path = tmp_path / "large.rec"
    with IndexedRecordWriter(path) as w:
        for i in range(256):  # 256 records of 256 KB: 64 MB
            w.write_key(i, pack(IRHeader(0, float(i), i, 0), os.urandom(256 << 10)))
    size = path.stat().st_size
    _evict(path, size)
    reader = RecordReader(path)
    walk = walk_records(reader)
    for _ in range(8):  # (2 MB into the file)
        next(walk)
    assert poll(lambda: _cached(path, 40 * _MB)), "the file was not read ahead of the walk"
    walk.close()
    assert not _follower_threads(), "a thread was left behind the walk"
    assert sum(1 for _ in walk_records(reader)) == 256
    assert not _follower_threads(), "a thread was left behind the walk"
    reader.close()

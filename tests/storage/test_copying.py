"""Writing buffers and copying ranges of other files into an output: short
writes are resumed, each way of copying falls back only when it does not
apply, and a real failure (a disk that is full) is raised, never retried."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
from pathlib import Path

import pytest

from im2rec.recordio import IndexedRecordWriter, frame
from im2rec.storage import copying as copying_module

from ..writing import ranges_of, with_small_files


def test_partial_writes_are_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # writev may write less than asked (a signal, a nearly full disk): the rest must follow
    real_writev, calls = copying_module._writev, [0]

    def short_writev(fd: int, buffers: list[bytes]) -> int:
        calls[0] += 1
        return real_writev(fd, [memoryview(b"".join(buffers))[:1000]])

    monkeypatch.setattr(copying_module, "_writev", short_writev)
    records = [bytes([i]) * (300 * i + 5) for i in range(40)]
    with IndexedRecordWriter(tmp_path / "a.rec", hashing=True) as w:
        for i, record in enumerate(records):
            w.write_key(i, record[:8], record[8:])  # a record in two pieces
    data = (tmp_path / "a.rec").read_bytes()
    assert data == b"".join(map(frame, records))
    assert w.sha256() == hashlib.sha256(data).hexdigest()
    assert calls[0] >= len(data) // 1000  # every write was cut short, and resumed


def test_a_batch_of_copies_writes_glue_then_ranges(tmp_path: Path) -> None:
    """Bytes, then each range, in order, whether the range's bytes are in
    memory (written) or only in the file (copied), in runs of either; into a
    file opened for appending, where sendfile refuses (EINVAL) and the
    copies are read and written."""
    pieces = [b"a" * 70_000, b"", b"b" * 3, b"c" * (3 << 20), b"d" * 9, b"e" * 40_000]
    ranges = ranges_of(tmp_path, pieces)
    for i in (1, 2, 5):  # (the other ranges' bytes are in the file only)
        ranges[i] = dataclasses.replace(ranges[i], data=memoryview(pieces[i]))
    items = [(b"1", ranges[0]), (b"", ranges[1]), (b"22", ranges[2]), (b"", ranges[3]),
             (b"", ranges[4]), (b"333", ranges[5]), (b"end", None)]  # fmt: skip
    want = (
        b"".join(glue + piece for (glue, _), piece in zip(items[:-1], pieces, strict=True)) + b"end"
    )
    for flags in (os.O_TRUNC, os.O_APPEND):
        out = os.open(tmp_path / "out.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | flags)
        try:
            copying_module.copy_batch(out, items)
        finally:
            os.close(out)
        assert (tmp_path / "out.bin").read_bytes() == want


@pytest.mark.slow
def test_a_failing_copy_is_raised_not_retried(tmp_path: Path) -> None:
    """Only "not here" errors (no such call, another file system) fall back
    to the next way of copying; a real failure (here, a file that may grow
    no further) is raised, after the bytes that fitted, and a writer hit by
    it at its end leaves no output and no temporary file."""
    seen = with_small_files(
        """
        from im2rec.recordio import RecordWriter
        from im2rec.storage import copying
        from im2rec.storage.files import FileRange, HeldFile

        seen = {}
        body = bytes(range(256)) * 4
        src = os.path.join(FOLDER, "source.bin")
        with open(src, "wb") as f:
            f.write(body)
        fd = os.open(src, os.O_RDONLY)
        whole = FileRange(fd, 0, len(body), src, False, HeldFile(fd))
        small_files()
        out = os.open(os.path.join(FOLDER, "out.bin"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            copying.copy_batch(out, [(b"head", whole)])
        except OSError as exc:
            seen["copy"] = exc.errno
        finally:
            os.close(out)
        try:
            with RecordWriter(os.path.join(FOLDER, "o.rec")) as w:
                w.write(b"head", whole, split=False)
        except OSError as exc:
            seen["writer"] = exc.errno
        with open(os.path.join(FOLDER, "out.bin"), "rb") as f:
            seen["written"] = f.read() == (b"head" + body)[:512]
        seen["left"] = sorted(os.listdir(FOLDER))
        print(json.dumps(seen))
        """,
        tmp_path,
        512,
    )
    assert seen == {
        "copy": errno.EFBIG,
        "writer": errno.EFBIG,
        "written": True,
        "left": ["out.bin", "source.bin"],
    }

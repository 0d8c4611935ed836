"""Writers: atomic finish, indexes, and refusing what would corrupt output."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from im2rec.errors import DuplicateKeyError, ModeError, TruncatedRecordError
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, RecordWriter, frame
from im2rec.recordio.framing import MAGIC_BYTES, has_aligned_magic, needs_split
from im2rec.storage import copying as copying_module
from im2rec.storage.files import FileRange, HeldFile


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


def test_indexed_writer_writes_mxnet_style_idx(tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        for key in range(3):
            w.write_key(key, b"abcd")
        assert w.index_path == tmp_path / "d.idx"
    assert (tmp_path / "d.idx").read_text() == "0\t0\n1\t12\n2\t24\n"
    reader = IndexedRecordReader(tmp_path / "d.rec")
    assert [reader.read_key(k) for k in range(3)] == [b"abcd"] * 3


def test_key_type_and_custom_idx_path(tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "d.rec", tmp_path / "keys.txt", key_type=str) as w:
        w.write_key(5, b"x")
    assert (tmp_path / "keys.txt").read_text() == "5\t0\n"


def test_duplicate_key_refused_before_writing(tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        w.write_key(1, b"x")
        with pytest.raises(DuplicateKeyError, match="key 1 was already written"):
            w.write_key(1, b"y")
        assert w.tell() == 12
    assert (tmp_path / "d.idx").read_text() == "1\t0\n"


def test_writer_refuses_pickling(tmp_path: Path) -> None:
    w = RecordWriter(tmp_path / "a.rec")
    w.write(b"data")
    with pytest.raises(TypeError, match="writers cannot be pickled"):
        pickle.dumps(w)
    w.close()
    assert (tmp_path / "a.rec").read_bytes() == frame(b"data")  # nothing truncated


def test_write_after_close(tmp_path: Path) -> None:
    w = RecordWriter(tmp_path / "a.rec")
    w.close()
    with pytest.raises(ModeError, match="the writer is closed"):
        w.write(b"x")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.slow
def test_forked_child_cannot_write(tmp_path: Path) -> None:
    w = RecordWriter(tmp_path / "a.rec")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            w.write(b"x")
            os.write(write_end, b"wrote")
        except ModeError as exc:
            os.write(write_end, str(exc).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    message = os.read(read_end, 4096).decode()
    assert "opened in process" in message and "interleave" in message
    w.write(b"parent")
    w.close()
    assert (tmp_path / "a.rec").read_bytes() == frame(b"parent")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("atomic", [True, False])
@pytest.mark.slow
def test_child_dropping_an_inherited_writer_writes_nothing(tmp_path: Path, atomic: bool) -> None:
    import gc

    w = IndexedRecordWriter(tmp_path / "a.rec", atomic=atomic)
    w.write_key(0, b"pending in the parent's buffer")
    pid = os.fork()
    if pid == 0:
        del w
        gc.collect()
        os._exit(0)
    os.waitpid(pid, 0)
    w.close()
    assert (tmp_path / "a.rec").read_bytes() == frame(b"pending in the parent's buffer")
    assert (tmp_path / "a.idx").read_text() == "0\t0\n"


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


def ranges_of(tmp_path: Path, pieces: list[bytes]) -> list[FileRange]:
    """Each piece as a range of one source file, with its magic word scanned."""
    src = tmp_path / "source.bin"
    src.write_bytes(b"".join(pieces))
    fd = os.open(src, os.O_RDONLY)
    held = HeldFile(fd)
    out, offset = [], 0
    for piece in pieces:
        out.append(FileRange(fd, offset, len(piece), str(src), has_aligned_magic(piece), held))
        offset += len(piece)
    return out


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=24).map(lambda b: b[: len(b) & ~3]),  # a header: whole words
            st.binary(max_size=300),
            st.sampled_from([None, 0, 4, 5, 8]),  # where a magic word goes in the body
            st.booleans(),  # split known to the caller, or not
        ),
        min_size=1, max_size=6,
    ),
    st.booleans(),
)  # fmt: skip
def test_a_body_still_in_a_file_is_framed_as_bytes_are(
    tmp_path: Path, copies: str, records: list[tuple[bytes, bytes, int | None, bool]], hashing: bool
) -> None:
    """write(head, FileRange): the same file and index as writing the bytes,
    split at aligned magic words in the header or the body, whether the
    caller says so, the range's own scan does, or nobody did; bodies in
    memory (``data``, as a shard's reader gives them) or only in the file;
    a hashing writer reads the body and hashes what it wrote."""
    bodies = []
    for _, body, at, _ in records:
        if at is not None and len(body) >= at + 4:
            body = body[:at] + MAGIC_BYTES + body[at + 4 :]
        bodies.append(body)
    ranges = ranges_of(tmp_path, bodies)
    for name, use_range in (("bytes", False), ("range", True)):
        with IndexedRecordWriter(tmp_path / f"{name}.rec", hashing=hashing) as w:
            for i, ((head, _, _, told), body, where) in enumerate(
                zip(records, bodies, ranges, strict=True)
            ):
                split = needs_split(head, body) if told else None
                if use_range and i % 2:
                    where = dataclasses.replace(where, magic=None)  # never scanned
                if use_range and i % 3 == 0:
                    where = dataclasses.replace(where, data=memoryview(body))
                w.write_key(i, head, where if use_range else body, split=split)
        if hashing:
            assert w.sha256() == hashlib.sha256((tmp_path / f"{name}.rec").read_bytes()).hexdigest()
    assert (tmp_path / "range.rec").read_bytes() == (tmp_path / "bytes.rec").read_bytes()
    assert (tmp_path / "range.idx").read_bytes() == (tmp_path / "bytes.idx").read_bytes()


def test_a_range_of_a_file_that_shrank_is_an_error(tmp_path: Path) -> None:
    (whole,) = ranges_of(tmp_path, [b"x" * 5000])
    os.truncate(whole.name, 3000)
    with pytest.raises(TruncatedRecordError, match="ends at byte 3,000.*truncated or rewrote"):
        bytes(whole)
    with pytest.raises(TruncatedRecordError, match="ends at byte 3,000"), \
            RecordWriter(tmp_path / "out.rec") as w:  # fmt: skip
        w.write(b"head", whole, split=False)
    assert not (tmp_path / "out.rec").exists()


@pytest.fixture(params=["C helper", "one copy at a time"])
def copies(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of making a batch of copies: the C helper (when built) and
    the Python loop used without it."""
    if request.param == "C helper":
        pytest.importorskip("im2rec.storage._copies", reason="built without a compiler")
    else:
        monkeypatch.setattr(copying_module, "_copy_records", None)
    return str(request.param)


def test_a_batch_of_copies_writes_glue_then_ranges(tmp_path: Path, copies: str) -> None:
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


def with_small_files(script: str, folder: Path, limit: int, *, native: bool = True) -> Any:
    """Run ``script`` (Python, with ``folder`` as ``FOLDER``) in a process of
    its own whose files cannot grow past ``limit`` bytes, and return what it
    printed, as JSON. ``RLIMIT_FSIZE``: a write past the limit fails with
    EFBIG on every kernel and file system, as a write to a full disk fails
    with ENOSPC (Python ignores SIGXFSZ); only after the script's own set-up,
    whose files may be larger."""
    env = dict(os.environ)
    env.pop("IM2REC_NO_NATIVE", None)
    if not native:
        env["IM2REC_NO_NATIVE"] = "1"
    prelude = (
        "import json, os, resource, sys\n"
        f"FOLDER = {str(folder)!r}\n"
        "def small_files():\n"
        "    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]\n"
        f"    resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, hard))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_a_failing_copy_is_raised_not_retried(tmp_path: Path, copies: str) -> None:
    """Only "not here" errors (no such call, another file system) fall back
    to the next way of copying; a real failure (here, a file that may grow
    no further) is raised, after the bytes that fitted, and a writer hit by
    it at its end leaves no output and no temporary file."""
    seen = with_small_files(
        """
        from im2rec.recordio import RecordWriter
        from im2rec.storage import copying
        from im2rec.storage.files import FileRange, HeldFile

        seen = {"C helper": copying._copy_records is not None}
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
        native=copies == "C helper",
    )
    assert seen == {
        "C helper": copies == "C helper",
        "copy": errno.EFBIG,
        "writer": errno.EFBIG,
        "written": True,
        "left": ["out.bin", "source.bin"],
    }


@pytest.mark.slow
def test_a_pair_lands_whole_or_not_at_all(tmp_path: Path) -> None:
    """``close()`` moves the ``.rec`` and ``.idx`` into place only once both
    are written: an ``.idx`` that fails (here it is the larger file: empty
    records under long keys) leaves the old pair as it was, and the
    temporary files for the caller to keep (resume) or remove."""
    (tmp_path / "d.rec").write_bytes(b"old rec")
    (tmp_path / "d.idx").write_bytes(b"old idx")
    seen = with_small_files(
        """
        from im2rec.recordio import IndexedRecordWriter

        small_files()
        w = IndexedRecordWriter(os.path.join(FOLDER, "d.rec"))
        for i in range(1000):
            w.write_key(10**9 + i, b"")
        seen = {}
        try:
            w.close()
        except OSError as exc:
            seen["close"] = exc.errno
        seen["kept"] = sorted(os.listdir(FOLDER))
        w.abort()
        seen["left"] = sorted(os.listdir(FOLDER))
        print(json.dumps(seen))
        """,
        tmp_path,
        12_000,  # the .rec, 8,000 bytes, fits; the .idx, 16,000, does not
    )
    pid = int(seen["kept"][0].split(".")[3])
    assert seen == {
        "close": errno.EFBIG,
        "kept": [f".d.idx.{pid}.tmp", f".d.rec.{pid}.tmp", "d.idx", "d.rec"],
        "left": ["d.idx", "d.rec"],
    }
    assert (tmp_path / "d.rec").read_bytes() == b"old rec"
    assert (tmp_path / "d.idx").read_bytes() == b"old idx"


def test_a_writer_stopped_while_copying_leaves_nothing(tmp_path: Path, copies: str) -> None:
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

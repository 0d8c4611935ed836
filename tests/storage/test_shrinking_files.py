"""A ``.rec`` that another process truncates or rewrites while it is open.

A memory-mapped file that shrinks kills its reader with SIGBUS at the next
touch of a page past the new end, which no Python code can catch. Every
read path must instead raise our error naming the file. Each case runs in
a forked child, so a regression fails its test (killed by a signal) instead
of killing the test run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from im2rec import ImageRecordIter, RecordDataset
from im2rec.errors import Im2RecError, TruncatedRecordError
from im2rec.inspect.verifying import verify
from im2rec.recordio import (
    IndexedRecordReader,
    IRHeader,
    MXIndexedRecordIO,
    MXRecordIO,
    RecordReader,
    pack,
    pack_img,
)
from im2rec.recordio.walking import walk_records

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

SHRUNK = "another program truncated or rewrote it"


def in_child(body: Callable[[], str]) -> str:
    """Run ``body`` in a forked child and return what it returned (or the
    traceback it raised); fail if the child died of a signal."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            out = body()
        except BaseException:  # noqa: BLE001 - reported to the parent
            out = "raised:\n" + traceback.format_exc()
        os.write(write_end, out.encode()[:60_000])
        os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        pytest.fail(f"the reader was killed by {signal.Signals(os.WTERMSIG(status)).name}")
    return b"".join(chunks).decode()


def expect_shrunk(read: Callable[[], object]) -> str:
    try:
        read()
    except TruncatedRecordError as exc:
        return f"ok: {exc}"
    except Im2RecError as exc:
        return f"other error: {exc}"
    return "no error"


@pytest.fixture
def rec(tmp_path: Path) -> Path:
    path = tmp_path / "big.rec"
    writer = MXIndexedRecordIO(str(path.with_suffix(".idx")), str(path), "w")
    for i in range(400):
        writer.write_idx(i, pack(IRHeader(0, float(i % 3), i, 0), bytes([i % 256]) * 9000))
    writer.close()
    return path


@pytest.mark.slow
def test_indexed_readers(rec: Path) -> None:
    def body() -> str:
        reader = IndexedRecordReader(rec)
        mx_reader = MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
        assert reader[0] and mx_reader.read_idx(0)  # both opened and used
        os.truncate(rec, 4096)
        return (
            expect_shrunk(lambda: reader[399])
            + "\n"
            + expect_shrunk(lambda: mx_reader.read_idx(399))
        )

    out = in_child(body)
    assert out.count("ok: ") == 2 and SHRUNK in out and str(rec) in out, out


@pytest.mark.slow
def test_sequential_readers_and_walks(rec: Path) -> None:
    def body() -> str:
        mx_reader = MXRecordIO(str(rec), "r")
        reader = RecordReader(rec)
        assert mx_reader.read()
        os.truncate(rec, 20_000)

        def read_all() -> None:
            while mx_reader.read() is not None:
                pass

        return "\n".join(
            [
                expect_shrunk(read_all),
                expect_shrunk(lambda: list(reader)),
                expect_shrunk(lambda: list(walk_records(reader))),
            ]
        )

    out = in_child(body)
    assert out.count("ok: ") == 3, out


@pytest.mark.slow
def test_verify_while_the_file_shrinks(tmp_path: Path) -> None:
    path = tmp_path / "many.rec"
    writer = MXRecordIO(str(path), "w")
    for i in range(20_000):
        writer.write(pack(IRHeader(0, 1.0, i, 0), b"x" * 40))
    writer.close()

    def body() -> str:
        def shrink(done: int, total: int) -> None:
            if done < total:  # early in the walk, not its last call
                os.truncate(path, 4096)

        result: list[object] = []
        out = expect_shrunk(lambda: result.append(verify(path, on_progress=shrink)))
        return out + (f" {result[0].problems}" if result else "")  # type: ignore[attr-defined]

    out = in_child(body)
    assert out.startswith("ok: ") and SHRUNK in out, out


@pytest.mark.slow
def test_dataset_and_iterator(tmp_path: Path) -> None:
    path = tmp_path / "img.rec"
    writer = MXIndexedRecordIO(str(path.with_suffix(".idx")), str(path), "w")
    rng = np.random.default_rng(0)
    for i in range(96):
        image = rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)
        writer.write_idx(i, pack_img(IRHeader(0, float(i % 2), i, 0), image))
    writer.close()

    whole = path.read_bytes()

    def body() -> str:
        dataset = RecordDataset(path, output="numpy")
        assert dataset[0][0].shape == (40, 40, 3)
        results = []
        for threads in (1, 2):
            path.write_bytes(whole)
            it = ImageRecordIter(
                path_imgrec=str(path), path_imgidx=str(path.with_suffix(".idx")),
                data_shape=(3, 32, 32), batch_size=8, preprocess_threads=threads,
                prefetch_buffer=1,
            )  # fmt: skip
            it.next()
            os.truncate(path, 2048)

            def drain(it: ImageRecordIter = it) -> None:
                for _ in it:
                    pass

            results.append(expect_shrunk(drain))
            it.close()
        results.append(expect_shrunk(lambda: dataset[95]))
        return "\n".join(results)

    out = in_child(body)
    lines = out.splitlines()
    assert len(lines) == 3 and all(line.startswith("ok: ") for line in lines), out


@pytest.mark.slow
def test_rec_verify_process_while_another_truncates(tmp_path: Path) -> None:
    """The real command line, racing a real truncation: whatever the timing,
    it ends with a result or one Error line, never a signal or a traceback."""
    path = tmp_path / "race.rec"
    writer = MXRecordIO(str(path), "w")
    payload = b"y" * 60_000
    for i in range(3000):
        writer.write(pack(IRHeader(0, 0.0, i, 0), payload))
    writer.close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "im2rec", "verify", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    cut = threading.Timer(0.3, lambda: os.truncate(path, 1 << 20))
    cut.start()
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        cut.cancel()
    time.sleep(0)  # let the timer thread finish
    assert proc.returncode in (0, 1), (proc.returncode, err)
    assert "Traceback" not in err


def test_merge_refuses_an_input_that_changes_after_it_was_checked(
    rec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from im2rec.inspect import merging
    from im2rec.inspect.merging import merge_recs

    checked = merging._check_whole

    def check_then_cut(path: Path, offsets: np.ndarray) -> int:
        size = checked(path, offsets)
        os.truncate(path, 4096)  # another program, between the check and the copy
        return size

    monkeypatch.setattr(merging, "_check_whole", check_then_cut)
    with pytest.raises(TruncatedRecordError, match="changed while it was being merged"):
        merge_recs([rec], tmp_path / "m.rec")
    assert not (tmp_path / "m.rec").exists() and not (tmp_path / "m.idx").exists()


def test_a_val_tar_cut_after_it_was_listed_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from im2rec.errors import DatasetError
    from im2rec.imagenet import preparing
    from im2rec.imagenet.preparing import ImagenetOptions, prepare_imagenet

    from ..imagenet_fixture import make_fake_imagenet

    download = tmp_path / "dl"
    make_fake_imagenet(download).write_pklz(download / "imagenet_val_maps.pklz")
    listed = preparing.list_members

    def list_then_cut(path: Path) -> list[object]:
        members = listed(path)
        if path.name == "ILSVRC2012_img_val.tar":
            os.truncate(path, path.stat().st_size // 2)  # another program, after the listing
        return members  # type: ignore[return-value]

    monkeypatch.setattr(preparing, "list_members", list_then_cut)
    with pytest.raises(DatasetError, match="ends early: the file changed while it was being read"):
        prepare_imagenet(ImagenetOptions(download, tmp_path / "t"))

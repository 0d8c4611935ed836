"""What runs inside a worker process: a stop asked for is seen between items
and only in a worker asked to stop, and the allocator is tuned so image
buffers stay on the heap."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from im2rec.executors import LocalExecutor
from im2rec.recordio import IndexedRecordWriter, pack

MALLINFO = r"""
import ctypes, sys
from im2rec.executors import LocalExecutor, tune_malloc

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2

def mapped_after_churn():
    # what a worker does per image: image-sized buffers made and dropped
    for _ in range(50):
        held = [bytearray(200_000) for _ in range(4)]
        del held
    held = bytearray(4 << 20)  # held while measured
    return libc.mallinfo2().hblkhd

if sys.argv[1] == "tuned":
    tune_malloc()
    print(mapped_after_churn())
elif sys.argv[1] == "worker":
    with LocalExecutor(2) as ex:
        print(ex.submit(mapped_after_churn).result())
else:
    print(mapped_after_churn())
"""


def test_check_stop_raises_only_in_a_worker_asked_to_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from im2rec import executors

    executors.check_stop()  # not asked: nothing
    monkeypatch.setattr(executors.worker, "_stop_asked", True)
    with pytest.raises(executors.Stopped):
        executors.check_stop()


def test_a_batch_job_stops_between_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ImageRecordIter's jobs fill a whole batch; after close() a worker
    stops at the next image instead of finishing it."""

    from im2rec import executors
    from im2rec.training.iterator import ImageRecordIter

    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        for i in range(8):
            out = io.BytesIO()
            Image.new("RGB", (20, 20), (i * 30, 0, 0)).save(out, "JPEG")
            w.write_key(i, pack((0, float(i), i, 0), out.getvalue()))
    with ImageRecordIter(path_imgrec=str(tmp_path / "d.rec"), data_shape=(3, 16, 16),
                         batch_size=8, preprocess_threads=1, verbose=False) as it:  # fmt: skip
        monkeypatch.setattr(executors.worker, "_stop_asked", True)  # as a worker's SIGUSR1 sets it
        with pytest.raises(executors.Stopped):
            it.next()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
@pytest.mark.slow
def test_tuned_malloc_keeps_image_buffers_on_the_heap() -> None:
    def mapped(mode: str) -> int:
        env = dict(os.environ)
        env.pop("MALLOC_MMAP_THRESHOLD_", None)
        env.pop("MALLOC_TRIM_THRESHOLD_", None)
        done = subprocess.run([sys.executable, "-c", MALLINFO, mode], env=env, check=True,
                              capture_output=True, text=True)  # fmt: skip
        return int(done.stdout.split()[-1])

    assert mapped("plain") >= 4 << 20  # glibc's default: a 4 MiB block is its own mmap
    assert mapped("tuned") < 4 << 20  # from the heap
    assert mapped("worker") < 4 << 20  # process workers are tuned when they start


def _imported(name: str) -> tuple[int, bool]:
    import sys

    return os.getpid(), name in sys.modules


@pytest.mark.slow
def test_preloaded_modules_are_imported_once_before_the_workers_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from im2rec.executors import fork_is_safe

    if not fork_is_safe():
        pytest.skip("workers are not forked here")
    log = tmp_path / "imports.log"
    (tmp_path / "probe_module.py").write_text(
        f"import os\nwith open({str(log)!r}, 'a') as f:\n    f.write(f'{{os.getpid()}}\\n')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with LocalExecutor(2, preload=["probe_module"]) as executor:
        seen = list(executor.map_ordered(_imported, ["probe_module"] * 8))
    assert {ok for _, ok in seen} == {True} and os.getpid() not in {pid for pid, _ in seen}
    assert log.read_text().split() == [str(os.getpid())]  # the parent's import, nobody else's


def test_worker_counts_are_bounded_by_the_usable_cpus() -> None:
    from im2rec.errors import ConfigError
    from im2rec.executors.worker import (
        MIN_WORKER_LIMIT,
        WORKERS_PER_CPU,
        check_workers,
        default_workers,
    )

    limit = max(MIN_WORKER_LIMIT, WORKERS_PER_CPU * default_workers())
    assert check_workers(1) == 1 and check_workers(limit) == limit
    for count in (0, -3, limit + 1):
        with pytest.raises(
            ConfigError, match=f"--threads {count:,}: this machine runs 1 to {limit:,}"
        ):
            check_workers(count, "--threads")

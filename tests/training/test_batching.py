"""ImageRecordIter where the shared memory has no room for its batches (a
Docker container's 64 MB ``/dev/shm`` under large batches): threads of the
training process instead of worker processes that would die of SIGBUS at
their first write past the room, with a warning saying why, and the same
batches. The small ``/dev/shm`` is a real tmpfs, mounted in a user and
mount namespace of the test's own (``unshare -rm``), so nothing outside
it sees the mount; the test is skipped where such namespaces are not
allowed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .test_iterator import png, source, write_rec

# (processes, servers or seconds: `make test-fast` leaves them out)
pytestmark = pytest.mark.slow

# One epoch of a shuffled, randomly cropped and mirrored iterator with two
# workers: which kind of workers ran it, the warnings raised, and a digest
# of every batch's pixels and labels.
SCRIPT = r"""
import hashlib, json, sys, warnings
from im2rec.training.iterator import ImageRecordIter
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    it = ImageRecordIter(path_imgrec=sys.argv[1], data_shape=(3, 24, 20), batch_size=4,
                         preprocess_threads=2, shuffle=True, rand_crop=True, rand_mirror=True,
                         seed=3, verbose=False)
    digest = hashlib.sha256()
    for batch in it:
        digest.update(batch.data[0].tobytes())
        digest.update(batch.label[0].tobytes())
    kind = it._workers.kind
    it.close()
print(json.dumps({"kind": kind, "warnings": [str(w.message) for w in caught],
                  "digest": digest.hexdigest()}))
"""


def run(command: list[str]) -> dict[str, object]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def namespaces_allowed() -> bool:
    if shutil.which("unshare") is None or not sys.platform.startswith("linux"):
        return False
    probe = "mount -t tmpfs -o size=64k tmpfs /dev/shm"
    done = subprocess.run(["unshare", "-rm", "sh", "-c", probe], capture_output=True, timeout=30)
    return done.returncode == 0


@pytest.mark.skipif(not namespaces_allowed(), reason="no user and mount namespaces here")
def test_no_room_in_dev_shm_means_threads_and_the_same_batches(tmp_path: Path) -> None:
    rec = write_rec(tmp_path / "data.rec", [png(source(i)) for i in range(10)])
    roomy = run([sys.executable, "-c", SCRIPT, str(rec)])
    # 64 kB: room for multiprocessing's semaphores, not for four 23 kB slots
    small = 'mount -t tmpfs -o size=64k tmpfs /dev/shm && exec "$0" -c "$1" "$2"'
    cramped = run(["unshare", "-rm", "sh", "-c", small, sys.executable, SCRIPT, str(rec)])
    assert roomy["kind"] == "processes" and roomy["warnings"] == []
    assert cramped["kind"] == "threads"
    (message,) = cramped["warnings"]  # type: ignore[misc]
    assert "/dev/shm" in message and "--shm-size" in message and "4 batches" in message
    assert cramped["digest"] == roomy["digest"]


@pytest.mark.parametrize("batch_size", [5000, 6000, 40_000])
def test_a_batch_larger_than_one_message_is_built_by_the_processes(
    tmp_path: Path, batch_size: int
) -> None:
    """(A job past JOB_BYTES travels in a memory file passed with its message.)"""
    from im2rec.recordio import IndexedRecordWriter, pack
    from im2rec.training.augment import Augmenter
    from im2rec.training.batching import BatchJob, SlotLayout, Workers
    from im2rec.training.filling import ImageFill

    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        w.write_key(0, pack((0, 1.0, 0, 0), b"not an image"))
    layout = SlotLayout(batch_size, (1, 2, 2), "float32", 1)
    workers = Workers(2, 2, layout, ImageFill(Augmenter((1, 2, 2))), str(tmp_path / "d.rec"), None)
    try:
        assert workers.kind == "processes"
        import numpy as np

        offsets = np.zeros(batch_size, np.int64)  # the largest job this layout sends
        job = BatchJob(str(tmp_path / "d.rec"), offsets, batch_size, 0, (0, 0, 0), True, True,
                       stops=offsets + 100)  # fmt: skip
        result = workers.collect(workers.submit(job)).result
        assert (result.filled, len(result.skipped)) == (0, batch_size)  # each one refused
    finally:
        workers.finalizer()

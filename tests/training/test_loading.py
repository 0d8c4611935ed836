"""RecordDataset a batch at a time: __getitems__ and RecordDataset.collate
(im2rec.training.loading), against the sample-at-a-time path."""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from im2rec import native
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.training import loading
from im2rec.training.augment import Augmenter, fused
from im2rec.training.augment import seeding as augment_module
from im2rec.training.dataset import RecordDataset

from .test_dataset import jpeg

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, default_collate  # noqa: E402


@pytest.fixture
def rec(tmp_path: Path) -> Path:
    with IndexedRecordWriter(tmp_path / "data.rec") as w:
        for i in range(40):
            w.write_key(i, pack((0, float(i % 7), i, 0), jpeg(40 + i, 32 + i % 5, i)))
    return tmp_path / "data.rec"


def training(rec: Path, **kw: Any) -> RecordDataset:
    augment = Augmenter((3, 24, 24), random_resized_crop=True, min_random_area=0.08,
                        rand_mirror=True, mean=(120, 115, 100), std=(58, 57, 57), **kw)  # fmt: skip
    return RecordDataset(rec, output="bytes", transform=augment)


class PerSample:
    """The dataset as torch sees one without __getitems__: a sample a call."""

    def __init__(self, ds: RecordDataset) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i: int) -> Any:
        return self.ds[i]


def fresh_rng(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    monkeypatch.setattr(augment_module, "_RNG", None)  # the next draw seeds again from random
    random.seed(seed)


def test_getitems_draws_as_getitem_does(rec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = training(rec)
    order = [5, 0, 39, 5, 17]
    fresh_rng(monkeypatch, 1)
    one_by_one = [ds[i] for i in order]
    fresh_rng(monkeypatch, 1)
    batch = ds.__getitems__(order)
    assert isinstance(batch, loading.Batch) and len(batch) == len(order)
    assert batch.images.shape == (5, 3, 24, 24) and batch.images.dtype == np.float32
    for (image, label), (want_image, want_label) in zip(batch, one_by_one, strict=True):
        assert np.array_equal(image, want_image) and label == want_label
    fresh_rng(monkeypatch, 2)
    assert not np.array_equal(ds.__getitems__(order).images, batch.images)  # the seed counts


def test_other_transforms_get_the_per_sample_list(rec: Path) -> None:
    ds = RecordDataset(rec, output="numpy", transform=np.shape)
    assert ds.__getitems__([3, 1]) == [ds[3], ds[1]]
    assert RecordDataset(rec).__getitems__([]) == []


def loaders(ds: RecordDataset, workers: int, method: str, seed: int) -> tuple[list[Any], list[Any]]:
    """One epoch both ways, shuffled, with the same seeds."""
    context = None if workers == 0 else multiprocessing.get_context(method)
    runs = []
    for dataset, collate in ((ds, RecordDataset.collate), (PerSample(ds), default_collate)):
        torch.manual_seed(seed)  # seeds `random` in each worker: the augmenter draws from it
        if workers == 0:
            random.seed(seed)
            augment_module._RNG = None
        loader = DataLoader(dataset, batch_size=16, shuffle=True, num_workers=workers,
                            collate_fn=collate, multiprocessing_context=context,
                            generator=torch.Generator().manual_seed(seed))  # fmt: skip
        runs.append([(images.clone(), labels) for images, labels in loader])
    return runs[0], runs[1]


@pytest.mark.parametrize(("workers", "method"), [(0, ""), (2, "fork"), (2, "spawn")])
@pytest.mark.slow
def test_batched_dataloader_gives_the_per_sample_batches(
    rec: Path, workers: int, method: str
) -> None:
    batched, per_sample = loaders(training(rec), workers, method, seed=7)
    assert [len(images) for images, _ in batched] == [16, 16, 8]
    for (images, labels), (want_images, want_labels) in zip(batched, per_sample, strict=True):
        assert images.dtype == want_images.dtype == torch.float32
        assert torch.equal(images, want_images)
        assert labels.dtype == want_labels.dtype == torch.int64
        assert torch.equal(labels, want_labels)
    again, _ = loaders(training(rec), workers, method, seed=8)
    assert not all(torch.equal(a, b) for (a, _), (b, _) in zip(batched, again, strict=True))


def test_uint8_batches_and_float_labels(rec: Path) -> None:
    ds = training(rec, dtype="uint8")
    ds.labels = "float"
    images, labels = RecordDataset.collate(ds.__getitems__([1, 2, 3]))
    assert images.dtype == torch.uint8 and images.shape == (3, 3, 24, 24)
    assert labels.dtype == torch.float64 and labels.tolist() == [1.0, 2.0, 3.0]


def test_default_collate_takes_a_batch_too(rec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = training(rec)
    fresh_rng(monkeypatch, 3)
    copied = default_collate(ds.__getitems__([4, 9]))
    fresh_rng(monkeypatch, 3)
    shared = RecordDataset.collate(ds.__getitems__([4, 9]))
    assert torch.equal(copied[0], shared[0]) and torch.equal(copied[1], shared[1])


def test_a_slot_is_reused_only_once_every_view_is_gone(
    rec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loading, "_OWN", (os.getpid(), []))  # this test's block alone
    ds = training(rec)
    held = [RecordDataset.collate(ds.__getitems__([i, i + 1])) for i in range(loading.SLOTS)]
    homes = {id(t[0].untyped_storage()) for t in held}
    assert len(homes) == loading.SLOTS  # each batch in its own slot
    values = [t[0].clone() for t in held]
    # every slot held: the next batch goes to fresh memory, and no held one changes
    extra = ds.__getitems__([20, 21])
    assert extra.home is None
    extra_images, _ = RecordDataset.collate(extra)
    assert all(torch.equal(t[0], v) for t, v in zip(held, values, strict=True))
    view = held[0][0][1:]  # a view keeps its batch's slot
    first_home = held[0][0].data_ptr()
    del held[0], extra_images
    again = ds.__getitems__([30, 31])
    assert again.home is None and torch.equal(view, values[0][1:])
    del view
    reused = ds.__getitems__([30, 31])
    assert reused.home is not None and reused.images.ctypes.data == first_home


def test_batches_stay_correct_without_dev_shm(rec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "SHM_DIR", None)
    monkeypatch.setattr(loading, "_OWN", (os.getpid(), []))
    ds = training(rec)
    batch = ds.__getitems__([0, 1])
    assert batch.home is None
    images, labels = RecordDataset.collate(batch)
    assert images.shape == (2, 3, 24, 24) and labels.tolist() == [0, 1]
    monkeypatch.setattr(loading, "SHM_DIR", str(Path(ds.reader.name).parent / "absent"))
    monkeypatch.setattr(loading, "_OWN", (os.getpid(), []))
    assert ds.__getitems__([0, 1]).home is None  # the block cannot be made: fresh memory


def blocks_of(pids: set[int]) -> list[str]:
    assert loading.SHM_DIR is not None
    return [
        name for name in os.listdir(loading.SHM_DIR)
        if name.startswith("im2rec-batches-") and int(name.split("-")[2]) in pids
    ]  # fmt: skip


@pytest.mark.skipif(loading.SHM_DIR is None, reason="blocks live in /dev/shm")
@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.slow
def test_workers_blocks_leave_no_files(rec: Path, persistent: bool) -> None:
    loader = DataLoader(training(rec), batch_size=8, num_workers=2,
                        collate_fn=RecordDataset.collate, persistent_workers=persistent,
                        multiprocessing_context="fork")  # fmt: skip
    it = iter(loader)
    pids = {w.pid for w in it._workers}  # type: ignore[attr-defined]
    batches = list(it)
    assert sum(len(images) for images, _ in batches) == 40
    assert blocks_of(pids) == []  # named only until this process mapped them
    del it, loader, batches


@pytest.mark.skipif(loading.SHM_DIR is None, reason="blocks live in /dev/shm")
@pytest.mark.slow
def test_blocks_of_dead_processes_are_swept(tmp_path: Path) -> None:
    child = multiprocessing.get_context("fork").Process(target=os.getpid)
    child.start()
    child.join()
    assert loading.SHM_DIR is not None and child.pid is not None
    stale = Path(loading.SHM_DIR) / f"im2rec-batches-{child.pid}-stale"
    stale.write_bytes(b"\0" * 4096)
    mine = loading.Slots(1024)
    assert not stale.exists() and Path(mine.path).exists()
    path = mine.path
    del mine  # dropped: its name goes with it
    assert not os.path.exists(path)


_HOLD_A_BLOCK = """
import sys
from im2rec.training import loading
block = loading.Slots(1024)
print(block.path, flush=True)
sys.stdin.read()  # held until the test closes stdin
"""


@pytest.mark.skipif(loading.SHM_DIR is None, reason="blocks live in /dev/shm")
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
@pytest.mark.slow
def test_a_job_in_another_pid_namespace_keeps_its_blocks(tmp_path: Path) -> None:
    """Containers started with --ipc=host share /dev/shm but not pids: a
    job whose sweep runs in another PID namespace, where the first job's
    pid names nobody, must leave that job's live block alone (it had
    removed it, killing the job with FileNotFoundError). A block nobody
    holds is still swept, whatever pid its name says."""
    import subprocess
    import sys

    holder = subprocess.Popen([sys.executable, "-c", _HOLD_A_BLOCK], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None
        live = Path(holder.stdout.readline().strip())
        assert live.exists()
        stale = Path(str(live).replace(f"-{holder.pid}-", f"-{os.getpid()}-") + "stale")
        stale.write_bytes(b"\0" * 4096)  # (its pid is alive: only the lock says it is dead)
        sweep = "from im2rec.training import loading; loading.Slots(1024)"
        command = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", sweep]
        if os.geteuid() != 0:
            command[1:1] = ["--user", "--map-root-user"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0 and "unshare" in done.stderr:
            pytest.skip(f"no new PID namespace here: {done.stderr.strip()}")
        assert done.returncode == 0, done.stderr
        assert live.exists(), "a live job's block was removed by a sweep in another namespace"
        assert not stale.exists()
    finally:
        holder.communicate("", timeout=60)
    assert not live.exists()  # its own process removed it at exit


def test_a_shorter_batch_takes_a_slot_of_the_block_it_fits(
    rec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loading, "_OWN", (os.getpid(), []))
    ds = training(rec)
    full = ds.__getitems__(list(range(8)))
    short = ds.__getitems__([8, 9, 10])  # an epoch's last batch
    assert full.home is not None and short.home is not None
    assert short.home.slots is full.home.slots and short.home.slot != full.home.slot
    assert len(loading._OWN[1]) == 1


#: the C batch loop a store's batches are staged for (not in the no-native run)
needs_c_loop = pytest.mark.skipif(
    native.switched_off() or fused._jpeg is None, reason="no C batch loop without the extensions"
)


def in_child(check: Any) -> None:
    """``check()`` in a forked child, its failure raised here: reading a URL
    starts fsspec's event-loop thread for good, and in this process that
    thread would make every later ImageRecordIter choose threads over
    processes (fork is unsafe beside a foreign thread)."""
    import traceback

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def run() -> None:
        try:
            check()
            send.send(None)
        except BaseException:
            send.send(traceback.format_exc())

    child = context.Process(target=run)
    child.start()
    failure = receive.recv() if receive.poll(120) else "the child did not answer in 120 s"
    child.join(30)
    assert failure is None, failure


@needs_c_loop
@pytest.mark.slow
def test_a_stores_batch_goes_through_the_c_loop_as_a_files_does(
    rec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records from a store (through its block cache) are staged in memory
    and decoded by the same C loop as a local file's: the same samples as
    one at a time, and as the local file gives; a batch staged in part, or
    not at all (every span too big), gives them too."""
    from im2rec.recordio import reader as reader_module
    from im2rec.storage.blockcache import BlockCache
    from im2rec.training import dataset as dataset_module

    from ..rangeserver import serving
    from .test_blockorder import needs_remote

    needs_remote()
    staged: list[int] = []
    real = dataset_module._staged

    def counted(reader: Any, positions: Any) -> Any:  # the real staging, counted
        got = real(reader, positions)
        staged.append(-1 if got is None else len(got[1]))
        return got

    monkeypatch.setattr(dataset_module, "_staged", counted)
    augment = training(rec).transform
    order = [5, 0, 39, 5, 17, 22]
    fresh_rng(monkeypatch, 4)
    local = training(rec).__getitems__(order)
    assert staged == []  # a local file is read in place

    def check() -> None:
        with serving(rec.parent) as server:
            cache = BlockCache(str(tmp_path / "cache"), budget=64 << 20, block_bytes=1 << 16)
            ds = RecordDataset(f"{server.url}/data.rec", output="bytes", transform=augment,
                               cache=cache)  # fmt: skip
            fresh_rng(monkeypatch, 4)
            one_by_one = [ds[i] for i in order]
            fresh_rng(monkeypatch, 4)
            batch = ds.__getitems__(order)
            assert staged == [len(order)]
            for (image, label), (want, want_label), (mine, my_label) in zip(
                batch, one_by_one, local, strict=True
            ):
                assert np.array_equal(image, want) and np.array_equal(image, mine)
                assert label == want_label == my_label
            for module, name, limit in ((dataset_module, "STAGE_LIMIT", 4000),
                                        (reader_module, "SPAN_LIMIT", 64)):  # fmt: skip
                # a batch staged in part, then every span too big to stage
                monkeypatch.setattr(module, name, limit)
                fresh_rng(monkeypatch, 4)
                again = ds.__getitems__(order)
                assert np.array_equal(again.images, batch.images)

    in_child(check)


@needs_c_loop
@pytest.mark.slow
def test_a_stores_spans_that_miss_stop_the_staging(
    rec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index listing every other record (each span holds two): nothing is
    staged wrongly, each sample is still right, and after SPAN_MISSES such
    spans the reader stops staging, so such an index cannot make a worker
    copy megabytes a record."""
    from im2rec.recordio import reader as reader_module
    from im2rec.storage.blockcache import BlockCache
    from im2rec.training import dataset as dataset_module

    from ..rangeserver import serving
    from .test_blockorder import needs_remote

    needs_remote()
    lines = (rec.with_suffix(".idx")).read_text().splitlines()[::2]
    served = tmp_path / "served"
    served.mkdir()
    (served / "data.rec").write_bytes(rec.read_bytes())
    (served / "data.idx").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(reader_module, "SPAN_MISSES", 4)
    staged: list[bool] = []
    real = dataset_module._staged

    def counted(reader: Any, positions: Any) -> Any:  # the real staging, counted
        got = real(reader, positions)
        staged.append(got is not None)
        return got

    monkeypatch.setattr(dataset_module, "_staged", counted)
    augment = training(rec).transform

    def check() -> None:
        with serving(served) as server:
            cache = BlockCache(str(tmp_path / "cache"), budget=64 << 20, block_bytes=1 << 16)
            ds = RecordDataset(f"{server.url}/data.rec", output="bytes", transform=augment,
                               cache=cache)  # fmt: skip
            order = [0, 3, 5, 7, 9, 11]
            fresh_rng(monkeypatch, 5)
            one_by_one = [ds[i] for i in order]
            fresh_rng(monkeypatch, 5)
            batch = ds.__getitems__(order)
            for (image, label), (want, want_label) in zip(batch, one_by_one, strict=True):
                assert np.array_equal(image, want) and label == want_label
            assert ds.__getitems__(order[:2]) is not None
            assert staged[0] and not staged[-1]  # staged at first, not once 4 spans missed

    in_child(check)

"""Block-shuffled epochs (im2rec.training.blockorder) and reading a remote
.rec through whole cached blocks (im2rec.storage.blockcache): the epoch
contract, requests per epoch, the cache's budget and validity, against a
real HTTP range server and a real S3 server."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from im2rec.errors import ConfigError
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, pack
from im2rec.storage.blockcache import BlockCache, CachedView
from im2rec.training.blockorder import BlockSampler, epoch_order
from im2rec.training.dataset import RecordDataset

from ..rangeserver import serving

BLOCK = 64 << 10  # the smallest block: 12 of them in the file below


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 records of 1-5 kB each (about 800 kB): record i's label is i."""
    root = tmp_path_factory.mktemp("served")
    rng = np.random.default_rng(0)
    with IndexedRecordWriter(root / "data.rec") as w:
        for i in range(300):
            payload = bytes(rng.integers(0, 256, int(rng.integers(1000, 5000)), np.uint8))
            w.write_key(i, pack((0, float(i), i, 0), payload))
    return root


def labels_of(ds: RecordDataset, order: Any) -> list[int]:
    return [int(ds[int(i)][1]) for i in order]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=25),
    seed=st.integers(0, 2**32 - 1),
    window=st.integers(1, 5),
    replicas=st.integers(1, 4),
)
def test_every_sample_once_an_epoch_in_windows_of_blocks(
    sizes: list[int], seed: int, window: int, replicas: int
) -> None:
    blocks = np.repeat(np.arange(len(sizes)) * 7, sizes)  # block ids need not be 0..n-1
    seen = []
    for rank in range(replicas):
        samples, visit = epoch_order(blocks, seed, 3, window, replicas, rank)
        again, _ = epoch_order(blocks, seed, 3, window, replicas, rank)
        assert np.array_equal(samples, again)  # a function of (seed, epoch)
        # read a window of blocks at a time: each window's samples are its blocks'
        done = 0
        for first in range(0, len(visit), window):
            group = visit[first : first + window]
            count = int(np.isin(blocks, group).sum())
            assert set(blocks[samples[done : done + count]]) == set(group)
            done += count
        assert done == len(samples)
        seen.extend(samples.tolist())
    assert sorted(seen) == list(range(len(blocks)))  # across ranks: each exactly once


def test_epochs_differ_and_seeds_differ() -> None:
    blocks = np.repeat(np.arange(20), 10)
    first = epoch_order(blocks, 1, 0, 2)[0]
    assert not np.array_equal(first, epoch_order(blocks, 1, 1, 2)[0])
    assert not np.array_equal(first, epoch_order(blocks, 2, 0, 2)[0])
    # shuffled within the window, not in file order
    assert not np.array_equal(np.sort(first[:20]), first[:20])


def test_sampler_ranks_resume_and_state(folder: Path) -> None:
    ds = RecordDataset(folder / "data.rec", output="bytes")
    samplers = [BlockSampler(ds, seed=5, block_bytes=BLOCK, num_replicas=3, rank=r)
                for r in range(3)]  # fmt: skip
    lengths = {len(s) for s in samplers}
    assert len(lengths) == 1  # every rank has as many samples (a few repeated)
    orders = [list(s) for s in samplers]
    assert set().union(*map(set, orders)) == set(range(300))
    # the blocks are dealt anew each epoch (4 ranks: 3 or 4 blocks each, so
    # the parts' lengths change): every record still comes, every epoch
    four = [BlockSampler(ds, seed=5, block_bytes=BLOCK, num_replicas=4, rank=r)
            for r in range(4)]  # fmt: skip
    for epoch in range(8):
        for s in four:
            s.set_epoch(epoch)
        assert len({len(s) for s in four}) == 1
        assert set().union(*(set(s) for s in four)) == set(range(300))
    dropped = [list(BlockSampler(ds, seed=5, block_bytes=BLOCK, num_replicas=3, rank=r,
                                 drop_last=True)) for r in range(3)]  # fmt: skip
    flat = [i for order in dropped for i in order]
    assert len(flat) == len(set(flat))  # nothing repeated when dropping
    one = BlockSampler(ds, seed=5, block_bytes=BLOCK)
    one.set_epoch(4)
    full = list(one)
    one.set_epoch(4, start=123)
    assert list(one) == full[123:]
    one.set_epoch(4)
    state = one.state_dict(consumed=40)
    other = BlockSampler(ds, seed=5, block_bytes=BLOCK)
    other.load_state_dict(state)
    assert len(other) == 260 and list(other) == full[40:]
    assert list(other) == full  # the resumed epoch's next iteration starts afresh
    with pytest.raises(ConfigError, match="seed"):
        BlockSampler(ds, seed=6).load_state_dict(state)
    with pytest.raises(ConfigError, match="rank"):
        BlockSampler(ds, num_replicas=2, rank=2)


def test_a_resumed_resume_goes_on_where_the_last_one_stopped(folder: Path) -> None:
    """``consumed`` counts the samples of the pass in progress, resumed or
    not, before or during its iteration, and ``len`` is that pass's length
    throughout: a job resumed twice repeats and skips nothing (it had
    counted from the epoch's start in one case, from the resumed start in
    the other)."""
    ds = RecordDataset(folder / "data.rec", output="bytes")
    full = list(BlockSampler(ds, seed=7, block_bytes=BLOCK).__iter__())
    first = BlockSampler(ds, seed=7, block_bytes=BLOCK)
    taken = []
    it = iter(first)
    taken += [next(it) for _ in range(40)]
    state = first.state_dict(consumed=40)  # (mid-iteration)
    for run in range(3):  # each run resumes the last one's checkpoint
        job = BlockSampler(ds, seed=7, block_bytes=BLOCK)
        job.load_state_dict(state)
        assert len(job) == 300 - state["start"]
        assert job.state_dict(consumed=0) == state  # (before it iterates)
        it = iter(job)
        got = [next(it) for _ in range(30)]
        assert len(job) == 300 - state["start"]  # the same while the pass runs
        taken += got
        state = job.state_dict(consumed=30)
        assert state["start"] == 40 + 30 * (run + 1)
    rest = BlockSampler(ds, seed=7, block_bytes=BLOCK)
    rest.load_state_dict(state)
    taken += list(rest)
    assert taken == full  # every sample once, in the epoch's order
    assert len(rest) == 300  # that pass is over: the next begins at the start
    with pytest.raises(ConfigError, match="consumed is 301; it must be 0 to 300"):
        rest.state_dict(consumed=301)


def needs_remote() -> None:
    pytest.importorskip("fsspec", reason="URLs need the remote extra")
    pytest.importorskip("aiohttp", reason="http:// URLs need aiohttp (the remote extra)")


def cached_dataset(url: str, cache_dir: Path, **kw: Any) -> RecordDataset:
    needs_remote()
    cache = BlockCache(str(cache_dir), budget=kw.pop("budget", 64 << 20), block_bytes=BLOCK,
                       ahead=kw.pop("ahead", 4))  # fmt: skip
    return RecordDataset(url, output="bytes", cache=cache, **kw)


@pytest.mark.slow
def test_an_epoch_requests_each_block_once_and_the_next_none(folder: Path, tmp_path: Path) -> None:
    local = RecordDataset(folder / "data.rec", output="bytes")
    with serving(folder) as server:
        ds = cached_dataset(f"{server.url}/data.rec", tmp_path / "cache")
        view = ds.reader._ensure_open()
        assert isinstance(view, CachedView)
        blocks = len(view.starts)
        assert abs(blocks - view.size / BLOCK) <= 1  # about a block each 64 kB
        # blocks begin at records: no record is in two
        offsets = np.sort(ds.record_offsets())
        assert set(view.starts.tolist()) <= set(offsets.tolist())
        sampler = BlockSampler(ds, seed=1, window=2)
        epoch = [(ds[i][0], int(ds[i][1])) for i in sampler]
        assert sorted(label for _, label in epoch) == list(range(300))
        assert all(payload == local[label][0] for payload, label in epoch)
        # one request a block (the first one's made opening it: the layout check)
        assert server.gets["/data.rec"] == blocks
        sampler.set_epoch(1)
        assert sorted(labels_of(ds, sampler)) == list(range(300))
        assert server.gets["/data.rec"] == blocks  # the second epoch: none
        # another process, another run: the same folder serves it
        again = cached_dataset(f"{server.url}/data.rec", tmp_path / "cache")
        assert sorted(labels_of(again, BlockSampler(again, seed=9))) == list(range(300))
        assert server.gets["/data.rec"] == blocks


@pytest.mark.slow
def test_workers_share_the_cache(folder: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    with serving(folder) as server:
        ds = cached_dataset(f"{server.url}/data.rec", tmp_path / "cache")
        sampler = BlockSampler(ds, seed=3, window=2)
        loader = DataLoader(ds, batch_size=16, sampler=sampler, num_workers=2,
                            multiprocessing_context=multiprocessing.get_context("fork"),
                            collate_fn=lambda batch: [int(label) for _, label in batch])  # fmt: skip
        got = [label for batch in loader for label in batch]
        assert sorted(got) == list(range(300))
        assert got == labels_of(RecordDataset(folder / "data.rec", output="bytes"), list(sampler))
        blocks = len(ds.reader._ensure_open().starts)
        assert server.gets["/data.rec"] == blocks  # no block fetched twice, by any process
        del torch


@pytest.mark.slow
def test_read_ahead_goes_on_after_the_first_epoch_with_a_small_budget(
    folder: Path, tmp_path: Path
) -> None:
    """The sampler's process asks for blocks ahead but never reads them (its
    DataLoader's workers do): with a budget smaller than the data, blocks
    evicted in one epoch are fetched ahead again in the next (the first
    epoch's asks had stayed marked pending for ever, so every later block
    was fetched by a worker, waiting for it)."""
    with serving(folder) as server:
        ds = cached_dataset(f"{server.url}/data.rec", tmp_path / "cache", budget=6 * BLOCK,
                            ahead=1)  # fmt: skip
        view = ds.reader._ensure_open()
        assert isinstance(view, CachedView)
        sampler = BlockSampler(ds, seed=4, window=2)
        fetched = []
        for epoch in range(3):
            sampler.set_epoch(epoch)
            before = view.requests
            for _ in sampler:  # asks ahead, reads nothing
                view.wait()
            fetched.append(view.requests - before)
        blocks = len(view.starts)
        assert fetched[0] >= blocks - 1  # (the first block came with the open)
        assert all(n >= blocks - 6 for n in fetched[1:]), fetched  # the evicted ones, again


@pytest.mark.slow
def test_a_block_sampler_over_s3(folder: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from ..s3server import BUCKET, s3_server

    with s3_server() as client:
        for name in ("data.rec", "data.idx"):
            client.upload_file(str(folder / name), BUCKET, f"sets/{name}")
        url = f"s3://{BUCKET}/sets/data.rec"
        ds = cached_dataset(url, tmp_path / "cache")
        sampler = BlockSampler(ds, seed=2, window=3)
        local = IndexedRecordReader(folder / "data.rec")
        orders = []
        for epoch in range(2):
            sampler.set_epoch(epoch)
            order = list(sampler)
            orders.append(order)
            assert sorted(order) == list(range(300))
            for i in order[:50]:
                assert ds.reader[i] == local[i]
        assert orders[0] != orders[1]  # another order each epoch
        # the same seed and epoch: the same order, in another process's view
        other = BlockSampler(cached_dataset(url, tmp_path / "cache"), seed=2, window=3)
        assert list(other) == orders[0]
        # resumed after 77 samples of epoch 1: the rest of that epoch's order
        sampler.set_epoch(1)
        other.load_state_dict(sampler.state_dict(consumed=77))
        assert list(other) == orders[1][77:]
        # two ranks, DataLoader workers each: every record once between them
        seen = []
        for rank in range(2):
            part = BlockSampler(ds, seed=2, window=3, num_replicas=2, rank=rank,
                                drop_last=True)  # fmt: skip
            loader = DataLoader(ds, batch_size=20, sampler=part, num_workers=2,
                                multiprocessing_context=multiprocessing.get_context("fork"),
                                collate_fn=lambda batch: [int(label) for _, label in batch])  # fmt: skip
            seen.extend(label for batch in loader for label in batch)
        # as many for each rank (drop_last: the longer part drops a few), none twice
        assert len(seen) == len(set(seen)) == 2 * len(part) > 200
        del torch
        view = ds.reader._ensure_open()
        assert isinstance(view, CachedView)
        view.wait()  # the blocks the sampler asked for ahead
        assert view.requests == len(view.starts)  # each once, over two epochs


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.slow
def test_image_record_iter_reads_a_cached_url_a_block_at_a_time(
    tmp_path: Path, threads: int
) -> None:
    from PIL import Image

    from im2rec.training.iterator import ImageRecordIter

    needs_remote()
    served = tmp_path / "served"
    served.mkdir()
    rng = np.random.default_rng(1)
    with IndexedRecordWriter(served / "img.rec") as w:
        for i in range(120):
            pixels = rng.integers(0, 256, (24, 20 + i % 7, 3), np.uint8)
            out = __import__("io").BytesIO()
            Image.fromarray(pixels).save(out, "JPEG", quality=95)
            w.write_key(i, pack((0, float(i), i, 0), out.getvalue()))
    with serving(served) as server:
        url = f"{server.url}/img.rec"
        cache = BlockCache(str(tmp_path / "cache"), budget=64 << 20, block_bytes=BLOCK)
        it = ImageRecordIter(path_imgrec=url, path_imgidx=url[:-4] + ".idx",
                             data_shape=(3, 16, 16), batch_size=10, shuffle=True, seed=4,
                             rand_crop=True, cache=cache, block_window=2,
                             preprocess_threads=threads, verbose=False)  # fmt: skip
        blocks = len(it._plan.view.starts) if it._plan else 0
        assert blocks >= 3
        epochs = []
        for _ in range(2):
            labels = [int(v) for batch in it for v in batch.label[0][: 10 - batch.pad]]
            epochs.append(labels)
            it.reset()
        it.close()
        assert sorted(epochs[0]) == sorted(epochs[1]) == list(range(120))
        assert epochs[0] != epochs[1] and epochs[0] != sorted(epochs[0])
        # each block once, by any process, over two epochs; and the one small
        # read of the last record that every iterator makes when it opens a file
        assert server.gets["/img.rec"] == blocks + 1

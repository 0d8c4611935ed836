"""Checkpoint mid-epoch, resume in a fresh process: torchdata's
StatefulDataLoader over RecordDataset (BlockSampler, or shuffle=True) with
worker processes, and ImageRecordIter through its own state. Each resumed
run gives exactly the samples the uninterrupted run gave after that point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .test_iterator import jpeg_rec

pytest.importorskip("torchdata.stateful_dataloader")

LOADER = r"""
import hashlib, json, sys, torch
from torchdata.stateful_dataloader import StatefulDataLoader
from im2rec.training import Augmenter, BlockSampler, RecordDataset

rec, kind, mode, state_file, stop = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
if __name__ == "__main__":
    augment = Augmenter((3, 16, 16), rand_crop=True, rand_mirror=True)
    ds = RecordDataset(rec, output="bytes", transform=augment, labels="float")
    kw = {"batch_size": 4, "num_workers": 2, "collate_fn": ds.collate}
    if kind == "block":
        sampler = BlockSampler(ds, seed=3, block_bytes=4096)
        loader = StatefulDataLoader(ds, sampler=sampler, **kw)
    else:
        torch.manual_seed(7)
        loader = StatefulDataLoader(ds, shuffle=True, **kw)
    if mode == "rest":
        loader.load_state_dict(torch.load(state_file))
    got = []
    for images, labels in loader:
        got.append(labels.tolist())
        if mode == "first" and len(got) == stop:  # checkpoint after `stop` training steps
            torch.save(loader.state_dict(), state_file)
            break
    print(json.dumps(got))
"""


def run(script: str, *args: object) -> list:
    done = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return jpeg_rec(tmp_path_factory.mktemp("resume") / "r.rec", 37, (40, 30))


@pytest.mark.parametrize("kind", ["block", "shuffle"])
def test_a_stateful_dataloader_resumes_where_it_stopped(
    rec: Path, tmp_path: Path, kind: str
) -> None:
    state = tmp_path / "state.pt"
    full = run(LOADER, rec, kind, "full", state, 0)
    first = run(LOADER, rec, kind, "first", state, 4)
    rest = run(LOADER, rec, kind, "rest", state, 0)
    assert first == full[:4]
    assert first + rest == full
    assert sum(len(batch) for batch in full) == 37  # every record once


ITERATOR = r"""
import hashlib, json, sys
from im2rec.training import ImageRecordIter

rec, mode, state_file, stop = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
it = ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=4, shuffle=True,
                     rand_crop=True, rand_mirror=True, preprocess_threads=2, verbose=False)
if mode == "rest":
    it.load_state_dict(json.load(open(state_file)))
got = []
for epoch in range(2):  # the rest of this epoch, then all of the next
    for batch in it:
        got.append([hashlib.sha256(batch.data[0].tobytes()).hexdigest()[:12],
                    batch.label[0].tolist(), int(batch.pad)])
        if mode == "first" and len(got) == stop:
            json.dump(it.state_dict(), open(state_file, "w"))
            break
    if mode == "first":
        break
print(json.dumps(got))
"""


def test_image_record_iter_resumes_from_its_state(rec: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    full = run(ITERATOR, rec, "full", state, 0)
    first = run(ITERATOR, rec, "first", state, 3)
    saved = json.loads(state.read_text())
    assert saved["batch"] == 3 and saved["epoch"] == 0
    rest = run(ITERATOR, rec, "rest", state, 0)
    assert first == full[:3]
    assert first + rest == full  # the same pixels, labels and pads, into the next epoch


def test_a_state_of_another_iterator_is_refused(rec: Path) -> None:
    from im2rec.errors import ConfigError
    from im2rec.training import ImageRecordIter

    kw = {"path_imgrec": str(rec), "data_shape": (3, 16, 16), "verbose": False,
          "preprocess_threads": 1}  # fmt: skip
    with ImageRecordIter(batch_size=4, **kw) as one:
        state = one.state_dict()
    with ImageRecordIter(batch_size=5, **kw) as other:
        with pytest.raises(ConfigError, match="batch_size=4"):
            other.load_state_dict(state)


ELASTIC = r"""
import json, sys, torch
from im2rec.training import BlockSampler, RecordDataset, merge_states

rec, replicas, rank, stop, state = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
if __name__ == "__main__":
    ds = RecordDataset(rec, output="bytes", labels="float")
    sampler = BlockSampler(ds, seed=11, block_bytes=4096, num_replicas=replicas, rank=rank)
    if stop < 0:  # a rank of the resized job: every old rank's state, merged
        old = [json.load(open(f"{state}.{r}")) for r in range(-stop)]
        sampler.load_state_dict(merge_states(old))
    loader = torch.utils.data.DataLoader(ds, sampler=sampler, batch_size=3, num_workers=2,
                                         collate_fn=lambda batch: [label for _, label in batch])
    got = []
    for labels in loader:
        got += labels
        if 0 <= stop <= len(got):  # the job stops here: this rank checkpoints what it trained on
            json.dump(sampler.state_dict(consumed=len(got)), open(f"{state}.{rank}", "w"))
            break
    print(json.dumps(got))
"""


def test_an_epoch_checkpointed_on_4_ranks_resumes_on_3_exactly_once(
    rec: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    old: list[float] = []
    for rank, stop in enumerate((6, 3, 9, 3)):  # each rank had trained on that many
        old += run(ELASTIC, rec, 4, rank, stop, state)
    new = [run(ELASTIC, rec, 3, rank, -4, state) for rank in range(3)]
    assert max(map(len, new)) - min(map(len, new)) <= 1
    rest = [label for part in new for label in part]
    assert len(rest) == len(set(rest)) and not set(rest) & set(old)  # none twice
    assert set(old) | set(rest) == {float(i) for i in range(37)}  # every record


def test_merge_states_wants_every_rank(rec: Path) -> None:
    from im2rec.errors import ConfigError
    from im2rec.training import BlockSampler, RecordDataset, merge_states

    ds = RecordDataset(rec, output="bytes")
    states = [BlockSampler(ds, seed=1, block_bytes=4096, num_replicas=3, rank=r).state_dict()
              for r in (0, 2)]  # fmt: skip
    with pytest.raises(ConfigError, match="every rank 0..2"):
        merge_states(states)
    with pytest.raises(ConfigError, match="rank 0 of 3"):
        BlockSampler(ds, seed=1, block_bytes=4096, num_replicas=2).load_state_dict(states[0])

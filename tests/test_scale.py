"""Indexes at the size of real datasets (docs/performance.md, "Scale"): no
Python object a record, memory measured on real processes (RSS and PSS
from /proc), and the drop-in's ``keys``/``idx`` views behaving as MXNet's
list and dict did."""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from im2rec.errors import DuplicateKeyError
from im2rec.recordio import IndexedRecordReader, MXIndexedRecordIO, load_index
from im2rec.recordio.views import KeyList, KeyView

MAGIC = 0xCED7230A
RECORD = np.dtype([("magic", "<u4"), ("lrec", "<u4"), ("flag", "<u4"), ("label", "<f4"),
                   ("id", "<u8"), ("id2", "<u8"), ("payload", "<u4")])  # fmt: skip


def synthetic(prefix: Path, n: int, keys: np.ndarray | None = None) -> Path:
    """A ``.rec``/``.idx`` pair of ``n`` tiny records (a 24-byte header and
    4 bytes of payload), written with numpy in a second for a million."""
    records = np.zeros(n, RECORD)
    records["magic"], records["lrec"] = MAGIC, 28
    records["label"] = np.arange(n) % 1000
    records["id"] = np.arange(n)
    records.tofile(f"{prefix}.rec")
    keys = np.arange(n, dtype=np.int64) if keys is None else keys
    offsets = np.arange(n, dtype=np.int64) * RECORD.itemsize
    with open(f"{prefix}.idx", "w") as f:
        for start in range(0, n, 1 << 20):
            f.write("".join(f"{k}\t{o}\n" for k, o in zip(keys[start : start + (1 << 20)].tolist(),
                                                         offsets[start : start + (1 << 20)].tolist(),
                                                         strict=True)))  # fmt: skip
    return Path(f"{prefix}.rec")


# -- lookups and views ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["dense", "shuffled", "sparse", "negative"])
def test_lookups_by_key_agree_with_a_dict(tmp_path: Path, kind: str) -> None:
    rng = np.random.default_rng(3)
    n = 5000
    keys = {
        "dense": np.arange(n, dtype=np.int64),
        "shuffled": rng.permutation(n).astype(np.int64) + 10,
        "sparse": np.sort(rng.choice(1 << 40, n, replace=False)).astype(np.int64)[::-1].copy(),
        "negative": rng.permutation(n).astype(np.int64) - 2500,
    }[kind]
    rec = synthetic(tmp_path / "d", n, keys)
    index = load_index(rec.with_suffix(".idx"))
    want = dict(zip(keys.tolist(), (np.arange(n) * RECORD.itemsize).tolist(), strict=True))
    for key in random.Random(1).sample(sorted(want), 300):
        assert index.offset_of(key) == want[key]
        assert index.offset_of(np.int64(key)) == want[key]  # InsightFace passes numpy ints
        assert index.offset_of(float(key)) == want[key]  # as a dict finds 2.0 under 2
    for missing in (int(keys.max()) + 1, int(keys.min()) - 1, "7", None, 2.5, True):
        with pytest.raises(KeyError):
            index.offset_of(missing)
    assert list(index.key_view()) == keys.tolist()
    reader = IndexedRecordReader(rec)
    key = int(keys[123])
    assert reader.read_key(key) == reader[123]


@pytest.mark.parametrize("keys", [[0, 1, 2, 1], [5, 1 << 40, 7, 1 << 40]])
def test_a_key_written_twice_is_found_by_the_lookup_build(tmp_path: Path, keys: list[int]) -> None:
    idx = tmp_path / "d.idx"
    idx.write_text("".join(f"{k}\t{4 * i}\n" for i, k in enumerate(keys)))
    with pytest.raises(DuplicateKeyError, match=r"d.idx:4: key .* appears again \(first on line"):
        load_index(idx)


def test_string_keys_still_work(tmp_path: Path) -> None:
    idx = tmp_path / "d.idx"
    idx.write_text("b\t0\na\t36\n")
    index = load_index(idx, str)
    assert index.offset_of("a") == 36 and list(index.key_view()) == ["b", "a"]


def test_the_index_pickles_without_its_lookup_table(tmp_path: Path) -> None:
    rec = synthetic(tmp_path / "d", 2000)
    index = load_index(rec.with_suffix(".idx"))
    index.offset_of(5)
    again = pickle.loads(pickle.dumps(index))
    assert again.offset_of(1999) == 1999 * RECORD.itemsize
    view = pickle.loads(pickle.dumps(index.key_view()))
    assert isinstance(view, KeyView) and view[7] == 7 and len(view) == 2000


def test_drop_in_keys_are_a_list_code_may_reorder(tmp_path: Path) -> None:
    rec = synthetic(tmp_path / "d", 100)
    r = MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    assert isinstance(r.keys, KeyList) and r.keys == list(range(100))
    random.Random(0).shuffle(r.keys)  # what training code does with MXNet's list
    assert sorted(r.keys) == list(range(100)) and r.keys != list(range(100))
    assert r.read_idx(r.keys[0]) == IndexedRecordReader(rec).read_key(r.keys[0])
    r.keys.sort()
    assert list(r.keys) == list(range(100))
    r.keys.append("extra")  # anything a list takes
    assert r.keys[-1] == "extra" and len(r.keys) == 101
    assert load_index(rec.with_suffix(".idx")).key_view()[:3] == [0, 1, 2]  # the index unchanged


def test_drop_in_idx_is_a_mapping_code_may_edit(tmp_path: Path) -> None:
    rec = synthetic(tmp_path / "d", 10)
    r = MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    assert len(r.idx) == 10 and 3 in r.idx and r.idx[3] == 3 * RECORD.itemsize
    r.idx[99] = r.idx[4]
    del r.idx[3]
    assert r.read_idx(99) == r.read_idx(4)
    with pytest.raises(KeyError):
        r.read_idx(3)
    assert len(r.idx) == 10 and 3 not in r.idx and list(r.idx)[-1] == 99
    assert dict(pickle.loads(pickle.dumps(r.idx))) == dict(r.idx)


# -- memory of real processes -------------------------------------------------------

PROBE = """
import json, random, sys
from im2rec.recordio import {cls}
def status():
    found = {{}}
    for line in open("/proc/self/status"):
        if line.startswith(("VmRSS", "VmHWM")):
            found[line.split(":")[0]] = int(line.split()[1]) * 1024
    return found
import numpy  # (counted in the base, as the reader imports it)
base = status()
reader = {make}
n = len(reader)
for key in random.Random(0).sample(range(n), 1000):
    {read}
print(json.dumps({{"base": base, "after": status(), "n": n}}))
"""


def probe(code: str, rec: Path) -> dict[str, int]:
    """RSS grown by opening ``rec`` and reading from it, and the peak while opening."""
    code = code.replace("sys.argv[1]", repr(str(rec)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    return {"rss": data["after"]["VmRSS"] - data["base"]["VmRSS"],
            "peak": data["after"]["VmHWM"] - data["base"]["VmRSS"], "n": data["n"]}  # fmt: skip


@pytest.fixture(scope="module")
def million(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic(tmp_path_factory.mktemp("scale") / "m", 1_000_000)


@pytest.mark.parametrize(
    ("cls", "make", "read"),
    [
        ("IndexedRecordReader", "IndexedRecordReader(sys.argv[1])", "reader.read_key(key)"),
        ("MXIndexedRecordIO", "MXIndexedRecordIO(sys.argv[1][:-4] + '.idx', sys.argv[1], 'r')",
         "reader.read_idx(key)"),
        ("RecordDataset", "RecordDataset(sys.argv[1], output='bytes')", "reader[key]"),
    ],
)  # fmt: skip
def test_an_open_index_costs_at_most_32_bytes_a_record(
    million: Path, tmp_path: Path, cls: str, make: str, read: str
) -> None:
    # keys, offsets and the dense lookup table: 24 bytes a record; before,
    # Python ints in lists and dicts took about 190 (MXNet's own: ~130).
    # Measured as the difference between 1M and 1k records: the imports and
    # the allocator's own blocks are the same in both.
    module = "im2rec" if cls == "RecordDataset" else "im2rec.recordio"
    code = PROBE.format(cls=cls, make=make, read=read).replace("im2rec.recordio", module)
    code = code.replace("n = len(reader)", "n = len(reader.keys)")
    big, small = probe(code, million), probe(code, synthetic(tmp_path / "k", 1000))
    assert big["n"] == 1_000_000
    per_record = (big["rss"] - small["rss"]) / 999_000
    peak = (big["peak"] - small["peak"]) / 999_000
    assert per_record < 32, f"{per_record:.1f} bytes a record"
    assert peak < 48, f"peak {peak:.1f} bytes a record while opening"


LOADER = """
import json, os, sys
import torch
from torch.utils.data import DataLoader
from im2rec import RecordDataset

def pss(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0

def children():
    found = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            found += [int(p) for p in f.read().split()]
    return found

ds = RecordDataset(sys.argv[1], output="bytes")
sampler = torch.utils.data.RandomSampler(ds, num_samples=4000, generator=torch.Generator().manual_seed(0))
loader = DataLoader(ds, batch_size=100, sampler=sampler, num_workers=4, persistent_workers=True,
                    multiprocessing_context="fork", collate_fn=lambda batch: len(batch))
for epoch in range(2):
    seen = sum(loader)
workers = children()
total = pss(os.getpid()) + sum(pss(p) for p in workers)
print(json.dumps({"pss": total, "workers": len(workers), "seen": seen}))
"""


def test_dataloader_workers_share_the_index(million: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    small = synthetic(tmp_path / "k", 1000)

    def total_pss(rec: Path) -> int:
        out = subprocess.run([sys.executable, "-c", LOADER, str(rec)], capture_output=True,
                             text=True, check=True, timeout=600)  # fmt: skip
        data = json.loads(out.stdout.strip().splitlines()[-1])
        assert data["workers"] == 4 and data["seen"] == 4000, data
        return int(data["pss"])

    grown = total_pss(million) - total_pss(small)
    # the parent's 24 MB of arrays, shared with the workers (fork): each
    # worker copying Python objects touched by refcounts would add ~190 MB
    assert grown < 60 << 20, f"parent + 4 workers grew {grown / 1e6:.0f} MB for 1M records"

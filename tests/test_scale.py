"""Indexes at the size of real datasets (docs/performance.md, "Scale"): no
Python object a record, memory measured on real processes (RSS and PSS
from /proc), and the drop-in's ``keys``/``idx`` views behaving as MXNet's
list and dict did."""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from im2rec.errors import DuplicateKeyError
from im2rec.recordio import IndexedRecordReader, index_cache, load_index
from im2rec.recordio.views import KeyView

from .synthetic_rec import RECORD, synthetic

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


# -- memory of real processes -------------------------------------------------------

# status(), pss(pid), children(): what bench/bench_scale.py measures with
PROCMEM = (Path(__file__).parents[1] / "bench" / "procmem.py").read_text()

PROBE = """
import json, random, sys
from im2rec.recordio import {cls}
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
    code = PROCMEM + code.replace("sys.argv[1]", repr(str(rec)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    return {"rss": data["after"]["VmRSS"] - data["base"]["VmRSS"],
            "peak": data["after"]["VmHWM"] - data["base"]["VmRSS"], "n": data["n"]}  # fmt: skip


@pytest.fixture(scope="module")
def million(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A million records, with the binary copy of their index made: a copy
    is written only for an ``.idx`` settled for SETTLED_NS, so the fixture
    waits that long past the ``.idx``'s change time (without it, a test run
    right after the fixture would measure spawned workers without a copy)."""
    rec = synthetic(tmp_path_factory.mktemp("scale") / "m", 1_000_000)
    idx = rec.with_suffix(".idx")
    st = os.stat(idx)
    settled = max(st.st_mtime_ns, st.st_ctime_ns) + index_cache.SETTLED_NS
    while (left := settled - time.time_ns()) > 0:
        time.sleep(left / 1e9 + 0.01)
    load_index(idx)
    assert os.path.exists(index_cache.cache_path(idx)), "the binary copy was not written"
    return rec


@pytest.mark.parametrize(
    ("cls", "make", "read"),
    [
        ("IndexedRecordReader", "IndexedRecordReader(sys.argv[1])", "reader.read_key(key)"),
        ("MXIndexedRecordIO", "MXIndexedRecordIO(sys.argv[1][:-4] + '.idx', sys.argv[1], 'r')",
         "reader.read_idx(key)"),
        ("RecordDataset", "RecordDataset(sys.argv[1], output='bytes')", "reader[key]"),
    ],
)  # fmt: skip
@pytest.mark.slow
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
import json, os, random, sys
from torch.utils.data import DataLoader
from im2rec import RecordDataset

ds = RecordDataset(sys.argv[1], output="bytes")
# (not torch's RandomSampler: it makes a list of all n keys each epoch,
# 36 MB of Python ints at 1M whose freed pages stay or go at random)
sampler = random.Random(0).choices(range(len(ds)), k=4000)
loader = DataLoader(ds, batch_size=100, sampler=sampler, num_workers=4, persistent_workers=True,
                    multiprocessing_context=sys.argv[2], collate_fn=len)
for epoch in range(2):
    seen = sum(loader)
workers = children()
total = held(os.getpid()) + sum(held(p) for p in workers)
print(json.dumps({"held": total, "workers": len(workers), "seen": seen}))
"""


@pytest.mark.parametrize("start", ["fork", "spawn"])
@pytest.mark.slow
def test_dataloader_workers_share_the_index(million: Path, tmp_path: Path, start: str) -> None:
    pytest.importorskip("torch")
    small = synthetic(tmp_path / "k", 1000)

    def total_held(rec: Path) -> int:
        out = subprocess.run([sys.executable, "-c", PROCMEM + LOADER, str(rec), start],
                             capture_output=True, text=True, check=True, timeout=600)  # fmt: skip
        data = json.loads(out.stdout.strip().splitlines()[-1])
        # (spawn starts multiprocessing's resource tracker as well)
        assert data["workers"] == 4 + (start == "spawn") and data["seen"] == 4000, data
        return int(data["held"])

    # the parent's 24 MB of arrays, mapped from the binary copy and shared
    # with the workers: forked, each worker copying Python objects touched
    # by refcounts would add ~190 MB; spawned, each would receive 16 MB of
    # arrays and build an 8 MB table (+96 MB) if it did not map the copy
    # again. Counted: the processes' own memory (procmem.held: anonymous
    # and shared memory), not the pages of mapped files, whose share moves
    # with whatever else maps the same libraries (torch's: the whole PSS
    # moved 25-86 MB between runs of the suite). Measured: 3 MB forked,
    # 3 MB spawned (the whole PSS: 22 and 20 MB, the copy's pages in it).
    grown = total_held(million) - total_held(small)
    assert grown < 30 << 20, f"parent + 4 workers grew {grown / 1e6:.0f} MB for 1M records"


# -- the binary copy of a parsed .idx ------------------------------------------------


# -- lists read as streams -----------------------------------------------------------


@pytest.mark.parametrize("block", [7, 64, 1 << 20])
@pytest.mark.parametrize(
    "text",
    [
        "0\t1\ta.jpg\n1\t2\tb.jpg\n",
        "\ufeff0\t1\ta.jpg\r\n\r\n1\t2\t3\tb c.jpg\r2\t0\tx\u2028y.jpg",
        "5\t1\tdé\u00e9.jpg\n\n\n6\t0\tz.jpg\r",
    ],
)
def test_a_streamed_list_reads_as_the_whole_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int, text: str
) -> None:
    from im2rec.listing import lstfile
    from im2rec.storage.files import split_lines

    lst = tmp_path / "a.lst"
    lst.write_bytes(text.encode("utf-8"))
    monkeypatch.setattr(lstfile, "_BLOCK", block)
    got = list(lstfile.iter_lst(lst))
    lines = split_lines(text.lstrip("\ufeff"))
    want = [lstfile._parse_line(raw, n, str(lst)) for n, raw in enumerate(lines, 1)]
    assert got == [item for item in want if item is not None]
    stream = lstfile.ListStream.scan(lst)
    assert len(stream) == len(got) and list(stream.from_position(1)) == got[1:]
    assert stream.find(got[-1].key) == (len(got) - 1, got[-1])


def test_a_streamed_list_names_bad_bytes_and_repeated_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from im2rec.errors import DatasetError
    from im2rec.listing import lstfile

    monkeypatch.setattr(lstfile, "_BLOCK", 16)
    lst = tmp_path / "a.lst"
    lst.write_bytes(b"0\t1\ta.jpg\n1\t1\tb.jpg\n2\t1\t\xff.jpg\n")
    with pytest.raises(DatasetError, match=r"not UTF-8 text \(invalid start byte at byte 24\)"):
        list(lstfile.iter_lst(lst))
    lst.write_text("".join(f"{k}\t0\tx{i}.jpg\n" for i, k in enumerate([3, 9, 4, 9, 1])))
    with pytest.raises(DatasetError, match=r"a.lst:4: index 9 is already used on line 2"):
        lstfile.ListStream.scan(lst)


PEAK = """
import json, sys
from im2rec.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit:
    assert not exit.code, exit.code
for line in open("/proc/self/status"):
    if line.startswith("VmHWM"):
        print(json.dumps({"peak": int(line.split()[1]) * 1024}))
"""


def peak_of(*args: str, cwd: Path) -> int:
    out = subprocess.run([sys.executable, "-c", PEAK, *args], cwd=cwd, capture_output=True,
                         text=True, check=True, timeout=600)  # fmt: skip
    return int(json.loads(out.stdout.strip().splitlines()[-1])["peak"])


def same_image_list(folder: Path, lines: int, per_label: int = 0) -> Path:
    """A list of ``lines`` entries naming one tiny image (the cost is the
    list's); labels cycle through 1,000, or with ``per_label`` run in blocks
    of that many lines (identities grouped, as rec list writes them)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4)).save(folder / "a.jpg")
    lst = folder / "l.lst"
    with open(lst, "w") as f:
        for start in range(0, lines, 100_000):
            f.write(
                "".join(
                    f"{i}\t{i // per_label if per_label else i % 1000}\ta.jpg\n"
                    for i in range(start, min(lines, start + 100_000))
                )
            )
    return lst


@pytest.mark.parametrize("layout", ["plain", "insightface"])
@pytest.mark.slow
def test_pack_memory_does_not_grow_with_the_list(tmp_path: Path, layout: str) -> None:
    # a list of 150k lines against 1.5k: each entry once took ~400 bytes
    # held for the whole run (the list as Python objects); the face layout
    # held the list grouped by identity, and a set and a tuple an identity
    per_label = 50 if layout == "insightface" else 0
    small = same_image_list(tmp_path / "s", 1500, per_label)
    big = same_image_list(tmp_path / "b", 150_000, per_label)
    peaks = [peak_of("pack", str(lst), "--pass-through", "--root", ".", "-q", "--layout", layout,
                     cwd=lst.parent) for lst in (small, big)]  # fmt: skip
    if layout == "insightface":
        assert json.loads((big.with_suffix(".pack.json")).read_text())["identities"] == 3000
    grown = peaks[1] - peaks[0]
    # (measured: 52 MB in all for 2M lines; the scan keeps 8 bytes a key;
    # what is held at once, 256 KiB of list text and 2,048 staged entries,
    # shows here as ~4 MB of the growth, on every supported Python)
    assert grown < 12 << 20, f"rec pack grew {grown / 1e6:.1f} MB for 148,500 more lines"


@pytest.mark.parametrize(
    "command", [["verify"], ["info", "--json"], ["index", "-o", "x.idx"], ["merge", "-o", "m.rec"]]
)
@pytest.mark.slow
def test_inspection_memory_is_a_few_bytes_a_record(
    million: Path, tmp_path: Path, command: list[str]
) -> None:
    # verify took 310 bytes a record (sets and lists of Python ints). The
    # growth from 1M to 3M records: below 1M, costs that stop growing (the
    # index parse's malloc arena, on its own thread beside the walk, and
    # the walk's kept blocks: about 20 MB) are a large share of the
    # difference; and a small index is checked without numpy, whose import
    # would count as growth
    large = synthetic(tmp_path / "t", 3_000_000)
    peaks = []
    for rec in (million, large):
        args = [command[0], str(rec), *command[1:]]
        if command[0] == "merge":
            args = ["merge", str(rec), str(rec), "-o", str(tmp_path / f"m{len(peaks)}.rec"),
                    "--renumber"]  # fmt: skip
        elif command[0] == "index":
            args[-1] = str(tmp_path / f"x{len(peaks)}.idx")
        peaks.append(peak_of(*args, cwd=tmp_path))
    per_record = (peaks[1] - peaks[0]) / 2_000_000 / (2 if command[0] == "merge" else 1)
    assert per_record < 40, f"rec {command[0]}: {per_record:.1f} bytes a record"


def tree_of(folder: Path, files: int) -> Path:
    """``files`` empty .jpg files in 100 class folders (listing reads names only)."""
    for i in range(files):
        sub = folder / f"class{i % 100:03d}"
        if i < 100:
            sub.mkdir(parents=True)
        os.close(os.open(sub / f"image_{i:08d}.jpg", os.O_CREAT | os.O_WRONLY, 0o644))
    return folder


@pytest.mark.slow
def test_list_memory_is_a_small_multiple_of_the_path_bytes(tmp_path: Path) -> None:
    # each file once took a tuple, an int and a str (~190 bytes) for the
    # whole run, and each list's text was made whole before it was written
    # (254 bytes a file here); now its path bytes, 12 bytes in arrays and 8
    # a position in each list, and the buffers' growth
    small, big = tree_of(tmp_path / "s", 1000), tree_of(tmp_path / "b", 120_000)
    peaks = [peak_of("list", str(root), "-o", str(tmp_path / root.name), "--recursive", "-q",
                     "--train-ratio", "0.9", cwd=tmp_path) for root in (small, big)]  # fmt: skip
    per_file = (peaks[1] - peaks[0]) / 119_000
    path_bytes = len("class000/image_00000000.jpg")
    assert per_file < 4 * path_bytes, f"rec list: {per_file:.0f} bytes a file"
    lines = (tmp_path / "b_train.lst").read_text().splitlines()
    assert len(lines) + len((tmp_path / "b_val.lst").read_text().splitlines()) == 120_000

"""At the size of real datasets: open time, memory and read speed of an index
of 1M-100M records, side by side with MXNet's ``MXIndexedRecordIO`` where it
can run (up to 10M here: at 100M it needs ~13 GB), and the memory of the
commands that read a whole list or file (docs/performance.md, "Scale").

    make bench      # or: .venv/bin/python bench/bench_scale.py --mx-python .venv-mx/bin/python

Files are synthetic: tiny records (a 24-byte header, 4 bytes of payload),
written with numpy, so a row measures the index and the framing, not
images. Every measurement runs in its own process and reads its memory from
/proc: RSS and peak RSS (VmHWM), and for DataLoader workers the PSS of the
parent plus its workers (smaps_rollup), which counts pages shared by forked
workers once.

Targets (at 5M records unless said):

* ``RecordDataset`` open >= 10x faster than MXNet's ``MXIndexedRecordIO``
  opening the same pair (the second open: the first writes the binary copy);
* random ``read_idx`` >= 2x MXNet's;
* parent + 4 ``DataLoader`` workers after random reads: PSS at most
  +200 MB over the same run on a 1k-record file (workers forked, and
  spawned: those map the index's binary copy again);
* ``rec pack --pass-through`` of a 2M-line list: peak RSS < 200 MB, and of
  a 10M-line list no more;
* ``rec verify`` < 250 MB peak RSS; ``rec info``, ``rec index`` and
  ``rec merge`` alike;
* a 100M-record index opens and serves random reads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchutil import ratio, save_results  # bench/ is on sys.path when run as a script

from im2rec.recordio import index_cache

RECORD = np.dtype([("magic", "<u4"), ("lrec", "<u4"), ("flag", "<u4"), ("label", "<f4"),
                   ("id", "<u8"), ("id2", "<u8"), ("payload", "<u4")])  # fmt: skip
MB = 1 << 20
TARGETS = {"open": 10.0, "read_idx": 2.0, "pss_mb": 200, "pack_mb": 200, "inspect_mb": 250}


def synthetic(prefix: Path, n: int) -> Path:
    """``prefix.rec``/``.idx`` of ``n`` tiny records, keys 0..n-1."""
    rec = Path(f"{prefix}.rec")
    if rec.exists() and Path(f"{prefix}.idx").exists():
        return rec
    piece = 1 << 22
    with open(rec, "wb") as f, open(f"{prefix}.idx", "w") as idx:
        for start in range(0, n, piece):
            count = min(piece, n - start)
            records = np.zeros(count, RECORD)
            records["magic"], records["lrec"] = 0xCED7230A, 28
            records["label"] = np.arange(start, start + count) % 1000
            records["id"] = np.arange(start, start + count)
            records.tofile(f)
            offsets = np.arange(start, start + count, dtype=np.int64) * RECORD.itemsize
            lines = np.char.add(
                np.char.add(np.arange(start, start + count).astype(str), "\t"),
                offsets.astype(str),
            )
            idx.write("\n".join(lines.tolist()) + "\n")
    return rec


def warm(*paths: Path) -> None:
    """Read files once, so that every side measures them in the page cache
    (files kept from an earlier run may have been evicted since; the first
    process to read one would pay the disk for all the others)."""
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.read(1 << 23):
                pass


def run_child(python: str, code: str, *args: str, timeout: int = 3600) -> dict[str, Any]:
    out = subprocess.run([python, "-c", code, *args], capture_output=True, text=True,
                         timeout=timeout, env={**os.environ, "PYTHONWARNINGS": "ignore"})  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"child failed: {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# status(), pss(pid), children(): measured as the memory tests measure
PROCMEM = Path(__file__).with_name("procmem.py").read_text()

OPEN = (
    PROCMEM
    + """
import json, random, sys, time
rec, kind, reads = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "mxnet":
    import mxnet.recordio as rio
else:
    import im2rec.recordio as rio
    from im2rec import RecordDataset
base = status()
t0 = time.perf_counter()
if kind == "dataset":
    opened = RecordDataset(rec, output="bytes")
    n = len(opened)
    read = opened.reader.read_key
elif kind == "indexed":
    opened = rio.IndexedRecordReader(rec)
    n = len(opened)
    read = opened.read_key
else:
    opened = rio.MXIndexedRecordIO(rec[:-4] + ".idx", rec, "r")
    n = len(opened.keys)
    read = opened.read_idx
seconds = time.perf_counter() - t0
after_open = status()
keys = random.Random(0).sample(range(n), min(reads, n))
for key in keys[:1000]:  # the pages of the lookup table and of the file: warm
    read(key)
t0 = time.perf_counter()
for key in keys:
    read(key)
per_read = (time.perf_counter() - t0) / len(keys)
print(json.dumps({"seconds": seconds, "n": n, "read_us": per_read * 1e6,
                  "rss": after_open["VmRSS"] - base["VmRSS"], "peak": after_open["VmHWM"]}))
"""
)

LOADER = (
    PROCMEM
    + """
import json, os, sys
import torch
from torch.utils.data import DataLoader

rec, kind = sys.argv[1], sys.argv[2]
if kind == "mxnet":
    import mxnet.recordio as rio

    class Dataset:  # the usual mx.recordio dataset of PyTorch training code
        def __init__(self, rec):
            self.record = rio.MXIndexedRecordIO(rec[:-4] + ".idx", rec, "r")
            self.keys = list(self.record.keys)
        def __len__(self):
            return len(self.keys)
        def __getitem__(self, i):
            return self.record.read_idx(self.keys[i])
    ds = Dataset(rec)
else:
    from im2rec import RecordDataset
    ds = RecordDataset(rec, output="bytes")
sampler = torch.utils.data.RandomSampler(ds, num_samples=20000,
                                         generator=torch.Generator().manual_seed(0))
loader = DataLoader(ds, batch_size=100, sampler=sampler, num_workers=4, persistent_workers=True,
                    multiprocessing_context=sys.argv[3], collate_fn=len)
seen = sum(loader)
workers = children()
print(json.dumps({"pss": pss(os.getpid()) + sum(pss(p) for p in workers), "seen": seen,
                  "workers": len(workers)}))
"""
)

COMMAND = (
    PROCMEM
    + """
import json, sys, time
from im2rec.cli import main
t0 = time.perf_counter()
try:
    main(sys.argv[1:])
except SystemExit as exit:
    assert not exit.code, exit.code
print(json.dumps({"seconds": time.perf_counter() - t0, "peak": status()["VmHWM"]}))
"""
)


def measure_open(python: str, rec: Path, kind: str, reads: int = 200_000) -> dict[str, Any]:
    return run_child(python, OPEN, str(rec), kind, str(reads))


def pack_list(folder: Path, lines: int) -> Path:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4)).save(folder / "a.jpg")
    lst = folder / "l.lst"
    with open(lst, "w") as f:
        for start in range(0, lines, 1 << 20):
            f.write("".join(f"{i}\t{i % 1000}\ta.jpg\n"
                            for i in range(start, min(lines, start + (1 << 20)))))  # fmt: skip
    return lst


def human(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mx-python", help="the interpreter with mxnet==1.9.1 (and torch)")
    parser.add_argument("--sizes", default="1000000,5000000,10000000,100000000")
    parser.add_argument("--mx-up-to", type=int, default=10_000_000)
    parser.add_argument("--pack-lines", default="200000,2000000,10000000")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "im2rec-bench-scale"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    # the index copies go to the bench's own cache folder (the children inherit it)
    os.environ["IM2REC_CACHE_DIR"] = str(work / "cache")
    py = sys.executable
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: list[dict[str, Any]] = []
    missed: list[str] = []
    small = synthetic(work / "r1k", 1000)
    base_pss = run_child(py, LOADER, str(small), "im2rec", "fork")["pss"]
    spawn_base_pss = run_child(py, LOADER, str(small), "im2rec", "spawn")["pss"]
    mx_base_pss = (
        run_child(args.mx_python, LOADER, str(small), "mxnet", "fork")["pss"]
        if args.mx_python
        else None
    )
    for n in sizes:
        t0 = time.perf_counter()
        rec = synthetic(work / f"r{human(n)}", n)
        made = time.perf_counter() - t0
        Path(index_cache.cache_path(rec.with_suffix(".idx"))).unlink(missing_ok=True)
        # a copy is written only of an .idx still for SETTLED_NS: the first
        # open below writes it, as it would for any dataset not just made
        still = (time.time_ns() - rec.with_suffix(".idx").stat().st_ctime_ns) / 1e9
        time.sleep(max(0.0, index_cache.SETTLED_NS / 1e9 - still + 0.1))
        row: dict[str, Any] = {"records": n, "made_seconds": made}
        warm(rec, rec.with_suffix(".idx"))
        first = measure_open(py, rec, "reader", reads=10_000)  # parses; writes the copy
        row["first_open"] = first["seconds"]
        dataset = measure_open(py, rec, "dataset")
        row["open"], row["rss"], row["read_us"] = (
            dataset["seconds"],
            dataset["rss"],
            dataset["read_us"],
        )
        dropin = measure_open(py, rec, "dropin")
        row["dropin_open"], row["dropin_read_us"] = dropin["seconds"], dropin["read_us"]
        row["indexed_open"] = measure_open(py, rec, "indexed", reads=1000)["seconds"]
        if args.mx_python and n <= args.mx_up_to:
            mx = measure_open(args.mx_python, rec, "mxnet")
            row["mx_open"], row["mx_rss"], row["mx_read_us"] = (
                mx["seconds"],
                mx["rss"],
                mx["read_us"],
            )
            row["open_ratio"] = mx["seconds"] / dataset["seconds"]
            # (the target holds for each way of opening the pair)
            row["open_ratios"] = {
                "RecordDataset": row["open_ratio"],
                "IndexedRecordReader": mx["seconds"] / row["indexed_open"],
                "MXIndexedRecordIO": mx["seconds"] / dropin["seconds"],
            }
            row["read_ratio"] = mx["read_us"] / dropin["read_us"]
        if n <= 10_000_000:
            pss = run_child(py, LOADER, str(rec), "im2rec", "fork")
            row["pss_growth"] = pss["pss"] - base_pss
            spawned = run_child(py, LOADER, str(rec), "im2rec", "spawn")
            row["spawn_pss_growth"] = spawned["pss"] - spawn_base_pss
            if args.mx_python and n <= args.mx_up_to and mx_base_pss is not None:
                row["mx_pss_growth"] = (
                    run_child(args.mx_python, LOADER, str(rec), "mxnet", "fork")["pss"]
                    - mx_base_pss
                )
            for command in (["verify"], ["info", "--json"], ["index", "-o", str(work / "x.idx")],
                            ["merge", "-o", str(work / "m.rec"), "--renumber", "--overwrite"]):  # fmt: skip
                args_ = [command[0], str(rec), *command[1:]]
                done = run_child(py, COMMAND, *args_)
                row[command[0]] = {"seconds": done["seconds"], "peak": done["peak"]}
        rows.append(row)
        print(row_text(row), flush=True)
        if n == 5_000_000:
            missed += check_targets(row)
    pack_rows = []
    for lines in [int(s) for s in args.pack_lines.split(",") if s]:
        lst = pack_list(work / f"pack{human(lines)}", lines)
        for suffix in (".rec", ".idx", ".pack.json"):
            lst.with_suffix(suffix).unlink(missing_ok=True)
        done = run_child(
            py, COMMAND, "pack", str(lst), "--pass-through", "--root", str(lst.parent), "-q"
        )
        pack_rows.append({"lines": lines, **done})
        print(f"rec pack --pass-through, {lines:>11,} lines: {done['seconds']:7.1f} s, "
              f"peak RSS {done['peak'] / MB:6.0f} MB", flush=True)  # fmt: skip
        if lines >= 2_000_000 and done["peak"] >= TARGETS["pack_mb"] * MB:
            missed.append(f"rec pack of {human(lines)} lines peaked at {done['peak'] / MB:.0f} MB")
    if 100_000_000 in sizes:
        big = next(r for r in rows if r["records"] == 100_000_000)
        print(f"100M records: opened in {big['open']:.1f} s (first open, parsing: "
              f"{big['first_open']:.1f} s), {big['rss'] / MB:,.0f} MB, a random read "
              f"{big['read_us']:.1f} us")  # fmt: skip
    print_growth(rows)
    save_results("scale", {"sizes": rows, "pack": pack_rows, "missed": missed}, [
        ratio(f"open {'the drop-in ' if what == 'MXIndexedRecordIO' else ''}{what}, "
              f"{human(row['records'])} records", "MXNet MXIndexedRecordIO", value,
              TARGETS["open"])
        for row in rows for what, value in row.get("open_ratios", {}).items()
    ] + [
        ratio(f"read_idx, {human(row['records'])} records", "MXNet MXIndexedRecordIO",
              row["read_ratio"], TARGETS["read_idx"])
        for row in rows if "read_ratio" in row
    ])  # fmt: skip
    if args.json:
        print(json.dumps({"sizes": rows, "pack": pack_rows, "missed": missed}))
    if missed:
        print("missed: " + "; ".join(missed))
        return 1
    print("every scale target met")
    return 0


def row_text(row: dict[str, Any]) -> str:
    n = row["records"]
    text = (f"{human(n):>5} records: open {row['open']:6.2f} s (first {row['first_open']:5.2f} s), "
            f"RSS {row['rss'] / MB:6.0f} MB ({row['rss'] / n:4.1f} B/record), "
            f"read_idx {row['dropin_read_us']:.2f} us")  # fmt: skip
    if "mx_open" in row:
        others = ", ".join(f"{k} {v:.1f}x" for k, v in row["open_ratios"].items() if k[0] != "R")
        text += (f" | MXNet open {row['mx_open']:6.2f} s ({row['open_ratio']:4.1f}x; {others}), "
                 f"RSS {row['mx_rss'] / MB:6.0f} MB, read_idx {row['mx_read_us']:.2f} us "
                 f"({row['read_ratio']:.1f}x)")  # fmt: skip
    if "pss_growth" in row:
        text += f" | 4-worker PSS +{row['pss_growth'] / MB:.0f} MB"
        if "mx_pss_growth" in row:
            text += f" (MXNet +{row['mx_pss_growth'] / MB:.0f} MB)"
        text += f", spawned +{row['spawn_pss_growth'] / MB:.0f} MB"
    for command in ("verify", "info", "index", "merge"):
        if command in row:
            done = row[command]
            text += f" | {command} {done['seconds']:.1f} s {done['peak'] / MB:.0f} MB"
    return text


def check_targets(row: dict[str, Any]) -> list[str]:
    missed = []
    for what, value in row.get("open_ratios", {}).items():
        if value < TARGETS["open"]:
            missed.append(f"{what} open {value:.1f}x MXNet (target {TARGETS['open']}x)")
    if "read_ratio" in row and row["read_ratio"] < TARGETS["read_idx"]:
        missed.append(f"read_idx {row['read_ratio']:.1f}x MXNet (target {TARGETS['read_idx']}x)")
    for start in ("", "spawn_"):
        if row.get(f"{start}pss_growth", 0) > TARGETS["pss_mb"] * MB:
            missed.append(f"4-worker PSS ({start or 'fork_'}) +{row[f'{start}pss_growth'] / MB:.0f} MB "
                          f"(target {TARGETS['pss_mb']})")  # fmt: skip
    for command in ("verify", "info", "index", "merge"):
        if command in row and row[command]["peak"] >= TARGETS["inspect_mb"] * MB:
            missed.append(f"rec {command} peaked at {row[command]['peak'] / MB:.0f} MB")
    return missed


def print_growth(rows: list[dict[str, Any]]) -> None:
    """Time and memory a record: how each cost grows with the count."""
    print("\ncost a record (microseconds; RSS in bytes a record; peaks in MB):")
    print(f"{'records':>9} {'open':>7} {'1st open':>9} {'RSS B':>6} {'read':>6} "
          f"{'verify':>7} {'peak':>6} {'info':>6} {'peak':>6} {'merge':>6} {'peak':>6}")  # fmt: skip
    for row in rows:
        n = row["records"]
        cells = []
        for command in ("verify", "info", "merge"):
            done = row.get(command)
            cells += ([f"{done['seconds'] * 1e6 / n:.2f}", f"{done['peak'] / MB:.0f}"]
                      if done else ["-", "-"])  # fmt: skip
        print(f"{human(n):>9} {row['open'] * 1e6 / n:7.3f} {row['first_open'] * 1e6 / n:9.3f} "
              f"{row['rss'] / n:6.1f} {row['read_us']:6.2f} {cells[0]:>7} {cells[1]:>6} "
              f"{cells[2]:>6} {cells[3]:>6} {cells[4]:>6} {cells[5]:>6}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

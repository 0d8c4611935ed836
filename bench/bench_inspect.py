"""``rec verify`` and ``rec index`` against reading the file (``cat > /dev/null``);
``rec info`` and ``rec verify --boxes`` on a detection ``.rec`` of Objects365's size.

    make bench      # or: .venv/bin/python bench/bench_inspect.py

Writes a ``--size-mb`` ``.rec`` of image-sized records (40-160 KB of random
bytes each), then times, best of ``--repeat`` with a warm page cache, the
whole commands: ``cat FILE > /dev/null``, ``rec verify FILE``, ``rec index
FILE``. Speed is reported relative to cat (1.0 = as fast as reading the file);
the target is at least 0.5. When allowed (root on Linux) the same is measured
with the page cache dropped before each run.

Then a detection ``.rec`` shaped like Objects365 (``--det-images``
1,742,292 images, 14.6 boxes each: 25.4M boxes, GluonCV's label layout
with the image size, payloads of 3-5 KB: 7.4 GB) is written and ``rec info``
and ``rec verify --boxes`` are timed beside cat with a warm cache, best of
three as cat is, with their peak memory (target: at least 0.5x cat, memory
flat).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchutil import (  # bench/ is on sys.path when run as a script
    compile_package,
    drop_caches,
    ratio,
    save_results,
)

TARGET = 0.5


def make_rec(path: Path, size_mb: int) -> int:
    from im2rec.recordio import IndexedRecordWriter, IRHeader, pack

    rng = random.Random(0)
    n, total = 0, 0
    with IndexedRecordWriter(path) as w:
        while total < size_mb << 20:
            payload = rng.randbytes(rng.randint(40_000, 160_000))
            w.write_key(n, pack(IRHeader(0, n % 1000, n, 0), payload))
            n, total = n + 1, total + len(payload)
    return n


#: Objects365's train set: images and boxes
DET_IMAGES, DET_BOXES = 1_742_292, 25_436_000


def make_det_rec(path: Path, images: int) -> int:
    """A detection .rec: every image's label ``4, 6, w, h`` then its boxes
    (``cls, x0, y0, x1, y1, difficult``), 14.6 boxes an image on average,
    then 3-5 KB of bytes; written a chunk of records at a time. Returns
    the number of boxes."""
    import numpy as np

    from im2rec.recordio import IndexedRecordWriter, IRHeader, pack
    from im2rec.recordio.detection import make_label

    rng = np.random.default_rng(0)
    blob = rng.integers(0, 255, 8192, dtype=np.uint8).tobytes()
    boxes = 0
    mean = DET_BOXES / DET_IMAGES
    with IndexedRecordWriter(path) as w:
        for first in range(0, images, 65536):
            n = min(65536, images - first)
            counts = rng.poisson(mean - 1, n) + 1
            sizes = rng.integers(3072, 5120, n)
            total = int(counts.sum())
            low = rng.random((total, 2), np.float32) * 0.5  # (x0, y0); x1, y1 past them
            high = low + 0.01 + rng.random((total, 2), np.float32) * 0.49
            rows = np.concatenate([rng.integers(0, 365, (total, 1)).astype(np.float32), low, high,
                                   np.zeros((total, 1), np.float32)], axis=1)  # fmt: skip
            at = 0
            for i in range(n):
                label = make_label(rows[at : at + counts[i]], (640.0, 480.0))
                at += counts[i]
                key = first + i
                w.write_key(key, pack(IRHeader(0, label, key, 0), blob[: sizes[i]]))
            boxes += total
    return boxes


def peak_timed(cmd: list[str]) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of one run of ``cmd``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return elapsed, usage.ru_maxrss * 1024


def best_of(runs: int, cmd: list[str]) -> tuple[float, int]:
    """The shortest time of ``runs`` runs (as cat's) and the largest peak."""
    times, peaks = zip(*(peak_timed(cmd) for _ in range(runs)), strict=True)
    return min(times), max(peaks)


def detection(tmp: Path, images: int, rec_cli: str) -> dict[str, float]:
    path = tmp / "det.rec"
    boxes = make_det_rec(path, images)
    size = path.stat().st_size
    (tmp / "big.rec").unlink(missing_ok=True)  # (room in the page cache)
    os.sync()  # (7.8 GB just written: timed while the kernel writes it back, both sides slow)
    cat = ["sh", "-c", f"cat {path} > /dev/null"]
    timed(cat, False), timed(cat, False)  # warm the cache
    cat_s = min(timed(cat, False) for _ in range(3))
    info_s, info_peak = best_of(3, [rec_cli, "info", str(path), "--json"])
    verify_s, verify_peak = best_of(3, [rec_cli, "verify", "--boxes", str(path)])
    return {"images": images, "boxes": boxes, "gb": size / 1e9, "cat_s": cat_s,
            "info_s": info_s, "info_peak_mb": info_peak / 1e6,
            "verify_s": verify_s, "verify_peak_mb": verify_peak / 1e6,
            "info_speed": cat_s / info_s, "verify_speed": cat_s / verify_s}  # fmt: skip


def timed(cmd: list[str], cold: bool) -> float:
    if cold:
        drop_caches()
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--det-images", type=int, default=DET_IMAGES)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    compile_package()
    rec_cli = str(Path(sys.executable).with_name("rec"))
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-inspect-") as tmp:
        path = Path(tmp) / "big.rec"
        records = make_rec(path, args.size_mb)
        os.sync()  # (the written file on disk before anything is timed)
        commands = {
            "cat": ["sh", "-c", f"cat {path} > /dev/null"],
            "verify": [rec_cli, "verify", str(path)],
            "index": [rec_cli, "index", str(path), "-o", str(Path(tmp) / "rebuilt.idx")],
        }
        modes = ["warm", "cold"] if drop_caches() else ["warm"]
        for mode in modes:
            cold = mode == "cold"
            if not cold:
                timed(commands["cat"], False)  # warm the cache
            times = {
                k: min(timed(c, cold) for _ in range(args.repeat)) for k, c in commands.items()
            }
            results[mode] = {**{f"{k}_s": v for k, v in times.items()},
                             "verify_speed": times["cat"] / times["verify"],
                             "index_speed": times["cat"] / times["index"]}  # fmt: skip
        det = detection(Path(tmp), args.det_images, rec_cli)
    ok = all(r["verify_speed"] >= TARGET and r["index_speed"] >= TARGET for r in results.values())
    ok = ok and det["info_speed"] >= TARGET and det["verify_speed"] >= TARGET
    save_results("inspect", {"records": records, "mb": args.size_mb, "results": results,
                             "detection": det}, [
        *(ratio(f"rec {what}, {mode} cache", "cat", r[f"{what}_speed"], TARGET)
          for mode, r in results.items() for what in ("verify", "index")),
        ratio(f"rec info, {det['boxes'] / 1e6:.1f}M boxes", "cat", det["info_speed"], TARGET),
        ratio(f"rec verify --boxes, {det['boxes'] / 1e6:.1f}M boxes", "cat",
              det["verify_speed"], TARGET),
    ])  # fmt: skip
    if args.json:
        summary = {"records": records, "mb": args.size_mb, "results": results,
                   "detection": det, "targets_met": ok}  # fmt: skip
        print(json.dumps(summary, indent=1))
        sys.exit(0 if ok else 1)
    print(f"{args.size_mb:,} MB .rec, {records:,} records")
    print(
        f"{'cache':<6} {'cat':>8} {'verify':>8} {'index':>8}  speed vs cat: verify, index (target >= {TARGET})"
    )
    for mode, r in results.items():
        print(f"{mode:<6} {r['cat_s']:>7.2f}s {r['verify_s']:>7.2f}s {r['index_s']:>7.2f}s  "
              f"{r['verify_speed']:.2f}x, {r['index_speed']:.2f}x")  # fmt: skip
    print(f"detection: {det['images']:,} images, {det['boxes']:,} boxes, {det['gb']:.1f} GB, "
          f"warm: cat {det['cat_s']:.2f}s")  # fmt: skip
    for what in ("info", "verify"):
        print(f"  rec {what:<6} {det[what + '_s']:>7.2f}s  {det[what + '_speed']:.2f}x cat "
              f"(target >= {TARGET}), peak {det[what + '_peak_mb']:,.0f} MB")  # fmt: skip
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""Sharded packing on a Dask cluster vs the local process pool, side by side.

    make bench      # or: .venv/bin/python bench/bench_distributed.py

Generates ``--images`` photo-like JPEGs (300x225 to 1024x768, as
bench_pack.py), lists them once, then times ``rec pack --resize 256
--quality 95``, best of ``--repeat``:

* local: ``--num-workers W`` (the process pool, one output file);
* Dask, running cluster: ``--shards S --executor dask --scheduler ADDR``
  against a ``LocalCluster`` of W single-threaded worker processes that this
  script started beforehand (a cluster you already run): the engine's cost;
* Dask, with start-up: ``--shards S --executor dask --num-workers W``, which
  also starts and stops the ``LocalCluster`` inside the command.

Target: the running-cluster ratio (local time / Dask time) >= 0.8. The
outputs are checked: every record of the shards equals the local pack's.
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

from benchutil import (  # bench/ is on sys.path when run as a script
    listed_images,  # bench/ is on sys.path when run as a script
    ratio,
    save_results,
)

TARGET = 0.8


def timed(cmd: list[str], repeat: int) -> float:
    def once() -> float:
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0

    return min(once() for _ in range(repeat))


def same_records(work: Path, shards: int) -> bool:
    from im2rec.recordio import RecordReader

    whole = list(RecordReader(work / "local" / "images.rec"))
    parts = sorted((work / "dask").glob(f"images-*-of-{shards:05d}.rec"))
    return whole == [r for p in parts for r in RecordReader(p)]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--shards", type=int, default=0, help="default: 4 per worker")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from distributed import LocalCluster

    shards = args.shards or 4 * args.workers
    rec = str(Path(sys.executable).with_name("rec"))
    w = str(args.workers)
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-dask-") as tmp:
        work = Path(tmp)
        listed_images(work, args.images, copies=("local", "dask"))
        common = ["--root", str(work / "images"), "--resize", "256", "--quality", "95", "-q"]
        local = timed([rec, "pack", str(work / "local" / "images.lst"), *common,
                       "--num-workers", w], args.repeat)  # fmt: skip
        sharded = [rec, "pack", str(work / "dask" / "images.lst"), *common, "--shards",
                   str(shards), "--executor", "dask"]  # fmt: skip
        with LocalCluster(
            n_workers=args.workers, threads_per_worker=1, dashboard_address=":0"
        ) as cluster:
            running = timed([*sharded, "--scheduler", cluster.scheduler_address], args.repeat)
        started = timed([*sharded, "--num-workers", w], args.repeat)
        identical = same_records(work, shards)
    n = args.images
    results = {
        "images": n, "workers": args.workers, "shards": shards,
        "local_s": local, "dask_running_cluster_s": running, "dask_with_startup_s": started,
        "ratio_running_cluster": local / running, "ratio_with_startup": local / started,
        "records_identical": identical,
    }  # fmt: skip
    results["targets_met"] = identical and local / running >= TARGET
    save_results("distributed", results, [
        ratio("rec pack --shards on a running Dask cluster", "the local process pool",
              local / running, TARGET),
        ratio("rec pack --shards, Dask cluster started too", "the local process pool",
              local / started),
    ])  # fmt: skip
    if args.json:
        print(json.dumps(results))
    else:
        print(f"rec pack --resize 256 --quality 95, {n:,} JPEGs, {args.workers} workers")
        print(f"local process pool             {local:6.2f} s  {n / local:6,.0f} images/s")
        print(f"Dask, running cluster, {shards:2} shards {running:6.2f} s  {n / running:6,.0f} images/s"
              f"   ratio {local / running:.2f}x (target {TARGET}x)")  # fmt: skip
        print(f"Dask, starting its cluster      {started:6.2f} s  {n / started:6,.0f} images/s"
              f"   ratio {local / started:.2f}x")  # fmt: skip
        print(f"shard records identical to the local pack: {identical}")
    sys.exit(0 if identical and local / running >= TARGET else 1)


if __name__ == "__main__":
    main()

"""``rec export --to webdataset`` and ``rec import webdataset`` against copying
the same bytes with ``cat``, start-up included.

    make bench      # or: .venv/bin/python bench/bench_convert.py [--size-mb 1000]

A pass-through ``.rec`` of ``--size-mb`` MB (default 500) of records of
60-140 kB (ImageNet's sizes; JPEG-signed random payloads, nothing is
decoded) is made once and read once to warm the page cache; im2rec's
modules are compiled to bytecode first, as an installed copy has them.
Every input is read once before it is timed (the shards just written too:
see ``read_once``). Then, best of ``--runs`` (10) each (and the median of
each round's ratio), all alternating, each after a ``sync`` (untimed) so that
none pays for another's writeback: ``cat data.rec > copy.rec``; ``rec
export data.rec --to webdataset -o shards/d-%06d.tar``; ``rec import
webdataset`` of those shards back to a ``.rec`` (checked byte-identical to
the original). Each is a fresh process, as a user runs it, in two regimes:

- cold: the inputs evicted from the page cache first and the final ``sync``
  timed, so the copy is done when it is on the disk (a dataset larger than
  memory). Target: both at >= 0.5x cat's speed.
- warm: the inputs cached and the outputs left in the cache, where cat
  copies at memory speed. Also timed, as a fresh process alternating with
  the others: the bound, the import's own start-up (its modules) plus the
  least any import does with the bytes (each read into Python once, to be
  scanned, and written out from there), with no per-record work. Target: 0.5x cat, or within 10 % of the bound where the
  bound itself is below 0.5x.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchutil import (  # bench/ is on sys.path when run as a script
    compile_package,  # bench/ is on sys.path when run as a script
    ratio,
    save_results,
)

from im2rec.packing.resuming import sha256_file

TARGET = 0.5
REC = [sys.executable, "-m", "im2rec"]


def make_rec(path: Path, size_mb: int) -> int:
    from im2rec.recordio import IndexedRecordWriter, pack

    rng = random.Random(0)
    n = total = 0
    with IndexedRecordWriter(path) as w:
        while total < size_mb * 1_000_000:
            payload = b"\xff\xd8\xff\xe0" + rng.randbytes(rng.randint(60_000, 140_000))
            w.write_key(n, pack((0, float(n % 1000), n, 0), payload))
            n += 1
            total += len(payload)
    return n


def evict(paths: list[Path]) -> None:
    """Drop these files' pages from the page cache (after ``sync`` they are
    clean): the next read comes from the disk, as a dataset larger than
    memory does."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_once(paths: list[Path]) -> None:
    """Read files once, untimed. On a VM the host caches what its disk
    served: a file never read since it was written came from the disk at a
    third of the speed of one read before, even with the guest's cache
    evicted (measured: 1.7-2.1 s against 0.5 s for 500 MB). ``data.rec``,
    which cat and export read, was read before; the shards export has just
    written are read once too (from the disk: first written and evicted
    from the guest's cache), so every input comes from the same place."""
    os.sync()
    evict(paths)
    for path in paths:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass


def timed(cmd: list[str] | str, inputs: list[Path], cold: bool, shell: bool = False) -> float:
    """One run of ``cmd`` from a clean state: what the last run wrote is
    flushed first (``sync``, untimed), so no run pays for another's
    writeback. Warm: the inputs in the page cache, the outputs timed into
    it. Cold: the inputs evicted first, and the final ``sync`` timed too
    (the copy is done when it is on the disk)."""
    os.sync()
    if cold:
        evict(inputs)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, shell=shell, stdout=subprocess.DEVNULL)
    if cold:
        os.sync()
    return time.perf_counter() - t0


def bare_copy(src: str, dst: str) -> None:
    """The warm bound, run as its own process: the modules ``rec import``
    loads (the CLI, the WebDataset reader), then the least any import must
    do with the bytes, with no per-record work at all: read every byte of
    ``src`` once into Python (as the magic-word scan must see them), through
    a buffer of the size the import reads with, and write it to ``dst``
    from there."""
    import im2rec.cli  # noqa: F401
    import im2rec.formats.wds_import  # noqa: F401
    from im2rec.recordio.chunks import Chunks

    fd, out = os.open(src, os.O_RDONLY), os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    buf, offset = memoryview(bytearray(Chunks.SIZE)), 0
    while n := os.preadv(fd, [buf], offset):
        offset += n
        view = buf[:n]
        while view:
            view = view[os.write(out, view) :]
    os.close(fd)
    os.close(out)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size-mb", type=int, default=500)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--bare-copy", nargs=2, metavar=("SRC", "DST"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.bare_copy:
        bare_copy(*args.bare_copy)
        return
    compile_package()
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-convert-") as tmp_s:
        tmp = Path(tmp_s)
        rec = tmp / "data.rec"
        n = make_rec(rec, args.size_mb)
        size = rec.stat().st_size
        want = sha256_file(rec)  # also warms the page cache
        shards = tmp / "shards"

        def clean_shards() -> None:
            shutil.rmtree(shards, ignore_errors=True)

        def clean_back() -> None:
            for suffix in (".rec", ".idx"):
                (tmp / f"back{suffix}").unlink(missing_ok=True)

        export = [*REC, "export", str(rec), "--to", "webdataset", "-o", str(shards / "d-%06d.tar"),
                  "-q"]  # fmt: skip
        cat = f"cat '{rec}' > '{tmp / 'copy.rec'}'"
        samples: dict[str, list[float]] = {}

        def best(key: str, t: float) -> None:
            samples.setdefault(key, []).append(t)

        for _ in range(args.runs):  # the sides alternate: a drift of the machine hits all
            for regime in ("warm", "cold"):
                cold = regime == "cold"
                clean_shards()
                # every side writes new files: cat's copy of the last run is
                # removed untimed, as the others' outputs are
                (tmp / "copy.rec").unlink(missing_ok=True)
                best(f"{regime}_cat", timed(cat, [rec], cold, shell=True))
                best(f"{regime}_export", timed(export, [rec, rec.with_suffix(".idx")], cold))
                names = sorted(str(p) for p in shards.glob("d-*.tar"))
                read_once([Path(n) for n in names])
                back = [*REC, "import", "webdataset", *names, "-o", str(tmp / "back"), "-q"]
                clean_back()
                best(f"{regime}_import", timed(back, [Path(n) for n in names], cold))
                if not cold:
                    floor = [sys.executable, __file__, "--bare-copy", names[0], str(tmp / "f.tar")]
                    best(
                        "warm_bound", timed(floor, [], cold) * size / Path(names[0]).stat().st_size
                    )
                    (tmp / "f.tar").unlink()
        assert sha256_file(tmp / "back.rec") == want, "the imported .rec differs from the original"
        tar_bytes = sum(Path(p).stat().st_size for p in names)
    mb = size / 1e6
    times = {key: min(ts) for key, ts in samples.items()}
    # the median of each round's own ratio too: cat and the command run back
    # to back, so a slow phase of the machine (they last seconds to minutes
    # here) slows both, where the best of each can come from different phases
    results: dict[str, Any] = {"bytes": size, "records": n, "shards": len(names),
                               "tar_bytes": tar_bytes}  # fmt: skip
    for regime in ("warm", "cold"):
        for name in ("cat", "export", "import"):
            results[f"{regime}_{name}_mb_s"] = mb / times[f"{regime}_{name}"]
        for name in ("export", "import"):
            results[f"{regime}_{name}_ratio"] = times[f"{regime}_cat"] / times[f"{regime}_{name}"]
            results[f"{regime}_{name}_paired_ratio"] = statistics.median(
                cat / t for cat, t in zip(samples[f"{regime}_cat"], samples[f"{regime}_{name}"],
                                          strict=True)
            )  # fmt: skip
    bound = results["warm_bound_ratio"] = times["warm_cat"] / times["warm_bound"]
    # Cold (a dataset larger than memory, writes durable): 0.5x cat. Warm, cat
    # copies at memory speed, and the bound (the import's own start-up plus a
    # bare copy through Python) can be below 0.5x itself: then the target is
    # that bound, met within 10 %.
    targets = {"cold": TARGET, "warm": min(TARGET, 0.9 * bound)}
    met = all(
        results[f"{regime}_{name}_ratio"] >= targets[regime]
        for regime in ("cold", "warm") for name in ("export", "import")
    )  # fmt: skip
    results["warm_target"] = targets["warm"]
    results["seconds"] = {key: [round(t, 3) for t in ts] for key, ts in samples.items()}
    results["targets_met"] = met
    save_results("convert", results, [
        ratio(f"rec {name} (WebDataset), {regime} cache", "cat", results[f"{regime}_{name}_ratio"],
              round(targets[regime], 2))
        for regime in ("warm", "cold") for name in ("export", "import")
    ])  # fmt: skip
    if args.json:
        print(json.dumps(results))
    else:
        print(f"{mb:,.0f} MB, {n:,} records -> {len(names)} shard(s) of {tar_bytes / 1e6:,.0f} MB")
        for regime, what in (("cold", "cold data, timed until synced"),
                             ("warm", "warm page cache, unsynced")):  # fmt: skip
            print(f"{regime}: {what}")
            print(f"  {'cat (copy the bytes)':30} {results[f'{regime}_cat_mb_s']:8,.0f} MB/s")
            for name, label in (("export", "rec export --to webdataset"),
                                ("import", "rec import webdataset")):  # fmt: skip
                value = results[f"{regime}_{name}_ratio"]
                paired = results[f"{regime}_{name}_paired_ratio"]
                print(f"  {label:30} {results[f'{regime}_{name}_mb_s']:8,.0f} MB/s   ratio "
                      f"{value:.2f}x (target {targets[regime]:.2f}x; median of each "
                      f"round's {paired:.2f}x)")  # fmt: skip
        print(
            f"warm bound (the import's start-up, every byte read once and written from "
            f"there): {bound:.2f}x cat; the import came back byte-identical"
        )
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()

"""What each small C extension buys on a whole job: the command timed with
every extension, and with that one missing (its Python path), alternately.

An extension stays only where some job it serves runs at least
``TARGET`` (1.2x) faster with it; the table printed is what each one buys.
The jobs, warm cache, best of ``--rounds``:

* ``rec pack --pass-through`` of photo-sized JPEGs (the writer scans each
  image for the magic word);
* ``rec export --to webdataset`` and ``rec import webdataset`` of a .rec of
  100 KB payloads (each payload scanned on the way back);
* ``IndexedRecordWriter`` writing 1 KB records (``words``' frame).

An extension is made missing in the job's own process only (its module
set to None in ``sys.modules`` before im2rec imports it), which is what an
install without it runs.

    .venv/bin/python bench/bench_native.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_convert import make_rec  # bench/ is on sys.path as a script
from benchutil import listed_images, ratio, save_results

TARGET = 1.2
MODULES = {"words": "im2rec.recordio._words"}

#: runs rec with some extensions missing: argv[1] their names, the rest rec's arguments
CLI = r"""
import sys
for module in filter(None, sys.argv[1].split(",")):
    sys.modules[module] = None  # import fails: the extension is "not built"
from im2rec.cli import main
sys.argv = ["rec", *sys.argv[2:]]
main()
"""

WRITER = r"""
import os, sys
for module in filter(None, sys.argv[1].split(",")):
    sys.modules[module] = None
from im2rec.recordio import IndexedRecordWriter, IRHeader, pack
payload = bytes(range(256)) * 4
with IndexedRecordWriter(sys.argv[2]) as w:
    for i in range(300_000):
        w.write_key(i, pack(IRHeader(0, float(i % 10), i, 0), payload))
"""


def timed(script: str, missing: list[str], args: list[str], clean: list[Path]) -> float:
    for path in clean:
        for found in path.parent.glob(path.name):
            found.unlink()
    os.sync()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", script, ",".join(missing), *args], check=True,
                   capture_output=True)  # fmt: skip
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--size-mb", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="im2rec-native-") as tmp:
        work = Path(tmp)
        listed_images(work, a.images, copies=("pack",))
        make_rec(work / "data.rec", a.size_mb)
        shards = str(work / "shards" / "d-%06d.tar")
        (work / "shards").mkdir()
        make = [sys.executable, "-c", CLI, "", "export", str(work / "data.rec"), "--to",
                "webdataset", "-o", shards, "-q"]  # fmt: skip
        subprocess.run(make, check=True, capture_output=True)
        tars = sorted(str(p) for p in (work / "shards").glob("*.tar"))
        jobs = {
            "rec pack --pass-through": (CLI, ["pack", "--pass-through", "--num-workers", "2",
                                              "--root", str(work / "images"),
                                              str(work / "pack" / "images.lst"), "-q"],
                                        [work / "pack" / "images.[ri][ed][cx]",
                                         work / "pack" / "images.pack.json"], ["words"]),
            "rec export --to webdataset": (CLI, ["export", str(work / "data.rec"), "--to",
                                                 "webdataset", "-o", str(work / "out" / "d-%06d.tar"),
                                                 "-q"], [work / "out" / "*"], ["words"]),
            "rec import webdataset": (CLI, ["import", "webdataset", *tars, "-o",
                                            str(work / "back"), "-q"],
                                      [work / "back.*"], ["words"]),
            "IndexedRecordWriter, 1 KB records": (WRITER, [str(work / "small.rec")],
                                                  [work / "small.*"], ["words"]),
        }  # fmt: skip
        (work / "out").mkdir()
        best: dict[tuple[str, str], float] = {}
        for _ in range(a.rounds):
            for job, (script, args, clean, serves) in jobs.items():
                for without in ["", *serves]:
                    missing = [MODULES[without]] if without else []
                    t = timed(script, missing, args, clean)
                    key = (job, without)
                    best[key] = min(best.get(key, t), t)
    print(f"{'extension':<8} {'job':<36} {'with':>8} {'without':>8} {'buys':>7}")
    buys: dict[str, float] = {}
    rows = []
    for job, (_, _, _, serves) in jobs.items():
        for name in serves:
            gain = best[(job, name)] / best[(job, "")]
            buys[name] = max(buys.get(name, 0.0), gain)
            print(f"{name:<8} {job:<36} {best[(job, '')]:>7.2f}s {best[(job, name)]:>7.2f}s "
                  f"{gain:>6.2f}x")  # fmt: skip
    for name, gain in buys.items():  # (each job's figures are in the results' data)
        job = max(
            (j for j in jobs if name in jobs[j][3]), key=lambda j: best[(j, name)] / best[(j, "")]
        )
        rows.append(ratio(f"{name}: {job}", f"im2rec without {name}", gain, TARGET))
    save_results("native", {"seconds": {f"{j} | {w or 'all'}": t for (j, w), t in best.items()}},
                 rows)  # fmt: skip
    short = [name for name, gain in buys.items() if gain < TARGET]
    if short:
        print(f"under {TARGET}x on every job they serve: {', '.join(short)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

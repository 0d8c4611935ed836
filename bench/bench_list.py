"""``rec list`` vs ``im2rec.py --list`` on a generated tree, side by side.

    make bench      # or: .venv/bin/python bench/bench_list.py --mx-python .venv-mx/bin/python

Builds FILES empty ``.jpg`` files in FOLDERS class folders (listing reads no
pixels), warms the page cache, then times, best of ``--repeat``:

* the whole command, as a user runs it (``python im2rec.py PREFIX ROOT --list
  --recursive`` vs ``rec list ROOT --recursive``), start-up included;
* the listing alone, in-process (im2rec.py's ``make_list`` vs ``make_lists``),
  so MXNet's slow import does not flatter us;

and checks both wrote the same bytes. Memory: peak Python allocations of
``make_lists`` per listed file (tracemalloc), at two tree sizes to show growth
is linear.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from benchutil import ratio, save_results  # bench/ is on sys.path when run as a script

TARGET = 2.0

IM2REC_INPROCESS = """
import importlib.util, json, os, sys, time, types, warnings
warnings.simplefilter("ignore")
import mxnet
path = os.path.join(os.path.dirname(mxnet.__file__), "tools", "im2rec.py")
spec = importlib.util.spec_from_file_location("im2rec_tool", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
args = types.SimpleNamespace(root=sys.argv[1], prefix=sys.argv[2], recursive=True,
    exts=[".jpeg", ".jpg", ".png"], shuffle=True, chunks=1, train_ratio=1.0, test_ratio=0.0)
best = 1e9
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter()
    sys.stdout = open(os.devnull, "w")  # it prints the class map
    mod.make_list(args)
    sys.stdout = sys.__stdout__
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"seconds": best, "tool": path}))
"""


def make_tree(root: Path, files: int, folders: int) -> None:
    per = files // folders
    for c in range(folders):
        d = root / f"n{c:08d}"
        d.mkdir(parents=True)
        for i in range(per):
            (d / f"n{c:08d}_{i:05d}.JPEG").touch()


def best_of(cmd: list[str], repeat: int, cwd: Path) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(
            cmd, check=True, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        times.append(time.perf_counter() - t0)
    return min(times)


def ours_inprocess(root: Path, prefix: Path, repeat: int) -> float:
    from im2rec.listing import ListOptions, make_lists

    options = ListOptions(recursive=True)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        make_lists(root, prefix, options)
        times.append(time.perf_counter() - t0)
    return min(times)


def bytes_per_entry(root: Path, prefix: Path) -> float:
    from im2rec.listing import ListOptions, make_lists

    tracemalloc.start()
    result = make_lists(root, prefix, ListOptions(recursive=True))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / len(result.scan.entries)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mx-python", required=True, help="Python of a venv with mxnet==1.9.1")
    ap.add_argument("--files", type=int, default=200_000)
    ap.add_argument("--folders", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.mx_python = os.path.abspath(args.mx_python)  # the commands run in a temp folder
    im2rec_py = json.loads(
        subprocess.run(
            [args.mx_python, "-c", IM2REC_INPROCESS.split("spec =")[0] + "print(json.dumps(path))"],
            check=True, capture_output=True, text=True,
        ).stdout.strip().splitlines()[-1]
    )  # fmt: skip
    rec = str(Path(sys.executable).with_name("rec"))
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-list-") as tmp:
        work = Path(tmp)
        root = work / "train"
        make_tree(root, args.files, args.folders)
        small = work / "small"
        make_tree(small, args.files // 4, args.folders // 4)
        for _ in os.walk(root):  # warm the page cache for both tools
            pass
        cmd_mx = best_of(
            [args.mx_python, im2rec_py, str(work / "mx"), str(root), "--list", "--recursive"],
            args.repeat,
            work,
        )
        cmd_ours = best_of(
            [rec, "list", str(root), "--recursive", "-o", str(work / "ours"), "-q"],
            args.repeat,
            work,
        )
        same = (work / "mx.lst").read_bytes() == (work / "ours.lst").read_bytes()
        out = subprocess.run(
            [args.mx_python, "-c", IM2REC_INPROCESS, str(root), str(work / "mx2"),
             str(args.repeat)],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        lib_mx = json.loads(out.strip().splitlines()[-1])["seconds"]
        lib_ours = ours_inprocess(root, work / "ours2", args.repeat)
        mem_small = bytes_per_entry(small, work / "mem_small")
        mem_big = bytes_per_entry(root, work / "mem_big")
    results = {
        "files": args.files,
        "folders": args.folders,
        "command": {"im2rec_s": cmd_mx, "rec_s": cmd_ours, "ratio": cmd_mx / cmd_ours},
        "listing_only": {"im2rec_s": lib_mx, "rec_s": lib_ours, "ratio": lib_mx / lib_ours},
        "identical_output": same,
        "peak_bytes_per_entry": {str(args.files // 4): mem_small, str(args.files): mem_big},
    }
    save_results(
        "list",
        results,
        [
            ratio("rec list, whole command", "im2rec.py --list", cmd_mx / cmd_ours, TARGET),
            ratio("rec list, listing only", "im2rec.py --list", lib_mx / lib_ours, TARGET),
        ],
    )
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print(f"{args.files:,} files in {args.folders:,} folders (im2rec.py from {im2rec_py})")
        print(f"{'':<30} {'im2rec.py':>10} {'rec list':>10} {'ratio':>7} {'target':>7}")
        for key, label in (
            ("command", "whole command (start-up incl.)"),
            ("listing_only", "listing only, in-process"),
        ):
            r = results[key]
            assert isinstance(r, dict)
            times = f"{r['im2rec_s']:>9.2f}s {r['rec_s']:>9.2f}s"
            print(f"{label:<30} {times} {r['ratio']:>6.2f}x {TARGET:>6.1f}x")
        print(f"output byte-identical: {'yes' if same else 'NO'}")
        print(
            f"peak memory per listed file: {mem_small:.0f} B at {args.files // 4:,} files, "
            f"{mem_big:.0f} B at {args.files:,} files"
        )
    ok = (
        same
        and results["command"]["ratio"] >= TARGET
        and results["listing_only"]["ratio"] >= TARGET
    )  # type: ignore[index]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

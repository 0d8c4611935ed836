"""im2rec against itself: the same jobs timed on the working tree and on a
git revision, alternately, on this machine in one run.

A change that moves work between Python and C (or removes an extension)
must keep its speed: this runs the im2rec side of the loader, pack and
recordio benchmarks under both trees and prints each job's rate before and
after. The revision is checked out into a temporary worktree and its
extensions are built there with this interpreter; each job runs in a fresh
interpreter with that tree first on ``PYTHONPATH``. The two trees take
turns for ``--rounds`` rounds, each going first as often as the other, and
each keeps its best rate (the machine's noise is one-sided). Fails when a job is slower than ``--floor`` (0.95) of
before.

    .venv/bin/python bench/before_after.py --base 5162d19
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import bench_detection
from bench_loader import make_full_size_rec, make_rec  # bench/ is on sys.path as a script
from benchutil import listed_images, ratio, save_results
from loader_scripts import DATASET, ITERATOR

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FLOOR = 0.95

#: the recordio job: write records with an index, read them in order and by key
RECORDIO = r"""
import json, os, sys, time
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, IRHeader, pack, unpack
path = os.path.join(sys.argv[2], "small.rec")
payload = bytes(range(256)) * 4
n = 200_000
os.sync()  # (the other tree's file, written back now, not while this one is timed)
t0 = time.perf_counter()
with IndexedRecordWriter(path) as w:
    for i in range(n):
        w.write_key(i, pack(IRHeader(0, float(i % 10), i, 0), payload))
t1 = time.perf_counter()
r = IndexedRecordReader(path)
total = sum(unpack(r.read_key(k))[0].label for k in r.keys)
t2 = time.perf_counter()
os.unlink(path)
os.unlink(path[:-4] + ".idx")
print(json.dumps({"write": n / (t1 - t0), "read": n / (t2 - t1), "label_sum": total}))
"""

#: rec verify's walk (frames, padding, headers as detection labels, the
#: .idx) over many small records, records/s
VERIFY = r"""
import json, sys, time
from im2rec.inspect.verifying import verify
path = sys.argv[2]
t0 = time.perf_counter()
result = verify(path, boxes=True)
assert not result.problems, result.problems[:3]
print(json.dumps({"verify": result.records / (time.perf_counter() - t0)}))
"""


def make_verify_rec(path: Path, n: int) -> None:
    """``n`` records of 256 bytes, each with a detection label, indexed."""
    from im2rec.recordio import IndexedRecordWriter, pack
    from im2rec.recordio.detection import make_label

    label = make_label([[1, 0.1, 0.2, 0.5, 0.6, 0]], (320, 240))
    with IndexedRecordWriter(path) as w:
        for i in range(n):
            w.write_key(i, pack((len(label), label, i, 0), bytes(256)))


#: the pack jobs: rec pack of a list, --pass-through (threads copy the files)
#: or with its options (worker processes decode, resize, encode), records/s
PACK = r"""
import json, os, subprocess, sys, time
work, workers, options = sys.argv[2], sys.argv[3], sys.argv[4:]
out = os.path.join(work, "out")
os.makedirs(out, exist_ok=True)
for name in os.listdir(out):  # (the list stays; the last run's outputs go)
    if name != "images.lst":
        os.unlink(os.path.join(out, name))
t0 = time.perf_counter()
subprocess.run([sys.executable, "-m", "im2rec", "pack", *options, "--num-workers", workers,
                "--root", os.path.join(work, "images"), os.path.join(out, "images.lst")],
               check=True, capture_output=True)
n = sum(1 for _ in open(os.path.join(out, "images.lst")))
print(json.dumps({"pack": n / (time.perf_counter() - t0)}))
"""


def jobs(work: Path, workers: int, epochs: int) -> list[tuple[str, str, list[str], str]]:
    """(row, script, its arguments, the key of its JSON to compare)."""
    rec, full = str(work / "256.rec"), str(work / "full.rec")
    loader = [str(workers), str(epochs)]
    return [
        ("ImageRecordIter, random crop", ITERATOR, ["im2rec", rec, *loader], "images_per_s"),
        ("ImageRecordIter, RandomResizedCrop", ITERATOR, ["im2rec-rrc", rec, *loader],
         "images_per_s"),
        ("ImageRecordIter, full-size RandomResizedCrop", ITERATOR, ["im2rec-rrc", full, *loader],
         "images_per_s"),
        ("ImageRecordIter, GluonCV's recipe", ITERATOR, ["im2rec-recipe", rec, *loader],
         "images_per_s"),
        ("RecordDataset + Augmenter, DataLoader", DATASET, ["im2rec-train", rec, *loader],
         "images_per_s"),
        ("RecordDataset, decode only", DATASET, ["im2rec", rec, *loader], "images_per_s"),
        ("rec pack --pass-through", PACK, ["pack", str(work), str(workers), "--pass-through"],
         "pack"),
        ("rec pack --resize 128 (processes)", PACK,
         ["pack", str(work), str(workers), "--resize", "128"], "pack"),
        ("ImageDetRecordIter, SSD's augmentation", bench_detection.SCRIPT,
         ["im2rec", str(work / "det.rec"), *loader], "images_per_s"),
        ("IndexedRecordWriter, 1 KB records", RECORDIO, ["recordio", str(work)], "write"),
        ("IndexedRecordReader, by key", RECORDIO, ["recordio", str(work)], "read"),
        ("rec verify --boxes, 256-byte records", VERIFY, ["verify", str(work / "verify.rec")],
         "verify"),
    ]  # fmt: skip


def worktree(rev: str, where: Path) -> Path:
    """``rev`` checked out at ``where`` with its extensions built."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where), rev],
                   check=True)  # fmt: skip
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=where,
                   check=True, capture_output=True)  # fmt: skip
    return where


def measure(tree: Path, script: str, args: list[str]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, "-c", script, *args], check=True, capture_output=True,
                         text=True, env=env, cwd=tree).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the git revision to compare against")
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--floor", type=float, default=FLOOR)
    ap.add_argument("--only", metavar="TEXT", help="only the jobs whose name holds TEXT")
    ap.add_argument("--json", action="store_true", help="save bench/results/before_after.json")
    a = ap.parse_args()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    base = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", a.base],
                          check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="im2rec-before-after-") as tmp:
        work = Path(tmp)
        before = worktree(a.base, work / "base")
        try:
            make_rec(work / "256.rec", a.images)
            make_full_size_rec(work / "full.rec", a.images // 2)
            bench_detection.make_rec(work / "det.rec", a.images // 2)
            make_verify_rec(work / "verify.rec", 200_000)
            listed_images(work, a.images, copies=("out",))
            best: dict[str, dict[str, float]] = {}
            sides = [("before", before), ("after", ROOT)]
            for _ in range(a.rounds):
                for row, script, args, key in jobs(work, a.workers, a.epochs):
                    if a.only and a.only not in row:
                        continue
                    sides.reverse()  # each tree goes first as often as the other
                    for side, tree in sides:
                        rate = float(measure(tree, script, args)[key])
                        got = best.setdefault(row, {})
                        got[side] = max(got.get(side, 0.0), rate)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(work / "base")], check=False)  # fmt: skip
    print(f"{'job':<46} {'before':>10} {'after':>10} {'ratio':>7}   ({base} -> {head}+)")
    missed = []
    for row, got in best.items():
        change = got["after"] / got["before"]
        got["ratio"] = change
        print(f"{row:<46} {got['before']:>10.0f} {got['after']:>10.0f} {change:>7.3f}")
        if change < a.floor:
            missed.append(row)
    if a.json:
        save_results("before_after", {"base": base, "rows": best}, [
            ratio(row, f"im2rec {base}", got["ratio"], a.floor) for row, got in best.items()
        ])  # fmt: skip
    if missed:
        print(f"slower than {a.floor:.2f}x before: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

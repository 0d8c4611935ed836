"""A mixture of two recs against one rec of the same images, read the same
way: ``RecordDataset`` + an ``Augmenter`` (random 224 crop, mirror,
mean/std) in a torch ``DataLoader`` with ``--workers`` workers, batches of
64. One: ``--images`` 256-px JPEGs in one rec, shuffled. Mixture: the same
images split into two recs, a ``MixedDataset`` with a ``MixtureSampler``
(weights 1:1, an epoch of ``--images`` draws). Images/s, best of
``--epochs`` after a warm-up one, the sides alternating; each epoch checked
to give ``--images`` samples. Target: the mixture >= 0.9x one rec.

    .venv/bin/python bench/bench_mixture.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_loader import make_rec
from benchutil import ratio, save_results

TARGET = 0.9

SCRIPT = r"""
import json, sys, time, torch
from im2rec.training import Augmenter, MixedDataset, MixtureSampler, RecordDataset

kind, workers, images = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
recs = sys.argv[4:]
if __name__ == "__main__":
    augment = Augmenter((3, 224, 224), rand_crop=True, rand_mirror=True,
                        mean=(123.68, 116.78, 103.94), std=(58.4, 57.12, 57.38))
    sets = [RecordDataset(r, output="bytes", transform=augment) for r in recs]
    if kind == "one":
        ds, sampler = sets[0], torch.utils.data.RandomSampler(sets[0])
    else:
        ds = MixedDataset(sets)
        sampler = MixtureSampler(ds, [1, 1], epoch_size=images, seed=0)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, sampler=sampler, num_workers=workers,
                                         collate_fn=ds.collate, persistent_workers=True)
    rates = []
    for epoch in range(4):
        if kind != "one":
            sampler.set_epoch(epoch)
        t0, n = time.perf_counter(), 0
        for batch, labels in loader:
            n += len(labels)
        if epoch:
            rates.append(n / (time.perf_counter() - t0))
        assert n == images, n
    print(json.dumps({"images_per_s": max(rates)}))
"""


def split(rec: Path, into: list[Path]) -> None:
    """``rec``'s records dealt alternately into ``into``."""
    from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter

    reader = IndexedRecordReader(rec)
    writers = [IndexedRecordWriter(p) for p in into]
    for n, key in enumerate(reader.keys):
        writers[n % len(writers)].write_key(key, reader.read_key(key))
    for w in writers:
        w.close()


def run(kind: str, workers: int, images: int, recs: list[Path]) -> float:
    out = subprocess.run([sys.executable, "-c", SCRIPT, kind, str(workers), str(images),
                          *map(str, recs)], check=True, capture_output=True, text=True).stdout  # fmt: skip
    return float(json.loads(out.strip().splitlines()[-1])["images_per_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-mixture-") as tmp_s:
        tmp = Path(tmp_s)
        one = tmp / "one.rec"
        make_rec(one, args.images)
        halves = [tmp / "a.rec", tmp / "b.rec"]
        split(one, halves)
        rates: dict[str, list[float]] = {"one": [], "mixture": []}
        for _ in range(args.rounds):  # the sides alternate
            rates["one"].append(run("one", args.workers, args.images, [one]))
            rates["mixture"].append(run("mixture", args.workers, args.images, halves))
    best = {k: max(v) for k, v in rates.items()}
    value = best["mixture"] / best["one"]
    print(f"one rec {best['one']:,.0f} images/s, a mixture of two {best['mixture']:,.0f}: "
          f"{value:.2f}x (target {TARGET}x)")  # fmt: skip
    save_results("mixture", {"images": args.images, "workers": args.workers, "rates": rates},
                 [ratio("MixedDataset of two recs, DataLoader", "one rec", value, TARGET)])  # fmt: skip
    sys.exit(0 if value >= TARGET else 1)


if __name__ == "__main__":
    main()

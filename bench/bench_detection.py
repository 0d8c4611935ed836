"""Detection training input, MXNet side by side in one run:

1. ``ImageDetRecordIter`` vs MXNet's ``mx.io.ImageDetRecordIter`` on the same
   rec: MXNet SSD's recipe at 300x300 (``rand_crop_prob=0.5`` with 5
   samplers of min IoU 0.1-0.9, ``rand_pad_prob=0.5`` up to 4x,
   ``rand_mirror_prob=0.5``, mean/std), batches of 32, shuffled, with
   ``--workers`` preprocess threads each. Target >= 2x. MXNet's detection
   parser decodes on at most (cores - 1) OpenMP threads, so on a 2-core
   machine its 2 threads are 1: the row with 1 thread each is printed too.
2. ``RecordDataset(output="bytes", labels="boxes")`` with the same options
   as a ``DetTransform`` in a torch ``DataLoader`` (``--workers`` worker
   processes, ``RecordDataset.collate_boxes``) vs our iterator. Target
   >= 0.8x.

    .venv/bin/python bench/bench_detection.py --mx-python .venv-mx/bin/python

The rec holds ``--images`` VOC-sized photos (300-500 px a side, quality 90)
with 1-6 objects each, listed as ``rec list --boxes`` lists them (A = 4,
B = 6). Images/s counts real images (batch size minus pad), best of
``--epochs`` epochs after a warm-up one; each side's first epoch is checked:
every record once, every label row a well-formed detection label.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchutil import ratio, save_results

ITER_TARGET = 2.0
LOADER_TARGET = 0.8

SCRIPT = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
impl, rec, workers, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
n_samplers = 5
kw = dict(path_imgrec=rec, data_shape=(3, 300, 300), batch_size=32, shuffle=True,
          preprocess_threads=workers, label_pad_width=-1,
          rand_crop_prob=0.5, num_crop_sampler=n_samplers,
          min_crop_scales=(0.3,) * n_samplers, max_crop_scales=(1.0,) * n_samplers,
          min_crop_aspect_ratios=(0.5,) * n_samplers, max_crop_aspect_ratios=(2.0,) * n_samplers,
          min_crop_overlaps=(0.1, 0.3, 0.5, 0.7, 0.9), max_crop_overlaps=(1.0,) * n_samplers,
          max_crop_trials=(25,) * n_samplers,
          rand_pad_prob=0.5, max_pad_scale=4.0, rand_mirror_prob=0.5,
          mean_r=123.68, mean_g=116.78, mean_b=103.94, std_r=58.4, std_g=57.12, std_b=57.38)

def check(rows, real):
    ok = 0
    for row in rows[:real]:
        length = int(row[3])
        ok += bool(row[0] == 3 and row[1] == 300 and row[2] == 300 and length >= 10
               and (length - 4) % 6 == 0 and row[4] == 4 and row[5] == 6)
    return ok

if impl == "loader":
    import numpy as np
    import torch
    from im2rec.training import RecordDataset
    from im2rec.training.augment.detection import DetAugmenter
    from im2rec.training.detdraw import DetTransform
    from im2rec.training.detiter import _augmenter
    options = {k: v for k, v in kw.items() if k not in (
        "path_imgrec", "data_shape", "batch_size", "shuffle", "preprocess_threads",
        "label_pad_width")}
    transform = DetTransform(_augmenter((3, 300, 300), options))
    ds = RecordDataset(rec, output="bytes", labels="boxes", transforms=transform)
    loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, num_workers=workers,
                                         collate_fn=RecordDataset.collate_boxes,
                                         persistent_workers=True, prefetch_factor=4)
    def epoch():
        n = good = 0
        for images, targets in loader:
            n += len(targets)
            good += sum(bool(t["boxes"].shape[0] >= 1 and images.shape[1:] == (3, 300, 300))
                        for t in targets)
        return n, good
else:
    if impl == "mx":
        import mxnet as mx
        it = mx.io.ImageDetRecordIter(ctx="cpu", **kw)
        as_array = lambda a: a.asnumpy()
    else:
        from im2rec.training.detiter import ImageDetRecordIter
        it = ImageDetRecordIter(verbose=False, **kw)
        as_array = lambda a: a
    def epoch():
        it.reset()
        n = good = 0
        for batch in it:
            real = as_array(batch.data[0]).shape[0] - batch.pad
            n += real
            good += check(as_array(batch.label[0]), real)
        return n, good
rates = []
for e in range(epochs + 1):
    t0 = time.perf_counter()
    n, good = epoch()
    if e:
        rates.append(n / (time.perf_counter() - t0))
    else:
        first = {"images": n, "well_formed": good}
print(json.dumps({"images_per_s": max(rates), **first}))
"""


def make_rec(path: Path, n: int) -> None:
    """VOC-sized photos with 1-6 boxes each, A = 4 (width, height), B = 6."""
    import numpy as np
    from PIL import Image

    from im2rec.recordio import IndexedRecordWriter, pack
    from im2rec.recordio.detection import make_label

    rng = np.random.default_rng(0)
    with IndexedRecordWriter(path) as w:
        for i in range(n):
            width, height = (int(v) for v in rng.integers(300, 501, 2))
            low = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
            field = np.asarray(Image.fromarray(low).resize((width, height),
                                                           Image.Resampling.BICUBIC), np.int16)  # fmt: skip
            grain = rng.integers(-8, 9, (height, width, 1), dtype=np.int16)
            out = io.BytesIO()
            Image.fromarray(np.clip(field + grain, 0, 255).astype(np.uint8)).save(out, "JPEG",
                                                                                   quality=90)  # fmt: skip
            objects = []
            for _ in range(int(rng.integers(1, 7))):
                x0, y0 = rng.uniform(0, 0.7, 2)
                x1, y1 = x0 + rng.uniform(0.1, 1 - x0), y0 + rng.uniform(0.1, 1 - y0)
                objects.append([int(rng.integers(0, 20)), x0, y0, min(x1, 1), min(y1, 1), 0])
            label = make_label(objects, (width, height))
            w.write_key(i, pack((len(label), label, i, 0), out.getvalue()))


def run(python: str, impl: str, rec: Path, workers: int, epochs: int) -> dict[str, Any]:
    # MXNet sizes its decoder pool from OpenMP (and caps it at cores - 1)
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS=str(workers))
    proc = subprocess.run([python, "-c", SCRIPT, impl, str(rec), str(workers), str(epochs)],
                          capture_output=True, text=True, env=env)  # fmt: skip
    if proc.returncode:
        sys.exit(f"the {impl} side failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mx-python", required=True, help="an interpreter with mxnet 1.9.1")
    parser.add_argument("--images", type=int, default=1200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(tmp) / "det.rec"
        make_rec(rec, args.images)
        sides: dict[str, dict[str, Any]] = {}
        for name, python, impl, workers in (
            ("mxnet", args.mx_python, "mx", args.workers),
            ("im2rec", sys.executable, "ours", args.workers),
            ("mxnet_1", args.mx_python, "mx", 1),
            ("im2rec_1", sys.executable, "ours", 1),
            ("loader", sys.executable, "loader", args.workers),
        ):
            sides[name] = run(python, impl, rec, workers, args.epochs)
            print(f"  {name:9} {sides[name]['images_per_s']:8.1f} images/s", flush=True)
    for name, got in sides.items():
        want = args.images
        if got["images"] != want or got["well_formed"] != want:
            sys.exit(f"{name}: first epoch gave {got['images']} images, {got['well_formed']} "
                     f"well-formed, of {want}")  # fmt: skip
    rate = {name: got["images_per_s"] for name, got in sides.items()}
    iter_ratio = rate["im2rec"] / rate["mxnet"]
    one_ratio = rate["im2rec_1"] / rate["mxnet_1"]
    loader_ratio = rate["loader"] / rate["im2rec"]
    print(f"ImageDetRecordIter {rate['im2rec']:.0f} images/s vs MXNet's {rate['mxnet']:.0f}: "
          f"{iter_ratio:.2f}x (target {ITER_TARGET}x; {args.workers} threads each)")  # fmt: skip
    print(f"  1 thread each: {rate['im2rec_1']:.0f} vs {rate['mxnet_1']:.0f}: {one_ratio:.2f}x")
    print(f"RecordDataset + DetTransform in a DataLoader: {rate['loader']:.0f} images/s, "
          f"{loader_ratio:.2f}x the iterator (target {LOADER_TARGET}x)")  # fmt: skip
    ratios = [
        ratio("ImageDetRecordIter", "mx.io.ImageDetRecordIter", iter_ratio, ITER_TARGET),
        ratio("ImageDetRecordIter, 1 thread each", "mx.io.ImageDetRecordIter", one_ratio),
        ratio("RecordDataset detection DataLoader", "ImageDetRecordIter", loader_ratio,
              LOADER_TARGET),
    ]  # fmt: skip
    data = {"images": args.images, "workers": args.workers, "epochs": args.epochs,
            "images_per_s": rate}  # fmt: skip
    print(f"saved {save_results('detection', data, ratios)}")
    if iter_ratio < ITER_TARGET or loader_ratio < LOADER_TARGET:
        sys.exit("missed a target")


if __name__ == "__main__":
    main()

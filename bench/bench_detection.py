"""Detection training input, side by side in one run:

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
3. Both against NVIDIA DALI's CPU detection pipeline (its SSD example:
   ``fn.readers.coco`` over the JPEG files and the annotation file the rec
   was listed from, decode, ``fn.random_bbox_crop`` with IoU thresholds 0,
   0.1, 0.3, 0.5, 0.7, 0.9, scale 0.3-1, aspect 0.5-2 and no crop allowed,
   slice, resize to 300x300, ``bb_flip`` and mirror at 0.5, normalise), 2
   threads, batches of 32; ours with the crop matched: 6 samplers of those
   minimum IoUs, the same scale, aspect and tries, no padding, and a crop
   as often as DALI made one in its first epoch (DALI leaves an image
   uncropped when it draws "no crop" or when no window meets the IoU drawn
   in 50 tries; MXNet's samplers check IoU only when all six of their
   bounds are set, so they always find one). Each side's crop statistics
   are printed (images left uncropped, mean window: the area shown). Target
   >= 2x for each.

    .venv/bin/python bench/bench_detection.py --mx-python .venv-mx/bin/python

The data: ``--images`` VOC-sized photos (300-500 px a side, quality 90)
with 1-6 objects each, written as JPEG files and a COCO annotation file,
then listed and packed as a user would (``rec list --boxes coco``, ``rec
pack --pass-through --pack-label``: A = 4, B = 6). Images/s counts real
images (batch size minus pad), best of ``--epochs`` epochs after a warm-up
one; each side's first epoch is checked: every record once, every label a
well-formed detection label.
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

from benchutil import ratio, save_results

ITER_TARGET = 2.0
LOADER_TARGET = 0.8
DALI_TARGET = 2.0

SCRIPT = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
impl, rec, workers, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
kw = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(sys.argv[6]).items()}
kw.update(path_imgrec=rec, preprocess_threads=workers)

def check(rows, real):
    ok = 0
    for row in rows[:real]:
        length = int(row[3])
        ok += bool(row[0] == 3 and row[1] == 300 and row[2] == 300 and length >= 10
               and (length - 4) % 6 == 0 and row[4] == 4 and row[5] == 6)
    return ok

if impl == "stats":  # the crops our augmenter plans for each record: share uncropped, mean window
    import numpy as np
    from im2rec.recordio import IndexedRecordReader, unpack
    from im2rec.recordio.detection import kept, read_label
    from im2rec.training.detiter import _augmenter
    options = {k: v for k, v in kw.items() if k not in (
        "path_imgrec", "data_shape", "batch_size", "shuffle", "preprocess_threads",
        "label_pad_width")}
    aug = _augmenter((3, 300, 300), options)
    rng = np.random.default_rng(0)
    reader = IndexedRecordReader(rec)
    whole = areas = n = 0
    for _ in range(epochs):
        for key in reader.keys:
            header, _ = unpack(reader.read_key(key))
            label = read_label(header.label)
            objects = label.objects[kept(label.objects)]
            width, height = int(label.header[2]), int(label.header[3])
            plan = aug.plan(width, height, objects, rng)
            x0, y0, x1, y1 = plan.box
            area = (x1 - x0) * (y1 - y0) / (width * height)
            whole += abs(area - 1) < 1e-6
            areas += area
            n += 1
    print(json.dumps({"uncropped": whole / n, "mean_window": areas / n}))
    sys.exit()
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


#: MXNet SSD's recipe (example/ssd), the options both iterators take
MX_RECIPE = dict(
    data_shape=(3, 300, 300), batch_size=32, shuffle=True, label_pad_width=-1,
    rand_crop_prob=0.5, num_crop_sampler=5, min_crop_scales=(0.3,) * 5, max_crop_scales=(1.0,) * 5,
    min_crop_aspect_ratios=(0.5,) * 5, max_crop_aspect_ratios=(2.0,) * 5,
    min_crop_overlaps=(0.1, 0.3, 0.5, 0.7, 0.9), max_crop_overlaps=(1.0,) * 5,
    max_crop_trials=(25,) * 5, rand_pad_prob=0.5, max_pad_scale=4.0, rand_mirror_prob=0.5,
    mean_r=123.68, mean_g=116.78, mean_b=103.94, std_r=58.4, std_g=57.12, std_b=57.38,
)  # fmt: skip
#: DALI's SSD crop in MXNet's words: its thresholds as 6 samplers, no crop as a 7th choice
THRESHOLDS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9)
DALI_MATCHED = dict(
    MX_RECIPE, rand_crop_prob=6 / 7, num_crop_sampler=6, min_crop_scales=(0.3,) * 6,
    max_crop_scales=(1.0,) * 6, min_crop_aspect_ratios=(0.5,) * 6,
    max_crop_aspect_ratios=(2.0,) * 6, min_crop_overlaps=THRESHOLDS, max_crop_overlaps=(1.0,) * 6,
    max_crop_trials=(50,) * 6, rand_pad_prob=0.0, max_pad_scale=1.0,
)  # fmt: skip


def make_data(root: Path, n: int) -> Path:
    """VOC-sized photos with 1-6 boxes each (20 classes) as JPEG files and a
    COCO annotation file (boxes in pixels), listed and packed as a user
    would: the rec's path."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    images, annotations = [], []
    (root / "images").mkdir(parents=True)
    for i in range(n):
        width, height = (int(v) for v in rng.integers(300, 501, 2))
        low = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
        field = np.asarray(Image.fromarray(low).resize((width, height),
                                                       Image.Resampling.BICUBIC), np.int16)  # fmt: skip
        grain = rng.integers(-8, 9, (height, width, 1), dtype=np.int16)
        name = f"{i:06d}.jpg"
        Image.fromarray(np.clip(field + grain, 0, 255).astype(np.uint8)).save(
            root / "images" / name, "JPEG", quality=90)  # fmt: skip
        images.append({"id": i + 1, "file_name": name, "width": width, "height": height})
        for _ in range(int(rng.integers(1, 7))):
            x0, y0 = rng.uniform(0, 0.7, 2)
            x1, y1 = min(x0 + rng.uniform(0.1, 1 - x0), 1), min(y0 + rng.uniform(0.1, 1 - y0), 1)
            box = [round(x0 * width, 2), round(y0 * height, 2), round((x1 - x0) * width, 2),
                   round((y1 - y0) * height, 2)]  # fmt: skip
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "iscrowd": 0,
                                "category_id": int(rng.integers(1, 21)), "bbox": box,
                                "area": box[2] * box[3]})  # fmt: skip
    categories = [{"id": c, "name": f"class{c}"} for c in range(1, 21)]
    (root / "instances.json").write_text(json.dumps(
        {"images": images, "annotations": annotations, "categories": categories}))  # fmt: skip
    rec = str(Path(sys.executable).with_name("rec"))
    for cmd in (
        [rec, "list", str(root / "images"), "--boxes", "coco", "--annotations",
         str(root / "instances.json"), "-o", str(root / "det"), "-q"],
        [rec, "pack", str(root / "det.lst"), "--pass-through", "--pack-label", "-q"],
    ):  # fmt: skip
        subprocess.run(cmd, check=True)
    return root / "det.rec"


DALI_SCRIPT = r"""
import json, sys, time
import numpy as np
from nvidia.dali import fn, pipeline_def, types

root, ann, workers, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


@pipeline_def(batch_size=32, num_threads=workers, device_id=None, seed=0)
def ssd():
    jpegs, bboxes, labels = fn.readers.coco(file_root=root, annotations_file=ann, ltrb=True,
                                            ratio=True, skip_empty=True, random_shuffle=True,
                                            pad_last_batch=True, name="Reader")
    images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
    anchor, shape, bboxes, labels = fn.random_bbox_crop(
        bboxes, labels, aspect_ratio=[0.5, 2.0], thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9],
        scaling=[0.3, 1.0], bbox_layout="xyXY", allow_no_crop=True, num_attempts=50)
    images = fn.slice(images, anchor, shape, normalized_anchor=True, normalized_shape=True,
                      out_of_bounds_policy="trim_to_shape")
    images = fn.resize(images, resize_x=300, resize_y=300)
    flip = fn.random.coin_flip(probability=0.5)
    bboxes = fn.bb_flip(bboxes, ltrb=True, horizontal=flip)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                      mean=[123.68, 116.78, 103.94], std=[58.4, 57.12, 57.38],
                                      mirror=flip)
    return images, bboxes, labels, shape


pipe = ssd()
pipe.build()
size = pipe.epoch_size("Reader")
rates = []
for epoch in range(epochs + 1):
    t0, n, good, whole, areas = time.perf_counter(), 0, 0, 0, 0.0
    while n < size:  # one epoch: the last batch's padding is not counted
        images, bboxes, labels, shape = pipe.run()
        batch = np.asarray(images.as_tensor())
        real = min(len(batch), size - n)
        for k in range(real):
            boxes, window = np.asarray(bboxes[k]), np.asarray(shape[k])
            good += bool(boxes.ndim == 2 and boxes.shape[1] == 4 and len(boxes) >= 1)
            whole += bool(abs(window[0] * window[1] - 1) < 1e-6)
            areas += float(window[0] * window[1])
        assert batch.shape[1:] == (3, 300, 300) and batch.dtype == np.float32
        n += real
    if epoch:
        rates.append(n / (time.perf_counter() - t0))
    else:
        first = {"images": n, "well_formed": good, "uncropped": whole / n, "mean_window": areas / n}
print(json.dumps({"images_per_s": max(rates), **first}))
"""


def run(
    python: str, impl: str, rec: Path, workers: int, epochs: int,
    options: dict[str, Any] = MX_RECIPE,
) -> dict[str, Any]:  # fmt: skip
    # MXNet sizes its decoder pool from OpenMP (and caps it at cores - 1)
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS=str(workers))
    script = DALI_SCRIPT if impl == "dali" else SCRIPT
    args = [str(rec.parent / "images"), str(rec.parent / "instances.json")] if impl == "dali" else [
        impl, str(rec)]  # fmt: skip
    proc = subprocess.run([python, "-c", script, *args, str(workers), str(epochs), "-",
                           json.dumps(options)], capture_output=True, text=True, env=env)  # fmt: skip
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
        rec = make_data(Path(tmp), args.images)
        sides: dict[str, dict[str, Any]] = {}
        for name, python, impl, workers, options in (
            ("mxnet", args.mx_python, "mx", args.workers, MX_RECIPE),
            ("im2rec", sys.executable, "ours", args.workers, MX_RECIPE),
            ("mxnet_1", args.mx_python, "mx", 1, MX_RECIPE),
            ("im2rec_1", sys.executable, "ours", 1, MX_RECIPE),
            ("loader", sys.executable, "loader", args.workers, MX_RECIPE),
            ("dali", sys.executable, "dali", args.workers, DALI_MATCHED),
            ("im2rec_dali", sys.executable, "ours", args.workers, DALI_MATCHED),
            ("loader_dali", sys.executable, "loader", args.workers, DALI_MATCHED),
        ):
            if name == "im2rec_dali":  # (crop as often as DALI did: see the docstring)
                options = matched = dict(
                    options, rand_crop_prob=round(1 - sides["dali"]["uncropped"], 3)
                )
            elif name == "loader_dali":
                options = matched
            sides[name] = run(python, impl, rec, workers, args.epochs, options)
            print(f"  {name:11} {sides[name]['images_per_s']:8.1f} images/s", flush=True)
        crops = run(sys.executable, "stats", rec, 1, 3, matched)
    for name, got in sides.items():
        want = args.images
        if got["images"] != want or got["well_formed"] != want:
            sys.exit(f"{name}: first epoch gave {got['images']} images, {got['well_formed']} "
                     f"well-formed, of {want}")  # fmt: skip
    rate = {name: got["images_per_s"] for name, got in sides.items()}
    iter_ratio = rate["im2rec"] / rate["mxnet"]
    one_ratio = rate["im2rec_1"] / rate["mxnet_1"]
    loader_ratio = rate["loader"] / rate["im2rec"]
    dali_iter = rate["im2rec_dali"] / rate["dali"]
    dali_loader = rate["loader_dali"] / rate["dali"]
    print(f"ImageDetRecordIter {rate['im2rec']:.0f} images/s vs MXNet's {rate['mxnet']:.0f}: "
          f"{iter_ratio:.2f}x (target {ITER_TARGET}x; {args.workers} threads each)")  # fmt: skip
    print(f"  1 thread each: {rate['im2rec_1']:.0f} vs {rate['mxnet_1']:.0f}: {one_ratio:.2f}x")
    print(f"RecordDataset + DetTransform in a DataLoader: {rate['loader']:.0f} images/s, "
          f"{loader_ratio:.2f}x the iterator (target {LOADER_TARGET}x)")  # fmt: skip
    dali = sides["dali"]
    print(f"against NVIDIA DALI's CPU SSD pipeline ({rate['dali']:.0f} images/s; crops: "
          f"{dali['uncropped']:.0%} of images uncropped, mean window {dali['mean_window']:.2f}; "
          f"ours: {crops['uncropped']:.0%}, {crops['mean_window']:.2f}):")  # fmt: skip
    print(f"  ImageDetRecordIter {rate['im2rec_dali']:.0f} images/s: {dali_iter:.2f}x "
          f"(target {DALI_TARGET}x)")  # fmt: skip
    print(f"  RecordDataset DataLoader {rate['loader_dali']:.0f} images/s: {dali_loader:.2f}x "
          f"(target {DALI_TARGET}x)")  # fmt: skip
    ratios = [
        ratio("ImageDetRecordIter", "mx.io.ImageDetRecordIter", iter_ratio, ITER_TARGET),
        ratio("ImageDetRecordIter, 1 thread each", "mx.io.ImageDetRecordIter", one_ratio),
        ratio("RecordDataset detection DataLoader", "ImageDetRecordIter", loader_ratio,
              LOADER_TARGET),
        ratio("ImageDetRecordIter, DALI's crop", "NVIDIA DALI (CPU)", dali_iter, DALI_TARGET),
        ratio("RecordDataset detection DataLoader, DALI's crop", "NVIDIA DALI (CPU)",
              dali_loader, DALI_TARGET),
    ]  # fmt: skip
    data = {"images": args.images, "workers": args.workers, "epochs": args.epochs,
            "images_per_s": rate,
            "crops": {"dali": {k: dali[k] for k in ("uncropped", "mean_window")},
                      "im2rec": crops}}  # fmt: skip
    print(f"saved {save_results('detection', data, ratios)}")
    if (iter_ratio < ITER_TARGET or loader_ratio < LOADER_TARGET or dali_iter < DALI_TARGET
            or dali_loader < DALI_TARGET):  # fmt: skip
        sys.exit("missed a target")


if __name__ == "__main__":
    main()

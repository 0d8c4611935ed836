"""Reading back for training, MXNet side by side in one run:

1. ``ImageRecordIter`` vs MXNet's ``mx.io.ImageRecordIter``: batches of 64 x
   3x224x224 float32 with random crop, random mirror and mean/std
   normalisation, both with ``--workers`` decoders (MXNet: ``ctx='cpu'`` and
   ``OMP_NUM_THREADS``, without which it decodes on one thread). Target >= 1x.
   Then the same with GluonCV's ImageNet training recipe (``train_imagenet.py
   --use-rec``: MXNet's random-resized crop with area 0.08-1 and aspect
   3/4-4/3, brightness, contrast and saturation 0.4, PCA noise 0.1, random
   mirror, mean/std). Target >= 1.3x.
2. ``RecordDataset`` vs the usual ``mx.recordio`` + PIL dataset class (what
   insightface's ``MXFaceDataset`` and many repos write), both in a torch
   DataLoader with ``--workers`` workers (fork), decoding to RGB arrays.
   Informational (the old 2x target is out of reach); also printed: the decode ceiling (images/s of ``--workers``
   processes doing nothing but decode each JPEG to an RGB array). Two
   informational rows follow: images wanted at half size
   (``min_size``), and a training transform (RandomResizedCrop(224), random
   flip, ToTensor, Normalize, collated into float32 batches): torchvision's
   PIL path written out for the usual class, since torchvision's wheel does
   not load beside this CPU build of torch, and ``Augmenter`` for ours.

    make bench      # or: .venv/bin/python bench/bench_loader.py --mx-python .venv-mx/bin/python

Packs ``--images`` JPEGs with a 256-pixel short side; each side runs in its
own interpreter (MXNet needs numpy<1.24); images/s counts real images (batch
size minus pad) and is the best of ``--epochs`` epochs after a warm-up one.
The shares of the decode-only bound come from rounds of their own (see
``BOUND_ROUNDS``).
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

from benchutil import ratio, save_results  # bench/ is on sys.path when run as a script

ITER_TARGET = 1.0
TRAIN_TARGET = 1.5  # RecordDataset + Augmenter vs the usual class, training transform (issue 20)
#: (row, which .rec, DALI's pipeline): RandomResizedCrop on 256-px and on
#: photo-sized images, and a plain random 224 crop
DALI_ROWS = (("rrc_256", "256", "rrc"), ("rrc_full", "full", "rrc"), ("crop_256", "256", "crop"))
DALI_TARGETS = {"rrc_256": 1.3, "rrc_full": 1.5, "crop_256": 1.1}
DALI_LABELS = {
    "rrc_256": "RandomResizedCrop, 256-px",
    "rrc_full": "RandomResizedCrop, full-size",
    "crop_256": "random 224 crop, 256-px",
}
RECIPE_TARGET = 1.3  # with GluonCV's training augmentation (issue 17)
# Against FFCV 1.0.2's CPU loader, RandomResizedCrop(224) + flip + normalise
# (issue 36), and the share of the decode-only bound each path reaches.
FFCV_ITER_TARGET = 1.5
FFCV_DATASET_TARGET = 1.3
BOUND_TARGET = 0.75
# The shares of the bound come from rounds of the bound, the iterator and the
# DataLoader run one after the other, each side's best round kept: on a shared
# VM one process's speed moved 2x between consecutive epochs (a batch every
# 11 ms, then every 24 ms), so a share made of two numbers measured minutes
# apart said more about the neighbours than about the code.
BOUND_ROUNDS = 3
HERE = Path(__file__).resolve().parent
# RecordDataset's old 2x target is retired: two processes doing nothing but
# decoding (the ceiling printed beside it) reach 1.06-1.35x the usual class.

ITERATOR = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
impl, rec, workers, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
kw = dict(path_imgrec=rec, path_imgidx=rec[:-4] + ".idx", data_shape=(3, 224, 224),
          batch_size=64, shuffle=True, rand_mirror=True,
          mean_r=123.68, mean_g=116.78, mean_b=103.94, std_r=58.4, std_g=57.12, std_b=57.38,
          preprocess_threads=workers, prefetch_buffer=4, ctx="cpu")
impl, _, variant = impl.partition("-")
if variant in ("recipe", "rrc"):  # GluonCV's train_imagenet.py --use-rec, option for option
    kw.update(random_resized_crop=True, max_aspect_ratio=4. / 3., min_aspect_ratio=3. / 4.,
              max_random_area=1, min_random_area=0.08)
if variant == "recipe":  # and its colour jitter
    kw.update(brightness=0.4, saturation=0.4, contrast=0.4, pca_noise=0.1)
elif variant != "rrc":
    kw.update(rand_crop=True)
if impl == "mx":
    import mxnet as mx
    it = mx.io.ImageRecordIter(**kw)
    as_array = lambda a: a.asnumpy()  # numpy batches, which is what ours yields
else:
    from im2rec.training.iterator import ImageRecordIter
    it = ImageRecordIter(verbose=False, **kw)
    as_array = lambda a: a
rates = []
for epoch in range(epochs + 1):
    it.reset()
    t0, n, labels = time.perf_counter(), 0, 0.0
    for batch in it:
        real = as_array(batch.data[0]).shape[0] - batch.pad
        n += real
        labels += float(as_array(batch.label[0])[:real].sum())
    if epoch:  # the first epoch warms up
        rates.append(n / (time.perf_counter() - t0))
    else:  # and is checked: every record once (MXNet's later epochs start after the wrap)
        first = {"images": n, "label_sum": labels}
print(json.dumps({"images_per_s": max(rates), **first}))
"""

DALI = r"""
import json, sys, time
import numpy as np
from nvidia.dali import fn, pipeline_def, types

mode, rec, workers, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


@pipeline_def(batch_size=64, num_threads=workers, device_id=None, seed=0)
def pipeline():
    # DALI's own fused decoders: the crop window is drawn first and only it
    # is decoded (libjpeg-turbo's ROI decoding), as in DALI's ImageNet examples.
    jpegs, labels = fn.readers.mxnet(path=[rec], index_path=[rec[:-4] + ".idx"],
                                     random_shuffle=True, pad_last_batch=True,
                                     name="Reader")  # each epoch exactly the records once
    if mode == "rrc":
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0],
                                               random_aspect_ratio=[3 / 4, 4 / 3])
        images = fn.resize(images, resize_x=224, resize_y=224)
    else:
        images = fn.decoders.image_crop(jpegs, device="cpu", output_type=types.RGB,
                                        crop=(224, 224),
                                        crop_pos_x=fn.random.uniform(range=(0.0, 1.0)),
                                        crop_pos_y=fn.random.uniform(range=(0.0, 1.0)))
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                      mean=[123.68, 116.78, 103.94], std=[58.4, 57.12, 57.38],
                                      mirror=fn.random.coin_flip())
    return images, labels


pipe = pipeline()
pipe.build()
size = pipe.epoch_size("Reader")
rates = []
for epoch in range(epochs + 1):
    t0, n, labels = time.perf_counter(), 0, 0.0
    while n < size:  # one epoch: the last batch's padding is not counted
        data, label = pipe.run()
        batch = np.asarray(data.as_tensor())  # the batch as one numpy array, as ours gives
        assert batch.shape[1:] == (3, 224, 224) and batch.dtype == np.float32
        real = min(len(batch), size - n)
        n += real
        labels += float(np.asarray(label.as_tensor())[:real].sum())
    if epoch:
        rates.append(n / (time.perf_counter() - t0))
print(json.dumps({"images_per_s": max(rates), "images": n, "label_sum": labels}))
"""

BOUND = r"""
import json, math, os, sys, time
import numpy as np
from im2rec.imaging import _jpeg
from im2rec.imaging.jpeg import _draft_scale
from im2rec.recordio import IndexedRecordReader, unpack

mode, rec, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
reader = IndexedRecordReader(rec)
payloads = [bytes(unpack(reader[i])[1]) for i in range(min(len(reader), 2000))]
rng = np.random.default_rng(0)


def window(width, height):  # the crop the iterator draws (MXNet's and DALI's rules)
    if mode == "crop":
        x, y = rng.integers(0, width - 223), rng.integers(0, height - 223)
        return x, y, x + 224, y + 224
    for _ in range(10):
        area = rng.uniform(0.08, 1) * width * height
        aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
        if w <= width and h <= height:
            x, y = rng.integers(0, width - w + 1), rng.integers(0, height - h + 1)
            return x, y, x + w, y + h
    side = min(width, height)
    return (width - side) // 2, (height - side) // 2, (width + side) // 2, (height + side) // 2


jobs = []
for payload in payloads:
    width, height = _jpeg.header(payload)[:2]
    box = tuple(int(v) for v in window(width, height))
    scale = _draft_scale((width, height), box, (224, 224))
    sw, sh = -(-width // scale), -(-height // scale)
    region = (box[0] * sw // width, box[1] * sh // height,
              -(-box[2] * sw // width), -(-box[3] * sh // height))
    jobs.append((payload, scale, region))


def decode_for(mine, start, span):  # images decoded from start to start + span
    while time.monotonic() < start:
        pass
    n, end = 0, start + span
    while time.monotonic() < end:
        payload, scale, (l, t, r, b) = mine[n % len(mine)]
        _jpeg.decode(payload, scale, l, t, r, b, False, 1 << 30)
        n += 1
    return n


# `workers` processes decoding every image at the same time, timed by the
# wall clock as the loaders are: what they would reach if decoding were all
# they did. (Until 0.3 this was `workers` x one process's CPU time on the
# first 1,000 images, which assumed perfect scaling: 1.0-1.12x this one,
# median 1.05x, measured interleaved on the 2-vCPU Zen 4 VM.)
SPAN = 0.5
rates = []
for attempt in range(4):
    start, pids, (r, w) = time.monotonic() + 0.05, [], os.pipe()
    for k in range(workers):
        pid = os.fork()
        if pid == 0:
            os.write(w, decode_for(jobs[k::workers], start, SPAN).to_bytes(8, "little"))
            os._exit(0)
        pids.append(pid)
    os.close(w)
    total = sum(int.from_bytes(os.read(r, 8), "little") for _ in pids)
    for pid in pids:
        os.waitpid(pid, 0)
    os.close(r)
    if attempt:  # the first warms up
        rates.append(total / SPAN)
print(json.dumps({"images_per_s": max(rates)}))
"""

DATASET = r"""
import io, json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

impl, rec, workers, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
half = impl.endswith("-half")  # an informational row: images wanted at half size
# another: a training transform, float32 batches; ours decoded a batch at a
# time (__getitems__ + RecordDataset.collate), or ("-train-sample") a sample
# at a time with default_collate, as before 0.3
per_sample = impl.endswith("-train-sample")
train = impl.endswith("-train") or per_sample
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


def torchvision_train(image):
    # What torchvision's RandomResizedCrop(224), RandomHorizontalFlip(),
    # ToTensor() and Normalize(MEAN, STD) run on a PIL image, draw for draw.
    width, height = image.size
    area, log_ratio = width * height, (np.log(3 / 4), np.log(4 / 3))
    for _ in range(10):
        target = area * torch.empty(1).uniform_(0.08, 1.0).item()
        aspect = np.exp(torch.empty(1).uniform_(*log_ratio).item())
        w, h = round((target * aspect) ** 0.5), round((target / aspect) ** 0.5)
        if 0 < w <= width and 0 < h <= height:
            i = torch.randint(0, height - h + 1, size=(1,)).item()
            j = torch.randint(0, width - w + 1, size=(1,)).item()
            break
    else:
        i, j, h, w = 0, 0, height, width
    image = image.crop((j, i, j + w, i + h)).resize((224, 224), Image.Resampling.BILINEAR)
    if torch.rand(1) < 0.5:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    pixels = torch.from_numpy(np.array(image, np.uint8, copy=True)).view(224, 224, 3)
    return pixels.permute(2, 0, 1).contiguous().to(torch.float32).div(255).sub_(MEAN).div_(STD)


def to_array(image):
    if half and impl.startswith("mx"):  # what users write: decode in full, then shrink
        image = image.resize((image.width // 2, image.height // 2), Image.Resampling.BILINEAR)
    return np.asarray(image)


class MXRecordDataset(Dataset):
    # The pattern users write around mx.recordio (insightface MXFaceDataset, ...).
    def __init__(self, rec):
        import mxnet as mx
        self.mx = mx
        self.imgrec = mx.recordio.MXIndexedRecordIO(rec[:-4] + ".idx", rec, "r")
        self.keys = list(self.imgrec.keys)

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, i):
        header, payload = self.mx.recordio.unpack(self.imgrec.read_idx(self.keys[i]))
        image = Image.open(io.BytesIO(payload)).convert("RGB")
        return (torchvision_train if train else to_array)(image), float(header.label)


if impl.startswith("mx"):
    dataset = MXRecordDataset(rec)
elif train:
    from im2rec.training.augment import Augmenter
    from im2rec.training.dataset import RecordDataset
    augment = Augmenter((3, 224, 224), random_resized_crop=True, min_random_area=0.08,
                        min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3, rand_mirror=True,
                        mean=tuple(255 * MEAN.flatten()), std=tuple(255 * STD.flatten()))
    dataset = RecordDataset(rec, output="bytes", transform=augment)
    if per_sample:  # hides __getitems__: DataLoader then asks for each sample
        samples = dataset

        class PerSample(Dataset):
            def __len__(self):
                return len(samples)

            def __getitem__(self, i):
                return samples[i]

        dataset = PerSample()
else:
    from im2rec.training.dataset import RecordDataset
    dataset = RecordDataset(rec, transform=to_array, min_size=(112, 112) if half else None)


def count(batch):  # images and the sum of their labels: both sides must agree
    return len(batch), sum(label for _, label in batch)


if not train:
    collate = count
elif impl.startswith("im2rec") and not per_sample:
    collate = RecordDataset.collate  # the batch as decoded, moved without a copy
else:  # the real batches, handed to this process in shared memory
    collate = torch.utils.data.default_collate
loader = DataLoader(dataset, batch_size=64, num_workers=workers, collate_fn=collate,
                    multiprocessing_context="fork", persistent_workers=True, shuffle=True,
                    generator=torch.Generator().manual_seed(0))
rates = []
for epoch in range(epochs + 1):
    t0, n, labels = time.perf_counter(), 0, 0.0
    for batch in loader:
        if train:
            assert batch[0].shape[1:] == (3, 224, 224) and batch[0].dtype == torch.float32
        real, total = (len(batch[0]), float(batch[1].sum())) if train else batch
        n += real
        labels += total
    if epoch:  # the first epoch starts the workers
        rates.append(n / (time.perf_counter() - t0))
print(json.dumps({"images_per_s": max(rates), "images": n, "label_sum": labels}))
"""


def photo(rng: Any, size: tuple[int, int]) -> bytes:
    """A smooth colour field with grain, quality 90: compresses like a photo."""
    import numpy as np
    from PIL import Image

    low = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    field = np.asarray(Image.fromarray(low).resize(size, Image.Resampling.BICUBIC), np.int16)
    grain = rng.integers(-8, 9, (size[1], size[0], 1), dtype=np.int16)
    out = io.BytesIO()
    Image.fromarray(np.clip(field + grain, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=90)
    return out.getvalue()


def make_rec(path: Path, n: int) -> None:
    """256-px short side, alternately landscape and portrait (an ImageNet rec)."""
    import numpy as np

    from im2rec.recordio import IndexedRecordWriter, IRHeader, pack

    rng = np.random.default_rng(0)
    with IndexedRecordWriter(path) as w:
        for i in range(n):
            size = (256, 341) if i % 2 else (341, 256)
            w.write_key(i, pack(IRHeader(0, i % 100, i, 0), photo(rng, size)))


def make_full_size_rec(path: Path, n: int) -> None:
    """Photo-sized JPEGs: 4:3 images from 300x225 to 1024x768, quality 90."""
    import numpy as np

    from im2rec.recordio import IndexedRecordWriter, IRHeader, pack

    rng = np.random.default_rng(1)
    with IndexedRecordWriter(path) as w:
        for i in range(n):
            width = int(rng.integers(300, 1025))
            size = (width, width * 3 // 4)
            w.write_key(i, pack(IRHeader(0, i % 100, i, 0), photo(rng, size)))


CEILING = r"""
import io, sys, time
import numpy as np
from PIL import Image
from im2rec.recordio import IndexedRecordReader, unpack
reader = IndexedRecordReader(sys.argv[1])
payloads = [unpack(reader[i])[1] for i in range(len(reader))]
best = float("inf")
for attempt in range(4):
    t0 = time.process_time()
    for payload in payloads:
        np.asarray(Image.open(io.BytesIO(payload)).convert("RGB"))
    if attempt:
        best = min(best, (time.process_time() - t0) / len(payloads))
print(int(sys.argv[2]) / best)
"""


def decode_ceiling(rec: Path, workers: int) -> float:
    """Images/s if ``workers`` processes did nothing but decode each JPEG to
    an RGB array (CPU time, best of 3 passes after a warm-up one): the most
    any dataset returning full-size decoded images can deliver here. glibc's
    malloc is told to keep freed memory: a fresh process otherwise returns
    each image's buffers to the kernel and faults them in again, about 0.3
    ms an image here, which the loaders' long-lived workers do not pay."""
    env = dict(
        os.environ, MALLOC_MMAP_THRESHOLD_=str(64 << 20), MALLOC_TRIM_THRESHOLD_=str(256 << 20)
    )
    out = subprocess.run([sys.executable, "-c", CEILING, str(rec), str(workers)],
                         check=True, capture_output=True, text=True, env=env).stdout  # fmt: skip
    return float(out.split()[-1])


def run(
    python: str, script: str, impl: str, rec: Path, workers: int, epochs: int
) -> dict[str, float]:
    """``images_per_s``, and the ``images`` and ``label_sum`` of the last
    epoch, which must be the same on both sides (a side that dropped or
    repeated records must not look fastest)."""
    # MXNet's CPU iterator sizes its decoder pool from OpenMP, not preprocess_threads.
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS=str(workers))
    out = subprocess.run([python, "-c", script, impl, str(rec), str(workers), str(epochs)],
                         check=True, capture_output=True, text=True, env=env).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def against_dali(
    recs: dict[str, Path], mx_python: str, workers: int, epochs: int
) -> dict[str, dict[str, Any]]:
    """The DALI table (issue 20): for each row, DALI's CPU pipeline, ours,
    MXNet's iterator with the same options, and the decode-only bound."""
    rows: dict[str, dict[str, Any]] = {}
    for name, rec_kind, mode in DALI_ROWS:
        rec = recs[rec_kind]
        suffix = "-rrc" if mode == "rrc" else ""
        dali = run(sys.executable, DALI, mode, rec, workers, epochs)
        mine = run(sys.executable, ITERATOR, "im2rec" + suffix, rec, workers, epochs)
        theirs = run(mx_python, ITERATOR, "mx" + suffix, rec, workers, epochs)
        bound = run(sys.executable, BOUND, mode, rec, workers, epochs)["images_per_s"]
        target = DALI_TARGETS[name]
        vs_dali = mine["images_per_s"] / dali["images_per_s"]
        # The rule: a target past the decode-only bound is replaced
        # by the bound, which must then be met within 10%.
        beyond = bound / dali["images_per_s"] < target
        met = vs_dali >= target or (beyond and mine["images_per_s"] >= 0.9 * bound)
        rows[name] = {
            "dali": dali["images_per_s"], "im2rec": mine["images_per_s"],
            "mx": theirs["images_per_s"], "bound": bound, "ratio": vs_dali, "target": target,
            "target_beyond_bound": beyond, "met": met,
            "same_records": (dali["images"], dali["label_sum"])
            == (mine["images"], mine["label_sum"]),
        }  # fmt: skip
    return rows


def print_dali(rows: dict[str, dict[str, Any]], workers: int) -> None:
    print(f"against NVIDIA DALI's CPU pipeline, {workers} threads/workers each, batches of 64")
    print(f"{'':28} {'DALI':>7} {'im2rec':>7} {'MXNet':>7} {'bound':>7}   ratio (target)   "
          "im2rec of the bound")  # fmt: skip
    for name, r in rows.items():
        note = "" if r["met"] else "   MISSED"
        if r["target_beyond_bound"]:
            note += "   (target past the bound)"
        print(
            f"{DALI_LABELS[name]:28} {r['dali']:7,.0f} {r['im2rec']:7,.0f} {r['mx']:7,.0f} "
            f"{r['bound']:7,.0f}   {r['ratio']:.2f}x ({r['target']}x)   "
            f"{r['im2rec'] / r['bound']:6.0%}{note}"
        )


def bound_rounds(rec: Path, workers: int, epochs: int, rounds: int) -> dict[str, Any]:
    """The decode-only bound, ImageRecordIter and RecordDataset + Augmenter
    in a DataLoader (the 256-px random-resized-crop work), measured in turn
    ``rounds`` times; each one's best round (noise only ever slows a run),
    every round kept for the record."""
    seen: dict[str, list[float]] = {"bound": [], "iterator": [], "dataset": []}
    dataset: dict[str, Any] = {}
    for _ in range(rounds):
        seen["bound"].append(
            run(sys.executable, BOUND, "rrc", rec, workers, epochs)["images_per_s"]
        )
        mine = run(sys.executable, ITERATOR, "im2rec-rrc", rec, workers, epochs)
        seen["iterator"].append(mine["images_per_s"])
        got = run(sys.executable, DATASET, "im2rec-train", rec, workers, epochs)
        seen["dataset"].append(got["images_per_s"])
        if got["images_per_s"] >= dataset.get("images_per_s", 0.0):
            dataset = got
    return {"bound": max(seen["bound"]), "iterator": max(seen["iterator"]), "dataset": dataset,
            "rounds": seen}  # fmt: skip


def against_ffcv(
    rec: Path, ffcv_python: str | None, workers: int, epochs: int, iterator: float
) -> dict[str, Any]:
    """The FFCV table (issue 36): FFCV's CPU loader on its own ``.beton`` of
    the same images; ours, RecordDataset + Augmenter in a DataLoader a batch
    at a time and a sample at a time, and ImageRecordIter (measured in the
    DALI table's 256-px random-resized-crop row, the same work); each as a
    share of the decode-only bound (:func:`bound_rounds`); and where an
    image's time goes."""
    shares = bound_rounds(rec, workers, epochs, BOUND_ROUNDS)
    bound = shares["bound"]
    row: dict[str, Any] = {"iterator": iterator, "bound": bound, "rounds": shares["rounds"]}
    row["dataset"] = run(sys.executable, DATASET, "im2rec-train", rec, workers, epochs)
    row["dataset_sample"] = run(sys.executable, DATASET, "im2rec-train-sample", rec, workers,
                                epochs)["images_per_s"]  # fmt: skip
    row["stages_ms"] = json.loads(
        subprocess.run([sys.executable, str(HERE / "loader_stages.py"), str(rec)], check=True,
                       capture_output=True, text=True).stdout.splitlines()[-1]
    )  # fmt: skip
    row["iterator_of_bound"] = shares["iterator"] / bound
    row["dataset_of_bound"] = shares["dataset"]["images_per_s"] / bound
    if ffcv_python is None or not os.path.exists(ffcv_python):
        row["ffcv"] = None
        row["why"] = f"no FFCV interpreter at {ffcv_python} (make ffcv builds one)"
        return row
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-ffcv-") as tmp:
        export_jpegs(rec, Path(tmp))
        command = [ffcv_python, str(HERE / "ffcv_reference.py"), tmp, str(workers), str(epochs)]
        try:
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            theirs = json.loads(done.stdout.strip().splitlines()[-1])
        except subprocess.CalledProcessError as exc:
            row["ffcv"] = None
            row["why"] = f"FFCV failed: {exc.stderr.strip().splitlines()[-1:]}"
            return row
    mine = row["dataset"]
    row["ffcv"] = theirs["images_per_s"]
    row["ffcv_checks"] = theirs
    row["iterator_ratio"] = iterator / theirs["images_per_s"]
    row["dataset_ratio"] = mine["images_per_s"] / theirs["images_per_s"]
    row["same_records"] = bool(theirs["same_images"]) and (theirs["images"], theirs["label_sum"]) == (
        mine["images"], mine["label_sum"])  # fmt: skip
    return row


def export_jpegs(rec: Path, folder: Path) -> None:
    """The ``.rec``'s JPEG payloads as numbered files and their labels, for
    FFCV's writer (its interpreter has no im2rec)."""
    from im2rec.recordio import IndexedRecordReader, unpack

    labels = []
    with IndexedRecordReader(rec) as reader:
        for i in range(len(reader)):
            header, payload = unpack(reader[i])
            (folder / f"{i:07d}.jpg").write_bytes(payload)
            labels.append(int(header.label))
    (folder / "labels.json").write_text(json.dumps(labels))


def ffcv_met(row: dict[str, Any]) -> bool:
    bound_met = min(row["iterator_of_bound"], row["dataset_of_bound"]) >= BOUND_TARGET
    if row["ffcv"] is None:
        return bound_met  # FFCV's rows cannot be judged here; the bound still can
    return (
        bound_met
        and row["iterator_ratio"] >= FFCV_ITER_TARGET
        and row["dataset_ratio"] >= FFCV_DATASET_TARGET
    )


def print_ffcv(row: dict[str, Any], images: int, workers: int) -> None:
    print(f"against FFCV 1.0.2's CPU loader: its .beton of the same {images:,} images; "
          f"RandomResizedCrop(224), flip, normalise to float32; {workers} workers, batches of 64")  # fmt: skip
    ffcv = row["ffcv"]
    if ffcv is None:
        print(f"  FFCV not measured: {row['why']}")
    else:
        checks = row["ffcv_checks"]
        print(f"{'FFCV Loader':44} {ffcv:7,.0f} images/s   (same images and labels: "
              f"{checks['same_images']}, centre colours within {checks['centre_mean_diff']:.1f})")  # fmt: skip

    def line(label: str, rate: float, target: float | None) -> None:
        text = f"{label:44} {rate:7,.0f} images/s"
        if ffcv is not None:
            want = f" (target {target}x)" if target else ""
            text += f"   {rate / ffcv:.2f}x FFCV{want}"
            if target and rate / ffcv < target:
                text += " MISSED"
        print(text)

    line("ImageRecordIter", row["iterator"], FFCV_ITER_TARGET)
    line("RecordDataset + Augmenter, DataLoader", row["dataset"]["images_per_s"],
         FFCV_DATASET_TARGET)  # fmt: skip
    line("  the same a sample at a time (0.2's way)", row["dataset_sample"], None)
    rounds = row["rounds"]
    print(f"share of the decode-only bound, the best of {len(rounds['bound'])} rounds of each "
          f"(target {BOUND_TARGET:.0%}):")  # fmt: skip
    for label, key, share in (
        ("decode-only bound", "bound", None),
        ("ImageRecordIter", "iterator", row["iterator_of_bound"]),
        ("RecordDataset + Augmenter, DataLoader", "dataset", row["dataset_of_bound"]),
    ):
        seen = " ".join(f"{v:,.0f}" for v in rounds[key])
        text = f"  {label:42} {max(rounds[key]):7,.0f} images/s   (rounds: {seen})"
        if share is not None:
            text += f"   {share:.0%}" + (" MISSED" if share < BOUND_TARGET else "")
        print(text)
    stages = row["stages_ms"]
    print("where an image's time goes, ms on one core: " + ", ".join(
        f"{name} {stages[name]:.3f}" for name in ("decode", "resample", "python"))
        + f" = {stages['whole']:.3f}; Pillow's way instead of the resample: "
        + " + ".join(f"{stages['pillow_' + n]:.3f}" for n in ("resample", "export", "normalise"))
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mx-python", required=True)
    ap.add_argument("--ffcv-python", default=str(HERE.parent / ".venv-ffcv" / "bin" / "python"),
                    help="an interpreter with FFCV 1.0.2 (make ffcv)")  # fmt: skip
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    mx_python = os.path.abspath(args.mx_python)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-loader-") as tmp:
        rec = Path(tmp) / "data.rec"
        make_rec(rec, args.images)
        full = Path(tmp) / "full.rec"
        make_full_size_rec(full, args.images // 3)
        dali = against_dali({"256": rec, "full": full}, mx_python, args.workers, args.epochs)
        for name, script, suffix in (
            ("iterator", ITERATOR, ""), ("recipe", ITERATOR, "-recipe"),
            ("dataset", DATASET, ""), ("dataset_half", DATASET, "-half"),
            ("dataset_train", DATASET, "-train"),
        ):  # fmt: skip
            theirs = run(mx_python, script, "mx" + suffix, rec, args.workers, args.epochs)
            mine = run(sys.executable, script, "im2rec" + suffix, rec, args.workers, args.epochs)
            same = (theirs["images"], theirs["label_sum"]) == (mine["images"], mine["label_sum"])
            results[name] = {"mx": theirs["images_per_s"], "im2rec": mine["images_per_s"],
                             "ratio": mine["images_per_s"] / theirs["images_per_s"],
                             "images": [theirs["images"], mine["images"]], "same_records": same}  # fmt: skip
        results["dataset"]["decode_ceiling"] = decode_ceiling(rec, args.workers)
        rrc = dali["rrc_256"]
        ffcv = against_ffcv(rec, args.ffcv_python, args.workers, args.epochs, rrc["im2rec"])
    met = (
        results["iterator"]["ratio"] >= ITER_TARGET
        and results["recipe"]["ratio"] >= RECIPE_TARGET
        and results["dataset_train"]["ratio"] >= TRAIN_TARGET
        and all(r["met"] for r in dali.values())
        and ffcv_met(ffcv)
    )
    same = all(r["same_records"] for r in [*results.values(), *dali.values()])
    same = same and ffcv.get("same_records", True)
    results["dali"] = dali
    results["ffcv"] = ffcv
    results["targets_met"] = met and same
    save_results("loader", results, [
        *(ratio(DALI_LABELS[name], "NVIDIA DALI (CPU)", r["ratio"], r["target"])
          for name, r in dali.items()),
        ratio("ImageRecordIter", "mx.io.ImageRecordIter", results["iterator"]["ratio"], ITER_TARGET),
        ratio("ImageRecordIter, GluonCV's recipe", "mx.io.ImageRecordIter",
              results["recipe"]["ratio"], RECIPE_TARGET),
        ratio("RecordDataset + Augmenter, training", "mx.recordio + PIL dataset",
              results["dataset_train"]["ratio"], TRAIN_TARGET),
        ratio("RecordDataset, decode only", "mx.recordio + PIL dataset", results["dataset"]["ratio"]),
        *([] if ffcv["ffcv"] is None else [
            ratio("ImageRecordIter, RandomResizedCrop", "FFCV (CPU)", ffcv["iterator_ratio"],
                  FFCV_ITER_TARGET),
            ratio("RecordDataset + Augmenter, DataLoader", "FFCV (CPU)", ffcv["dataset_ratio"],
                  FFCV_DATASET_TARGET)]),
        ratio("ImageRecordIter, share of the decode bound", "decode only",
              ffcv["iterator_of_bound"], BOUND_TARGET),
        ratio("RecordDataset + Augmenter, share of the decode bound", "decode only",
              ffcv["dataset_of_bound"], BOUND_TARGET),
    ])  # fmt: skip
    if args.json:
        print(json.dumps(results))
    else:
        print_dali(dali, args.workers)
        print_ffcv(ffcv, args.images, args.workers)
        print(f"{args.images:,} JPEGs with a 256-px short side, {args.workers} workers")
        r = results["iterator"]
        print(f"{'mx.io.ImageRecordIter':28} {r['mx']:8,.0f} images/s")
        print(
            f"{'ImageRecordIter':28} {r['im2rec']:8,.0f} images/s   ratio {r['ratio']:.2f}x "
            f"(target {ITER_TARGET}x)"
        )
        r = results["recipe"]
        print("with GluonCV's training recipe (random-resized crop, colour jitter 0.4, PCA 0.1)")
        print(f"{'mx.io.ImageRecordIter':28} {r['mx']:8,.0f} images/s")
        print(
            f"{'ImageRecordIter':28} {r['im2rec']:8,.0f} images/s   ratio {r['ratio']:.2f}x "
            f"(target {RECIPE_TARGET}x)"
        )
        r = results["dataset"]
        print(f"{'mx.recordio + PIL dataset':28} {r['mx']:8,.0f} images/s")
        print(f"{'RecordDataset':28} {r['im2rec']:8,.0f} images/s   ratio {r['ratio']:.2f}x")
        print(
            f"{'(decoding alone)':28} {r['decode_ceiling']:8,.0f} images/s   the ceiling for "
            f"full-size images: {r['decode_ceiling'] / r['mx']:.2f}x the usual class (the 2x "
            "target is retired: no loader returning full-size images can pass this)"
        )
        r = results["dataset_half"]
        print("the same at half size (informational): decode in full + resize, vs min_size")
        print(f"{'mx.recordio + PIL + resize':28} {r['mx']:8,.0f} images/s")
        print(
            f"{'RecordDataset(min_size=...)':28} {r['im2rec']:8,.0f} images/s   ratio {r['ratio']:.2f}x"
        )
        r = results["dataset_train"]
        print("with a training transform, float32 batches")
        print(f"{'mx.recordio + PIL + tv ops':28} {r['mx']:8,.0f} images/s")
        print(
            f"{'RecordDataset + Augmenter':28} {r['im2rec']:8,.0f} images/s   ratio {r['ratio']:.2f}x "
            f"(target {TRAIN_TARGET}x)"
        )
        print(f"both sides read the same records (count and label sum, each row): {same}")
    sys.exit(0 if met and same else 1)


if __name__ == "__main__":
    main()

"""The scripts bench_loader.py runs, each in a fresh interpreter of the side
it measures (MXNet needs numpy<1.24, DALI and FFCV their own packages):
``ITERATOR`` (ImageRecordIter, ours or MXNet's), ``DALI`` (its CPU
pipeline), ``BOUND`` (the decode-only bound), ``DATASET`` (a torch
DataLoader over RecordDataset or the usual mx.recordio + PIL class) and
``CEILING`` (decoding whole images alone); and :func:`run`, which runs one
and reads the JSON line it prints."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

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
from PIL import Image
from im2rec.imaging.columns import SCALARS
from im2rec.imaging.jpeg import region_rule
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
    scale = region_rule(SCALARS, width, height, *box, (224, 224), Image.Resampling.BILINEAR)[0]
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

"""FFCV 1.0.2's CPU loader on bench_loader.py's images, run by .venv-ffcv's
interpreter (``make ffcv``), which has FFCV and no im2rec.

    .venv-ffcv/bin/python bench/ffcv_reference.py IMAGES_DIR WORKERS EPOCHS

``IMAGES_DIR`` holds the ``.rec``'s JPEG payloads as ``0000000.jpg``... and
``labels.json``. They are written into FFCV's own ``.beton`` as FFCV stores
JPEGs (decoded, then encoded again by OpenCV at quality 90, the quality they
were made at; same size). The ``.beton`` is then read back in order through
a centre crop and each image's mean colour compared with the source JPEG's,
and its labels with ``labels.json``: both sides must train on the same
images. The timed pipeline is FFCV's own ImageNet recipe on the CPU:
``RandomResizedCropRGBImageDecoder((224, 224))`` (area 0.08-1, aspect
3/4-4/3), ``RandomHorizontalFlip``, ``NormalizeImage`` to float32 (on the
CPU it works on HWC uint8, so it comes before ``ToTensor``), ``ToTensor``,
``ToTorchImage``; batches of 64, ``WORKERS`` threads, random order, every
image once an epoch (``drop_last=False``). Prints one JSON line: the best
images/s of ``EPOCHS`` epochs after a warm-up one (numba compiles then), the
last epoch's image count and label sum, and the checks.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
from ffcv.fields import IntField, RGBImageField
from ffcv.fields.decoders import (
    CenterCropRGBImageDecoder,
    IntDecoder,
    RandomResizedCropRGBImageDecoder,
)
from ffcv.loader import Loader, OrderOption
from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, Squeeze, ToTensor, ToTorchImage
from ffcv.writer import DatasetWriter
from PIL import Image

folder, workers, epochs = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
labels = json.loads((folder / "labels.json").read_text())
files = sorted(folder.glob("*.jpg"))
assert len(files) == len(labels), "one label per image"


class Images:
    def __len__(self):
        return len(files)

    def __getitem__(self, i):
        return np.asarray(Image.open(files[i]).convert("RGB")), labels[i]


beton = str(folder / "data.beton")
t0 = time.perf_counter()
fields = {"image": RGBImageField(write_mode="jpg", jpeg_quality=90), "label": IntField()}
DatasetWriter(beton, fields, num_workers=workers).from_indexed_dataset(Images())
write_s = time.perf_counter() - t0

# The same images in the same order: each one's centre square, shrunk to
# 32x32, has the source JPEG's mean colour (within what encoding again moves).
check = Loader(beton, batch_size=64, num_workers=workers, order=OrderOption.SEQUENTIAL,
               drop_last=False, pipelines={"image": [CenterCropRGBImageDecoder((32, 32), 1.0)],
                                           "label": [IntDecoder()]})  # fmt: skip
means, seen = [], []
for image, label in check:
    means.append(np.asarray(image, np.float64).mean(axis=(1, 2)))
    seen.extend(int(v) for v in np.asarray(label).ravel())
want = []
for f in files:
    pixels = np.asarray(Image.open(f).convert("RGB"))
    h, w = pixels.shape[:2]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    want.append(pixels[top : top + side, left : left + side].reshape(-1, 3).mean(axis=0))
diff = float(np.abs(np.concatenate(means) - np.asarray(want)).max())

MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255
image_pipeline = [
    RandomResizedCropRGBImageDecoder((224, 224)), RandomHorizontalFlip(),
    NormalizeImage(MEAN, STD, np.float32), ToTensor(), ToTorchImage(),
]  # fmt: skip
loader = Loader(beton, batch_size=64, num_workers=workers, order=OrderOption.RANDOM, seed=0,
                drop_last=False, os_cache=True,
                pipelines={"image": image_pipeline,
                           "label": [IntDecoder(), ToTensor(), Squeeze()]})  # fmt: skip
rates = []
for epoch in range(epochs + 1):
    t0, n, total = time.perf_counter(), 0, 0.0
    for image, label in loader:
        assert tuple(image.shape[1:]) == (3, 224, 224) and str(image.dtype) == "torch.float32"
        n += len(image)
        total += float(label.sum())
    if epoch:  # the first epoch compiles FFCV's pipeline (numba)
        rates.append(n / (time.perf_counter() - t0))
print(json.dumps({
    "images_per_s": max(rates), "images": n, "label_sum": total, "write_s": write_s,
    "centre_mean_diff": diff, "same_images": diff < 4.0 and seen == labels,
}))  # fmt: skip

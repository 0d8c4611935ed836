"""Where an image's time goes on the loader path, one core, CPU time:
bench_loader.py's breakdown behind its "of the bound" column.

    .venv/bin/python bench/loader_stages.py DATA.rec

For the 256-px random-resized-crop row (area 0.08-1, aspect 3/4-4/3, flip,
224x224 float32 normalised), over the first 1,000 records, best of 3 passes
after a warm-up one. Stages, each timed around its own call:

- ``decode``: libjpeg-turbo decoding the crop's rows and columns at the DCT
  scale picked into RGB rows (what the decode-only bound measures, plus the
  few pixels around the crop that the bilinear filter reaches);
- ``resample``: resampling that window to 224x224 and writing the float32
  planes (``_tensor.resample`` on the RGB rows, as the loaders' batch loop
  calls it: Pillow-SIMD's arithmetic in our C, in planes where the CPU has
  AVX-512 VBMI, each row normalised as it is made);
- ``whole``: a sample of ``RecordDataset.__getitems__`` (what both loaders'
  workers run: the records read and the crops planned in Python, rendered in one C call), batches of 64;
  ``python`` is what it spends beside the two stages above;
- for comparison, the way before it (``pillow_*``): Pillow resizing the
  window, its pixels' export (Arrow, read in place, on Pillow 11.2 and
  later), and ``_tensor.normalise`` writing the planes.

Prints one JSON line of milliseconds per image.
"""

import json
import sys
import time

import numpy as np

from im2rec.executors import tune_malloc
from im2rec.imaging import _tensor, jpeg
from im2rec.recordio import IndexedRecordReader, unpack
from im2rec.training.augment import Augmenter, fused, geometry
from im2rec.training.dataset import RecordDataset

tune_malloc()  # as the loaders' workers do
reader = IndexedRecordReader(sys.argv[1])
payloads = [bytes(unpack(reader[i])[1]) for i in range(min(len(reader), 1000))]
augment = Augmenter((3, 224, 224), random_resized_crop=True, min_random_area=0.08,
                    min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3, rand_mirror=True,
                    mean=(123.68, 116.78, 103.94), std=(58.4, 57.12, 57.38))  # fmt: skip
assert augment._one_pass, "the one-pass path is the one measured"
# a sample in a batch: 64-byte aligned, as the loaders' shared batches are
block = np.empty(3 * 224 * 224 + 16, np.float32)
start = (-block.ctypes.data % 64) // 4
out = block[start : start + 3 * 224 * 224].reshape(3, 224, 224)
k, mk = augment._coef
best: dict[str, float] = {}
# the loaders' own path: their workers' __getitems__ on batches of 64
dataset = RecordDataset(sys.argv[1], output="bytes", transform=augment)
order = np.random.default_rng(0).permutation(len(payloads))
batches = [order[b : b + 64].tolist() for b in range(0, len(order) - 63, 64)]
names = ("decode", "resample", "whole", "pillow_resample", "pillow_export", "pillow_normalise")
for attempt in range(4):
    spent = dict.fromkeys(names, 0.0)
    t0 = time.process_time()
    for indices in batches:
        made = dataset.__getitems__(indices)
        del made  # its slot goes back, as the training process's drop does
    spent["whole"] = (time.process_time() - t0) / (64 * len(batches)) * len(payloads)
    rng = np.random.default_rng(attempt)
    measured = 0
    for payload in payloads:
        plan, chosen = augment._plan(geometry.pick_interp(augment.inter_method, rng), rng)
        real = jpeg._native.decode
        windows: list[float] = []

        def timed(*args, _real=real, _times=windows):
            s = time.process_time()
            got = _real(*args)
            _times.append(time.process_time() - s)
            return got

        jpeg._native.decode = timed
        try:  # RGB rows, as the batch loop decodes them
            got = jpeg.window(payload, 1, plan, chosen)
        finally:
            jpeg._native.decode = real
        assert got is not None and got.mode in ("RGB", "RGBX")
        if got.cut is not None:  # (a crop of exactly 224x224 at scale 1: a plain cut, no resample)
            continue
        measured += 1
        flip = rng.random() < 0.5
        box = (got.box[0] - got.x, got.box[1] - got.y, got.box[2] - got.x, got.box[3] - got.y)
        t2 = time.process_time()
        assert _tensor.resample(out, got.pixels, got.width * 3, 3, got.width, got.height, box,
                                int(got.method), 3, 224, 224, k, mk, flip)  # fmt: skip
        t3 = time.process_time()
        im = got.finish(got.image())
        t4 = time.process_time()
        pixels = fused._pixels(im)
        t5 = time.process_time()
        step = 4 if isinstance(pixels, tuple) else 3  # Arrow: four bytes a pixel
        _tensor.normalise(out, pixels, 224 * step, step, 0, 0, 224, 224, 3, k, mk, flip)
        t6 = time.process_time()
        spent["decode"] += windows[0]
        spent["resample"] += t3 - t2
        spent["pillow_resample"] += t4 - t3
        spent["pillow_export"] += t5 - t4
        spent["pillow_normalise"] += t6 - t5
    if attempt:
        for name, value in spent.items():
            count = len(payloads) if name == "whole" else measured
            best[name] = min(best.get(name, float("inf")), value / count * 1e3)
best["python"] = max(0.0, best["whole"] - best["decode"] - best["resample"])
print(json.dumps({name: round(value, 4) for name, value in best.items()}))

"""Where an image's time goes on the loader path, one core, CPU time:
bench_loader.py's breakdown behind its "of the bound" column.

    .venv/bin/python bench/loader_stages.py DATA.rec

For the 256-px random-resized-crop row (area 0.08-1, aspect 3/4-4/3, flip,
224x224 float32 normalised), over the first 1,000 records, best of 3 passes
after a warm-up one. Stages, each timed around its own call:

- ``decode``: libjpeg-turbo decoding the crop's rows and columns at the DCT
  scale picked (what the decode-only bound measures, plus the few pixels
  around the crop that the bilinear filter reaches, four bytes a pixel);
- ``resample``: resampling that window to 224x224 and writing the float32
  planes (``_tensor.resample``: Pillow-SIMD's arithmetic in our C, each row
  normalised as it is made);
- ``python``: the rest of ``Augmenter.write`` (drawing the crop, planning
  the window, the calls between);
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
for attempt in range(4):
    names = ("decode", "resample", "whole", "pillow_resample", "pillow_export", "pillow_normalise")
    spent = dict.fromkeys(names, 0.0)
    rng = np.random.default_rng(attempt)
    for payload in payloads:
        t0 = time.process_time()
        augment.write(payload, out, rng)  # the whole of it, as the loaders run it
        t1 = time.process_time()
        plan, chosen = augment._plan(geometry.pick_interp(augment.inter_method, rng), rng)
        real = jpeg._native.decode
        windows: list[float] = []

        def timed(*args, _real=real, _times=windows):
            s = time.process_time()
            got = _real(*args)
            _times.append(time.process_time() - s)
            return got

        jpeg._native.decode = timed
        try:
            got = jpeg.window(payload, 1, plan, chosen, rgbx=True)
        finally:
            jpeg._native.decode = real
        assert got is not None and got.cut is None
        flip = rng.random() < 0.5
        t2 = time.process_time()
        assert fused._resample(got, out, k, mk, flip)
        t3 = time.process_time()
        im = got.finish(got.image())
        t4 = time.process_time()
        pixels = fused._pixels(im)
        t5 = time.process_time()
        w, h = got.size
        _tensor.normalise(out, pixels, w * 4, 4, 0, 0, w, h, 3, k, mk, flip)
        t6 = time.process_time()
        spent["whole"] += t1 - t0
        spent["decode"] += windows[0]
        spent["resample"] += t3 - t2
        spent["pillow_resample"] += t4 - t3
        spent["pillow_export"] += t5 - t4
        spent["pillow_normalise"] += t6 - t5
    if attempt:
        for name, value in spent.items():
            best[name] = min(best.get(name, float("inf")), value / len(payloads) * 1e3)
best["python"] = max(0.0, best["whole"] - best["decode"] - best["resample"])
print(json.dumps({name: round(value, 4) for name, value in best.items()}))

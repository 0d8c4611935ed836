"""RecordDataset under a torch DataLoader vs the usual ``mx.recordio`` + PIL
dataset class (what insightface's ``MXFaceDataset`` and many repos write).

    make bench      # or: .venv/bin/python bench/bench_loader.py --mx-python .venv-mx/bin/python

Packs ``--images`` JPEGs with a 256-pixel short side, then runs the same
DataLoader loop (batch 64, ``--workers`` workers, fork) over both datasets,
each in its own interpreter (MXNet's needs numpy<1.24), each decoding to an
RGB array; images/s is the best of ``--epochs`` epochs after a warm-up one.
Target: RecordDataset >= 2x the mx.recordio class.
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

TARGET = 2.0

WORKER = r"""
import io, json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

impl, rec, workers, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


def to_array(image):
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
        return to_array(Image.open(io.BytesIO(payload)).convert("RGB")), float(header.label)


if impl == "mx":
    dataset = MXRecordDataset(rec)
else:
    from im2rec.loader import RecordDataset
    dataset = RecordDataset(rec, transform=to_array)


def collate(batch):
    return len(batch)


loader = DataLoader(dataset, batch_size=64, num_workers=workers, collate_fn=collate,
                    multiprocessing_context="fork", persistent_workers=True, shuffle=True,
                    generator=torch.Generator().manual_seed(0))
rates = []
for epoch in range(epochs + 1):
    t0 = time.perf_counter()
    n = sum(loader)
    if epoch:  # the first epoch starts the workers
        rates.append(n / (time.perf_counter() - t0))
print(json.dumps({"images_per_s": max(rates), "images": n}))
"""


def make_rec(path: Path, n: int) -> None:
    import numpy as np
    from PIL import Image

    from im2rec.recordio import IndexedRecordWriter, IRHeader, pack

    rng = np.random.default_rng(0)
    with IndexedRecordWriter(path) as w:
        for i in range(n):
            size = (256, 341) if i % 2 else (341, 256)
            low = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
            field = np.asarray(
                Image.fromarray(low).resize(size, Image.Resampling.BICUBIC), np.int16
            )
            grain = rng.integers(-8, 9, (size[1], size[0], 1), dtype=np.int16)
            out = io.BytesIO()
            Image.fromarray(np.clip(field + grain, 0, 255).astype(np.uint8)).save(
                out, "JPEG", quality=90
            )
            w.write_key(i, pack(IRHeader(0, i % 100, i, 0), out.getvalue()))


def run(python: str, impl: str, rec: Path, workers: int, epochs: int) -> float:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    out = subprocess.run([python, "-c", WORKER, impl, str(rec), str(workers), str(epochs)],
                         check=True, capture_output=True, text=True, env=env).stdout  # fmt: skip
    return float(json.loads(out.strip().splitlines()[-1])["images_per_s"])


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mx-python", required=True)
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-loader-") as tmp:
        rec = Path(tmp) / "data.rec"
        make_rec(rec, args.images)
        mx_rate = run(os.path.abspath(args.mx_python), "mx", rec, args.workers, args.epochs)
        ours = run(sys.executable, "im2rec", rec, args.workers, args.epochs)
    ratio = ours / mx_rate
    if args.json:
        print(json.dumps({"mx_images_per_s": mx_rate, "im2rec_images_per_s": ours, "ratio": ratio}))
    else:
        print(
            f"DataLoader, {args.workers} workers, {args.images:,} JPEGs with a 256-px short side, decoded to RGB arrays"
        )
        print(f"mx.recordio + PIL dataset {mx_rate:8,.0f} images/s")
        print(
            f"RecordDataset             {ours:8,.0f} images/s   ratio {ratio:.2f}x (target {TARGET}x)"
        )
    sys.exit(0 if ratio >= TARGET else 1)


if __name__ == "__main__":
    main()

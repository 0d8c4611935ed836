"""A small fake ILSVRC2012, laid out as the real download, to try `rec
imagenet` without 155 GB (docs/imagenet.md, "Trying it on a fake").

    python examples/fake_imagenet.py ~/fake-ilsvrc --classes 3
    rec imagenet --download-dir ~/fake-ilsvrc --val-map ~/fake-ilsvrc/val_map.txt \\
        --target-dir ~/fake-imagenet --with-rec

It writes, in the folder given:

* ``ILSVRC2012_img_train.tar``: one ``<wnid>.tar`` per class, each holding
  ``<wnid>_<n>.JPEG`` images, as the real train tar;
* ``ILSVRC2012_img_val.tar``: ``ILSVRC2012_val_%08d.JPEG`` images, flat;
* ``val_map.txt``: which class each val image is (``name wnid`` lines). The
  map bundled with im2rec is the real one, of 1,000 classes: a fake (or a
  subset) needs its own, given with ``--val-map``.

The classes are the first real WNIDs in order (n01440764 tench, ...); the
images are generated (smooth colour fields), a few kB each. Only Pillow is
needed.
"""

from __future__ import annotations

import argparse
import io
import random
import tarfile
from pathlib import Path

from PIL import Image

#: the first ILSVRC2012 classes, in sorted-WNID order (labels 0, 1, 2, ...)
WNIDS = [
    "n01440764", "n01443537", "n01484850", "n01491361", "n01494475",
    "n01496331", "n01498041", "n01514668", "n01514859", "n01518878",
]  # fmt: skip


def image(seed: int) -> bytes:
    """A small photo-like JPEG: a colour gradient with a little noise."""
    rng = random.Random(seed)
    w, h = rng.randint(64, 160), rng.randint(48, 120)
    corners = [tuple(rng.randrange(256) for _ in range(3)) for _ in range(4)]
    small = Image.new("RGB", (2, 2))
    small.putdata(corners)
    img = small.resize((w, h), Image.Resampling.BILINEAR)
    out = io.BytesIO()
    img.save(out, "JPEG", quality=85)
    return out.getvalue()


def tar_of(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def make(folder: Path, classes: int, train: int, val: int) -> None:
    if not 1 <= classes <= len(WNIDS):
        raise SystemExit(f"--classes must be 1 to {len(WNIDS)}")
    folder.mkdir(parents=True, exist_ok=True)
    wnids = WNIDS[:classes]
    per_class = [
        (f"{w}.tar", tar_of([(f"{w}_{n}.JPEG", image(c * 1000 + n)) for n in range(1, train + 1)]))
        for c, w in enumerate(wnids)
    ]
    (folder / "ILSVRC2012_img_train.tar").write_bytes(tar_of(per_class))
    labels = [w for w in wnids for _ in range(val)]
    random.Random(0).shuffle(labels)  # val images of all classes, mixed, as in the real set
    names = [f"ILSVRC2012_val_{i:08d}.JPEG" for i in range(1, len(labels) + 1)]
    (folder / "ILSVRC2012_img_val.tar").write_bytes(
        tar_of([(name, image(10**6 + i)) for i, name in enumerate(names)])
    )
    (folder / "val_map.txt").write_text(
        "".join(f"{n} {w}\n" for n, w in zip(names, labels, strict=True))
    )
    print(f"{folder}: {classes} classes, {classes * train} train and {len(names)} val images")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path, help="where to write the fake download")
    ap.add_argument("--classes", type=int, default=3, help="1 to 10 (default 3)")
    ap.add_argument("--train", type=int, default=4, help="train images per class (default 4)")
    ap.add_argument("--val", type=int, default=2, help="val images per class (default 2)")
    args = ap.parse_args()
    make(args.folder.expanduser(), args.classes, args.train, args.val)


if __name__ == "__main__":
    main()

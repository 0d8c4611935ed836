"""A tiny fake ILSVRC2012 (spec: imagenet.md, test plan), built by the tests.

* ``ILSVRC2012_img_train.tar``: a tar of per-class tars in unsorted order,
  3 images each, with the real odd files' names: ``n02105855_2933.JPEG`` holds
  PNG bytes, ``n01739381_1309.JPEG`` is a CMYK JPEG;
* ``ILSVRC2012_img_val.tar``: 8 flat images added in shuffled order;
* ``imagenet_val_maps.pklz``: GluonCV's exact structure (protocol 0, gzip);
* ``ILSVRC2012_devkit_t12.tar.gz``: meta.mat (written by scipy) whose leaf IDs
  are deliberately not alphabetical, plus the ground truth.
"""

from __future__ import annotations

import gzip
import io
import pickle
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .conftest import photo

TRAIN_ORDER = ["n15075141", "n01739381", "n01440764", "n02105855"]
WNIDS = sorted(TRAIN_ORDER)
DEVKIT_IDS = {"n02105855": 1, "n15075141": 2, "n01440764": 3, "n01739381": 4}
VAL_CLASSES = ["n02105855", "n01440764", "n15075141", "n01739381"] * 2  # val image i+1
VAL_ADD_ORDER = [5, 2, 7, 0, 3, 6, 1, 4]
ODD = {"n02105855_2933.JPEG": "png", "n01739381_1309.JPEG": "cmyk-jpeg"}


def val_name(i: int) -> str:
    return f"ILSVRC2012_val_{i:08d}.JPEG"


def jpeg(seed: int, mode: str = "RGB", fmt: str = "JPEG") -> bytes:
    out = io.BytesIO()
    photo(40 + seed % 7, 30 + seed % 5, seed).convert(mode).save(out, fmt)
    return out.getvalue()


def tar_bytes(
    members: list[tuple[str, bytes]], extra: list[tarfile.TarInfo] | None = None
) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info in extra or []:
            tar.addfile(info)
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def train_files(wnid: int | str) -> list[tuple[str, bytes]]:
    wnid = str(wnid)
    seed = TRAIN_ORDER.index(wnid) * 10
    names = [f"{wnid}_{k}.JPEG" for k in (1, 2, 3)]
    if wnid == "n02105855":
        names[2] = "n02105855_2933.JPEG"
    if wnid == "n01739381":
        names[0] = "n01739381_1309.JPEG"
    files = []
    for k, name in enumerate(names):
        kind = ODD.get(name)
        data = (
            jpeg(seed + k, "CMYK")
            if kind == "cmyk-jpeg"
            else jpeg(seed + k, fmt="PNG" if kind else "JPEG")
        )
        files.append((name, data))
    return files


@dataclass
class FakeImagenet:
    download: Path
    train: dict[str, dict[str, bytes]] = field(default_factory=dict)  # wnid -> name -> bytes
    val: dict[str, bytes] = field(default_factory=dict)  # name -> bytes

    @property
    def answer(self) -> dict[str, str]:
        return {val_name(i + 1): w for i, w in enumerate(VAL_CLASSES)}

    def expected_tree(self) -> dict[str, bytes]:
        tree = {f"train/{w}/{n}": d for w, files in self.train.items() for n, d in files.items()}
        tree.update({f"val/{self.answer[n]}/{n}": d for n, d in self.val.items()})
        return tree

    def write_pklz(self, path: Path, pairs: list[tuple[str, str]] | None = None) -> Path:
        pairs = pairs if pairs is not None else sorted(self.answer.items())
        dirs = sorted({w for _, w in pairs})
        path.write_bytes(gzip.compress(pickle.dumps([dirs, pairs], protocol=0)))
        return path

    def write_devkit(self, path: Path, truth: list[int] | None = None) -> Path:
        import scipy.io

        fields = ["ILSVRC2012_ID", "WNID", "words", "gloss", "num_children", "children",
                  "wordnet_height", "num_train_images"]  # fmt: skip
        rows = [(i, w, w, f"class {w}", 0, np.zeros((1, 0)), 0, 3) for w, i in DEVKIT_IDS.items()]
        rows.append((5, "n00001740", "entity", "the root", 4, np.array([[1, 2, 3, 4]]), 1, 0))
        synsets = np.zeros((len(rows), 1), dtype=[(f, "O") for f in fields])
        for r, row in enumerate(rows):
            for f, value in zip(fields, row, strict=True):
                synsets[r, 0][f] = value
        meta = io.BytesIO()
        scipy.io.savemat(meta, {"synsets": synsets}, do_compression=True)
        truth = truth if truth is not None else [DEVKIT_IDS[w] for w in VAL_CLASSES]
        members = {
            "ILSVRC2012_devkit_t12/data/meta.mat": meta.getvalue(),
            "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt": "".join(
                f"{t}\n" for t in truth
            ).encode(),
        }
        with tarfile.open(path, "w:gz") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path


def make_fake_imagenet(download: Path) -> FakeImagenet:
    download.mkdir(parents=True, exist_ok=True)
    fake = FakeImagenet(download)
    outer = []
    for wnid in TRAIN_ORDER:
        files = train_files(wnid)
        fake.train[wnid] = dict(files)
        outer.append((f"{wnid}.tar", tar_bytes(files)))
    (download / "ILSVRC2012_img_train.tar").write_bytes(tar_bytes(outer))
    for i in range(len(VAL_CLASSES)):
        fake.val[val_name(i + 1)] = jpeg(100 + i, "CMYK") if i == 6 else jpeg(100 + i)
    shuffled = [(val_name(i + 1), fake.val[val_name(i + 1)]) for i in VAL_ADD_ORDER]
    (download / "ILSVRC2012_img_val.tar").write_bytes(tar_bytes(shuffled))
    return fake

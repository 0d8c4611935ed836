"""Detection labels and annotation files as an attacker, an unlucky user or
a careless annotation tool write them (docs/security.md, "Values"): every
number is finite, in range and of its kind before any command or reader
uses it, and ids and names that collide are refused, naming them."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from im2rec.errors import DatasetError, RecordFormatError
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.training import ImageDetRecordIter, RecordDataset

NAN, INF = float("nan"), float("inf")


def rec_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "im2rec", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)  # fmt: skip


def jpeg(width: int = 40, height: int = 30, seed: int = 0) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (seed * 50 % 256, 90, 30)).save(out, "JPEG")
    return out.getvalue()


def det_rec(path: Path, bad: list[float]) -> Path:
    """Three detection records; record 1's label is ``bad``."""
    good = [4, 6, 40, 30, 0, 0.1, 0.1, 0.5, 0.5, 0]
    with IndexedRecordWriter(path) as w:
        for i in range(3):
            label = np.float32(bad if i == 1 else good)
            w.write_key(i, pack((len(label), label, i, 0), jpeg(seed=i)))
    return path


#: labels MXNet's iterator reads without a word, and what each became
BAD_LABELS = {
    "nan class": [4, 6, 40, 30, NAN, 0.1, 0.1, 0.5, 0.5, 0],  # label -2**63 in targets
    "inf class": [4, 6, 40, 30, INF, 0.1, 0.1, 0.5, 0.5, 0],
    "fractional class": [4, 6, 40, 30, 1.5, 0.1, 0.1, 0.5, 0.5, 0],
    "negative class": [4, 6, 40, 30, -2, 0.1, 0.1, 0.5, 0.5, 0],
    "nan corner": [4, 6, 40, 30, 0, NAN, 0.1, 0.5, 0.5, 0],
    "huge corner": [4, 6, 40, 30, 0, 0.1, 0.1, 1e30, 0.5, 0],  # an infinite pixel box
    "nan flag": [4, 6, 40, 30, 0, 0.1, 0.1, 0.5, 0.5, NAN],
    "nan header": [4, 6, NAN, 30, 0, 0.1, 0.1, 0.5, 0.5, 0],
}


@pytest.mark.parametrize("kind", BAD_LABELS)
def test_every_reader_refuses_a_label_with_numbers_it_cannot_use(tmp_path: Path, kind: str) -> None:
    rec = det_rec(tmp_path / "d.rec", BAD_LABELS[kind])
    ds = RecordDataset(rec, output="bytes", labels="boxes")
    ds[0]
    with pytest.raises(DatasetError, match="record 1: its label is not a detection label"):
        ds[1]
    kw = {"path_imgrec": rec, "data_shape": (3, 16, 16), "batch_size": 3,
          "preprocess_threads": 1, "verbose": False}  # fmt: skip
    with pytest.raises(RecordFormatError, match="not a detection label"):
        with ImageDetRecordIter(**kw) as it:  # type: ignore[arg-type]
            next(iter(it))
    with ImageDetRecordIter(on_corrupt="skip", round_batch=False, **kw) as it:  # type: ignore[arg-type]
        batch = next(iter(it))
    assert batch.pad == 1 and len(it.skipped) == 1


@pytest.mark.slow
def test_verify_info_and_show_see_such_a_label(tmp_path: Path) -> None:
    rec = det_rec(tmp_path / "d.rec", BAD_LABELS["nan class"])
    verify = rec_cli("verify", str(rec), "--boxes")
    assert verify.returncode == 1
    assert "key 1: label: label value 4 is nan" in verify.stdout + verify.stderr
    info = rec_cli("info", str(rec), "--json")
    assert info.returncode == 0
    detection = json.loads(info.stdout)["detection"]
    assert detection["images"] == 2 and detection["not_detection"] == 1
    assert detection["boxes_per_class"] == {"0": 2}
    text = rec_cli("info", str(rec)).stdout
    assert "1 record whose label is not a detection label" in text
    show = rec_cli("show", str(rec), "-o", str(tmp_path / "sheet.jpg"))
    assert show.returncode == 0 and (tmp_path / "sheet.jpg").exists()

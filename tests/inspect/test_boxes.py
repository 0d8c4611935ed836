"""Detection recs inspected: rec info's objects, classes and box sizes,
rec verify --boxes naming the records whose label breaks the layout, and
rec show drawing the boxes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from im2rec.inspect.boxes import label_problems
from im2rec.inspect.summary import summarise
from im2rec.recordio import IndexedRecordWriter, IRHeader, pack
from im2rec.recordio.detection import make_label


def _jpeg(size: tuple[int, int] = (100, 100)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (128, 128, 128)).save(out, "JPEG", quality=95)
    return out.getvalue()


def _write(path: Path, labels: list[object]) -> Path:
    with IndexedRecordWriter(path) as w:
        for key, label in enumerate(labels):
            values = np.asarray(label, np.float32)
            flag = 0 if values.ndim == 0 else len(values)
            w.write_key(
                key, pack(IRHeader(flag, values if flag else float(values), key, 0), _jpeg())
            )
    return path


GOOD = [
    make_label([[0, 0.2, 0.2, 0.8, 0.8, 0], [1, 0.1, 0.1, 0.3, 0.5, 1]], (100, 100)),
    make_label([[1, 0.0, 0.0, 1.0, 0.5, 0]], (100, 100)),
    make_label(
        [[0, 0.5, 0.5, 0.6, 0.9, 0], [0, 0, 0, 0.1, 0.1, 0], [2, 0, 0, 1, 1, 0]], (100, 100)
    ),
]


def test_info_counts_objects_classes_and_sizes(tmp_path: Path) -> None:
    found = summarise(_write(tmp_path / "d.rec", GOOD))["detection"]
    assert found["images"] == 3 and found["objects"] == 6
    assert found["objects_per_image"] == {"min": 1, "mean": 2.0, "max": 3,
                                          "images_by_count": {"1": 1, "2": 1, "3": 1}}  # fmt: skip
    assert found["boxes_per_class"] == {"0": 3, "1": 2, "2": 1}
    assert found["box_width"] == [0.1, 0.4, 1.0] and found["boxes_sized"] == 6
    assert summarise(_write(tmp_path / "c.rec", [0.0, 1.0]))["detection"] is None


def test_label_problems_name_each_rule() -> None:
    assert label_problems(GOOD[0]) == []
    assert "single label" in label_problems(np.float32(3))[0]
    assert "not a whole number" in label_problems([2, 5, 0, 0.1, 0.1, 0.2, 0.2, 9])[0]
    outside = label_problems([2, 5, 0, -0.1, 0, 0.5, 0.5, 1, 0.5, 0.5, 0.5, 0.7])
    assert outside == ["object 0: a corner (-0.1, 0, 0.5, 0.5) outside [0, 1]",
                       "object 1: an empty box (MXNet drops it)"]  # fmt: skip


def test_verify_boxes_names_the_records_that_break_the_layout(tmp_path: Path) -> None:
    rec = _write(tmp_path / "mixed.rec", [GOOD[0], [2, 5, 0, 0.1, 0.1, 0.2, 0.2, 9], 4.0, GOOD[1]])
    done = subprocess.run([sys.executable, "-m", "im2rec", "verify", str(rec), "--boxes", "--json"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1, done.stderr
    problems = json.loads(done.stdout)["problems"]
    assert [p["key"] for p in problems] == [1, 2]
    assert "label: " in problems[0]["message"] and "whole number" in problems[0]["message"]
    good = _write(tmp_path / "good.rec", GOOD)
    done = subprocess.run([sys.executable, "-m", "im2rec", "verify", str(good), "--boxes"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip().endswith(": OK"), done.stdout
    # without --boxes the labels are not the check's business
    done = subprocess.run([sys.executable, "-m", "im2rec", "verify", str(rec)], capture_output=True)
    assert done.returncode == 0


def test_show_draws_each_box_in_its_class_colour(tmp_path: Path) -> None:
    rec = _write(tmp_path / "one.rec", [make_label([[0, 0.25, 0.25, 0.75, 0.75, 0]], (100, 100))])
    done = subprocess.run([sys.executable, "-m", "im2rec", "show", str(rec), "-o",
                           str(tmp_path / "s.png")], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    sheet = np.asarray(Image.open(tmp_path / "s.png").convert("RGB")).astype(int)
    red = np.abs(sheet - [230, 25, 75]).sum(axis=2) < 60  # class 0's colour
    ys, xs = np.nonzero(red)
    # the 100x100 image fills a 124x124 tile at (2, 2): the box spans 33 to 95
    assert abs(xs.min() - 33) <= 2 and abs(xs.max() - 95) <= 2, (xs.min(), xs.max())
    assert abs(ys.min() - 33) <= 2 and abs(ys.max() - 95) <= 2, (ys.min(), ys.max())

"""``rec list --boxes coco`` at the size of real detection sets, beside
pycocotools' ``COCO()`` load of the same file.

    make bench      # or: .venv/bin/python bench/bench_annotations.py

Writes two annotation files shaped like real ones (and an empty file for
each image they name, which the listing looks for):

* COCO train2017: 118,287 images, 860,001 boxes, 80 categories with ids
  1-90, the sections in COCO's order, no segmentation (~145 MB);
* Objects365 v2: 1,742,292 images, 25,400,000 boxes, 365 categories, its
  fields (``isfake``, ``isreflected``, long decimals), ~5 GB: past the
  4 GiB a whole-file reader could take.

Each command runs as its own process, one run each, timed whole, with its
peak memory (``wait4``'s ``ru_maxrss``). Targets: on COCO, ``rec list``
at least 3x pycocotools' speed at no more than 0.3x its peak memory; on
Objects365, a peak of at most 3 GB and the time per million boxes stated
(pycocotools would need several times the file in memory: it is run only
with ``--objects365-reference``). Both sides' outputs are checked: the
boxes each lists or loads, counted, and a sample compared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchutil import ratio, save_results  # bench/ is on sys.path when run as a script

SPEED_TARGET = 3.0
MEMORY_TARGET = 0.3
OBJECTS365_PEAK = 3 << 30

COCO = {"images": 118_287, "boxes": 860_001, "categories": 80, "style": "coco"}
OBJECTS365 = {"images": 1_742_292, "boxes": 25_400_000, "categories": 365, "style": "objects365"}

PYCOCO = "import sys; from pycocotools.coco import COCO; c = COCO(sys.argv[1]); " \
    "print(len(c.anns), len(c.imgToAnns))"  # fmt: skip


def write_set(root: Path, images: int, boxes: int, categories: int, style: str) -> Path:
    """The annotation file (root/annotations.json) and an empty file for each
    image (root/images/...); boxes spread over the images at random."""
    rng = np.random.default_rng(0)
    ids = np.sort(rng.choice(10 * images, images, replace=False)) + 1
    widths, heights = rng.integers(200, 1025, images), rng.integers(200, 1025, images)
    owner = np.sort(rng.integers(0, images, boxes))
    cat_ids = [k + 1 + k // 8 for k in range(categories)]  # (ids with gaps, as COCO's)
    if style == "coco":
        names = [f"{i:012d}.jpg" for i in ids.tolist()]
    else:
        names = [f"patch{i % 50}/objects365_v1_{i:08d}.jpg" for i in ids.tolist()]
    folder = root / "images"
    for name in names:
        path = folder / name
        if not path.parent.exists():
            path.parent.mkdir(parents=True)
        path.touch()
    path = root / "annotations.json"
    with open(path, "w") as f:
        f.write(f'{{"info": {{"description": "shaped like {style}", "year": 2017}}, '
                '"licenses": [{"id": 1, "name": "x", "url": "http://x"}], "images": [')  # fmt: skip
        f.write(", ".join(_image(style, *row) for row in
                          zip(ids.tolist(), names, widths.tolist(), heights.tolist(), strict=True)))  # fmt: skip
        f.write('], "annotations": [')
        step = 1 << 20
        for lo in range(0, boxes, step):
            k = owner[lo : lo + step]
            w, h = widths[k], heights[k]
            x = np.round(rng.random(len(k)) * w * 0.8, 2 if style == "coco" else 7)
            y = np.round(rng.random(len(k)) * h * 0.8, 2 if style == "coco" else 7)
            bw = np.round(rng.random(len(k)) * (w - x) + 1, 2 if style == "coco" else 7)
            bh = np.round(rng.random(len(k)) * (h - y) + 1, 2 if style == "coco" else 7)
            cat = np.asarray(cat_ids)[rng.integers(0, categories, len(k))]
            crowd = (rng.random(len(k)) < 0.01).astype(int)
            rows = zip(range(lo + 1, lo + len(k) + 1), ids[k].tolist(), cat.tolist(), x.tolist(),
                       y.tolist(), bw.tolist(), bh.tolist(), crowd.tolist(), strict=True)  # fmt: skip
            f.write(("" if lo == 0 else ", ") + ", ".join(_annotation(style, *r) for r in rows))
        f.write('], "categories": [')
        f.write(", ".join(json.dumps({"id": c, "name": f"class{c}", "supercategory": "s"})
                          for c in cat_ids))  # fmt: skip
        f.write("]}")
    return path


def _image(style: str, i: int, name: str, w: int, h: int) -> str:
    if style == "coco":
        return (f'{{"license": 3, "file_name": "{name}", "coco_url": "http://images.cocodataset.'
                f'org/train2017/{name}", "height": {h}, "width": {w}, "date_captured": '
                f'"2013-11-14 11:18:45", "flickr_url": "http://farm3.staticflickr.com/{i}.jpg", '
                f'"id": {i}}}')  # fmt: skip
    return f'{{"height": {h}, "id": {i}, "license": 5, "width": {w}, "file_name": "{name}", "url": ""}}'


def _annotation(style: str, n: int, i: int, c: int, x: float, y: float, w: float, h: float,
                crowd: int) -> str:  # fmt: skip
    if style == "coco":
        return (f'{{"area": {w * h * 0.7:.4f}, "iscrowd": {crowd}, "image_id": {i}, '
                f'"bbox": [{x}, {y}, {w}, {h}], "category_id": {c}, "id": {n}}}')  # fmt: skip
    return (f'{{"id": {n}, "iscrowd": {crowd}, "isfake": 0, "area": {w * h}, "isreflected": 0, '
            f'"bbox": [{x}, {y}, {w}, {h}], "image_id": {i}, "category_id": {c}}}')  # fmt: skip


def run_one(cmd: list[str]) -> tuple[float, int, str]:
    """``cmd`` in a process of its own, which reports its child's time and
    peak (so each figure is that command's alone)."""
    code = ("import json, os, subprocess, sys, time\n"
            "t = time.perf_counter(); p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)\n"
            "_, status, usage = os.wait4(p.pid, 0); out = p.stdout.read().decode()\n"
            "print(json.dumps([time.perf_counter() - t, usage.ru_maxrss * 1024, status, out]))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True,
                          check=True)  # fmt: skip
    seconds, peak, status, out = json.loads(done.stdout)
    if status:
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({status})")
    return seconds, peak, out


def check_listing(prefix: Path, annotations: Path, expect_boxes: int) -> dict[str, Any]:
    """The boxes our lists hold: counted, and the first image's compared
    with its annotations (normalised by hand)."""
    boxes, lines, first = 0, 0, None
    for name in sorted(prefix.parent.glob(prefix.name + "*.lst")):
        with open(name) as f:
            for line in f:
                fields = line.rstrip("\n").split("\t")
                boxes += (len(fields) - 2 - 4) // 6
                lines += 1
                if first is None:
                    first = fields
    assert first is not None
    return {"images": lines, "boxes": boxes, "expected_boxes": expect_boxes,
            "same_count": boxes == expect_boxes, "first": first[-1]}  # fmt: skip


def _ratios(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Speed and memory as ratios where more is better: pycocotools' time
    and peak over ours; 3 GiB over the Objects365 peak."""
    coco = results["coco"]
    out = [
        ratio("rec list --boxes coco, COCO train2017-shaped", "pycocotools COCO()",
              coco["pycocotools_s"] / coco["rec_list_s"], SPEED_TARGET),
        ratio("rec list --boxes coco, COCO: memory (peak over ours)", "pycocotools COCO()",
              coco["pycocotools_peak"] / coco["rec_list_peak"], round(1 / MEMORY_TARGET, 2)),
    ]  # fmt: skip
    if "objects365" in results:
        out.append(ratio("rec list --boxes coco, Objects365-shaped: 3 GiB over its peak",
                         "a 3 GiB bound", OBJECTS365_PEAK / results["objects365"]["rec_list_peak"],
                         1.0))  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scale", type=float, default=1.0, help="both sets' sizes times this")
    ap.add_argument("--skip-objects365", action="store_true")
    ap.add_argument("--objects365-reference", action="store_true",
                    help="run pycocotools on the Objects365 file too (needs ~30 GB)")  # fmt: skip
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rec = str(Path(sys.executable).with_name("rec"))
    results: dict[str, Any] = {}
    ratios = []
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-ann-") as tmp:
        work = Path(tmp)
        sets = [("coco", COCO)] + ([] if args.skip_objects365 else [("objects365", OBJECTS365)])
        for name, shape in sets:
            n_images, n_boxes = int(shape["images"] * args.scale), int(shape["boxes"] * args.scale)
            root = work / name
            t0 = time.perf_counter()
            ann = write_set(root, n_images, n_boxes, int(shape["categories"]), str(shape["style"]))
            made = time.perf_counter() - t0
            subprocess.run(["cat", str(ann)], stdout=subprocess.DEVNULL, check=True)  # (warm)
            ours_s, ours_peak, _ = run_one([rec, "list", str(root / "images"), "--boxes", "coco",
                                            "--annotations", str(ann), "-o", str(work / name / "o"),
                                            "--crowd", "flag", "-q"])  # fmt: skip
            row: dict[str, Any] = {
                "images": n_images, "boxes": n_boxes, "file_bytes": ann.stat().st_size,
                "made_s": made, "rec_list_s": ours_s, "rec_list_peak": ours_peak,
                "s_per_million_boxes": ours_s / (n_boxes / 1e6),
                "check": check_listing(work / name / "o", ann, n_boxes),
            }  # fmt: skip
            if name == "coco" or args.objects365_reference:
                ref_s, ref_peak, out = run_one([sys.executable, "-c", PYCOCO, str(ann)])
                anns, images_with = map(int, out.split()[-2:])
                row.update(pycocotools_s=ref_s, pycocotools_peak=ref_peak,
                           pycocotools_check={"boxes": anns, "images_with_boxes": images_with,
                                              "same_count": anns == n_boxes})  # fmt: skip
            results[name] = row
            os.remove(ann)
    coco = results["coco"]
    speed = coco["pycocotools_s"] / coco["rec_list_s"]
    memory = coco["rec_list_peak"] / coco["pycocotools_peak"]
    ratios.extend(_ratios(results))
    met = speed >= SPEED_TARGET and memory <= MEMORY_TARGET and coco["check"]["same_count"]
    print(f"COCO train2017-shaped ({coco['file_bytes'] / 1e6:.0f} MB, {coco['boxes']:,} boxes):")
    print(f"  pycocotools COCO(): {coco['pycocotools_s']:6.2f} s, peak "
          f"{coco['pycocotools_peak'] / 2**20:,.0f} MiB")  # fmt: skip
    print(f"  rec list:           {coco['rec_list_s']:6.2f} s, peak "
          f"{coco['rec_list_peak'] / 2**20:,.0f} MiB")  # fmt: skip
    print(f"  speed {speed:.2f}x (target {SPEED_TARGET}x), memory {memory:.2f}x "
          f"(target <= {MEMORY_TARGET}x); boxes listed {coco['check']['boxes']:,}")  # fmt: skip
    if "objects365" in results:
        o = results["objects365"]
        print(f"Objects365-shaped ({o['file_bytes'] / 1e9:.1f} GB, {o['boxes']:,} boxes, "
              f"{o['images']:,} images):")  # fmt: skip
        print(f"  rec list: {o['rec_list_s']:.1f} s ({o['s_per_million_boxes']:.2f} s a million "
              f"boxes), peak {o['rec_list_peak'] / 2**30:.2f} GiB (target <= 3 GiB); boxes "
              f"listed {o['check']['boxes']:,}")  # fmt: skip
        met = met and o["rec_list_peak"] <= OBJECTS365_PEAK and o["check"]["same_count"]
    path = save_results("annotations", results, ratios)
    print(f"saved {path}")
    if args.json:
        print(json.dumps(results, indent=1))
    if not met:
        raise SystemExit("a target was missed (see above)")


if __name__ == "__main__":
    main()

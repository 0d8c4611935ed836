"""rec list --boxes against real MXNet 1.9.1 (``make compat``): its own
im2rec.py packs our detection list to the same records as rec pack, and its
ImageDetRecordIter reads every object we listed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from im2rec.listing.lstfile import read_lst
from im2rec.recordio import IndexedRecordReader, unpack

from ..boxsets import voc_set
from ..conftest import MXNet

pytestmark = pytest.mark.compat


def test_mxnet_packs_and_iterates_our_detection_list(mxnet: MXNet, tmp_path: Path) -> None:
    root = voc_set(tmp_path / "voc")
    subprocess.run([sys.executable, "-m", "im2rec", "list", str(root), "--boxes", "voc",
                    "-o", str(tmp_path / "ours"), "-q"], check=True)  # fmt: skip
    subprocess.run([sys.executable, "-m", "im2rec", "pack", "--pass-through", "--pack-label",
                    "--root", str(root), str(tmp_path / "ours.lst")], check=True,
                   capture_output=True)  # fmt: skip
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "ours.lst").write_bytes((tmp_path / "ours.lst").read_bytes())
    mxnet.im2rec("--pass-through", "--pack-label", str(theirs / "ours"), str(root) + "/")
    ours_reader = IndexedRecordReader(tmp_path / "ours.rec")
    theirs_reader = IndexedRecordReader(theirs / "ours.rec")
    assert ours_reader.keys == theirs_reader.keys
    for key in ours_reader.keys:  # the same header and label, the same image bytes
        assert ours_reader.read_key(key) == theirs_reader.read_key(key)
    labels = {item.key: item.labels for item in read_lst(tmp_path / "ours.lst")}
    rows = mxnet.run(
        """
        it = mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 32, 32), batch_size=3,
                                      label_pad_width=-1)
        result = [row.tolist() for batch in it for row in batch.label[0].asnumpy()]
        """,
        rec=str(tmp_path / "ours.rec"),
    )
    got = []
    for row in rows:  # the output shape, the label's length, the label, padding
        length = int(row[3])
        got.append(row[4 : 4 + length])
    expected = [list(np.asarray(labels[k], np.float32)) for k in ours_reader.keys]
    assert sorted(map(tuple, got)) == sorted(map(tuple, expected))
    for key in ours_reader.keys:
        header, _ = unpack(ours_reader.read_key(key))
        assert np.array_equal(header.label, np.asarray(labels[key], np.float32))


# -- GluonCV's own readers: what --convention gluoncv matches, and where the
# -- default differs (docs/detection.md) -------------------------------------

#: COCO annotations where the two conventions part: (image, category, bbox,
#: area, extra fields); images 30x20 and 24x24, listed out of id order
_COCO_TRICKY = [
    (2, 3, [4, 5, 10, 8], 80, {}),
    (2, 7, [20, 0, 10, 20], 200, {}),  # reaches the right edge
    (2, 3, [-3, 2, 8, 6], 48, {"iscrowd": 1}),  # starts left of the image
    (2, 7, [5, 5, 6, 6], 0, {}),  # area 0: GluonCV leaves it out
    (2, 3, [1, 1, 5, 5], 25, {"ignore": 1}),  # GluonCV leaves it out
    (1, 7, [3, 3, 0.5, 4], 2, {}),  # under a pixel wide: nothing left in GluonCV's
    (1, 3, [0, 0, 24, 24], 576, {}),
    (1, 7, [10.5, 2.25, 7.5, 9], 67.5, {}),
]


def _coco_for_gluoncv(root: Path) -> Path:
    """A COCO set laid out as GluonCV's COCODetection reads it
    (root/annotations/instances_x.json, root/x/*.jpg with coco_url)."""
    from ..conftest import photo

    (root / "x").mkdir(parents=True)
    (root / "annotations").mkdir()
    images = [{"id": 2, "file_name": "b.jpg", "width": 30, "height": 20},
              {"id": 1, "file_name": "a.jpg", "width": 24, "height": 24}]  # fmt: skip
    for k, image in enumerate(images):
        photo(image["width"], image["height"], k).save(root / "x" / image["file_name"])
        image["coco_url"] = f"http://example/x/{image['file_name']}"
    annotations = [{"id": n, "image_id": i, "category_id": c, "bbox": b, "area": a,
                    "iscrowd": extra.get("iscrowd", 0), **extra}
                   for n, (i, c, b, a, extra) in enumerate(_COCO_TRICKY)]  # fmt: skip
    data = {"images": images, "annotations": annotations,
            "categories": [{"id": 3, "name": "cat"}, {"id": 7, "name": "dog"}]}  # fmt: skip
    (root / "annotations" / "instances_x.json").write_text(json.dumps(data))
    return root


_GLUONCV = """
sys.modules["torch"] = None  # (GluonCV refuses the torch 2 beside MXNet here; it needs none)
from gluoncv.data.mscoco.detection import COCODetection
from gluoncv.data.pascal_voc.detection import VOCDetection
"""


def test_gluoncv_convention_reads_coco_as_gluoncvs_reader(mxnet: MXNet, tmp_path: Path) -> None:
    root = _coco_for_gluoncv(tmp_path / "coco")
    theirs = mxnet.run(
        _GLUONCV
        + textwrap.dedent("""
        class Ours(COCODetection):
            CLASSES = ["cat", "dog"]
        ds = Ours(root=root, splits=("instances_x",))
        result = [[ds._items[i].rsplit("/", 1)[1], np.asarray(ds._labels[i]).tolist()]
                  for i in range(len(ds))]
        """),
        root=str(root),
    )
    for convention, same in (("gluoncv", True), ("im2rec", False)):
        subprocess.run([sys.executable, "-m", "im2rec", "list", str(root / "x"), "--boxes", "coco",
                        "--annotations", str(root / "annotations" / "instances_x.json"),
                        "--convention", convention, "--no-shuffle", "-o",
                        str(tmp_path / convention), "-q"], check=True)  # fmt: skip
        ours = []
        for item in read_lst(tmp_path / f"{convention}.lst"):
            label = np.asarray(item.labels, np.float64)
            width, height = label[2], label[3]
            objects = label[4:].reshape(-1, 6)
            boxes = objects[:, 1:5] * [width, height, width, height]
            ours.append([item.path, np.column_stack([boxes, objects[:, 0]]).tolist()])
        matches = [name for name, _ in ours] == [name for name, _ in theirs] and all(
            len(a) == len(b) and np.allclose(a, np.asarray(b)[:, :5], atol=1e-4)
            for (_, a), (_, b) in zip(ours, theirs, strict=True)
        )  # fmt: skip
        assert matches == same, (convention, ours, theirs)


def test_gluoncv_convention_reads_voc_as_gluoncvs_reader(mxnet: MXNet, tmp_path: Path) -> None:
    images = [
        ("a", 64, 48, [("dog", 4, 6, 40, 30, 0), ("cat", 10, 10, 64, 48, 1)]),
        ("b", 50, 50, [("person", 0, 0, 25, 50, 0), ("cat", 30, 30, 60, 40, 0)]),  # leaves it
        ("d", 40, 60, [("cat", 5, 5, 35, 55, 0), ("dog", 1, 2, 3, 4, 0)]),
    ]
    root = voc_set(tmp_path / "VOC2007", images, {"trainval": ["a", "b", "d"]})
    xml = root / "Annotations" / "d.xml"
    xml.write_text(xml.read_text().replace("<name>dog</name>", "<name> Dog </name>"))
    theirs = mxnet.run(
        _GLUONCV
        + textwrap.dedent("""
        class Ours(VOCDetection):
            CLASSES = ["cat", "dog", "person"]
        ds = Ours(root=root, splits=((2007, "trainval"),))
        result = [np.asarray(ds._load_label(i)).tolist() for i in range(len(ds))]
        """),
        root=str(tmp_path),
    )
    classes = tmp_path / "classes.txt"
    classes.write_text("cat\ndog\nperson\n")
    done = subprocess.run([sys.executable, "-m", "im2rec", "list", str(root), "--boxes", "voc",
                           "--image-set", "trainval", "--classes", str(classes), "--convention",
                           "gluoncv", "--no-shuffle", "-o", str(tmp_path / "g"), "-q"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for item, their in zip(read_lst(tmp_path / "g.lst"), theirs, strict=True):
        label = np.asarray(item.labels, np.float64)
        objects = label[4:].reshape(-1, 6)
        boxes = objects[:, 1:5] * ([label[2], label[3]] * 2)
        mine = np.column_stack([boxes, objects[:, 0], objects[:, 5]])
        np.testing.assert_allclose(mine, np.asarray(their), atol=1e-4)
    # the default refuses the box that leaves its image, naming it
    done = subprocess.run([sys.executable, "-m", "im2rec", "list", str(root), "--boxes", "voc",
                           "--image-set", "trainval", "-o", str(tmp_path / "d")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1 and "b.xml: object 1 ('cat'): the box" in done.stderr

"""rec list --boxes: Pascal VOC, COCO and YOLO sets into detection lists
whose labels MXNet's detection iterator reads, packed and read back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from im2rec.cli import main
from im2rec.listing.classmap import read_class_map
from im2rec.listing.lstfile import read_lst
from im2rec.recordio import IndexedRecordReader, unpack
from im2rec.recordio.detection import problem, read_label

from ..boxsets import IMAGES, coco_set, voc_set, yolo_set

CLASSES = ["cat", "dog", "person"]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def expected(name: str, flags: bool = True) -> tuple[list[float], np.ndarray]:
    """The header and (N, 6) objects an image of IMAGES should list as."""
    _, w, h, objects = next(i for i in IMAGES if i[0] == name)
    rows = [(CLASSES.index(c), x0 / w, y0 / h, x1 / w, y1 / h, f if flags else 0)
            for c, x0, y0, x1, y1, f in objects]  # fmt: skip
    return [4, 6, w, h], np.asarray(rows, np.float32).reshape(-1, 6)


def listed(lst: Path) -> dict[str, list[float]]:
    return {Path(item.path).stem: list(item.labels) for item in read_lst(lst)}


@pytest.mark.parametrize("fmt", ["voc", "coco", "yolo"])
def test_each_format_lists_the_same_boxes(fmt: str, tmp_path: Path) -> None:
    root = {"voc": voc_set, "coco": coco_set, "yolo": yolo_set}[fmt](tmp_path / fmt)
    extra = ["--annotations", str(root / "instances.json")] if fmt == "coco" else []
    images = root / "images" if fmt == "coco" else root
    code, out = run("list", str(images), "--boxes", fmt, *extra, "-o", str(tmp_path / "o"), "-q")
    assert code == 0, out
    got = listed(tmp_path / "o.lst")
    assert sorted(got) == ["a", "b", "d"]  # "c" has no object
    for name, label in got.items():
        assert problem(label) is None
        header, objects = expected(name, flags=fmt != "yolo")
        parsed = read_label(label)
        assert parsed.header.tolist() == header
        np.testing.assert_allclose(parsed.objects, objects, atol=1e-6)
    assert (tmp_path / "o.classes.tsv").read_text() == "0\tcat\n1\tdog\n2\tperson\n"
    summary = json.loads((tmp_path / "o.lists.json").read_text())
    assert [(c["name"], c["images"], c["objects"]) for c in summary["classes"]] == [
        ("cat", 2, 3), ("dog", 2, 2), ("person", 1, 1)
    ]  # fmt: skip


def test_voc_image_sets_and_classes_given(tmp_path: Path) -> None:
    root = voc_set(tmp_path / "VOC2007", sets={"val": ["d", "b"]})
    names = tmp_path / "names.txt"
    names.write_text("person\ndog\ncat\n")
    code, out = run("list", str(root), "--boxes", "voc", "--image-set", "val", "--classes",
                    str(names), "--no-shuffle", "-o", str(tmp_path / "v"), "-q")  # fmt: skip
    assert code == 0, out
    items = read_lst(tmp_path / "v.lst")
    assert [i.path for i in items] == ["JPEGImages/d.jpg", "JPEGImages/b.jpg"]  # the set's order
    assert read_label(items[1].labels).objects[:, 0].tolist() == [0]  # person: first given


def test_coco_boxes_are_clipped_and_empty_ones_skipped_and_reported(tmp_path: Path) -> None:
    images = [("a", 64, 48, [("dog", 4, 6, 40, 30, 0), ("cat", -3, 10, 70, 48, 0),
                             ("cat", 64, 0, 70, 10, 0)])]  # fmt: skip
    root = coco_set(tmp_path / "coco", images)
    code, out = run("list", str(root / "images"), "--boxes", "coco", "--annotations",
                    str(root / "instances.json"), "-o", str(tmp_path / "c"))  # fmt: skip
    assert code == 0, out
    objects = read_label(listed(tmp_path / "c.lst")["a"]).objects
    np.testing.assert_allclose(objects[1, 1:5], [0, 10 / 48, 1, 1], atol=1e-6)  # clipped
    assert len(objects) == 2  # the third has nothing inside the image
    assert "Skipped 1 file(s): box with no area inside its image" in out
    assert "a.jpg (object 2)" in (tmp_path / "c.skipped.tsv").read_text()


def test_coco_crowd_and_empty_images(tmp_path: Path) -> None:
    root = coco_set(tmp_path / "coco")
    ann = str(root / "instances.json")
    code, out = run("list", str(root / "images"), "--boxes", "coco", "--annotations", ann,
                    "--crowd", "skip", "--keep-empty", "-o", str(tmp_path / "c"), "-q")  # fmt: skip
    assert code == 0, out
    got = listed(tmp_path / "c.lst")
    assert got["c"] == [4, 6, 80, 40]  # kept, with no object
    assert read_label(got["a"]).objects[:, 0].tolist() == [1]  # the crowd cat is gone


@pytest.mark.parametrize(
    ("fmt", "damage", "words"),
    [
        (
            "voc",
            lambda r: (r / "Annotations/a.xml").write_text(
                '<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x "xx">]><annotation>&x;</annotation>'
            ),
            "a.xml: not a VOC annotation (it declares a DTD",
        ),
        (
            "voc",
            lambda r: (r / "Annotations/b.xml").write_text(
                "<annotation><size><width>50</width><height>50</height></size><object><name>cat"
                "</name><bndbox><xmin>10</xmin><ymin>1</ymin><xmax>5</xmax><ymax>9</ymax></bndbox>"
                "</object></annotation>"
            ),
            "b.xml: object 0 ('cat'): the box (9, 0, 4, 8) is empty or leaves the 50x50 image",
        ),
        (
            "voc",
            lambda r: (r / "ImageSets/Main/bad.txt").write_text("a\n../../etc/passwd\n"),
            "bad.txt:2: the name '../../etc/passwd' leads out of the folder",
        ),
        (
            "coco",
            lambda r: (r / "instances.json").write_text(
                json.dumps(
                    {
                        "images": [{"id": 1, "file_name": "/etc/passwd", "width": 5, "height": 5}],
                        "annotations": [],
                        "categories": [],
                    }
                )
            ),
            "image 0: the name '/etc/passwd' is an absolute path",
        ),
        (
            "coco",
            lambda r: (r / "instances.json").write_text(
                json.dumps(
                    {
                        "images": [{"id": 1, "file_name": "a.jpg", "width": 5, "height": 5}],
                        "annotations": [{"image_id": 1, "category_id": 9, "bbox": [0, 0, 1, 1]}],
                        "categories": [{"id": 1, "name": "cat"}],
                    }
                )
            ),
            "annotation 0: category_id 9 is not among the categories",
        ),
        (
            "yolo",
            lambda r: (r / "labels/b.txt").write_text("0 0.5 0.5 0.2\n"),
            "b.txt:1: expected `class cx cy w h` (five numbers)",
        ),
        (
            "yolo",
            lambda r: (r / "labels/b.txt").write_text("0 0.9 0.5 0.4 0.2\n"),
            "b.txt:1: the box (0.7, 0.4, 1.1, 0.6) is empty or leaves the 1x1 image",
        ),
        # -- numbers taken on trust: a NaN box was the whole image, exit 0
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["annotations"][1].update(bbox=[NAN] * 4)),
            "annotation 1: bbox [nan, nan, nan, nan] is not [x, y, width, height]",
        ),
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["annotations"][0].update(bbox=[0, 0, INF, 5])),
            "annotation 0: bbox [0, 0, inf, 5] is not",
        ),
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["images"][1].update(width=0)),
            "image 1: the image size 0 x 50 is not a size in pixels",
        ),  # fmt: skip
        # (JSON's integers have no bound: 10**400 was an OverflowError traceback)
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["images"][1].update(height=10**400)),
            "image 1: the image size 50 x 10000000000000000000 is not",
        ),
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["annotations"][0].update(bbox=[0, 0, 10**400, 5])),
            "annotation 0: bbox [0, 0, 1000000",
        ),
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["annotations"][0].update(iscrowd=2)),
            "annotation 0: iscrowd is 2, not 0 or 1",
        ),  # fmt: skip
        # (10**8 classes made 10**8 names: a MemoryError after 2 GB)
        (
            "yolo",
            lambda r: (r / "labels/b.txt").write_text("100000000 0.5 0.5 0.2 0.2\n"),
            "b.txt:1: the class '100000000' is not a class number (a whole number from 0 to 2,",
        ),  # fmt: skip
        (
            "yolo",
            lambda r: _no_names(r, "100000000 0.5 0.5 0.2 0.2\n"),
            "b.txt:1: the class '100000000' is not a class number (a whole number from 0 to 65,535",
        ),  # fmt: skip
        (
            "yolo",
            lambda r: _no_names(r, "nan 0.5 0.5 0.2 0.2\n"),
            "b.txt:1: the class 'nan' is not a class number",
        ),  # fmt: skip
        (
            "yolo",
            lambda r: _no_names(r, "inf 0.5 0.5 0.2 0.2\n"),
            "b.txt:1: the class 'inf' is not a class number",
        ),  # fmt: skip
        (
            "yolo",
            lambda r: _no_names(r, "1.5 0.5 0.5 0.2 0.2\n"),
            "b.txt:1: the class '1.5' is not a class number",
        ),  # fmt: skip
        (
            "yolo",
            lambda r: (r / "labels/b.txt").write_text("0 nan 0.5 0.2 0.2\n"),
            "b.txt:1: expected `class cx cy w h` (five numbers)",
        ),  # fmt: skip
        (
            "voc",
            lambda r: _voc_edit(r, "b", "<width>50</width>", "<width>inf</width>"),
            "b.xml: <size>: <width> is 'inf', not a number",
        ),  # fmt: skip
        (
            "voc",
            lambda r: _voc_edit(r, "b", "<xmin>1</xmin>", "<xmin>NaN</xmin>"),
            "b.xml: object 0 ('person'): <xmin> is 'NaN', not a number",
        ),  # fmt: skip
        (
            "voc",
            lambda r: _voc_edit(r, "b", "<difficult>0</difficult>", "<difficult>2</difficult>"),
            "b.xml: object 0 ('person'): <difficult> is 2, not 0 or 1",
        ),  # fmt: skip
        # -- ids and names that collide
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["images"][1].update(id=100)),
            "image 1: id 100 is already the id of image 0",
        ),
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["images"][1].update(file_name="a.jpg")),
            "image 1: 'a.jpg' is already image 0",
        ),
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["categories"][1].update(id=3)),
            "category 1: id 3 is already the id of",
        ),
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["categories"][1].update(name="cat")),
            "the class name 'cat' is already the name of",
        ),
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["categories"][0].update(name="tabby\tcat")),
            "category 0 (id 3): the name 'tabby\\tcat' holds a NUL, TAB or newline",
        ),
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["categories"][0].update(name="cat\n1\tdog")),
            "holds a NUL, TAB or newline",
        ),
        (
            "coco",
            lambda r: _coco_edit(r, lambda d: d["categories"][0].update(name="big//cat")),
            "the class name 'big//cat' would read back from the class map as 'big/cat'",
        ),
        (
            "voc",
            lambda r: _voc_edit(r, "b", "<name>person</name>", "<name>per&#9;son</name>"),
            "b.xml: object 0 ('per\\tson'): the name 'per\\tson' holds a NUL, TAB",
        ),  # fmt: skip
        (
            "voc",
            lambda r: (r / "ImageSets/Main/bad.txt").write_text("a\nb\na\n"),
            "bad.txt:3: 'a' is already line 1",
        ),  # fmt: skip
        (
            "yolo",
            lambda r: _two_images_one_label(r),
            "images/b.jpg and images/b.png share labels/b.txt",
        ),
        (
            "yolo",
            lambda r: (r / "classes.txt").write_text("cat\ndog\ncat\n"),
            "classes.txt: class 2: the class name 'cat' is already the name of",
        ),  # fmt: skip
        (
            "yolo",
            lambda r: (r / "classes.txt").write_text("cat\ndog\x85x\nperson\n"),
            None,
        ),  # (\x85 is inside a name: split_lines, not str.splitlines)
    ],
)
def test_a_bad_annotation_is_one_line_naming_file_and_object(
    fmt: str, damage: object, words: str | None, tmp_path: Path
) -> None:
    root = {"voc": voc_set, "coco": coco_set, "yolo": yolo_set}[fmt](tmp_path / fmt)
    damage(root)  # type: ignore[operator]
    args = [str(root / "images") if fmt == "coco" else str(root), "--boxes", fmt]
    if fmt == "coco":
        args += ["--annotations", str(root / "instances.json")]
    if words is not None and "bad.txt" in words:
        args += ["--image-set", "bad"]
    done = subprocess.run([sys.executable, "-m", "im2rec", "list", *args, "-o",
                           str(tmp_path / "out")], capture_output=True, text=True)  # fmt: skip
    if words is None:  # listed, and the class map reads back as the classes
        assert done.returncode == 0, done.stderr
        assert list(read_class_map(tmp_path / "out.classes.tsv").values()) == [
            "cat", "dog\x85x", "person"
        ]  # fmt: skip
        return
    assert done.returncode == 1, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not list(tmp_path.glob("out*"))  # nothing written


NAN, INF = float("nan"), float("inf")


def _coco_edit(root: Path, edit: object) -> None:
    data = json.loads((root / "instances.json").read_text())
    edit(data)  # type: ignore[operator]
    (root / "instances.json").write_text(json.dumps(data))


def _voc_edit(root: Path, name: str, old: str, new: str) -> None:
    path = root / "Annotations" / f"{name}.xml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def _two_images_one_label(root: Path) -> None:
    (root / "images/a.jpg").rename(root / "images/b.png")  # (b.jpg's labels/b.txt for both)


def _no_names(root: Path, line: str) -> None:
    (root / "classes.txt").unlink()
    (root / "labels/b.txt").write_text(line)


def test_folder_options_are_refused_with_boxes(tmp_path: Path) -> None:
    root = voc_set(tmp_path / "voc")
    code, out = run("list", str(root), "--boxes", "voc", "--recursive")
    assert code != 0 and "--recursive walks folders" in out
    code, out = run("list", str(root), "--image-set", "train")
    assert code != 0 and "apply to --boxes" in out


@pytest.mark.slow
def test_listed_boxes_pack_into_labels_mxnet_reads(tmp_path: Path) -> None:
    root = voc_set(tmp_path / "voc")
    code, out = run("list", str(root), "--boxes", "voc", "-o", str(tmp_path / "voc"), "-q")
    assert code == 0, out
    done = subprocess.run([sys.executable, "-m", "im2rec", "pack", "--pass-through",
                           "--pack-label", "--root", str(root), str(tmp_path / "voc.lst")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = {item.key: item for item in read_lst(tmp_path / "voc.lst")}
    reader = IndexedRecordReader(tmp_path / "voc.rec")
    for key in reader.keys:
        header, payload = unpack(reader.read_key(key))
        assert np.array_equal(header.label, np.asarray(lines[key].labels, np.float32))
        assert payload == (root / lines[key].path).read_bytes()


# --- hostile annotation files: a clear error or a listing, never a traceback -------------

_FIELD = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.just(10**400),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                   st.lists(st.integers(-5, 100), max_size=5))  # fmt: skip
_COCO = st.fixed_dictionaries({
    "images": st.lists(st.dictionaries(st.sampled_from(["id", "file_name", "width", "height"]),
                                       _FIELD), max_size=4),
    "annotations": st.lists(st.dictionaries(
        st.sampled_from(["image_id", "category_id", "bbox", "iscrowd"]), _FIELD), max_size=4),
    "categories": st.lists(st.dictionaries(st.sampled_from(["id", "name"]), _FIELD), max_size=3),
})  # fmt: skip


def _listed_or_refused(root: Path, *args: str) -> None:
    from im2rec.errors import Im2RecError

    out = root.parent / "out"
    result = CliRunner().invoke(main, ["list", str(root), *args, "-o", str(out), "-q"])
    assert result.exit_code in (0, 1, 2), result.output
    if result.exit_code:
        assert "Error:" in result.output and "Traceback" not in result.output, result.output
        assert isinstance(result.exception, SystemExit | Im2RecError), result.exception
        return
    # listed: every label is one every reader takes (or, with --keep-empty,
    # a header alone: `4 6 width height`), the class map reads back
    classes = read_class_map(out.parent / "out.classes.tsv")
    assert list(classes) == list(range(len(classes)))
    for item in read_lst(out.parent / "out.lst"):
        if "--keep-empty" in args and len(item.labels) == 4:
            assert item.labels[:2] == (4.0, 6.0) and min(item.labels[2:]) > 0, item.labels
            continue
        assert problem(item.labels) is None, item.labels
        assert all(0 <= c < len(classes) for c in read_label(item.labels).objects[:, 0])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(xml=st.binary(max_size=300) | st.text(max_size=300).map(str.encode), keep=st.booleans())
def test_any_voc_annotation_is_listed_or_refused_clearly(
    tmp_path: Path, xml: bytes, keep: bool
) -> None:
    root = voc_set(tmp_path / "voc", IMAGES[:1])
    (root / "Annotations" / "a.xml").write_bytes(xml)
    _listed_or_refused(root, "--boxes", "voc", *["--keep-empty"] * keep)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_COCO, keep=st.booleans())
def test_any_coco_file_is_listed_or_refused_clearly(tmp_path: Path, data: dict, keep: bool) -> None:
    root = tmp_path / "coco"
    root.mkdir(exist_ok=True)
    (root / "i.json").write_text(json.dumps(data))
    _listed_or_refused(root, "--boxes", "coco", "--annotations", str(root / "i.json"),
                       *["--keep-empty"] * keep)  # fmt: skip


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(st.sampled_from("0123456789 .-e\nabnif\t"), max_size=80), keep=st.booleans())
def test_any_yolo_label_file_is_listed_or_refused_clearly(
    tmp_path: Path, text: str, keep: bool
) -> None:
    root = (
        yolo_set(tmp_path / "yolo", IMAGES[:1])
        if not (tmp_path / "yolo").exists()
        else tmp_path / "yolo"
    )
    (root / "labels" / "a.txt").write_text(text)
    _listed_or_refused(root, "--boxes", "yolo", *["--keep-empty"] * keep)


def test_a_wrong_coco_root_is_found_when_listing(tmp_path: Path) -> None:
    """It listed fine and failed only at rec pack; now the images the file
    names are looked for (a folder read at a time), and a missing one is
    reported."""
    root = coco_set(tmp_path / "coco")
    done = subprocess.run([sys.executable, "-m", "im2rec", "list", str(root), "--boxes", "coco",
                           "--annotations", str(root / "instances.json"), "-o",
                           str(tmp_path / "o")], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{root}: none of the 3 images" in done.stderr and "(the first: a.jpg)" in done.stderr
    (root / "images" / "b.jpg").unlink()
    code, out = run("list", str(root / "images"), "--boxes", "coco", "--annotations",
                    str(root / "instances.json"), "-o", str(tmp_path / "o"))  # fmt: skip
    assert code == 0, out
    assert sorted(listed(tmp_path / "o.lst")) == ["a", "d"]
    assert (
        "image the annotations name is not in the folder\tb.jpg"
        in (tmp_path / "o.skipped.tsv").read_text()
    )


def test_images_with_no_object_are_counted(tmp_path: Path) -> None:
    root = voc_set(tmp_path / "voc")
    code, out = run("list", str(root), "--boxes", "voc", "-o", str(tmp_path / "v"))
    assert code == 0 and "Left out 1 image with no object (--keep-empty lists them)" in out, out
    assert "Classes: 0 cat (2 images, 3 boxes), 1 dog (2 images, 2 boxes)" in out
    code, out = run("list", str(root), "--boxes", "voc", "-o", str(tmp_path / "v"), "--json")
    assert json.loads(out)["passed_over"] == {"images with no object": 1}


def test_a_mistyped_image_set_names_the_ones_there(tmp_path: Path) -> None:
    root = voc_set(tmp_path / "voc", sets={"train": ["a"], "val": ["b"], "cat_train": ["a"]})
    code, out = run("list", str(root), "--boxes", "voc", "--image-set", "trian")
    assert code == 1 and "no image set 'trian'; the sets there: train, val" in out, out


# --- at the size of real sets ------------------------------------------------------------


def test_coco_sections_come_in_any_order(tmp_path: Path) -> None:
    """Objects365 and LVIS write their sections in other orders than COCO:
    each order lists the same."""
    root = coco_set(tmp_path / "coco")
    data = json.loads((root / "instances.json").read_text())
    got = []
    for order in (("images", "annotations", "categories"), ("categories", "annotations", "images"),
                  ("annotations", "images", "categories")):  # fmt: skip
        (root / "instances.json").write_text(json.dumps({key: data[key] for key in order}))
        code, out = run("list", str(root / "images"), "--boxes", "coco", "--annotations",
                        str(root / "instances.json"), "-o", str(tmp_path / "o"), "-q")  # fmt: skip
        assert code == 0, out
        got.append((tmp_path / "o.lst").read_bytes())
    assert got[0] == got[1] == got[2]


def _coco_file(path: Path, images: int, boxes: int) -> None:
    rng = np.random.default_rng(0)
    owner = rng.integers(0, images, boxes)
    parts = ['{"images": [', ", ".join(
        f'{{"id": {k}, "file_name": "{k}.jpg", "width": 640, "height": 480, '
        f'"coco_url": "http://x/{k}.jpg"}}' for k in range(images)), '], "annotations": [',
        ", ".join(f'{{"id": {n}, "image_id": {k}, "category_id": {n % 3 + 1}, "iscrowd": 0, '
                  f'"area": 100.5, "bbox": [{n % 600}.25, 10.5, 30.75, 40]}}'
                  for n, k in enumerate(owner.tolist())),
        '], "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"}]}']  # fmt: skip
    path.write_text("".join(parts))


def _listing_peak(root: Path, prefix: Path, boxes: Any) -> int:
    """The most Python memory (tracemalloc) listing ``root`` took."""
    import tracemalloc

    from im2rec.listing.making import ListOptions, make_lists

    tracemalloc.start()
    try:
        make_lists(root, prefix, ListOptions(), boxes=boxes)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_coco_listing_memory_is_its_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python objects a box (json.loads of the whole file) took ~700 bytes a
    box; the columns take ~50, and the rest is the list being written: what
    three times the boxes adds is under 250 bytes a box."""
    from im2rec.listing.boxes import BoxOptions, jsoncolumns

    monkeypatch.setattr(jsoncolumns, "PIECE", 1 << 18)  # (both files are many pieces)
    images = tmp_path / "images"
    images.mkdir()
    for k in range(2_000):
        (images / f"{k}.jpg").touch()
    peaks = []
    for boxes in (20_000, 60_000):
        _coco_file(tmp_path / "i.json", 2_000, boxes)
        coco = BoxOptions("coco", annotations=str(tmp_path / "i.json"))
        peaks.append(_listing_peak(images, tmp_path / "o", coco))
        assert len((tmp_path / "o.lst").read_text().splitlines()) == 2_000
    growth = (peaks[1] - peaks[0]) / 40_000
    assert growth < 250, f"{growth:.0f} bytes a box"


def test_voc_listing_memory_is_its_arrays(tmp_path: Path) -> None:
    """Each object was a tuple of Python floats and its class name until
    every file was read (~300 bytes a box); now it is its label's 24 bytes
    in the entries from the start."""
    from im2rec.listing.boxes import BoxOptions

    peaks = []
    for files in (100, 400):
        root = tmp_path / f"voc{files}"
        for folder in ("Annotations", "JPEGImages"):
            (root / folder).mkdir(parents=True)
        box = "<object><name>c{}</name><bndbox><xmin>2</xmin><ymin>3</ymin><xmax>40</xmax>" \
              "<ymax>50</ymax></bndbox></object>"  # fmt: skip
        for k in range(files):
            (root / "JPEGImages" / f"{k}.jpg").touch()
            objects = "".join(box.format(n % 7) for n in range(100))
            (root / "Annotations" / f"{k}.xml").write_text(
                f"<annotation><size><width>64</width><height>64</height></size>{objects}"
                "</annotation>"
            )
        peaks.append(_listing_peak(root, tmp_path / "o", BoxOptions("voc")))
    growth = (peaks[1] - peaks[0]) / (300 * 100)
    assert growth < 120, f"{growth:.0f} bytes a box"


def test_yolo_listing_memory_is_its_arrays(tmp_path: Path) -> None:
    """YOLO's label files are read one at a time into the entries: what
    four times the boxes adds is their labels' bytes."""
    from PIL import Image

    from im2rec.listing.boxes import BoxOptions

    peaks = []
    for files in (100, 400):
        root = tmp_path / f"yolo{files}"
        for folder in ("images", "labels"):
            (root / folder).mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(root / "images" / "0.jpg")
        for k in range(files):
            if k:
                (root / "images" / f"{k}.jpg").write_bytes((root / "images" / "0.jpg").read_bytes())
            (root / "labels" / f"{k}.txt").write_text("1 0.5 0.5 0.25 0.25\n" * 100)
        peaks.append(_listing_peak(root, tmp_path / "o", BoxOptions("yolo")))
    growth = (peaks[1] - peaks[0]) / (300 * 100)
    assert growth < 120, f"{growth:.0f} bytes a box"


@pytest.mark.parametrize("fmt", ["voc", "coco", "yolo"])
def test_keep_empty_lists_a_set_whose_images_have_no_object(fmt: str, tmp_path: Path) -> None:
    """The class counts of a run of images with no box at all (here every
    image) ended in a traceback."""
    bare = [(name, w, h, []) for name, w, h, _ in IMAGES]
    root = {"voc": voc_set, "coco": coco_set, "yolo": yolo_set}[fmt](tmp_path / fmt, bare)
    extra = ["--annotations", str(root / "instances.json")] if fmt == "coco" else []
    images = root / "images" if fmt == "coco" else root
    args = ["list", str(images), "--boxes", fmt, *extra, "-o", str(tmp_path / "o")]
    code, out = run(*args, "--keep-empty", "--classes", str(_class_file(tmp_path)))
    assert code == 0 and "Traceback" not in out, out
    got = listed(tmp_path / "o.lst")
    assert got == {name: [4, 6, w, h] for name, w, h, _ in IMAGES}
    summary = json.loads((tmp_path / "o.lists.json").read_text())
    assert [(c["images"], c["objects"]) for c in summary["classes"]] == [(0, 0)] * 3


def _class_file(tmp_path: Path) -> Path:
    path = tmp_path / "classes.txt"
    path.write_text("".join(f"{name}\n" for name in CLASSES))
    return path

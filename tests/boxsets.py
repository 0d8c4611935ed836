"""Annotation sets made in tests: Pascal VOC, COCO and YOLO folders of
generated photos with known boxes (pixels, as each format stores them)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from .conftest import photo

#: (name, width, height, [(class, xmin, ymin, xmax, ymax, flag)] in pixels,
#: 0-based, xmax/ymax exclusive)
IMAGES = [
    ("a", 64, 48, [("dog", 4, 6, 40, 30, 0), ("cat", 10, 10, 64, 48, 1)]),
    ("b", 50, 50, [("person", 0, 0, 25, 50, 0)]),
    ("c", 80, 40, []),
    ("d", 40, 60, [("cat", 5, 5, 35, 55, 0), ("dog", 1, 2, 3, 4, 0), ("cat", 0, 30, 40, 60, 0)]),
]


def voc_set(root: Path, images: list = IMAGES, sets: dict[str, list[str]] | None = None) -> Path:
    """A VOC20xx folder: Annotations (1-based corners), JPEGImages, ImageSets."""
    for folder in ("Annotations", "JPEGImages", "ImageSets/Main"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for k, (name, w, h, objects) in enumerate(images):
        photo(w, h, k).save(root / "JPEGImages" / f"{name}.jpg", quality=90)
        parts = [f"<annotation><filename>{name}.jpg</filename>",
                 f"<size><width>{w}</width><height>{h}</height><depth>3</depth></size>"]  # fmt: skip
        for cls, x0, y0, x1, y1, flag in objects:
            parts.append(
                f"<object><name>{cls}</name><difficult>{flag}</difficult><bndbox>"
                f"<xmin>{x0 + 1}</xmin><ymin>{y0 + 1}</ymin><xmax>{x1 + 1}</xmax>"
                f"<ymax>{y1 + 1}</ymax></bndbox></object>"
            )
        parts.append("</annotation>")
        (root / "Annotations" / f"{name}.xml").write_text("".join(parts))
    for set_name, ids in (sets or {}).items():
        (root / "ImageSets" / "Main" / f"{set_name}.txt").write_text("".join(f"{i}\n" for i in ids))
    return root


def coco_set(root: Path, images: list = IMAGES, ids: tuple[int, ...] = (3, 7, 18)) -> Path:
    """COCO: root/images/*.jpg and root/instances.json; category ids with
    gaps (``ids`` for cat, dog, person, in that order of id)."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    category = dict(zip(("cat", "dog", "person"), ids, strict=True))
    data: dict = {"images": [], "annotations": [],
                  "categories": [{"id": i, "name": n} for n, i in category.items()]}  # fmt: skip
    for k, (name, w, h, objects) in enumerate(images):
        photo(w, h, k).save(root / "images" / f"{name}.jpg", quality=90)
        data["images"].append({"id": 100 + k, "file_name": f"{name}.jpg", "width": w, "height": h})
        for cls, x0, y0, x1, y1, flag in objects:
            data["annotations"].append({"id": len(data["annotations"]), "image_id": 100 + k,
                                        "category_id": category[cls], "iscrowd": flag,
                                        "bbox": [x0, y0, x1 - x0, y1 - y0]})  # fmt: skip
    (root / "instances.json").write_text(json.dumps(data))
    return root


def yolo_set(
    root: Path, images: list = IMAGES, names: tuple[str, ...] = ("cat", "dog", "person")
) -> Path:
    """YOLO: images/*.jpg, labels/*.txt (centre and size in [0, 1]),
    classes.txt; an image with no object has no label file."""
    for folder in ("images", "labels"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for k, (name, w, h, objects) in enumerate(images):
        photo(w, h, k).save(root / "images" / f"{name}.jpg", quality=90)
        if objects:
            lines = [
                f"{names.index(cls)} {(x0 + x1) / 2 / w} {(y0 + y1) / 2 / h} {(x1 - x0) / w} {(y1 - y0) / h}\n"
                for cls, x0, y0, x1, y1, _ in objects
            ]
            (root / "labels" / f"{name}.txt").write_text("".join(lines))
    (root / "classes.txt").write_text("".join(f"{n}\n" for n in names))
    return root


def det_rec(
    path: Path, sizes: list[tuple[int, int]], objects: list, header: tuple | None = None
) -> Path:
    """A detection ``.rec`` (and ``.idx``) of photos of ``sizes`` (width,
    height), record ``i`` labelled ``make_label(objects[i], header)``
    (boxes normalised, as listed; the header by default the image's width
    and height, as ``rec list --boxes`` writes it) and keyed ``i``."""
    from im2rec.recordio import IndexedRecordWriter, pack
    from im2rec.recordio.detection import make_label

    with IndexedRecordWriter(path, path.with_suffix(".idx")) as writer:
        for i, ((w, h), objs) in enumerate(zip(sizes, objects, strict=True)):
            label = make_label(objs, (w, h) if header is None else header)
            buf = io.BytesIO()
            photo(w, h, i).save(buf, "JPEG", quality=95)
            writer.write_key(i, pack((len(label), label, i, 0), buf.getvalue()))
    return path

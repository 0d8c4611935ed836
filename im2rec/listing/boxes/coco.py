"""COCO: an ``instances_*.json`` (``--annotations``) over its image folder
(the root). Categories become labels 0..K-1 in id order (COCO's ids have
gaps), or in the order of the classes given; ``bbox`` is ``[x, y, w, h]``
in pixels, clipped to the image (a box with nothing left is skipped and
reported, as GluonCV's reader skips it); images come in the file's order."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from ...errors import ConfigError, DatasetError
from ...storage.confined import relative_name
from ..lstfile import cannot_carry
from ..walking import Scan
from .common import MAX_OBJECTS, BoxEntries, BoxOptions, check_box, image_label, read_text

__all__ = ["EMPTY_BOX", "read_coco"]

#: the skip reason of a box with no area inside its image
EMPTY_BOX = "box with no area inside its image (left out, as GluonCV does)"

MAX_JSON = 4 << 30  # instances_train2017.json is 448 MB


def _field(item: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = item.get(key) if isinstance(item, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DatasetError(
            f"{where}: {key!r} is missing or not a {getattr(kind, '__name__', kind)}"
        )
    return value


def read_coco(root: str, options: BoxOptions) -> Scan:
    """The COCO set of ``options.annotations`` over the images in ``root``."""
    path = options.annotations
    if path is None:
        raise ConfigError("--boxes coco needs --annotations instances_*.json")
    try:
        data = json.loads(read_text(path, MAX_JSON, "annotation file"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: not a COCO annotation file (no images, annotations)")
    categories: list[tuple[int, str]] = sorted(
        (_field(c, "id", int, f"{path}: category {k}"),
         _field(c, "name", str, f"{path}: category {k}"))
        for k, c in enumerate(data.get("categories") or [])
    )  # fmt: skip
    names = dict(categories)
    if options.classes is not None:
        order = {name: i for i, name in enumerate(options.classes)}
        missing = sorted(set(names.values()) - set(order))
        if missing:
            raise ConfigError(f"{path}: categories {missing[:5]} are not in the classes given")
        labels = {cid: order[name] for cid, name in names.items()}
        classes = list(options.classes)
    else:
        labels = {cid: i for i, (cid, _) in enumerate(categories)}
        classes = [name for _, name in categories]
    boxes: dict[int, list[tuple[float, ...]]] = defaultdict(list)
    for k, ann in enumerate(data.get("annotations") or []):
        where = f"{path}: annotation {k}"
        image = _field(ann, "image_id", int, where)
        category = _field(ann, "category_id", int, where)
        if category not in labels:
            raise DatasetError(f"{where}: category_id {category} is not among the categories")
        crowd = ann.get("iscrowd", 0) == 1
        if crowd and options.crowd == "skip":
            continue
        bbox = _field(ann, "bbox", list, where)
        if len(bbox) != 4 or not all(isinstance(v, (int, float)) for v in bbox):
            raise DatasetError(f"{where}: bbox {bbox!r:.60} is not [x, y, width, height]")
        boxes[image].append((labels[category], *bbox, float(crowd)))
    entries = BoxEntries()
    skipped: list[str] = []
    degenerate: list[str] = []  # boxes with nothing inside the image
    for k, image in enumerate(data.get("images") or []):
        where = f"{path}: image {k}"
        image_id = _field(image, "id", int, where)
        rel = relative_name(_field(image, "file_name", str, where), where)
        size = (
            float(_field(image, "width", int, where)),
            float(_field(image, "height", int, where)),
        )
        found = boxes.pop(image_id, [])
        if len(found) > MAX_OBJECTS:
            raise DatasetError(f"{where}: {len(found):,} objects; at most {MAX_OBJECTS:,} an image")
        rows: list[tuple[float, ...]] = []
        for n, (label, x, y, w, h, flag) in enumerate(found):
            # as GluonCV reads COCO: a box clipped to its image, skipped when
            # nothing is left (COCO has a few of those)
            box = (max(0.0, x), max(0.0, y), min(size[0], x + w), min(size[1], y + h))
            if not (box[2] > box[0] and box[3] > box[1]):
                degenerate.append(f"{rel} (object {n})")
                continue
            rows.append((label, *check_box(f"{where} ({rel}), object {n}", box, size), flag))
        if not rows and not options.keep_empty:
            continue
        if cannot_carry(rel):
            skipped.append(rel)
            continue
        entries.add_image(rel, image_label(rows, size))
    if boxes:
        orphan = next(iter(boxes))
        raise DatasetError(f"{path}: annotations name image_id {orphan}, which is not an image")
    if not entries:
        raise DatasetError(f"{path}: no annotated images")
    skips = {"name cannot be stored in a .lst line": skipped} if skipped else {}
    if degenerate:
        skips[EMPTY_BOX] = degenerate
    return Scan(root, entries, classes, skips)

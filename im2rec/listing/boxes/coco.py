"""COCO: an ``instances_*.json`` (``--annotations``) over its image folder
(the root). Categories become labels 0..K-1 in id order (COCO's ids have
gaps), or in the order of the classes given; an id or a name twice is
refused, as is an image id or file twice. ``bbox`` is ``[x, y, w, h]`` in
pixels: the box ``(x, y, x + w, y + h)`` clipped to the image, skipped and
reported when nothing is left; images come in the file's order.

With the ``gluoncv`` convention, as GluonCV's ``COCODetection`` reads it:
the box is ``(x, y, x + max(w - 1, 0), y + max(h - 1, 0))`` clipped to
``[0, width - 1] x [0, height - 1]``; an annotation whose ``area`` is not
above 0 or that is marked ``ignore`` is left out (and reported), as is a
box with nothing left; images come in the order of their ids."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from ...errors import ConfigError, DatasetError
from ...storage.confined import relative_name
from ..classmap import check_class_names
from ..lstfile import cannot_carry
from ..walking import Scan
from .common import (
    MAX_OBJECTS,
    NO_OBJECT,
    NOT_THERE,
    BoxEntries,
    BoxOptions,
    check_box,
    check_size,
    check_there,
    class_order,
    finite,
    image_label,
    read_text,
)

__all__ = ["EMPTY_BOX", "read_coco"]

#: the skip reason of a box with no area inside its image
EMPTY_BOX = "box with no area inside its image (left out, as GluonCV does)"
#: (--convention gluoncv) the skip reasons of what GluonCV's reader leaves out
NO_AREA = "annotation whose area is not above 0 (left out, as GluonCV does)"
IGNORED = "annotation marked ignore (left out, as GluonCV does)"

MAX_JSON = 4 << 30  # instances_train2017.json is 448 MB


def _field(item: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = item.get(key) if isinstance(item, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DatasetError(
            f"{where}: {key!r} is missing or not a {getattr(kind, '__name__', kind)}"
        )
    return value


def _categories(
    data: dict[str, Any], path: str, options: BoxOptions
) -> tuple[dict[int, int], list[str]]:
    """Category id -> label, and the class names in label order: ids in
    order, or the classes given; an id or a name twice is refused."""
    found: dict[int, tuple[str, str]] = {}
    for k, c in enumerate(_list(data, "categories", path)):
        where = f"{path}: category {k}"
        cid, name = _field(c, "id", int, where), _field(c, "name", str, where)
        if cid in found:
            raise DatasetError(
                f"{where}: id {cid} is already the id of {found[cid][1]} ({found[cid][0]!r}); "
                "a category id must name one category"
            )
        found[cid] = (name, f"{where} (id {cid})")
    categories = sorted(found.items())
    check_class_names(found.values())  # (the names: carried by a class map, none twice)
    if options.classes is not None:
        order = class_order(options.classes, "--classes")
        missing = sorted({name for name, _ in found.values()} - set(order))
        if missing:
            raise ConfigError(f"{path}: categories {missing[:5]} are not in the classes given")
        return {cid: order[name] for cid, (name, _) in categories}, list(options.classes)
    labels = {cid: i for i, (cid, _) in enumerate(categories)}
    return labels, [name for _, (name, _) in categories]


def _list(data: dict[str, Any], key: str, path: str) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise DatasetError(f"{path}: {key!r} is not a list")
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
    except RecursionError:
        raise DatasetError(f"{path}: nested deeper than a COCO file is") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: not a COCO annotation file (no images, annotations)")
    labels, classes = _categories(data, path, options)
    gluoncv = options.convention == "gluoncv"
    boxes: dict[int, list[tuple[float, ...]]] = defaultdict(list)
    skips: dict[str, list[str]] = defaultdict(list)
    for k, ann in enumerate(_list(data, "annotations", path)):
        where = f"{path}: annotation {k}"
        image = _field(ann, "image_id", int, where)
        category = _field(ann, "category_id", int, where)
        if category not in labels:
            raise DatasetError(f"{where}: category_id {category} is not among the categories")
        crowd = ann.get("iscrowd", 0)
        if crowd not in (0, 1):
            raise DatasetError(f"{where}: iscrowd is {crowd!r}, not 0 or 1")
        if crowd and options.crowd == "skip":
            continue
        bbox = _field(ann, "bbox", list, where)
        if len(bbox) != 4 or not all(map(finite, bbox)):
            raise DatasetError(f"{where}: bbox {bbox!r:.60} is not [x, y, width, height] in pixels")
        if gluoncv:
            area = ann.get("area")
            if not finite(area):
                raise DatasetError(f"{where}: area {area!r:.40} is not a number (GluonCV reads it)")
            if ann.get("ignore", 0) == 1 or area <= 0:
                skips[IGNORED if ann.get("ignore", 0) == 1 else NO_AREA].append(f"annotation {k}")
                continue
        boxes[image].append((labels[category], *bbox, float(crowd)))
    entries = BoxEntries()
    empty = 0
    for k, image_id, rel, size in _images(data, path, gluoncv):
        where = f"{path}: image {k}"
        found = boxes.pop(image_id, [])
        if len(found) > MAX_OBJECTS:
            raise DatasetError(f"{where}: {len(found):,} objects; at most {MAX_OBJECTS:,} an image")
        rows: list[tuple[float, ...]] = []
        for n, (label, x, y, w, h, flag) in enumerate(found):
            box = _gluoncv_box(x, y, w, h, size) if gluoncv else _box(x, y, w, h, size)
            if not (box[2] > box[0] and box[3] > box[1]):
                skips[EMPTY_BOX].append(f"{rel} (object {n})")
                continue
            rows.append((label, *check_box(f"{where} ({rel}), object {n}", box, size), flag))
        if not rows and not options.keep_empty:
            empty += 1
            continue
        if cannot_carry(rel):
            skips["name cannot be stored in a .lst line"].append(rel)
            continue
        entries.add_image(rel, image_label(rows, size))
    if boxes:
        orphan = next(iter(boxes))
        raise DatasetError(f"{path}: annotations name image_id {orphan}, which is not an image")
    if not entries:
        raise DatasetError(f"{path}: no annotated images")
    entries, gone = check_there(root, entries, path)
    if gone:
        skips[NOT_THERE] = gone
    return Scan(root, entries, classes, dict(skips), {NO_OBJECT: empty} if empty else {})


def _box(
    x: float, y: float, w: float, h: float, size: tuple[float, float]
) -> tuple[float, float, float, float]:
    """``bbox`` as corners, clipped to the image."""
    return (max(0.0, x), max(0.0, y), min(size[0], x + w), min(size[1], y + h))


def _gluoncv_box(
    x: float, y: float, w: float, h: float, size: tuple[float, float]
) -> tuple[float, float, float, float]:
    """``bbox`` as GluonCV's ``bbox_xywh_to_xyxy`` then ``bbox_clip_xyxy``
    make it: the last pixel's index, clipped to ``[0, size - 1]``."""
    x1, y1 = x + max(w - 1, 0), y + max(h - 1, 0)
    right, bottom = size[0] - 1, size[1] - 1
    return (min(right, max(0.0, x)), min(bottom, max(0.0, y)),
            min(right, max(0.0, x1)), min(bottom, max(0.0, y1)))  # fmt: skip


def _images(
    data: dict[str, Any], path: str, by_id: bool
) -> list[tuple[int, int, str, tuple[float, float]]]:
    """``(index, id, file, size)`` of every image, each checked: an id or a
    file twice is refused; in the file's order, or by id."""
    found = []
    ids: dict[int, int] = {}
    files: dict[str, int] = {}
    for k, image in enumerate(_list(data, "images", path)):
        where = f"{path}: image {k}"
        image_id = _field(image, "id", int, where)
        if image_id in ids:
            raise DatasetError(
                f"{where}: id {image_id} is already the id of image {ids[image_id]}; its "
                "annotations would go to one of them: an image id must name one image"
            )
        ids[image_id] = k
        rel = relative_name(_field(image, "file_name", str, where), where)
        if rel in files:
            raise DatasetError(
                f"{where}: {rel!r} is already image {files[rel]}; list each file once, "
                "with all its annotations"
            )
        files[rel] = k
        size = check_size(
            where, _field(image, "width", int, where), _field(image, "height", int, where)
        )
        found.append((k, image_id, rel, size))
    return sorted(found, key=lambda item: item[1]) if by_id else found

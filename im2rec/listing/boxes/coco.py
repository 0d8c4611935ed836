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
box with nothing left; images come in the order of their ids.

The file is read as a stream into columns (:mod:`.jsoncolumns`), of any
size: memory is about 50 bytes a box and the images' names, and each rule
is applied to whole columns (:mod:`.cocoboxes`, :mod:`.cococolumns`). What
is refused is the first bad value, in the order categories, annotations,
images; the value is read back from the file to name it."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ...errors import ConfigError, DatasetError
from ..classmap import check_class_names
from ..walking import Scan
from .cocoboxes import Rows, image_rows, read_annotations
from .cococolumns import ImagesRead, field_error, read_images, spec
from .common import NO_OBJECT, NOT_THERE, BoxEntries, BoxOptions, check_there, class_order
from .jsoncolumns import Columns, read_columns
from .jsonkinds import INT, STRING, TRUTHY

__all__ = ["EMPTY_BOX", "read_coco"]

#: the skip reason of a box with no area inside its image
EMPTY_BOX = "box with no area inside its image (left out, as GluonCV does)"
#: the skip reason of an image whose name a .lst line cannot carry
UNCARRIED = "name cannot be stored in a .lst line"


def read_coco(root: str, options: BoxOptions) -> Scan:
    """The COCO set of ``options.annotations`` over the images in ``root``."""
    path = options.annotations
    if path is None:
        raise ConfigError("--boxes coco needs --annotations instances_*.json")
    gluoncv = options.convention == "gluoncv"
    columns = read_columns(path, spec(gluoncv))
    _is_list(columns, path, "categories")
    labels, classes = _categories(columns, path, options)
    skips: dict[str, list[str]] = defaultdict(list)
    _is_list(columns, path, "annotations")
    ann = read_annotations(columns, path, labels, options, skips)
    _is_list(columns, path, "images")
    images = read_images(columns, path, by_id=gluoncv)
    rows = image_rows(path, images, ann, gluoncv)  # (ann's arrays let go as they are used)
    del ann
    entries, empty = _entries(path, images, rows, options.keep_empty, skips)
    del rows, images  # (the entries hold what is listed)
    entries, gone = check_there(root, entries, path)
    if gone:
        skips[NOT_THERE] = gone
    return Scan(root, entries, classes, dict(skips), {NO_OBJECT: empty} if empty else {})


def _is_list(columns: Columns, path: str, name: str) -> None:
    """A section is a list, or absent, or another empty value (none)."""
    if columns.how[name][0] == TRUTHY:
        raise DatasetError(f"{path}: {name!r} is not a list")


def _categories(
    columns: Columns, path: str, options: BoxOptions
) -> tuple[dict[int, int], list[str]]:
    """Category id -> label, and the class names in label order: ids in
    order, or the classes given; an id or a name twice is refused."""
    cats = columns.sections["categories"]
    id_kinds, ids = cats["id"].kinds(), cats["id"].values().tolist()
    name_kinds, names = cats["name"].kinds(), cats["name"].texts()
    found: dict[int, tuple[str, str]] = {}
    for k, (cid, name) in enumerate(zip(ids, names, strict=True)):
        where = f"{path}: category {k}"
        if id_kinds[k] != INT:
            raise field_error(where, "id", int)
        if name_kinds[k] != STRING or name is None:
            raise field_error(where, "name", str)
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


def _entries(
    path: str, images: ImagesRead, rows: Rows, keep_empty: bool, skips: dict[str, list[str]]
) -> tuple[BoxEntries, int]:
    """The images listed (in the listing's order) with their labels, and
    how many were left out for having no object; what else was left out
    goes to ``skips``, the reasons in the order their first image comes."""
    names = [images.names[k] for k in images.order.tolist()]
    candidate = (rows.objects > 0) | keep_empty
    uncarried = images.cannot_carry[images.order] & candidate
    reasons = []
    if rows.empty_boxes:
        reasons.append((rows.empty_boxes[0][0], 0, EMPTY_BOX))
    if uncarried.any():
        reasons.append((int(np.argmax(uncarried)), 1, UNCARRIED))
    for _, _, reason in sorted(reasons):  # (an image's boxes come before its name)
        if reason == EMPTY_BOX:
            skips[EMPTY_BOX] += [f"{names[p]} (object {n})" for p, n in rows.empty_boxes]
        else:
            skips[UNCARRIED] += [names[p] for p in np.flatnonzero(uncarried).tolist()]
    listed = candidate & ~uncarried
    if not listed.any():
        raise DatasetError(f"{path}: no annotated images")
    entries = BoxEntries()
    for positions, values, ends in rows.labels(listed):  # (some images at a time)
        entries.add_images([names[p] for p in positions.tolist()], values, ends)
    return entries, int(np.count_nonzero(~candidate))

"""Pascal VOC: ``Annotations/<id>.xml`` and ``JPEGImages/<id>.jpg`` under a
``VOC20xx`` folder, the ids from ``ImageSets/Main/<set>.txt`` (or every
annotation, sorted). Boxes are 1-based pixels in the XML; as GluonCV reads
them, 1 is subtracted before they are divided by the image's size."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import Any

from ...errors import DatasetError
from ...storage.confined import relative_name
from ..lstfile import cannot_carry
from ..walking import Scan
from .common import BoxEntries, BoxOptions, check_box, class_labels, image_label, read_text

__all__ = ["read_voc"]

MAX_XML = 1 << 20  # a VOC annotation is a few kB
MAX_SET = 64 << 20  # an image-set file: an id a line


class _NoDTD(ET.TreeBuilder):
    """Refuses a document type declaration, so no entity is ever declared
    or expanded (what defusedxml's forbid_dtd does; VOC files have none)."""

    def doctype(self, name: str, pubid: str, system: str) -> None:
        raise ValueError("it declares a DTD, which annotation files never need")


def _parse(path: str) -> ET.Element:
    parser = ET.XMLParser(target=_NoDTD())
    try:
        parser.feed(read_text(path, MAX_XML, "annotation file"))
        root: ET.Element = parser.close()
    except (ET.ParseError, ValueError) as exc:
        raise DatasetError(f"{path}: not a VOC annotation ({exc})") from None
    return root


def _number(node: ET.Element | None, tag: str, where: str) -> float:
    text = node.findtext(tag) if node is not None else None
    try:
        return float(text) if text is not None else float("nan")
    except ValueError:
        raise DatasetError(f"{where}: <{tag}> is {text!r}, not a number") from None


def _ids(root: str, options: BoxOptions) -> list[str]:
    folder = os.path.join(root, "Annotations")
    if not os.path.isdir(folder):
        raise DatasetError(
            f"{root}: no Annotations folder; --boxes voc reads a VOC20xx folder "
            "(Annotations/, JPEGImages/, ImageSets/Main/)"
        )
    if options.image_set is None:
        return sorted(n[:-4] for n in os.listdir(folder) if n.endswith(".xml"))
    name = relative_name(options.image_set, "--image-set")
    path = os.path.join(root, "ImageSets", "Main", f"{name}.txt")
    lines = read_text(path, MAX_SET, "image-set file").splitlines()
    ids = []
    for n, line in enumerate(lines, 1):
        words = line.split()
        if words:  # (a class's set file adds a 1/-1 column: the id is first)
            ids.append(relative_name(words[0], f"{path}:{n}"))
    return ids


def read_voc(root: str, options: BoxOptions) -> Scan:
    """The VOC set under ``root`` (see the module's docstring)."""
    images: list[tuple[str, tuple[float, float], list[tuple[Any, ...]]]] = []
    names: list[str] = []
    for image_id in _ids(root, options):
        path = os.path.join(root, "Annotations", f"{image_id}.xml")
        tree = _parse(path)
        dims = tree.find("size")
        width, height = _number(dims, "width", path), _number(dims, "height", path)
        if not (width >= 1 and height >= 1):
            raise DatasetError(f"{path}: <size> gives no width and height")
        objects = []
        for k, obj in enumerate(tree.iter("object")):
            where = f"{path}: object {k} ({obj.findtext('name', '?').strip()!r})"
            name = (obj.findtext("name") or "").strip()
            if not name:
                raise DatasetError(f"{where}: it has no <name>")
            bndbox = obj.find("bndbox")
            x0, y0, x1, y1 = (
                _number(bndbox, t, where) - 1 for t in ("xmin", "ymin", "xmax", "ymax")
            )
            difficult = _number(obj, "difficult", where) if obj.find("difficult") is not None else 0
            normal = check_box(where, (x0, y0, x1, y1), (width, height))
            objects.append((name, *normal, float(difficult == 1)))
            names.append(name)
        if objects or options.keep_empty:
            images.append((f"JPEGImages/{image_id}.jpg", (width, height), objects))
    labels = class_labels(names, options.classes, root)
    entries = BoxEntries()
    skipped: list[str] = []
    for rel, size, objects in images:
        if cannot_carry(rel):
            skipped.append(rel)
            continue
        rows = []
        for name, *box in objects:
            if name not in labels:
                raise DatasetError(f"{root}: class {name!r} ({rel}) is not in the classes given")
            rows.append((labels[name], *box))
        entries.add_image(rel, image_label(rows, size))
    if not entries:
        raise DatasetError(f"{root}: no annotated images (Annotations/*.xml)")
    skips = {"name cannot be stored in a .lst line": skipped} if skipped else {}
    return Scan(root, entries, list(labels), skips)

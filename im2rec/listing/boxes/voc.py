"""Pascal VOC: ``Annotations/<id>.xml`` and ``JPEGImages/<id>.jpg`` under a
``VOC20xx`` folder, the ids from ``ImageSets/Main/<set>.txt`` (or every
annotation, sorted; an id twice is refused). Boxes are 1-based pixels in
the XML; as GluonCV reads them, 1 is subtracted from each of the four
corners before they are divided by the image's size. A box that is then
empty or leaves the image, a ``<difficult>`` other than 0 or 1 and a class
not among the classes given are refused.

With the ``gluoncv`` convention, as GluonCV's ``VOCDetection`` reads them:
class names are lower-cased, an object whose class is not among the
classes given or whose box is empty or leaves the image is left out (and
reported), and a ``<difficult>`` that is not a whole number is 0."""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from collections import defaultdict

from ...errors import DatasetError, MissingFileError
from ...storage.confined import relative_name
from ...storage.files import split_lines
from ..classmap import check_class_name
from ..entries import BOX_HEADER, BOX_OBJECT
from ..lstfile import cannot_carry
from ..walking import Scan
from .common import (
    NO_OBJECT,
    NOT_THERE,
    BoxEntries,
    BoxOptions,
    check_box,
    check_size,
    check_there,
    class_labels,
    image_label,
    read_text,
)

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
    """The finite number in ``node``'s ``<tag>``; DatasetError naming it
    when it is missing or not one (``nan`` and ``inf`` are not)."""
    text = node.findtext(tag) if node is not None else None
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise DatasetError(f"{where}: <{tag}> is {text!r:.40}, not a number")
    return value


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
    folder = os.path.join(root, "ImageSets", "Main")
    path = os.path.join(folder, f"{name}.txt")
    if not os.path.exists(path):
        names = os.listdir(folder) if os.path.isdir(folder) else []
        sets = sorted(n[:-4] for n in names if n.endswith(".txt") and "_" not in n)
        there = f"the sets there: {', '.join(sets[:12])}" if sets else "it holds no image set"
        raise MissingFileError(f"{path}: no image set {name!r}; {there}")
    lines = split_lines(read_text(path, MAX_SET, "image-set file"))
    ids: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        words = line.split()
        if words:  # (a class's set file adds a 1/-1 column: the id is first)
            image_id = relative_name(words[0], f"{path}:{n}")
            if image_id in ids:
                raise DatasetError(
                    f"{path}:{n}: {image_id!r} is already line {ids[image_id]}; list each "
                    "image once"
                )
            ids[image_id] = n
    return list(ids)


#: (--convention gluoncv) the skip reasons of what GluonCV's reader leaves out
INVALID = "box empty or outside its image (left out, as GluonCV does)"
NOT_GIVEN = "object of a class not among the classes given (left out, as GluonCV does)"


def _difficult(obj: ET.Element, where: str, gluoncv: bool) -> float:
    """An object's ``<difficult>`` flag: 0 or 1 (0 when missing); as
    GluonCV reads it, ``int()`` of its text, 0 when that fails."""
    if gluoncv:
        try:
            return float(int(obj.findtext("difficult") or ""))
        except ValueError:
            return 0.0
    difficult = _number(obj, "difficult", where) if obj.find("difficult") is not None else 0
    if difficult not in (0, 1):
        raise DatasetError(f"{where}: <difficult> is {difficult:g}, not 0 or 1")
    return float(difficult)


def read_voc(root: str, options: BoxOptions) -> Scan:
    """The VOC set under ``root`` (see the module's docstring). Each image's
    objects go into the entries as they are read, their classes numbered
    in the order first seen, and renumbered once every name is known:
    memory is the entries' arrays, not a Python object a box."""
    first_seen: dict[str, int] = {}
    gluoncv = options.convention == "gluoncv"
    given = None if options.classes is None else set(options.classes)
    skips: dict[str, list[str]] = defaultdict(list)
    uncarried: list[str] = []
    empty = 0
    entries = BoxEntries()
    for image_id in _ids(root, options):
        path = os.path.join(root, "Annotations", f"{image_id}.xml")
        tree = _parse(path)
        dims = tree.find("size")
        at = f"{path}: <size>"
        width, height = check_size(path, _number(dims, "width", at), _number(dims, "height", at))
        rows = []
        for k, obj in enumerate(tree.iter("object")):
            where = f"{path}: object {k} ({obj.findtext('name', '?').strip()!r})"
            name = (obj.findtext("name") or "").strip()
            if not name:
                raise DatasetError(f"{where}: it has no <name>")
            name = name.lower() if gluoncv else name
            check_class_name(name, where)
            difficult = _difficult(obj, where, gluoncv)
            bndbox = obj.find("bndbox")
            x0, y0, x1, y1 = (
                _number(bndbox, t, where) - 1 for t in ("xmin", "ymin", "xmax", "ymax")
            )
            if gluoncv and given is not None and name not in given:
                skips[NOT_GIVEN].append(f"{image_id} (object {k}, {name!r})")
                continue
            if gluoncv and not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
                skips[INVALID].append(f"{image_id} (object {k})")
                continue
            normal = check_box(where, (x0, y0, x1, y1), (width, height))
            rows.append((first_seen.setdefault(name, len(first_seen)), *normal, difficult))
        if not rows and not options.keep_empty:
            empty += 1
            continue
        rel = f"JPEGImages/{image_id}.jpg"
        if cannot_carry(rel):
            uncarried.append(rel)
            continue
        entries.add_image(rel, image_label(rows, (width, height)))
    if uncarried:
        skips["name cannot be stored in a .lst line"] = uncarried
    labels = class_labels(list(first_seen), options.classes, root)
    _renumber(root, entries, first_seen, labels)
    if not entries:
        raise DatasetError(f"{root}: no annotated images (Annotations/*.xml)")
    entries, gone = check_there(root, entries, "Annotations/")
    if gone:
        skips[NOT_THERE] = gone
    return Scan(root, entries, list(labels), dict(skips), {NO_OBJECT: empty} if empty else {})


def _renumber(
    root: str, entries: BoxEntries, first_seen: dict[str, int], labels: dict[str, int]
) -> None:
    """The classes numbered as first seen, numbered as ``labels`` says; a
    class not among the classes given is refused, naming its first image."""
    order = list(first_seen)
    unknown = [name for name in order if name not in labels]
    if unknown:
        bad = {first_seen[name] for name in unknown}
        for k in range(len(entries)):
            classes = entries.values(k)[BOX_HEADER::BOX_OBJECT]
            name = next((order[int(c)] for c in classes if int(c) in bad), None)
            if name is not None:
                raise DatasetError(
                    f"{root}: class {name!r} ({entries.paths_at([k])[0]}) is not in the classes "
                    "given"
                )
    entries.renumber([labels[name] for name in order])

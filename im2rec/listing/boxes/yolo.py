"""YOLO: ``images/**`` beside ``labels/**``, one ``<name>.txt`` an image
(none: no object) holding ``cls cx cy w h`` lines normalised to [0, 1].
Class names come from the classes given, else ``classes.txt`` in the root
(a name a line), else the numbers themselves. The image's size, for the
label's header, is read from its file header."""

from __future__ import annotations

import math
import os

from PIL import Image

from ...errors import DatasetError, Im2RecError
from ...storage.files import open_regular, split_lines
from ..lstfile import cannot_carry
from ..walking import DEFAULT_EXTS, Scan
from .common import (
    MAX_CLASSES,
    MAX_OBJECTS,
    NO_OBJECT,
    BoxEntries,
    BoxOptions,
    check_box,
    class_order,
    image_label,
    read_names,
    read_text,
)

__all__ = ["read_yolo"]

MAX_LABELS = 1 << 20  # a label file: MAX_OBJECTS lines and then some


def _images(folder: str) -> list[str]:
    """Image paths relative to ``folder``, sorted, subfolders included."""
    found = []
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        rel = os.path.relpath(top, folder)
        for name in sorted(files):
            if os.path.splitext(name)[1].lower() in DEFAULT_EXTS + (".bmp", ".webp"):
                found.append(name if rel == "." else f"{rel}/{name}")
    return found


def _snap(v: float) -> float:
    """``v``, or the edge of [0, 1] it misses by rounding (under 1e-6)."""
    edge = min(1.0, max(0.0, v))
    return edge if abs(v - edge) < 1e-6 else v


def _class(word: str, classes: int, where: str) -> int:
    """A label line's class: a whole number below ``classes`` (``3``, or
    ``3.0`` as some tools write it)."""
    try:
        value = float(word)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value.is_integer() and 0 <= value < classes):
        named = "named" if classes < MAX_CLASSES else "a set may number"
        raise DatasetError(
            f"{where}: the class {word!r:.40} is not a class number (a whole number from 0 to "
            f"{classes - 1:,}, the classes {named})"
        )
    return int(value)


def _numbers(words: list[str]) -> list[float] | None:
    """``words`` as finite numbers, or None."""
    try:
        values = [float(word) for word in words]
    except ValueError:
        return None
    return values if all(map(math.isfinite, values)) else None


def _objects(path: str, classes: int) -> list[tuple[float, ...]]:
    """The objects of the label file ``path`` (none when there is no such
    file); a class must be below ``classes``."""
    if not os.path.exists(path):
        return []  # (YOLO's way of saying: a background image)
    rows: list[tuple[float, ...]] = []
    for n, line in enumerate(split_lines(read_text(path, MAX_LABELS, "label file")), 1):
        words = line.split()
        if not words:
            continue
        numbers = _numbers(words[1:]) if len(words) == 5 else None
        if numbers is None:
            raise DatasetError(
                f"{path}:{n}: expected `class cx cy w h` (five numbers), got {line.strip()!r:.60}"
            )
        cx, cy, w, h = numbers
        cls = _class(words[0], classes, f"{path}:{n}")
        x0, y0, x1, y1 = (_snap(v) for v in (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
        rows.append((cls, *check_box(f"{path}:{n}", (x0, y0, x1, y1), (1.0, 1.0)), 0.0))
        if len(rows) > MAX_OBJECTS:
            raise DatasetError(f"{path}: more than {MAX_OBJECTS:,} objects")
    return rows


def _size(path: str) -> tuple[float, float]:
    """An image's (width, height), from its file's header (a regular file:
    a FIFO named like an image would never end)."""
    try:
        fd, _ = open_regular(path)
        with os.fdopen(fd, "rb") as f, Image.open(f) as image:
            return float(image.width), float(image.height)
    except (OSError, Im2RecError, Image.DecompressionBombError) as exc:
        raise DatasetError(f"{path}: cannot read the image's size ({exc})") from None


def read_yolo(root: str, options: BoxOptions) -> Scan:
    """The YOLO set under ``root`` (see the module's docstring)."""
    images_dir, labels_dir = os.path.join(root, "images"), os.path.join(root, "labels")
    if not os.path.isdir(images_dir):
        raise DatasetError(f"{root}: no images folder; --boxes yolo reads images/ beside labels/")
    classes = options.classes
    if classes is not None:
        class_order(classes, "--classes")
    elif os.path.exists(os.path.join(root, "classes.txt")):
        classes = read_names(os.path.join(root, "classes.txt"), "classes file")
    entries = BoxEntries()
    skipped: list[str] = []
    most = -1
    stems: dict[str, str] = {}
    empty = 0
    for rel in _images(images_dir):
        stem = os.path.splitext(rel)[0]
        if stem in stems:  # (a.jpg and a.png: one labels/a.txt would label both)
            raise DatasetError(
                f"{root}: images/{stems[stem]} and images/{rel} share labels/{stem}.txt; "
                "rename one (YOLO finds an image's labels by its name without extension)"
            )
        stems[stem] = rel
        label_file = os.path.join(labels_dir, f"{stem}.txt")
        rows = _objects(label_file, MAX_CLASSES if classes is None else len(classes))
        if not rows and not options.keep_empty:
            empty += 1
            continue
        path = f"images/{rel}"
        if cannot_carry(path):
            skipped.append(path)
            continue
        size = _size(os.path.join(root, path))
        most = max([most, *(int(r[0]) for r in rows)])
        entries.add_image(path, image_label(rows, size))
    if not entries:
        raise DatasetError(f"{root}: no labelled images (images/ with labels/*.txt)")
    if classes is None:  # (the numbers themselves: most is below MAX_CLASSES)
        classes = [str(i) for i in range(most + 1)]
    skips = {"name cannot be stored in a .lst line": skipped} if skipped else {}
    return Scan(root, entries, classes, skips, {NO_OBJECT: empty} if empty else {})

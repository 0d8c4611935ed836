"""YOLO: ``images/**`` beside ``labels/**``, one ``<name>.txt`` an image
(none: no object) holding ``cls cx cy w h`` lines normalised to [0, 1].
Class names come from the classes given, else ``classes.txt`` in the root
(a name a line), else the numbers themselves. The image's size, for the
label's header, is read from its file header."""

from __future__ import annotations

import os

from PIL import Image

from ...errors import DatasetError
from ..lstfile import cannot_carry
from ..walking import DEFAULT_EXTS, Scan
from .common import MAX_OBJECTS, BoxEntries, BoxOptions, check_box, image_label, read_text

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


def _objects(path: str) -> list[tuple[float, ...]]:
    if not os.path.exists(path):
        return []  # (YOLO's way of saying: a background image)
    rows: list[tuple[float, ...]] = []
    for n, line in enumerate(read_text(path, MAX_LABELS, "label file").splitlines(), 1):
        words = line.split()
        if not words:
            continue
        try:
            cls, cx, cy, w, h = (float(v) for v in words)
        except ValueError:
            raise DatasetError(
                f"{path}:{n}: expected `class cx cy w h` (five numbers), got {line.strip()!r:.60}"
            ) from None
        if cls != int(cls) or cls < 0:
            raise DatasetError(f"{path}:{n}: the class {words[0]!r} is not a class number")
        x0, y0, x1, y1 = (_snap(v) for v in (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
        rows.append((cls, *check_box(f"{path}:{n}", (x0, y0, x1, y1), (1.0, 1.0)), 0.0))
        if len(rows) > MAX_OBJECTS:
            raise DatasetError(f"{path}: more than {MAX_OBJECTS:,} objects")
    return rows


def read_yolo(root: str, options: BoxOptions) -> Scan:
    """The YOLO set under ``root`` (see the module's docstring)."""
    images_dir, labels_dir = os.path.join(root, "images"), os.path.join(root, "labels")
    if not os.path.isdir(images_dir):
        raise DatasetError(f"{root}: no images folder; --boxes yolo reads images/ beside labels/")
    entries = BoxEntries()
    skipped: list[str] = []
    most = -1
    for rel in _images(images_dir):
        stem = os.path.splitext(rel)[0]
        rows = _objects(os.path.join(labels_dir, f"{stem}.txt"))
        if not rows and not options.keep_empty:
            continue
        path = f"images/{rel}"
        if cannot_carry(path):
            skipped.append(path)
            continue
        try:
            with Image.open(os.path.join(root, path)) as image:
                size = (float(image.width), float(image.height))
        except (OSError, Image.DecompressionBombError) as exc:
            raise DatasetError(f"{root}/{path}: cannot read the image's size ({exc})") from None
        most = max([most, *(int(r[0]) for r in rows)])
        entries.add_image(path, image_label(rows, size))
    if not entries:
        raise DatasetError(f"{root}: no labelled images (images/ with labels/*.txt)")
    classes = options.classes
    if classes is None and os.path.exists(os.path.join(root, "classes.txt")):
        text = read_text(os.path.join(root, "classes.txt"), MAX_LABELS, "classes file")
        classes = [line.strip() for line in text.splitlines() if line.strip()]
    if classes is None:
        classes = [str(i) for i in range(most + 1)]
    if most >= len(classes):
        raise DatasetError(
            f"{root}: class {most} is used but only {len(classes)} classes are named"
        )
    skips = {"name cannot be stored in a .lst line": skipped} if skipped else {}
    return Scan(root, entries, classes, skips)

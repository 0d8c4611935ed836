"""Pre-split folders and class orders given: one class map for every split.

The most common layout of an image dataset (torchvision's ``ImageFolder``,
Kaggle, most tutorials) is ``ROOT/train/<class>/…`` beside
``ROOT/val/<class>/…``. Listed one split at a time, each split numbers the
classes it holds, so a class missing from one split shifts the labels of
the classes after it: ``square`` is 2 in train and 1 in val, silently.

``rec list ROOT --recursive`` sees such a root (its folders all split
names, no image at its top: :func:`split_folders`) and lists each split
into its own list with one class map for all (:func:`scan_splits`): the
classes of every split, in the order im2rec.py would label them in one
tree (a folder's pre-order position). ``--classes FILE`` gives a class
order for a folder tree too (a class map, or a name a line), so a split
listed on its own can take its sibling's map.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Sequence

from ..errors import ConfigError, DatasetError
from ..storage import is_url
from .entries import Entries
from .walking import ListOptions, Progress, Scan, scan_folder

__all__ = ["SPLIT_NAMES", "order_classes", "relabel", "scan_splits", "split_folders"]

#: the folder names taken for splits (case aside), and the list each becomes
SPLIT_NAMES = {
    "train": "train", "training": "train",
    "val": "val", "valid": "val", "validation": "val", "dev": "val",
    "test": "test", "testing": "test",
}  # fmt: skip


def split_folders(root: str, options: ListOptions) -> list[tuple[str, str]] | None:
    """``[(folder, split)]`` when ``root`` is a pre-split tree: a local
    folder whose subfolders (hidden ones aside) all have split names and
    which holds no image at its top; None otherwise. Two folders of one
    split (``val`` and ``validation``) are refused."""
    if is_url(root) or not os.path.isdir(root):
        return None
    folders, images = [], False
    with os.scandir(root) as found:
        for entry in found:
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                folders.append(entry.name)
            elif os.path.splitext(entry.name)[1].lower() in options.exts:
                images = True
    if images or not folders or any(f.lower() not in SPLIT_NAMES for f in folders):
        return None
    splits = [(folder, SPLIT_NAMES[folder.lower()]) for folder in sorted(folders)]
    seen: dict[str, str] = {}
    for folder, split in splits:
        if split in seen:
            raise ConfigError(
                f"{root}: {seen[split]}/ and {folder}/ are both {split} splits; rename one, or "
                "pass --no-splits to list the folder as one tree"
            )
        seen[split] = folder
    return splits


def _tree_key(name: str) -> tuple[str, ...]:
    """Where im2rec.py's walk reaches a class folder: pre-order, sorted."""
    return () if name == "." else tuple(name.split(os.sep))


def order_classes(found: Sequence[str], given: Sequence[str] | None, root: str) -> list[str]:
    """The class order: ``given`` (every class found must be in it), else
    the classes ``found`` in the order one walk of the tree labels them."""
    if given is None:
        return sorted(set(found), key=_tree_key)
    missing = sorted(set(found) - set(given), key=_tree_key)
    if missing:
        raise DatasetError(
            f"{root}: the class folders {missing[:5]} are not among the classes given "
            f"({len(given):,} in --classes); add them there, or list without --classes"
        )
    return list(given)


def scan_splits(
    root: str, options: ListOptions, splits: list[tuple[str, str]], on_progress: Progress | None
) -> tuple[Scan, list[tuple[str, array[int]]]]:
    """Each split folder walked as its own tree, then put together: one
    scan of every image (paths relative to ``root``, labels from one class
    order) and each split's positions in it, in walk order."""
    scans = [scan_folder(os.path.join(root, folder), options, on_progress) for folder, _ in splits]
    classes = order_classes([c for s in scans for c in s.classes], options.classes, root)
    label = {name: k for k, name in enumerate(classes)}
    entries = Entries()
    parts: list[tuple[str, array[int]]] = []
    skipped: dict[str, list[str]] = {}
    passed: dict[str, int] = {}
    for (folder, split), scan in zip(splits, scans, strict=True):
        for what, n in scan.passed.items():
            passed[what] = passed.get(what, 0) + n
        positions = array("q")
        for entry in scan.entries:
            positions.append(len(entries))
            entries.add(label[scan.classes[entry.label]], f"{folder}{os.sep}{entry.path}")
        parts.append((split, positions))
        for reason, paths in scan.skipped.items():
            skipped.setdefault(reason, []).extend(f"{folder}{os.sep}{p}" for p in paths)
    return Scan(root, entries, classes, skipped, passed), parts


def relabel(scan: Scan, given: Sequence[str]) -> Scan:
    """``scan`` with its classes in the order ``given`` (every class found
    must be in it)."""
    classes = order_classes(scan.classes, given, scan.root)
    label = {name: k for k, name in enumerate(classes)}
    entries = Entries()
    for entry in scan.entries:
        entries.add(label[scan.classes[entry.label]], entry.path)
    return Scan(scan.root, entries, classes, scan.skipped, scan.passed)

"""Class maps: ``PREFIX.classes.tsv``, ``label<TAB>name`` a line, the one
file that says which class each label is (docs/format.md, "im2rec's own
files"). Written by :func:`class_map_text` alone, read by
:func:`read_class_map`; :func:`check_class_name` is the rule for a name a
map can carry; :func:`class_map_beside` finds a ``.rec``'s map."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from ..errors import DatasetError, Im2RecError, MissingFileError
from ..storage.confined import relative_name, shown
from ..storage.files import open_regular, split_lines

__all__ = [
    "MAX_CLASS_MAP",
    "ROOT_CLASS",
    "carried",
    "check_class_name",
    "check_class_names",
    "class_map_beside",
    "class_map_text",
    "classes_named",
    "disagreeing_map",
    "read_class_map",
    "read_class_order",
]


#: the class of the images at the top of a folder listed with --recursive
ROOT_CLASS = "."


def check_class_name(name: str, where: str) -> str:
    """``name``, when a class map can carry it: it reads back as the same
    class (:func:`read_class_map` takes each name as a relative path, the
    folder ``rec unpack`` makes for it); DatasetError naming ``where`` (the
    file and the category) otherwise. Class names come from annotation files
    and classes files, which careless tools write with TABs, newlines, ``..``
    or ``/`` doubled. ``.`` is a class: the images at the top of a folder
    listed with ``--recursive`` (as im2rec.py labels them)."""
    if name == ROOT_CLASS:
        return name
    back = relative_name(name, where)
    if back != name:
        raise DatasetError(
            f"{where}: the class name {shown(name)} would read back from the class map as "
            f"{shown(back)}; rename the class"
        )
    return name


def carried(name: str) -> bool:
    """Whether a class map carries ``name`` (:func:`check_class_name`)."""
    try:
        check_class_name(name, "")
    except DatasetError:
        return False
    return True


def check_class_names(names: Iterable[tuple[str, str]]) -> None:
    """Every ``(name, where)`` a class map can carry (:func:`check_class_name`),
    and no name twice: two classes of one name would be one class to every
    reader of the map (DatasetError naming both places)."""
    seen: dict[str, str] = {}
    for name, where in names:
        check_class_name(name, where)
        if name in seen:
            raise DatasetError(
                f"{where}: the class name {shown(name)} is already the name of {seen[name]}; "
                "two classes of one name cannot be told apart: rename one"
            )
        seen[name] = where


def class_map_text(classes: list[str]) -> str:
    """The class map: one ``label<TAB>folder`` line per class, in label
    order. Every name must be one a class map carries
    (:func:`check_class_names`: a reader of the names checked them, naming
    where they came from); ValueError otherwise."""
    for label, name in enumerate(classes):
        try:
            check_class_name(name, f"class {label}")
        except DatasetError as exc:
            raise ValueError(str(exc)) from None
    return "".join(f"{label}\t{folder}\n" for label, folder in enumerate(classes))


def classes_named(mapped: int) -> int:
    """How many labels (0 to this, exclusive) a class map of ``mapped``
    classes may number: its readers list the names by label, so the gaps
    are bounded (at most as many again, and 1,024)."""
    return 2 * mapped + 1024


#: the largest class map read (WebFace42M's 2M identities take 40 MB)
MAX_CLASS_MAP = 256 << 20


def read_class_map(path: str | os.PathLike[str]) -> dict[int, str]:
    """``rec list``'s ``PREFIX.classes.tsv``: ``label<TAB>folder`` lines.
    Each folder must be a relative path (:func:`~im2rec.storage.confined.relative_name`):
    a map is often someone else's file, and its names become folders (``.``,
    the class of the images at the top of a recursive listing, is the top
    folder). Its
    labels number its classes from 0, with gaps of at most as many again
    (a label past ``2 * lines + 1024`` is refused): readers make a list of
    the class names by label, so a map's one line must not make it a
    billion long. At most :data:`MAX_CLASS_MAP` bytes."""
    classes: dict[int, str] = {}
    try:
        fd, size = open_regular(path)
    except FileNotFoundError:
        raise MissingFileError(f"{path}: class map not found") from None
    with os.fdopen(fd, "rb") as f:
        if size > MAX_CLASS_MAP:
            raise DatasetError(f"{path}: {size:,} bytes, more than a class map holds")
        data = f.read(MAX_CLASS_MAP + 1)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start:,})") from None
    top = (-1, 0)  # the largest label and its line
    for lineno, line in enumerate(split_lines(text), 1):
        if not line.strip():
            continue
        label, sep, folder = line.partition("\t")
        label = label.strip()
        if not sep or not (label.isascii() and label.isdigit()):
            raise DatasetError(f"{path}:{lineno}: expected `label<TAB>folder`, got {line!r}")
        if int(label) in classes:
            raise DatasetError(f"{path}:{lineno}: label {label} is already mapped")
        if folder != ROOT_CLASS:
            folder = relative_name(folder, f"{path}:{lineno}")
        classes[int(label)] = folder
        top = max(top, (int(label), lineno))
    if top[0] >= classes_named(len(classes)):
        raise DatasetError(
            f"{path}:{top[1]}: label {top[0]:,} in a map of {len(classes):,} classes; a class "
            "map numbers its classes from 0 (rec list writes 0..K-1)"
        )
    return classes


def read_class_order(path: str | os.PathLike[str]) -> list[str]:
    """The class order in ``path`` (``rec list --classes``): a class map
    (``label<TAB>name`` lines, as ``rec list`` writes it: its labels 0 to
    K-1, each once), or a name a line; each name one a class map carries,
    none twice."""
    try:
        fd, size = open_regular(path)
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such classes file") from None
    with os.fdopen(fd, "rb") as f:
        if size > MAX_CLASS_MAP:
            raise DatasetError(f"{path}: {size:,} bytes, more than a classes file holds")
        data = f.read(MAX_CLASS_MAP + 1)
    try:
        lines = [line for line in split_lines(data.decode("utf-8-sig")) if line.strip()]
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start:,})") from None
    if lines and all("\t" in line for line in lines):
        mapped = read_class_map(path)
        if sorted(mapped) != list(range(len(mapped))):
            raise DatasetError(
                f"{path}: its labels are not 0 to {len(mapped) - 1}, each once; a class order "
                "numbers every class"
            )
        names = [mapped[k] for k in range(len(mapped))]
    else:
        names = [line.strip() for line in lines]
    check_class_names((name, f"{path}: class {k}") for k, name in enumerate(names))
    return names


#: What rec list and rec pack add to a prefix: ``_3`` (a chunk), ``_train``
#: (a split), ``-00001-of-00004`` (a shard).
_LIST_SUFFIX = re.compile(r"(-\d{5}-of-\d{5})$|(_(train|val|test))$|(_\d+)$")


def class_map_beside(rec: str | os.PathLike[str]) -> Path | None:
    """The class map ``rec list`` wrote for the list ``rec`` was packed
    from: ``PREFIX.classes.tsv`` beside it, where ``rec`` is
    ``PREFIX[_CHUNK][_SPLIT][-SHARD].rec``; None if there is none."""
    path = Path(rec)
    stem = path.stem
    while True:
        candidate = path.with_name(f"{stem}.classes.tsv")
        if candidate.is_file():
            return candidate
        shorter = _LIST_SUFFIX.sub("", stem)
        if shorter in (stem, ""):
            return None
        stem = shorter


def _list_root(class_map: Path) -> Path | None:
    """The image root of the listing that wrote ``class_map`` (its run
    record, ``PREFIX.lists.json`` beside it), or None."""
    from ..storage.files import read_json
    from .records import load_lists_record

    record = class_map.with_name(class_map.name.removesuffix(".classes.tsv") + ".lists.json")
    try:
        root = load_lists_record(read_json(record), str(record))["root"]
    except (OSError, ValueError, Im2RecError):
        return None
    return Path(root) if isinstance(root, str) and root.startswith("/") else None


def disagreeing_map(class_map: str | os.PathLike[str]) -> str | None:
    """Why ``class_map`` cannot be trusted to label its list the way its
    siblings do, or None. A sibling is another class map in the same folder
    whose listing's root is the same folder as this one's or beside it (a
    ``train/`` listed after a ``val/``), and one of the two names a subset
    of the other's classes; they disagree when a class has a label in each.
    That is how a split listed on its own loses its labels: ``square`` is 2
    in train and 1 in val, when val has no ``circle``."""
    path = Path(class_map)
    root = _list_root(path)
    if root is None:
        return None
    try:
        mine = {name: label for label, name in read_class_map(path).items()}
    except Im2RecError:
        return None
    for other in sorted(path.parent.glob("*.classes.tsv")):
        if other.name == path.name:
            continue
        theirs_root = _list_root(other)
        if theirs_root is None or not (theirs_root == root or theirs_root.parent == root.parent):
            continue
        try:
            theirs = {name: label for label, name in read_class_map(other).items()}
        except Im2RecError:
            continue
        if not (mine.keys() <= theirs.keys() or theirs.keys() <= mine.keys()):
            continue
        for name in sorted(mine.keys() & theirs.keys()):
            if mine[name] != theirs[name]:
                fewer, more = (root, other) if mine.keys() <= theirs.keys() else (theirs_root, path)
                return (
                    f"{path} labels {name!r} {mine[name]}, and {other} (the list of {theirs_root}) "
                    f"labels it {theirs[name]}: the splits of one dataset need one class map; "
                    f"list them together (`rec list {root.parent} --recursive` when its folders "
                    f"are the splits), or list {fewer} again with `--classes {more}`"
                )
    return None

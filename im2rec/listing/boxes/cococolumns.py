"""A COCO file's columns (:mod:`.jsoncolumns`) and its images, checked:
each image's id a whole number and none twice, its ``file_name`` a plain
relative path and none twice, its size in pixels (:func:`.common.check_size`).
A bad image is reported for the first one, its value read back from the
file (:func:`.jsoncolumns.item_at`) to name it."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ...errors import DatasetError
from ...storage.confined import all_plain, is_plain, relative_name
from ..lstfile import cannot_carry
from .common import MAX_SIDE, check_size
from .jsoncolumns import Columns, Spec, item_at
from .jsonkinds import BIGINT, INT, STRING

__all__ = ["ImagesRead", "field_error", "read_images", "spec", "value_of"]


def spec(gluoncv: bool) -> Spec:
    """The sections and fields read (GluonCV's convention reads two more)."""
    extra = [("area", "f"), ("ignore", "b")] if gluoncv else []
    return [
        ("categories", [("id", "i"), ("name", "s")]),
        ("images", [("id", "i"), ("file_name", "s"), ("width", "i"), ("height", "i")]),
        ("annotations",
         [("image_id", "i"), ("category_id", "i"), ("bbox", "q"), ("iscrowd", "b"), *extra]),
    ]  # fmt: skip


def value_of(path: str, section: str, k: int, key: str) -> Any:
    """Field ``key`` of item ``k`` of ``section``, read back from the file."""
    item = item_at(path, section, k)
    return item.get(key) if isinstance(item, dict) else None


def field_error(where: str, key: str, kind: type) -> DatasetError:
    return DatasetError(f"{where}: {key!r} is missing or not a {kind.__name__}")


class ImagesRead(NamedTuple):
    """The images, in file order: id, size, name (relative to the root)
    and whether a ``.lst`` line can carry it; ``order``: the file indices
    in the order they are listed (the file's, or by id)."""

    ids: np.ndarray
    widths: np.ndarray
    heights: np.ndarray
    names: list[str]
    cannot_carry: np.ndarray
    order: np.ndarray


def read_images(columns: Columns, path: str, by_id: bool) -> ImagesRead:
    """Every image, each checked: an id or a file twice is refused."""
    images = columns.sections["images"]
    id_kinds, ids = images["id"].kinds(), images["id"].values()
    width_kinds, widths = images["width"].kinds(), images["width"].values()
    height_kinds, heights = images["height"].kinds(), images["height"].values()
    name_kinds = images["file_name"].kinds()
    names = images["file_name"].texts()
    n = len(ids)
    # the first image each rule refuses (n: none), in the order they are checked
    order = np.argsort(ids, kind="stable")
    twice = np.zeros(n, bool)
    same = ids[order][1:] == ids[order][:-1]
    good_id = id_kinds == INT
    twice[order[1:][same & good_id[order][1:] & good_id[order][:-1]]] = True
    sized = [np.isin(kinds, (INT, BIGINT)) for kinds in (width_kinds, height_kinds)]
    in_range = (
        (width_kinds == INT) & (height_kinds == INT)
        & (widths >= 1) & (widths <= MAX_SIDE) & (heights >= 1) & (heights <= MAX_SIDE)
    )  # fmt: skip
    bad = ~good_id | twice | (name_kinds != STRING) | ~sized[0] | ~sized[1] | ~in_range
    first_bad = int(np.argmax(bad)) if bad.any() else n
    if first_bad == n and all_plain(names) and len(set(names)) == n:  # type: ignore[arg-type]
        # (what nearly every file is: the names need no more checking)
        return ImagesRead(ids, widths.astype(np.float64), heights.astype(np.float64),
                          names, np.zeros(n, bool), order if by_id else np.arange(n))  # type: ignore[arg-type]  # fmt: skip
    files: dict[str, int] = {}
    out: list[str] = []
    carry = np.zeros(n, bool)
    for k, name in enumerate(names[: first_bad + 1]):
        if k == first_bad:
            _refuse(path, f"{path}: image {k}", k, ids, twice[k], id_kinds[k], name_kinds[k],
                    sized, in_range[k])  # fmt: skip
        assert name is not None
        if is_plain(name):  # (what nearly every name is: a .lst line carries it)
            rel = name
        else:
            rel = relative_name(name, f"{path}: image {k}")
            carry[k] = cannot_carry(rel)
        if files.setdefault(rel, k) != k:
            raise DatasetError(
                f"{path}: image {k}: {rel!r} is already image {files[rel]}; list each file "
                "once, with all its annotations"
            )
        out.append(rel)
    if first_bad < n:  # (the image's name was fine: the rule is one after it)
        _refuse(path, f"{path}: image {first_bad}", first_bad, ids, twice[first_bad],
                id_kinds[first_bad], name_kinds[first_bad], sized, in_range[first_bad],
                after_name=True)  # fmt: skip
    return ImagesRead(ids, widths.astype(np.float64), heights.astype(np.float64), out, carry,
                      order if by_id else np.arange(n))  # fmt: skip


def _refuse(
    path: str,
    where: str,
    k: int,
    ids: np.ndarray,
    twice: bool,
    id_kind: int,
    name_kind: int,
    sized: list[np.ndarray],
    in_range: bool,
    after_name: bool = False,
) -> None:
    """Raise what is wrong with image ``k`` (the rules before its name, or,
    ``after_name``, those after it)."""
    if not after_name:
        if id_kind != INT:
            raise field_error(where, "id", int)
        if twice:
            first = int(np.flatnonzero(ids == ids[k])[0])
            raise DatasetError(
                f"{where}: id {int(ids[k])} is already the id of image {first}; its "
                "annotations would go to one of them: an image id must name one image"
            )
        if name_kind != STRING:
            raise field_error(where, "file_name", str)
        return
    for key, ok in (("width", sized[0][k]), ("height", sized[1][k])):
        if not ok:
            raise field_error(where, key, int)
    if not in_range:
        item = item_at(path, "images", k)
        check_size(where, item["width"], item["height"])
    raise AssertionError(f"{where}: refused by the columns, not by the rules")

"""Which columns of a Parquet file ``rec import parquet`` reads, and each
row's label from them: the image and label columns found from the file's
``datasets`` features (or named), and a Hub-style ``objects`` column made
into detection labels (:mod:`.hubboxes`).

Found from the features (the ``huggingface`` metadata ``datasets`` writes
in every shard): the image column is the first ``Image``; the labels are
``mxnet_label`` where ``rec export --to parquet --keep-mxnet-label`` wrote
one, else the first ``ClassLabel`` (or list of them), else the first
``objects``-style column (a struct of lists, or a list of structs, with
``bbox`` and ``category``), else a column named ``label`` or ``labels``.
Without features: ``image``, or the first column of image structs or
binary, and the same names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DatasetError
from . import hubboxes
from .arrow_columns import list_lengths

__all__ = ["Columns", "find_columns", "read_objects"]

#: the most objects an image's row may hold (a detection label of 2**18 values)
MAX_OBJECTS = 1 << 16


@dataclass(frozen=True)
class Columns:
    """The columns read: ``image``, and ``label`` or ``objects`` (or
    ``mxnet_label``); ``rec`` where ``rec export --keep-header`` wrote
    one; the class names of the labels (None: unnamed)."""

    image: str
    label: str | None = None
    objects: str | None = None
    mxnet_label: str | None = None
    rec: str | None = None
    names: tuple[str, ...] | None = None

    @property
    def read(self) -> list[str]:
        found = [self.image, self.mxnet_label or self.label or self.objects, self.rec]
        return [name for name in found if name is not None]


def _features(schema: Any) -> dict[str, Any]:
    meta = schema.metadata or {}
    raw = meta.get(b"huggingface")
    if not raw or len(raw) > 64 << 20:
        return {}
    try:
        info = json.loads(raw)
        features = info.get("info", {}).get("features") or info.get("features") or {}
    except (ValueError, AttributeError):
        return {}
    return features if isinstance(features, dict) else {}


def _kind(feature: Any) -> str | None:
    return feature.get("_type") if isinstance(feature, dict) else None


def _class_names(feature: Any) -> tuple[str, ...] | None:
    """The names of a ClassLabel feature, or of a list of them."""
    while _kind(feature) in ("List", "Sequence", "LargeList"):
        feature = feature.get("feature")
    if _kind(feature) == "ClassLabel" and isinstance(feature.get("names"), list):
        return tuple(str(name) for name in feature["names"])
    return None


def _object_fields(feature: Any) -> dict[str, Any] | None:
    """The fields of an ``objects``-style feature (a struct of lists, or a
    list of structs), or None when it is not one."""
    if _kind(feature) in ("List", "Sequence", "LargeList"):
        feature = feature.get("feature")
    if (
        isinstance(feature, dict)
        and _kind(feature) is None
        and {"bbox", "category"} <= set(feature)
    ):
        return feature
    return None


def _is_image(pa: Any, kind: Any) -> bool:
    if pa.types.is_struct(kind):
        return bool(kind.get_field_index("bytes") >= 0)
    return bool(pa.types.is_binary(kind) or pa.types.is_large_binary(kind))


def _has_boxes(pa: Any, kind: Any) -> bool:
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        kind = kind.value_type
    return bool(pa.types.is_struct(kind)) and all(
        kind.get_field_index(name) >= 0 for name in ("bbox", "category")
    )


def _is_header(pa: Any, kind: Any) -> bool:
    """Whether a ``rec`` column is ``rec export --keep-header``'s: a struct
    with ``flag``, ``id`` and ``id2`` (another dataset's column of that name
    is only a column it has)."""
    return bool(pa.types.is_struct(kind)) and all(
        kind.get_field_index(name) >= 0 for name in ("flag", "id", "id2")
    )


def find_columns(
    pa: Any, schema: Any, name: str, *, image: str | None = None, label: str | None = None,
    objects: str | None = None,
) -> Columns:  # fmt: skip
    """The columns of the Parquet file ``name`` (its arrow ``schema``) to
    read, found from its features unless named (DatasetError naming the
    columns it has when they cannot be found)."""
    names = schema.names
    features = _features(schema)
    has = ", ".join(names)
    for given, option in ((image, "--image-column"), (label, "--label-column"),
                          (objects, "--objects-column")):  # fmt: skip
        if given is not None and given not in names:
            raise DatasetError(f"{name}: no column {given!r} ({option}); it has {has}")
    if image is None:
        typed = [n for n in names if _kind(features.get(n)) == "Image"]
        plain = [n for n in names if _is_image(pa, schema.field(n).type)]
        image = next(iter(typed), "image" if "image" in names else next(iter(plain), None))
    if image is None:
        raise DatasetError(f"{name}: no image column (it has {has}); name it with --image-column")
    rec = "rec" if "rec" in names and image != "rec" and _is_header(pa, schema.field("rec").type) \
        else None  # fmt: skip
    mxnet = "mxnet_label" if "mxnet_label" in names and label is None and objects is None \
        else None  # fmt: skip
    if label is None and objects is None:
        labelled = [n for n in names if _class_names(features.get(n)) is not None]
        boxed = [n for n in names if _object_fields(features.get(n)) is not None]
        boxed += [n for n in names if n not in boxed and _has_boxes(pa, schema.field(n).type)
                  and not features]  # fmt: skip
        if labelled:
            label = labelled[0]
        elif boxed:
            objects = boxed[0]
        else:
            label = next((n for n in ("label", "labels") if n in names), None)
    if label is None and objects is None and mxnet is None:
        raise DatasetError(
            f"{name}: no label column found (it has {has}); name it with --label-column, "
            "or a detection column with --objects-column"
        )
    if objects is not None and not _has_boxes(pa, schema.field(objects).type):
        raise DatasetError(
            f"{name}: column {objects!r} is not a detection column (a struct of lists, or a "
            "list of structs, with 'bbox' and 'category')"
        )
    if objects is not None:
        classes = _class_names((_object_fields(features.get(objects)) or {}).get("category"))
    else:
        classes = _class_names(features.get(label)) if label is not None else None
    if mxnet is not None:  # (the label as stored; the names from the column beside it)
        return Columns(image, None, None, mxnet, rec, classes)
    return Columns(image, label, objects, None, rec, classes)


def _flat_numbers(pa: Any, array: Any, what: str) -> np.ndarray:
    """The numbers of a numeric arrow array as float64 (DatasetError naming
    ``what`` for nulls or a type that holds no numbers)."""
    if not (pa.types.is_integer(array.type) or pa.types.is_floating(array.type)):
        raise DatasetError(f"{what} holds {array.type}, not numbers")
    if array.null_count:
        raise DatasetError(f"{what} has a missing value")
    data = np.frombuffer(array.buffers()[1], np.dtype(array.type.to_pandas_dtype()))
    return np.asarray(data[array.offset : array.offset + len(array)], np.float64)


def read_objects(pa: Any, column: Any, where: str) -> hubboxes.Objects:
    """The objects of a batch's ``objects``-style column (a struct of lists,
    or a list of structs; rows without objects may be null)."""

    if pa.types.is_struct(column.type):
        # (flatten(): each field with the struct's nulls, a null row no objects)
        fields = dict(zip([f.name for f in column.type], column.flatten(), strict=True))
        category_lists, bbox_lists = fields["category"], fields["bbox"]
        counts, sized = list_lengths(category_lists), list_lengths(bbox_lists)
        if (sized != counts).any():
            at = int(np.argmax(sized != counts))
            raise DatasetError(f"{where}: row {at} has {int(sized[at])} boxes and "
                               f"{int(counts[at])} categories")  # fmt: skip
        category, boxes = category_lists.flatten(), bbox_lists.flatten()
        extra = fields["extra"].flatten() if "extra" in fields else None
    else:  # a list of structs
        counts = list_lengths(column)
        inner = column.flatten()
        category, boxes = inner.field("category"), inner.field("bbox")
        extra = inner.field("extra") if inner.type.get_field_index("extra") >= 0 else None
    counts = np.asarray(counts, np.int64)
    if len(counts) and counts.max() > MAX_OBJECTS:
        raise DatasetError(f"{where}: a row has {int(counts.max()):,} objects (at most "
                           f"{MAX_OBJECTS:,})")  # fmt: skip
    if pa.types.is_fixed_size_list(boxes.type):
        corners = np.full(len(boxes), boxes.type.list_size)
    else:
        corners = list_lengths(boxes)
    if boxes.null_count or (np.asarray(corners) != 4).any():
        raise DatasetError(f"{where}: a box is not four numbers [x, y, width, height]")
    bbox = _flat_numbers(pa, boxes.flatten(), f"{where}: a box").reshape(-1, 4)
    classes = _flat_numbers(pa, category, f"{where}: a category")
    if (classes != np.floor(classes)).any() or (classes < -1).any():
        raise DatasetError(f"{where}: a category is not a class number (a whole number from 0)")
    if extra is not None:
        extra_counts = list_lengths(extra)
        extra_values = _flat_numbers(pa, extra.flatten(), f"{where}: an extra value")
    else:
        extra_counts, extra_values = np.zeros(len(classes), np.int64), np.empty(0)
    return hubboxes.Objects(counts, classes.astype(np.int64), bbox,
                            np.zeros(len(classes)), np.asarray(extra_counts, np.int64),
                            extra_values.astype(np.float32))  # fmt: skip

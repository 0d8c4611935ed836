"""What a ``.rec``'s labels become in a Hub dataset: the one home of the
choice of label column (``rec export --to parquet``) and of its features.

A rec's labels are one of these kinds, chosen from every record's header
(the first record's guess, :func:`guess`, then :func:`survey` when a later
record does not fit it):

=============  ==============================================  ==========================
kind           the records hold                                the column(s)
=============  ==============================================  ==========================
``class``      one whole-number label, named by a class map    ``label``: ``ClassLabel``
``int``        the same, with no class map                     ``label``: int64
``float``      one label, some not whole                       ``label``: float32
``multi``      several class numbers (multi-label)             ``label``: ``List(ClassLabel)``
                                                               (``List(int64)`` unnamed)
``list``       several labels, some not class numbers          ``label``: ``List(float32)``
``detection``  detection labels (:mod:`im2rec.recordio.        ``image_id``, ``width``,
               detection`), or a detection header alone        ``height``, ``objects``
=============  ==============================================  ==========================

A class number is a whole number from 0 below :data:`MAX_CLASS` (float32
holds each exactly); names come from the class map beside the ``.rec``
(``rec list``'s ``PREFIX.classes.tsv``) or the one given, ``ClassLabel``
only when there is one.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DatasetError
from ..listing.classmap import class_map_beside, classes_named, read_class_map
from ..recordio.detection import MAX_CLASS, Labels, check, headers_alone
from ..recordio.header import is_class_index, is_whole

__all__ = ["KINDS", "LabelColumn", "detection_rows", "guess", "schema", "survey", "value"]

KINDS = ("class", "int", "float", "multi", "list", "detection")
#: labels checked at once by :func:`survey`
_BATCH = 4096


@dataclass(frozen=True)
class LabelColumn:
    """How the records' labels become columns: ``kind`` (:data:`KINDS`),
    the class names (None: class numbers unnamed) and, for detection,
    whether objects carry values after their box (``extra``)."""

    kind: str
    names: tuple[str, ...] | None = None
    extra: bool = False

    @property
    def listed(self) -> bool:
        """Whether a record's labels are a list (several a record)."""
        return self.kind in ("multi", "list", "detection")

    def fits(self, flag: int, label: Any) -> bool:
        """Whether a record's label (a float, or float32 values when ``flag``
        counts several) goes in these columns as it is (a detection label
        as far as one record tells: :meth:`fit_boxes` checks a batch)."""
        if self.kind == "detection":
            return bool(flag)
        if self.kind == "list":
            return True
        if self.kind == "multi":
            values = np.asarray(label, np.float64).reshape(-1)
            return bool(_classes(values).all()) and (
                self.names is None or not len(values) or values.max() < len(self.names)
            )
        if flag:
            return False
        if self.kind == "float":
            return True
        if self.kind == "class":
            return bool(is_class_index(label)) and label < len(self.names or ())
        return bool(is_whole(label))

    def fit_boxes(self, labels: list[np.ndarray]) -> bool:
        """Whether every one of ``labels`` (float32) goes in the detection
        columns: a detection label or a header alone, its objects no wider
        than the columns hold, its classes named."""
        rows = detection_rows(Labels.of(labels))
        if not rows.good.all() or (not self.extra and bool((rows.b > 5).any())):
            return False
        return self.names is None or rows.top < len(self.names)

    def task(self) -> str:
        """The card's task for these labels."""
        return {"multi": "multi-label", "detection": "object-detection"}.get(
            self.kind, "classification"
        )


def _classes(values: np.ndarray) -> np.ndarray:
    return np.asarray((values >= 0) & (values < MAX_CLASS) & (values == np.floor(values)))


@dataclass(frozen=True)
class DetectionRows:
    """:func:`detection_rows`: which labels are detection labels (``good``:
    MXNet's layout with every number sound, or a header alone, as ``rec
    list --keep-empty`` writes), each one's widths ``a`` and ``b``, and the
    largest class number among the good ones (-1 if none)."""

    good: np.ndarray
    a: np.ndarray
    b: np.ndarray
    top: int


def detection_rows(labels: Labels) -> DetectionRows:
    """Which of ``labels`` are detection labels (:class:`DetectionRows`)."""
    faults, groups = check(labels)
    good = faults.code == 0
    bare = headers_alone(labels, faults)  # (short for MXNet: an image without objects)
    top = -1
    for group in groups:
        if len(group.objects):
            mine = good[group.owner]
            if mine.any():
                top = max(top, int(group.objects[mine, 0].max()))
    return DetectionRows(good | bare, faults.a, faults.b, top)


def guess(heads: Iterable[tuple[int, Any]], rec: str, class_map: str | None) -> LabelColumn:
    """The columns the first record suggests (no pass over the file)."""
    return survey(itertools.islice(heads, 1), rec, class_map)


def survey(heads: Iterable[tuple[int, Any]], rec: str, class_map: str | None) -> LabelColumn:
    """The columns every record fits, from each record's ``(flag, label)``
    (the label a float, or its float32 values when ``flag`` counts several)."""
    single_whole, single_top, flagged = True, -1, False
    multi, multi_top = True, -1
    detection, det_top, extra = True, -1, False
    batch: list[np.ndarray] = []

    def settle() -> None:
        nonlocal multi, multi_top, detection, det_top, extra
        if not batch:
            return
        labels = Labels.of(batch)
        values = labels.values
        if multi:
            ok = _classes(values.astype(np.float64))
            multi = bool(ok.all())
            if multi and len(values):
                multi_top = max(multi_top, int(values.max()))
        if detection:
            rows = detection_rows(labels)
            detection = bool(rows.good.all())
            det_top = max(det_top, rows.top)
            extra = extra or bool((rows.b > 5).any())
        batch.clear()

    for flag, label in heads:
        if flag:
            flagged = True
            batch.append(np.asarray(label, np.float32).reshape(-1))
            if len(batch) >= _BATCH:
                settle()
            continue
        detection = False
        value = float(label)
        if multi:
            multi = bool(_classes(np.array([value])).all())
            multi_top = max(multi_top, int(value)) if multi else multi_top
        if value.is_integer() and 0 <= value < 1 << 31:
            single_top = max(single_top, int(value))
        else:
            single_whole = False
    settle()
    if flagged and detection:
        return LabelColumn("detection", _names(rec, class_map, det_top), extra)
    if flagged:
        return LabelColumn("multi", _names(rec, class_map, multi_top)) if multi else \
            LabelColumn("list")  # fmt: skip
    if not single_whole:
        return LabelColumn("float")
    names = _names(rec, class_map, single_top)
    return LabelColumn("int") if names is None else LabelColumn("class", names)


def _names(rec: str, class_map: str | None, top: int) -> tuple[str, ...] | None:
    """The class names, numbers 0 to at least ``top``, from the class map
    (given, or the one beside the ``.rec``); None without one."""
    path = class_map if class_map is not None else class_map_beside(rec)
    if path is None:
        return None
    classes = read_class_map(path)
    if top >= classes_named(len(classes)):  # (a list of names that long)
        raise DatasetError(
            f"{rec}: a record's label is {top:,}, and the class map {path} names "
            f"{len(classes):,} classes; give this rec's own map (--class-map)"
        )
    count = max(top + 1, max(classes, default=-1) + 1)
    return tuple(classes.get(i, str(i)) for i in range(count))


def value(dtype: str) -> dict[str, Any]:
    return {"dtype": dtype, "_type": "Value"}


def _listed(feature: dict[str, Any], length: int | None = None) -> dict[str, Any]:
    if length is None:
        return {"feature": feature, "_type": "List"}
    return {"feature": feature, "length": length, "_type": "List"}


def _classes_feature(names: tuple[str, ...] | None) -> dict[str, Any]:
    return value("int64") if names is None else {"names": list(names), "_type": "ClassLabel"}


#: the record's header and ``.idx`` key (``--keep-header``)
_REC_FIELDS = (("flag", "uint32"), ("id", "uint64"), ("id2", "uint64"), ("key", "uint64"))


def schema(pa: Any, column: LabelColumn, *, keep_header: bool, keep_mxnet: bool) -> Any:
    """The Arrow schema of a shard, the ``datasets`` features in its
    metadata: ``image``; the label column(s) of ``column``'s kind;
    ``mxnet_label`` (the label as stored, ``--keep-mxnet-label``) and
    ``rec`` (the header and key, ``--keep-header``; a detection label's
    header values too)."""
    fields: list[tuple[str, Any]] = [
        ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    ]
    features: dict[str, Any] = {"image": {"_type": "Image"}}
    kind = column.kind
    if kind == "detection":
        objects = [
            ("id", pa.list_(pa.int64()), _listed(value("int64"))),
            ("area", pa.list_(pa.float64()), _listed(value("float64"))),
            ("bbox", pa.list_(pa.list_(pa.float64(), 4)), _listed(_listed(value("float64"), 4))),
            ("category", pa.list_(pa.int64()), _listed(_classes_feature(column.names))),
        ]
        if column.extra:
            objects.append(("extra", pa.list_(pa.list_(pa.float32())),
                            _listed(_listed(value("float32")))))  # fmt: skip
        fields += [
            ("image_id", pa.int64()),
            ("width", pa.int32()),
            ("height", pa.int32()),
            ("objects", pa.struct([(name, kind) for name, kind, _ in objects])),
        ]
        features.update(
            image_id=value("int64"),
            width=value("int32"),
            height=value("int32"),
            objects={name: feature for name, _, feature in objects},
        )
    else:
        arrow = {"float": pa.float32(), "list": pa.list_(pa.float32()),
                 "multi": pa.list_(pa.int64())}.get(kind, pa.int64())  # fmt: skip
        feature = {"class": _classes_feature(column.names), "int": value("int64"),
                   "float": value("float32"), "list": _listed(value("float32")),
                   "multi": _listed(_classes_feature(column.names))}[kind]  # fmt: skip
        fields.append(("label", arrow))
        features["label"] = feature
    if keep_mxnet:
        fields.append(("mxnet_label", pa.list_(pa.float32())))
        features["mxnet_label"] = _listed(value("float32"))
    if keep_header:
        rec = [(name, getattr(pa, dtype)()) for name, dtype in _REC_FIELDS]
        features["rec"] = {name: value(dtype) for name, dtype in _REC_FIELDS}
        if kind == "detection":
            rec.append(("label_head", pa.list_(pa.float32())))
            features["rec"]["label_head"] = _listed(value("float32"))
        fields.append(("rec", pa.struct(rec)))
    return pa.schema(fields, metadata={"huggingface": json.dumps({"info": {"features": features}})})

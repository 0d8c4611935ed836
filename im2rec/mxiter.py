"""MXNet's ``ImageRecordIter`` vocabulary (spec §5): its batch objects, its
keyword names, and its rules for which records an iterator reads.

Kept apart from :mod:`im2rec.iterator`, which is the machinery (epochs,
workers, the shared-memory ring).
"""

from __future__ import annotations

import difflib
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .errors import ConfigError, UnknownOptionError
from .lstfile import read_lst
from .recordio import RecordReader, build_index, load_index

__all__ = ["DataBatch", "DataDesc", "check_keywords", "lst_labels", "part", "record_offsets"]

#: Accepted for MXNet compatibility and ignored: they only choose MXNet's
#: device or logging, which have no counterpart here.
_IGNORED = frozenset({"ctx", "device_id", "dev_id"})

#: MXNet options not implemented; accepted only at MXNet's default value.
_UNSUPPORTED: dict[str, Any] = {
    "mean_img": "",
    "max_random_contrast": 0,
    "max_random_illumination": 0,
    "max_rotate_angle": 0,
    "rotate": -1,
    "max_shear_ratio": 0,
    "max_crop_size": -1,
    "min_crop_size": -1,
    "max_random_scale": 1,
    "min_random_scale": 1,
    "max_img_size": 1e10,
    "min_img_size": 0,
    "brightness": 0,
    "contrast": 0,
    "saturation": 0,
    "pca_noise": 0,
    "random_h": 0,
    "random_s": 0,
    "random_l": 0,
    "pad": 0,
    "fill_value": 255,
    "aug_seq": "aug_default",
    "shuffle_chunk_size": 0,
    "shuffle_chunk_seed": 0,
}


class DataDesc(NamedTuple):
    """Name, shape and dtype of an output, as MXNet's ``provide_data``."""

    name: str
    shape: tuple[int, ...]
    dtype: Any = np.float32
    layout: str = "NCHW"


@dataclass
class DataBatch:
    """One batch. ``pad`` counts the trailing samples that are not this
    epoch's own (wrapped-around repeats, zeros, or skipped records);
    ``index`` holds each sample's record id (its ``.lst`` index)."""

    data: list[np.ndarray]
    label: list[np.ndarray]
    pad: int = 0
    index: np.ndarray | None = None
    provide_data: list[DataDesc] = field(default_factory=list)
    provide_label: list[DataDesc] = field(default_factory=list)


def check_keywords(extra: dict[str, Any], known: Iterable[str]) -> None:
    """MXNet's keywords that im2rec does not take: ignored, refused unless at
    MXNet's default, or unknown (a typo MXNet silently ignored)."""
    known = list(known)
    for name, value in extra.items():
        if name in _IGNORED:
            continue
        if name in _UNSUPPORTED:
            if value != _UNSUPPORTED[name]:
                raise ConfigError(
                    f"ImageRecordIter option {name}={value!r} is not supported; apply such "
                    "augmentation with your own transform (RecordDataset takes any callable)"
                )
            continue
        close = difflib.get_close_matches(name, [*known, *_UNSUPPORTED], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownOptionError(f"ImageRecordIter got an unknown option {name!r}{hint}")


def record_offsets(rec: str, idx: str, verbose: bool) -> np.ndarray:
    """Byte offsets of every record, in file order. MXNet's indexed reader
    sorts the ``.idx`` offsets and ignores its keys (spec §5.2); without an
    ``.idx`` the file's headers are walked once, in memory."""
    if not rec or any(c in rec for c in ";*?"):
        raise ConfigError(
            f"path_imgrec must name one .rec file, not {rec!r} (lists and patterns of "
            "files are not supported; merge them with `rec merge`)"
        )
    reader = RecordReader(rec)
    try:
        index = load_index(idx) if idx else build_index(reader)
        index.check_within(reader.size, reader.name)
        offsets = np.unique(index.offsets)
        if len(offsets) == 0:
            raise ConfigError(f"{rec}: holds no records")
        reader.read_at(int(offsets[-1]))  # a file cut short fails here, not mid-epoch
        if not idx and verbose:
            print(
                f"im2rec: indexed {len(offsets):,} records of {rec} in memory (no path_imgidx)",
                file=sys.stderr,
            )
    finally:
        reader.close()
    return offsets


def part(offsets: np.ndarray, num_parts: int, part_index: int) -> np.ndarray:
    """MXNet's count split with an index (spec §5.2): ``ceil(N / num_parts)``
    records per part, the last part shorter."""
    if num_parts < 1 or not 0 <= part_index < num_parts:
        raise ConfigError(
            f"need num_parts >= 1 and 0 <= part_index < num_parts, got {part_index} of {num_parts}"
        )
    per = math.ceil(len(offsets) / num_parts)
    part = offsets[part_index * per : (part_index + 1) * per]
    if len(part) == 0:
        raise ConfigError(
            f"part {part_index} of {num_parts} holds no records ({len(offsets)} records, "
            f"{per} per part); use at most {math.ceil(len(offsets) / per)} parts"
        )
    return part


def lst_labels(path: str, width: int) -> dict[int, np.ndarray]:
    labels: dict[int, np.ndarray] = {}
    for item in read_lst(path):
        if len(item.labels) < width:
            raise ConfigError(
                f"{path}:{item.line}: {len(item.labels)} label(s), but label_width is {width}"
            )
        labels[item.key] = np.asarray(item.labels[:width], np.float32)
    return labels

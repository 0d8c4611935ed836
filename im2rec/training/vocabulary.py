"""MXNet's ``ImageRecordIter`` vocabulary (docs/format.md,
"ImageRecordIter"): its batch objects, its keyword names and the options
they become, its mean image. Which records a part reads is
:mod:`.parts`; ``path_imglist``'s labels are :mod:`.listlabels`.

Kept apart from :mod:`im2rec.training.iterator`, which is the machinery (epochs,
workers, the shared-memory ring).
"""

from __future__ import annotations

import difflib
import os
import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np

from ..errors import ConfigError, DatasetError
from .augment import Augmenter
from .augment.ndarray_file import load_ndarrays, save_ndarrays

__all__ = [
    "DataBatch",
    "DataDesc",
    "MXArray",
    "UnknownOptionWarning",
    "augmenter_options",
    "mean_image",
    "skips_corrupt",
]


def skips_corrupt(on_corrupt: str) -> bool:
    """Whether ``on_corrupt`` (every reader's: "raise" or "skip") says to
    skip an undecodable record; :class:`ConfigError` for any other value."""
    if on_corrupt not in ("raise", "skip"):
        raise ConfigError(f"on_corrupt must be 'raise' or 'skip', not {on_corrupt!r}")
    return on_corrupt == "skip"


#: Accepted for MXNet compatibility and ignored: they only choose MXNet's
#: device or threading, which have no counterpart here.
_IGNORED = frozenset({"ctx", "device_id", "dev_id"})

#: MXNet's per-channel keywords -> (Augmenter field, channel).
_CHANNELS = {f"{kind}_{c}": (kind, i) for kind in ("mean", "std") for i, c in enumerate("rgba")}
#: Augmenter options ImageRecordIter passes through under the same name.
_PASSED = frozenset(f.name for f in fields(Augmenter) if f.init and not f.name.startswith("_")) - {
    "data_shape",
    "dtype",
    "mean",
    "std",
    "mean_img",
}


def augmenter_options(options: dict[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """MXNet's augmentation keywords as :class:`Augmenter` ones: ``mean_r``...
    and ``std_r``... become ``mean``/``std``, ``rotate_list`` may be MXNet's
    ``"0,90,180"`` text. Device keywords are dropped; unknown ones are
    dropped with a warning naming the closest known one (MXNet ignores them
    silently, and its own tests pass a misspelt ``and_mirror``)."""
    out: dict[str, Any] = {}
    mean: list[Any] = [0.0] * 4
    std: list[Any] = [1.0] * 4
    for name, value in options.items():
        if name in _IGNORED:
            continue
        if name in _CHANNELS:
            kind, i = _CHANNELS[name]
            (mean if kind == "mean" else std)[i] = value
        elif name == "rotate_list":
            out[name] = _int_list(value)
        elif name == "aug_seq":
            if [s.strip() for s in str(value).split(",")] != ["aug_default"]:
                raise ConfigError(f"aug_seq={value!r}: MXNet 1.9 has one augmenter, 'aug_default'")
        elif name in _PASSED:
            out[name] = value
        else:
            candidates = [*known, *_PASSED, *_CHANNELS, "rotate_list", "aug_seq"]
            close = difflib.get_close_matches(name, candidates, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            warnings.warn(
                f"ImageRecordIter ignores the unknown option {name!r}{hint}",
                UnknownOptionWarning,
                stacklevel=3,
            )
    out["mean"], out["std"] = tuple(mean), tuple(std)
    return out


class UnknownOptionWarning(UserWarning):
    """An ImageRecordIter keyword that neither MXNet nor im2rec knows."""


def _int_list(value: Any) -> tuple[int, ...]:
    if isinstance(value, str):
        parts = [p for p in value.split(",") if p.strip()]
        try:
            return tuple(int(p) for p in parts)
        except ValueError:
            raise ConfigError(
                f"rotate_list must be angles like '0,90,180', not {value!r}"
            ) from None
    return tuple(int(v) for v in value)


def mean_image(path: str, compute: Callable[[], np.ndarray], verbose: bool) -> np.ndarray:
    """MXNet's ``mean_img``: read the file (an NDArray file holding one
    array), or, when it does not exist, ``compute()`` it and save it there
    as MXNet does, for MXNet and later runs to read."""
    if os.path.exists(path):
        arrays = load_ndarrays(path)
        if len(arrays) != 1:
            raise DatasetError(f"{path}: a mean image file holds one array, this one {len(arrays)}")
        return arrays[0][1].astype(np.float32)
    if verbose:
        print(f"im2rec: {path} not found: computing the mean image over the data", file=sys.stderr)
    image = compute()
    save_ndarrays(path, [("mean_img", image)])
    if verbose:
        print(f"im2rec: saved the mean image to {path}", file=sys.stderr)
    return image


class MXArray(np.ndarray):
    """A numpy array that also answers MXNet's ``asnumpy()`` (and
    ``as_in_context``/``context`` for CPU code), so code written for
    ``batch.data[0].asnumpy()`` runs unchanged; everything else is numpy's."""

    def asnumpy(self) -> np.ndarray:
        return np.asarray(self)

    def as_in_context(self, _context: Any = None) -> MXArray:
        return self

    @property
    def context(self) -> str:
        return "cpu(0)"


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

"""MXNet's ``ImageRecordIter`` vocabulary (docs/format.md,
"ImageRecordIter"): its batch objects, its keyword names, and its rules
for which records an iterator reads.

Kept apart from :mod:`im2rec.training.iterator`, which is the machinery (epochs,
workers, the shared-memory ring).
"""

from __future__ import annotations

import difflib
import math
import os
import sys
import warnings
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np

from ..errors import ConfigError, DatasetError
from ..listing.lstfile import iter_lst
from ..recordio import RecordReader, build_index, load_index
from ..storage import exists, is_url, sibling
from .augment import Augmenter
from .augment.ndarray_file import load_ndarrays, save_ndarrays

__all__ = [
    "DataBatch",
    "DataDesc",
    "ListLabels",
    "MXArray",
    "RaggedLabels",
    "UnknownOptionWarning",
    "augmenter_options",
    "chunk_starts",
    "epoch_order",
    "lst_labels",
    "ragged_lst_labels",
    "mean_image",
    "local_size",
    "part",
    "record_offsets",
    "record_stops",
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


def chunk_starts(
    offsets: np.ndarray, chunk_mb: int, num_parts: int, path_imgidx: str | os.PathLike[str]
) -> np.ndarray | None:
    """MXNet's ``shuffle_chunk_size`` without an ``.idx``: the part is cut
    into ``ceil(bytes * 1.1 / (num_parts * chunk))`` byte ranges whose order
    is shuffled every epoch. Returns the position where each range's first
    record is, or None when it does not apply (no chunk size, an ``.idx``
    given, or a single range)."""
    if chunk_mb <= 0 or path_imgidx or len(offsets) == 0:
        return None
    span = int(offsets[-1]) - int(offsets[0]) + 1
    count = math.ceil(span * 1.1 / (num_parts * (chunk_mb << 20)))
    if count <= 1:
        return None
    bounds = int(offsets[0]) + np.arange(count) * (span / count)
    starts = np.unique(np.searchsorted(offsets, bounds))
    return starts[starts < len(offsets)]


def epoch_order(
    n: int, shuffle: bool, seed: int, epoch: int, chunks: np.ndarray | None, chunk_seed: int
) -> np.ndarray:
    """The order of one epoch's records: a full permutation with
    ``shuffle``; with chunks, the chunks in a permuted order (seeded by
    ``shuffle_chunk_seed`` and the epoch), each shuffled inside with
    ``shuffle``, as MXNet reads them."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, epoch])
    if chunks is None:
        return rng.permutation(n) if shuffle else np.arange(n)
    ends = [*chunks[1:].tolist(), n]
    pieces = [np.arange(a, b) for a, b in zip(chunks.tolist(), ends, strict=True)]
    visit = np.random.default_rng([chunk_seed & 0xFFFFFFFF, epoch]).permutation(len(pieces))
    return np.concatenate([rng.permutation(pieces[i]) if shuffle else pieces[i] for i in visit])


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


def record_offsets(
    rec: str,
    idx: str,
    verbose: bool,
    storage_options: dict[str, Any] | None = None,
) -> np.ndarray:
    """Byte offsets of every record, in file order. MXNet's indexed reader
    sorts the ``.idx`` offsets and ignores its keys (docs/format.md,
    "Which records, in which order"); without an ``.idx`` the file's
    headers are walked once, in memory."""
    if not rec or any(c in rec for c in ";*?"):
        raise ConfigError(
            f"path_imgrec must name one .rec file, not {rec!r} (lists and patterns of "
            "files are not supported; merge them with `rec merge`)"
        )
    reader = RecordReader(rec, storage_options=storage_options)
    try:
        index = load_index(idx, storage_options=storage_options) if idx else build_index(reader)
        index.check_within(reader.size, reader.name)
        offsets = np.unique(index.offsets)
        if len(offsets) == 0:
            raise ConfigError(f"{rec}: holds no records")
        reader.read_at(int(offsets[-1]))  # a file cut short fails here, not mid-epoch
        if not idx and verbose:
            print(f"im2rec: {_walked(rec, len(offsets), storage_options)}", file=sys.stderr)
    finally:
        reader.close()
    return offsets


def _walked(rec: str, records: int, storage_options: dict[str, Any] | None) -> str:
    """What the iterator says when it indexed the records itself: and, when
    an .idx lies beside the .rec, why it did not use it (MXNet reads an
    index only when given one, and its parts are cut differently without,
    so taking it unasked would change which records a part reads)."""
    beside = sibling(rec, ".idx")
    said = f"indexed {records:,} records of {rec} in memory, path_imgidx not given"
    if exists(beside, storage_options):
        return f"{said} ({beside} is beside it: pass path_imgidx={beside!r} to use it)"
    return said


def local_size(rec: str) -> int | None:
    """A local ``.rec``'s size, or None (a URL, read as it always is)."""
    if is_url(rec):
        return None
    try:
        return os.stat(rec).st_size
    except OSError:
        return None


def record_stops(every: np.ndarray, offsets: np.ndarray, size: int) -> np.ndarray:
    """Where the records at ``offsets`` end: the next offset of ``every``
    (all the file's, sorted, as :func:`record_offsets` gives them), or
    ``size`` after the last. A span that is not one whole record (a gap,
    a file changed since) is only read the slower way, never misread:
    :meth:`~im2rec.recordio.RecordReader.read_span` checks."""
    after = np.searchsorted(every, offsets, side="right")
    stops = np.full(len(offsets), size, np.int64)
    inside = after < len(every)
    stops[inside] = every[after[inside]]
    return stops


def part(offsets: np.ndarray, num_parts: int, part_index: int) -> np.ndarray:
    """MXNet's count split with an index (docs/format.md, "Which records,
    in which order"): ``ceil(N / num_parts)`` records per part, the last
    part shorter."""
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


class ListLabels:
    """``path_imglist``'s labels by record id, as arrays: the keys sorted
    (uint64, as record ids are) and a float32 row of ``label_width`` labels a key, so a list of
    millions of lines costs 8 + 4 x width bytes a line (docs/performance.md,
    "Scale"), not a dict of arrays (~200). A key listed twice takes its last
    line's labels, as a dict would."""

    __slots__ = ("_keys", "_rows")

    def __init__(self, keys: np.ndarray, rows: np.ndarray):
        order = np.argsort(keys, kind="stable")
        keys, rows = keys[order], rows[order]
        last = np.append(keys[1:] != keys[:-1], True) if len(keys) else np.empty(0, bool)
        self._keys, self._rows = keys[last], rows[last]

    def __len__(self) -> int:
        return len(self._keys)

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids`` (shape ``(len(ids), width)``); ``KeyError``
        naming the first id the list has no line for."""
        wanted = np.asarray(ids).astype(np.uint64, copy=False)
        at = np.searchsorted(self._keys, wanted)
        np.minimum(at, max(len(self._keys) - 1, 0), out=at)
        found = self._keys[at] == wanted if len(self._keys) else np.zeros(len(wanted), bool)
        if not found.all():
            raise KeyError(int(wanted[np.argmin(found)]))
        rows: np.ndarray = self._rows[at]
        return rows


def lst_labels(path: str, width: int) -> ListLabels:
    """The first ``width`` labels of each line of the ``.lst`` at ``path``,
    read a line at a time into arrays."""
    keys = array("Q")
    values = array("f")
    for item in iter_lst(path):
        if len(item.labels) < width:
            raise ConfigError(
                f"{path}:{item.line}: {len(item.labels)} label(s), but label_width is {width}"
            )
        keys.append(item.key)
        values.extend(item.labels[:width])
    rows = np.frombuffer(values, np.float32) if values else np.empty(0, np.float32)
    key_array = np.frombuffer(keys, np.uint64) if keys else np.empty(0, np.uint64)
    return ListLabels(key_array, rows.reshape(len(keys), width))


class RaggedLabels:
    """``path_imglist``'s labels of any length by record id, as arrays (the
    keys sorted, each key's start in one float32 array of every value): the
    detection iterator's, where each image has its own number of objects.
    A key listed twice takes its last line's labels."""

    __slots__ = ("_keys", "_starts", "_values")

    def __init__(self, keys: np.ndarray, starts: np.ndarray, values: np.ndarray):
        order = np.argsort(keys, kind="stable")
        ends = np.append(starts[1:], len(values)) if len(starts) else starts
        keys, starts, ends = keys[order], starts[order], ends[order]
        last = np.append(keys[1:] != keys[:-1], True) if len(keys) else np.empty(0, bool)
        self._keys = keys[last]
        self._starts = np.stack([starts[last], ends[last]], axis=1)
        self._values = values

    def __len__(self) -> int:
        return len(self._keys)

    def lookup(self, key: int) -> np.ndarray:
        """The labels of ``key``; ``KeyError`` when the list has none."""
        at = int(np.searchsorted(self._keys, np.uint64(key)))
        if at >= len(self._keys) or int(self._keys[at]) != key:
            raise KeyError(key)
        start, end = self._starts[at]
        return self._values[start:end]

    def widest(self) -> int:
        """The most labels any line has."""
        return int((self._starts[:, 1] - self._starts[:, 0]).max()) if len(self._keys) else 0


def ragged_lst_labels(path: str, width: int) -> RaggedLabels:
    """Each line's labels of the ``.lst`` at ``path`` (``width`` of them, or
    all when ``width`` is -1, as MXNet's detection iterator reads them)."""
    keys = array("Q")
    starts = array("q")
    values = array("f")
    for item in iter_lst(path):
        if width > 0 and len(item.labels) < width:
            raise ConfigError(
                f"{path}:{item.line}: {len(item.labels)} label(s), but label_width is {width}"
            )
        keys.append(item.key)
        starts.append(len(values))
        values.extend(item.labels[:width] if width > 0 else item.labels)
    return RaggedLabels(
        np.frombuffer(keys, np.uint64) if keys else np.empty(0, np.uint64),
        np.frombuffer(starts, np.int64) if starts else np.empty(0, np.int64),
        np.frombuffer(values, np.float32) if values else np.empty(0, np.float32),
    )

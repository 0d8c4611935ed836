"""``path_imglist``'s labels, looked up by record id: fixed-width
(``ImageRecordIter``'s ``label_width``) or ragged (detection labels),
held compactly (docs/format.md, "ImageRecordIter")."""

from __future__ import annotations

from array import array

import numpy as np

from ..errors import ConfigError
from ..listing.lstfile import iter_lst

__all__ = ["ListLabels", "RaggedLabels", "lst_labels", "ragged_lst_labels"]


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

"""What ``rec list`` found, held compactly (docs/performance.md, "Scale"):
every path in one UTF-8 buffer with an end offset each, and a label each,
so a tree of 42M files costs its path bytes and 12 bytes a file, not a
Python tuple, int and str a file (~190 bytes). Entries are made one at a
time when read (:class:`Entries`, :class:`EntryView`), and im2rec.py's
shuffle is replayed on an array of positions (:func:`shuffle_positions`),
so the lists come out byte for byte as before."""

from __future__ import annotations

import random
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, overload

from ..recordio.views import ListLike

__all__ = ["BoxEntries", "Entries", "Entry", "EntryView", "labels_of", "ranks", "shuffle_positions"]

#: a box list's label: A = 4 values of header (A, B, width, height), then
#: B = 6 values an object (class, corners, flag): listing.boxes writes them
BOX_HEADER, BOX_OBJECT = 4, 6


class Entry(NamedTuple):
    """One ``.lst`` line: its index (which becomes the record key and header
    id when packed), label, and path relative to the root."""

    key: int
    label: int
    path: str


class _Made(Sequence[Entry]):
    """A sequence whose entries are made when read (:meth:`_at`)."""

    __slots__ = ()

    def _at(self, i: int) -> Entry:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> Entry: ...
    @overload
    def __getitem__(self, i: slice) -> list[Entry]: ...
    def __getitem__(self, i: int | slice) -> Entry | list[Entry]:
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(len(self)))]
        return self._at(range(len(self))[i])

    def __iter__(self) -> Iterator[Entry]:
        for i in range(len(self)):
            yield self._at(i)


class Entries(_Made):
    """Entries whose key is their position (as a walk makes them)."""

    __slots__ = ("_blob", "_ends", "_labels")

    def __init__(self) -> None:
        self._blob = bytearray()
        self._ends = array("q")
        self._labels = array("i")

    def add(self, label: int, path: str) -> None:
        # (surrogateescape: a name that is not UTF-8 comes back as it was)
        self._blob += path.encode("utf-8", "surrogateescape")
        self._ends.append(len(self._blob))
        self._labels.append(label)

    @property
    def labels(self) -> array[int]:
        return self._labels

    def path(self, i: int) -> str:
        start = self._ends[i - 1] if i else 0
        return self._blob[start : self._ends[i]].decode("utf-8", "surrogateescape")

    def paths_at(self, indices: Sequence[int]) -> list[str]:
        """The paths of the entries ``indices``."""
        blob, ends = self._blob, self._ends
        return [
            blob[ends[i - 1] if i else 0 : ends[i]].decode("utf-8", "surrogateescape")
            for i in indices
        ]

    def __len__(self) -> int:
        return len(self._ends)

    def _at(self, i: int) -> Entry:
        return Entry(i, self._labels[i], self.path(i))


class BoxEntries(Entries):
    """Entries with a detection label each (a float32 vector); an entry's
    ``label`` is its first object's class (0 for an image with none), which
    ``--stratify`` splits by."""

    __slots__ = ("_value_ends", "_values")

    def __init__(self) -> None:
        super().__init__()
        self._values = array("f")
        self._value_ends = array("q")

    def add_image(self, path: str, label: Any) -> None:
        """An image and its detection label (float32 values; its first
        object's class at ``BOX_HEADER``)."""
        values = array("f", bytes(memoryview(label).cast("B")))
        self.add(int(values[BOX_HEADER]) if len(values) > BOX_HEADER else 0, path)
        self._values.extend(values)
        self._value_ends.append(len(self._values))

    def add_images(self, paths: Sequence[str], values: Any, ends: Any) -> None:
        """Images and their labels at once: ``values`` (float32) holds the
        labels one after another, ``ends`` (int64) where each ends in it."""
        import numpy as np  # (only for annotation sets)

        ends = np.asarray(ends, np.int64)
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        first = np.zeros(len(ends), np.int32)
        has = ends - starts > BOX_HEADER
        first[has] = values[starts[has] + BOX_HEADER].astype(np.int32)
        blob = [path.encode("utf-8", "surrogateescape") for path in paths]
        base = len(self._blob)
        self._blob += b"".join(blob)
        lengths = np.fromiter(map(len, blob), np.int64, len(blob))
        self._ends.frombytes((base + np.cumsum(lengths)).tobytes())
        self._labels.frombytes(first.tobytes())
        offset = len(self._values)
        self._values.frombytes(np.ascontiguousarray(values, np.float32).data.cast("B"))
        self._value_ends.frombytes((offset + ends).data.cast("B"))

    def values(self, i: int) -> array[float]:
        """Entry ``i``'s label vector (float32)."""
        start = self._value_ends[i - 1] if i else 0
        return self._values[start : self._value_ends[i]]

    def spans(self, indices: Sequence[int]) -> tuple[Any, Any, Any]:
        """All the label values (float32), and where the labels of the
        entries ``indices`` start and end in them."""
        import numpy as np

        values = (
            np.frombuffer(self._values, np.float32) if self._values else np.zeros(0, np.float32)
        )
        ends_all = (
            np.frombuffer(self._value_ends, np.int64) if self._value_ends else np.zeros(0, int)
        )
        at = np.asarray(indices, np.int64)
        ends = ends_all[at]
        starts = np.where(at > 0, ends_all[np.maximum(at - 1, 0)], 0)
        return values, starts, ends

    def subset(self, indices: Sequence[int]) -> BoxEntries:
        """The entries ``indices``, in that order, as entries of their own."""
        import numpy as np

        values, starts, ends = self.spans(indices)
        lengths = ends - starts
        rank = ranks(lengths)
        out = BoxEntries()
        out.add_images(self.paths_at(indices), values[np.repeat(starts, lengths) + rank],
                       np.cumsum(lengths))  # fmt: skip
        return out

    def renumber(self, labels: Sequence[int]) -> None:
        """Every object's class ``c`` becomes ``labels[c]`` (in place)."""
        import numpy as np

        if not len(self):
            return
        table = np.asarray(labels, np.float32)
        values, starts, ends = self.spans(range(len(self)))
        each, at = _classes_at(starts, ends)
        values[at] = table[values[at].astype(np.int64)]
        first = np.frombuffer(self._labels, np.int32)
        has = each > 0
        first[has] = values[starts[has] + BOX_HEADER].astype(np.int32)

    def counts(self, boxes: int = 1 << 20) -> tuple[Counter[int], Counter[int]]:
        """(images holding each class, objects of each class), about
        ``boxes`` boxes at a time."""
        import numpy as np

        images: Counter[int] = Counter()
        objects: Counter[int] = Counter()
        n, lo = len(self), 0
        ends_all = np.frombuffer(self._value_ends, np.int64) if n else np.zeros(0, np.int64)
        while lo < n:
            hi = max(lo + 1, int(np.searchsorted(ends_all, ends_all[lo] + BOX_OBJECT * boxes)))
            hi = min(hi, n)
            values, starts, ends = self.spans(range(lo, hi))
            each, at = _classes_at(starts, ends)
            image = np.repeat(np.arange(hi - lo), each)
            classes = values[at].astype(np.int64)
            objects.update(dict(enumerate(np.bincount(classes).tolist())))
            width = int(classes.max(initial=0)) + 1
            pairs = np.sort(image * width + classes)  # (nearly sorted: image by image)
            first = np.ones(len(pairs), bool)  # (none where no image of the run has a box)
            first[1:] = pairs[1:] != pairs[:-1]
            images.update(dict(enumerate(np.bincount(pairs[first] % width).tolist())))
            lo = hi
        return +images, +objects


def ranks(counts: Any) -> Any:
    """Each item's place in its group, for groups of ``counts`` items one
    after another (``[2, 0, 3]``: ``[0, 1, 0, 1, 2]``)."""
    import numpy as np

    counts = np.asarray(counts, np.int64)
    return np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)


def _classes_at(starts: Any, ends: Any) -> tuple[Any, Any]:
    """For labels at ``[starts, ends)`` of a box list's values: how many
    objects each holds, and where every object's class is."""
    import numpy as np

    each = (ends - starts - BOX_HEADER) // BOX_OBJECT
    return each, np.repeat(starts, each) + BOX_HEADER + BOX_OBJECT * ranks(each)


class EntryView(_Made, ListLike[Entry]):
    """The entries at some positions of another sequence (a shuffled chunk
    or split of a list), made when read."""

    __slots__ = ("_entries", "_positions")
    counted = "entries"

    def __init__(self, entries: Sequence[Entry], positions: Sequence[int]):
        self._entries = entries
        self._positions = positions

    @property
    def positions(self) -> Sequence[int]:
        """Where this view's entries are in the sequence it views."""
        return self._positions

    @property
    def viewed(self) -> Sequence[Entry]:
        """The sequence viewed."""
        return self._entries

    def __len__(self) -> int:
        return len(self._positions)

    def _at(self, i: int) -> Entry:
        return self._entries[self._positions[i]]


def shuffle_positions(positions: Any, rng: random.Random) -> None:
    """``rng.shuffle(positions)``, the same draws and swaps as on a list
    (im2rec.py's lists), on an array of ints in place instead of a list of
    objects: :meth:`random.Random.shuffle` takes any mutable sequence."""
    rng.shuffle(positions)


def labels_of(entries: Sequence[Entry], positions: Sequence[int]) -> list[int]:
    """The labels of the entries at ``positions``."""
    if isinstance(entries, Entries):
        labels = entries.labels
        return [labels[p] for p in positions]
    return [entries[p].label for p in positions]

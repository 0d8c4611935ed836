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

__all__ = ["BoxEntries", "Entries", "Entry", "EntryView", "labels_of", "shuffle_positions"]

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

    def values(self, i: int) -> array[float]:
        """Entry ``i``'s label vector (float32)."""
        start = self._value_ends[i - 1] if i else 0
        return self._values[start : self._value_ends[i]]

    def counts(self) -> tuple[Counter[int], Counter[int]]:
        """(images holding each class, objects of each class)."""
        images: Counter[int] = Counter()
        objects: Counter[int] = Counter()
        for i in range(len(self)):
            classes = [int(c) for c in self.values(i)[BOX_HEADER::BOX_OBJECT]]
            objects.update(classes)
            images.update(set(classes))
        return images, objects


class EntryView(_Made, ListLike[Entry]):
    """The entries at some positions of another sequence (a shuffled chunk
    or split of a list), made when read."""

    __slots__ = ("_entries", "_positions")
    counted = "entries"

    def __init__(self, entries: Sequence[Entry], positions: Sequence[int]):
        self._entries = entries
        self._positions = positions

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

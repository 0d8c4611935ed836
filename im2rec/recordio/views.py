"""Views of an index that make no Python object per record: the keys as a
sequence (:class:`KeyView`, :class:`KeyList` for the drop-in's mutable
``keys``) and ``{key: offset}`` as a mapping (:class:`OffsetMap`), each
reading the index's arrays one value at a time (docs/performance.md,
"Scale")."""

from __future__ import annotations

import operator
from collections.abc import Iterator, MutableMapping, MutableSequence, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .index_cache import shareable

if TYPE_CHECKING:
    import numpy as np

    from .index import RecordIndex

__all__ = ["KeyList", "KeyView", "ListLike", "OffsetMap", "int_view", "whole_key"]

T = TypeVar("T")


def int_view(array: Any) -> memoryview:
    """A memoryview of an int64 array: indexing it gives Python ints, faster
    than indexing the array (docs/measured.md), and makes nothing per element."""
    return memoryview(array)


def _as_list(values: Any) -> list[Any]:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def whole_key(key: Any) -> int:
    """An integer key as a Python int, as a dict of int keys would find it:
    numpy integers (InsightFace passes ``np.int64`` keys) and whole floats
    (``2.0``) included; ``KeyError`` for anything else."""
    if isinstance(key, bool):
        raise KeyError(key)
    try:
        return operator.index(key)
    except TypeError:
        pass
    try:
        whole = int(key)
        if whole == key:
            return whole
    except (TypeError, ValueError, OverflowError):
        pass
    raise KeyError(key)


class ListLike(Sequence[T]):
    """A sequence made when read that compares and prints as the list it
    stands for (MXNet's code and its users compare ``keys`` with lists)."""

    __slots__ = ()
    #: what the repr counts
    counted = "keys"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        head = ", ".join(map(repr, self[:5]))
        more = ", ..." if len(self) > 5 else ""
        return f"{type(self).__name__}([{head}{more}], {len(self):,} {self.counted})"


class KeyView(ListLike[Any]):
    """Keys in ``.idx`` order, read-only, one Python value at a time from the
    array (``list(view)`` makes the list, if one is wanted)."""

    __slots__ = ("_keys", "_view")

    def __init__(self, keys: np.ndarray | Sequence[Any]):
        self._keys = keys
        # a memoryview of an int64 array indexes to Python ints directly
        self._view: Any = int_view(keys) if hasattr(keys, "dtype") else keys

    def __len__(self) -> int:
        return len(self._keys)

    def __reduce__(self) -> Any:  # (the memoryview is made again on the other side)
        return (KeyView, (shareable(self._keys),))

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return _as_list(self._keys[i])
        return self._view[i]

    def __iter__(self) -> Iterator[Any]:
        view = self._view
        for start in range(0, len(view), 1 << 16):  # in pieces: no list of every key
            yield from _as_list(self._keys[start : start + (1 << 16)])

    def __contains__(self, key: object) -> bool:
        if hasattr(self._keys, "dtype"):
            try:
                whole = whole_key(key)
            except KeyError:
                return False
            return bool((self._keys == whole).any())  # type: ignore[union-attr]
        return key in self._keys


class OffsetMap(MutableMapping[Any, int]):
    """``{key: offset}`` over a :class:`RecordIndex` without a dict of every
    key (what ``MXIndexedRecordIO.idx`` serves). MXNet's ``idx`` was a dict
    that code could edit (``record.idx[k] = offset``): edits and deletions
    are kept beside the index and honoured by lookups."""

    __slots__ = ("_added", "_edits", "_index", "_removed")

    def __init__(self, index: RecordIndex):
        self._index = index
        self._edits: dict[Any, int] = {}
        self._removed: set[Any] = set()
        self._added = 0  # edited keys the index does not have

    @property
    def edited(self) -> bool:
        return bool(self._edits or self._removed)

    def __getitem__(self, key: Any) -> int:
        if self._edits or self._removed:
            if key in self._edits:
                return self._edits[key]
            if key in self._removed:
                raise KeyError(key)
        return self._index.offset_of(key)

    def __setitem__(self, key: Any, offset: int) -> None:
        if key not in self._edits and (key in self._removed or key not in self._index):
            self._added += key not in self._removed
        self._removed.discard(key)
        self._edits[key] = offset

    def __delitem__(self, key: Any) -> None:
        if key not in self:
            raise KeyError(key)
        if self._edits.pop(key, None) is not None and key not in self._index:
            self._added -= 1
            return
        self._removed.add(key)

    def __contains__(self, key: object) -> bool:
        if key in self._edits:
            return True
        return key not in self._removed and key in self._index

    def __iter__(self) -> Iterator[Any]:
        removed = self._removed
        for key in self._index.key_view():
            if key not in removed:
                yield key
        for key in self._edits:
            if key not in self._index:
                yield key

    def __len__(self) -> int:
        return len(self._index) - len(self._removed) + self._added

    def __reduce__(self) -> Any:
        return (_offset_map, (self._index, self._edits, self._removed, self._added))

    def __repr__(self) -> str:
        return f"OffsetMap({self._index.name!r}, {len(self):,} keys)"


def _offset_map(
    index: RecordIndex, edits: dict[Any, int], removed: set[Any], added: int
) -> OffsetMap:
    view = OffsetMap(index)
    view._edits, view._removed, view._added = dict(edits), set(removed), added
    return view


class KeyList(MutableSequence[Any], ListLike[Any]):
    """``MXIndexedRecordIO.keys``: MXNet's list of keys, which code may
    reorder (``random.shuffle(record.keys)``), over the index's array.
    Reading makes no object a key; the first change copies the array (8
    bytes a key), and only an insert or a delete turns it into a Python
    list."""

    __slots__ = ("_data", "_owned")

    def __init__(self, keys: np.ndarray | list[Any]):
        self._data: Any = keys
        self._owned = isinstance(keys, list)

    def __reduce__(self) -> Any:
        return (KeyList, (self._data if self._owned else shareable(self._data),))

    def _own(self) -> Any:
        if not self._owned:
            self._data = self._data.copy()
            self._owned = True
        return self._data

    def _as_python_list(self) -> list[Any]:
        if not isinstance(self._data, list):
            self._data = _as_list(self._data)
            self._owned = True
        return self._data

    def __len__(self) -> int:
        return len(self._data)

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        data = self._data
        if isinstance(i, slice):
            return _as_list(data[i])
        value = data[i]
        return value if isinstance(data, list) else int(value)

    def __setitem__(self, i: Any, value: Any) -> None:
        data = self._data
        if isinstance(data, list) or isinstance(i, slice):
            self._as_python_list()[i] = value
            return
        try:
            self._own()[i] = whole_key(value)
        except (KeyError, OverflowError):  # not a whole number that fits: a list from now on
            self._as_python_list()[i] = value

    def __delitem__(self, i: Any) -> None:
        del self._as_python_list()[i]

    def insert(self, i: int, value: Any) -> None:
        self._as_python_list().insert(i, value)

    def __iter__(self) -> Iterator[Any]:
        data = self._data
        if isinstance(data, list):
            yield from data
            return
        for start in range(0, len(data), 1 << 16):
            yield from data[start : start + (1 << 16)].tolist()

    def sort(self, *, key: Any = None, reverse: bool = False) -> None:
        if key is None and not isinstance(self._data, list):
            data = self._own()
            data.sort()
            if reverse:
                data[:] = data[::-1]
            return
        self._as_python_list().sort(key=key, reverse=reverse)

"""``.idx`` files: one ``key<TAB>offset`` line per record (docs/format.md, "The Python API").

``offset`` is the byte position of the record's first magic word in the
``.rec``. Lines are in write order, not sorted. im2rec.py writes the ``.lst``
index as the key; rec2idx.py writes 0..N-1.

An index is two int64 arrays (keys, offsets) and a lookup table made from
them (:class:`RecordIndex`): about 24 bytes a record, no Python object a
record, shared by forked DataLoader workers. Loading is vectorised for the
common case (integer keys, one TAB per line): five million lines parse in
about 0.3 s, a block at a time (:mod:`.index_text`). Anything unusual
(string keys, blank lines, space separators, extra columns) takes a
line-by-line path that also produces the precise error for a malformed line.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .codec import can_start

if TYPE_CHECKING:  # numpy is imported on first use: `rec verify`/`rec index` start without it
    import numpy as np

from ..errors import IndexFormatError, MissingKeyError
from .index_cache import Cached, identity_of, read_cache, shareable, write_cache
from .index_text import (
    duplicate_error,
    offset_error,
    parse_file_fast,
    parse_lines,
    read_index_entries,
    read_text,
)
from .views import KeyView, OffsetMap, int_view, whole_key

__all__ = [
    "RecordIndex",
    "index_arrays",
    "format_index_line",
    "load_index",
    "read_index_entries",
]

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
KeyType = Callable[[str], Any]


#: elements a temporary array holds at most while the lookup table is made
_PIECE = 1 << 18


class RecordIndex:
    """Keys and record offsets of one ``.rec``, in ``.idx`` line order, held
    in flat arrays (docs/performance.md, "Scale"): no Python object per
    record, so 100M records take 2.4 GB, and forked DataLoader workers share
    the pages (nothing here writes to them after loading).

    ``keys`` is an int64 array for integer keys, else a list (string keys:
    the one case that costs a Python object a record); ``offsets`` is an
    int64 array (made on first access when the index was built from a list,
    so counting and saving one need no numpy). Lookups by key use a table
    built on first use: for integer keys spanning at most twice their count
    (the usual 0..N-1 permutation), a flat array of offsets by key (8 bytes
    a key of the span), read through a memoryview (a lookup is one index, no
    numpy call); for sparser ones the keys sorted (16 bytes a record) and a
    binary search; for other keys a dict.
    """

    __slots__ = (
        "_base",
        "_by_key",
        "_dense",
        "_offsets",
        "_sorted",
        "_table",
        "keys",
        "name",
    )

    def __init__(
        self,
        keys: np.ndarray | Sequence[Any],
        offsets: np.ndarray | Sequence[int],
        name: str = "<index>",
    ):
        self.keys = keys
        self._offsets = offsets
        self.name = name
        self._by_key: dict[Any, int] | None = None
        self._dense: memoryview | None = None  # offsets by key - base (-1: no such key)
        self._table: np.ndarray | None = None  # (the array behind _dense)
        self._base = 0
        self._sorted: tuple[np.ndarray, memoryview, np.ndarray] | None = None

    @property
    def offsets(self) -> np.ndarray:
        offsets = self._offsets
        if isinstance(offsets, Sequence):
            import numpy as np

            offsets = self._offsets = np.asarray(offsets, dtype=np.int64)
        return offsets

    def __len__(self) -> int:
        return len(self._offsets)

    def __getstate__(self) -> tuple[Any, ...]:
        # arrays mapped from the binary copy travel as its name and are
        # mapped again where they are used (a DataLoader worker under
        # spawn), so every worker shares the parent's pages; other arrays
        # travel whole, and the lookup table is made again there (it is
        # larger than the arrays it is made from)
        table = shareable(self._table)
        if table is self._table:
            table = None
        return (shareable(self.keys), shareable(self._offsets), self.name, table, self._base)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        keys, offsets, name, table, base = state
        self.__init__(keys, offsets, name)  # type: ignore[misc]
        if table is not None and len(table):
            self.use_table(table, base)

    def key_list(self) -> list[Any]:
        """Keys as a list of Python objects (a Python int a record: prefer
        :meth:`key_view` for large indexes)."""
        return _as_list(self.keys)

    def key_view(self) -> KeyView:
        """Keys in ``.idx`` order as a read-only sequence of Python values,
        made one at a time from the array."""
        return KeyView(self.keys)

    def offset_map(self) -> OffsetMap:
        """``{key: offset}`` as a read-only mapping over the index (no dict
        of every key is made)."""
        return OffsetMap(self)

    def __contains__(self, key: Any) -> bool:
        try:
            self.offset_of(key)
        except KeyError:
            return False
        return True

    def offset_of(self, key: Any) -> int:
        """Offset of the record stored under ``key``; ``KeyError`` if none."""
        dense = self._dense
        if dense is None and self._by_key is None and self._sorted is None:
            self.build_lookup()
            dense = self._dense
        if dense is not None:
            if type(key) is not int:
                try:
                    key = whole_key(key)
                except KeyError:
                    raise self._missing(key) from None
            i = key - self._base
            if 0 <= i < len(dense):
                offset: int = dense[i]
                if offset >= 0:
                    return offset
            raise self._missing(key)
        if self._sorted is not None:
            return self._search(key)
        assert self._by_key is not None
        try:
            return self._by_key[key]
        except KeyError:
            raise self._missing(key) from None

    def _missing(self, key: Any) -> MissingKeyError:
        """The error for a key no record has, naming the index (cheap: a
        membership test raises it for every key that is not there)."""
        return MissingKeyError(f"{self.name}: no record has key {key!r} ({len(self.keys):,} keys)")

    def _search(self, key: Any) -> int:
        assert self._sorted is not None
        sorted_keys, view, sorted_offsets = self._sorted
        try:
            whole = whole_key(key)
        except KeyError:
            raise self._missing(key) from None
        i = bisect.bisect_left(view, whole)
        if i < len(view) and view[i] == whole:
            return int(sorted_offsets[i])
        raise self._missing(key)

    def build_lookup(self) -> bool:
        """Make the table :meth:`offset_of` uses; False when two records share
        a key (the table is then not kept)."""
        import numpy as np

        keys = self.keys
        if not isinstance(keys, np.ndarray):
            if self._by_key is None:
                self._by_key = dict(zip(keys, _as_list(self._offsets), strict=True))
            return len(self._by_key) == len(keys)
        if not len(keys):
            self._dense, self._base = int_view(np.empty(0, np.int64)), 0
            return True
        base, span = int(keys.min()), int(keys.max()) - int(keys.min()) + 1
        if span <= 2 * len(keys) + 1024:
            table = np.full(span, -1, dtype=np.int64)
            offsets, filled = self.offsets, 0
            # a piece at a time: the temporaries stay small (the allocator
            # would keep a temporary as large as the table for good)
            for start in range(0, len(keys), _PIECE):
                piece = keys[start : start + _PIECE]
                table[piece - base if base else piece] = offsets[start : start + _PIECE]
            for start in range(0, span, _PIECE):
                filled += int(np.count_nonzero(table[start : start + _PIECE] >= 0))
            if filled != len(keys):  # a key written twice fills one slot
                return False
            self.use_table(table, base)
            return True
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        if len(sorted_keys) > 1 and bool((sorted_keys[1:] == sorted_keys[:-1]).any()):
            return False
        self._sorted = (sorted_keys, int_view(sorted_keys), self.offsets[order])
        return True

    def use_table(self, table: np.ndarray, base: int) -> None:
        """Take ``table`` (offsets by key - ``base``, -1 where no key; checked
        by the caller) as the lookup table."""
        self._table, self._dense, self._base = table, int_view(table), base

    @property
    def dense_table(self) -> tuple[np.ndarray, int] | None:
        """``(table, base)`` when lookups use a dense table."""
        return None if self._table is None else (self._table, self._base)

    def text(self) -> str:
        """The ``.idx`` file's text (for a large index, :meth:`write_to`)."""
        return "".join(self.text_pieces())

    def text_pieces(self, lines: int = 1 << 16) -> Iterator[str]:
        """The ``.idx`` text a ``lines``-line piece at a time: memory stays
        that of one piece, whatever the index's size."""
        for start in range(0, len(self), lines):
            keys = _as_list(self.keys[start : start + lines])
            offsets = _as_list(self._offsets[start : start + lines])
            yield "".join(map(format_index_line, keys, offsets))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write as a ``.idx`` file, atomically (temp file + rename; to a
        URL, one upload: an object appears whole)."""
        from ..storage import is_url, write_bytes  # stdlib only, like this package

        if is_url(path):
            write_bytes(path, self.text().encode("utf-8"))
            return
        from ..storage.atomic import AtomicGroup

        with AtomicGroup() as group, group.open(path) as f:
            for piece in self.text_pieces():
                f.write(piece.encode("utf-8"))

    def check_within(self, size: int, rec_name: str) -> None:
        """Fail when an offset cannot be a record head of a ``size``-byte file."""
        import numpy as np

        if not len(self.offsets):
            return
        last = int(np.argmax(self.offsets))
        if int(self.offsets[last]) + 8 > size:
            raise IndexFormatError(
                f"{self.name}: key {_py(self.keys[last])!r} points to byte "
                f"{int(self.offsets[last]):,}, past the end of {rec_name} ({size:,} bytes); "
                "the index belongs to another or a longer file: rebuild it from the .rec"
            )


def format_index_line(key: Any, offset: int) -> str:
    return f"{key}\t{offset}\n"


def _as_list(values: Any) -> list[Any]:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def load_index(
    path: str | os.PathLike[str],
    key_type: KeyType = int,
    *,
    storage_options: dict[str, Any] | None = None,
    cache: bool = True,
) -> RecordIndex:
    """Read a ``.idx`` file (a path or a URL). Duplicate keys, malformed lines
    and negative or unaligned offsets raise :class:`IndexFormatError` naming
    the line.

    Integer ``key<TAB>offset`` lines are parsed by numpy a block at a time
    into two int64 arrays (memory: the arrays, and one block of text); the
    rest takes a line-by-line path that also names a malformed line.

    ``cache``: read and write the binary copy beside a local ``.idx``
    (:mod:`.index_cache`); the commands that only inspect a file pass False,
    so they write nothing beside it."""
    import numpy as np

    name = os.fspath(path)
    from ..storage import is_url

    local_ints = cache and key_type is int and not is_url(path)
    before = None
    if local_ints:
        before = identity_of(path)  # (what the copy, if one is written, is of)
        cached = read_cache(path, before)
        if cached is not None:  # (checked there as a parse is checked here)
            return _from_copy(cached, name)
    parsed = parse_file_fast(path, storage_options) if key_type is int else None
    lines: list[int] | None = None  # position -> line number, when they differ
    if parsed is None:
        _, data = read_text(path, storage_options)
        keys, offsets, lines = parse_lines(data, name, key_type)
        del data
        # an offset past int64 is past any file: refused before the array
        # conversion (which would raise OverflowError)
        bad = next((i for i, off in enumerate(offsets) if not 0 <= off < 1 << 63), None)
        if bad is not None:
            raise offset_error(name, lines, bad, keys[bad], offsets[bad])
        key_array = _int64_or_none(keys) if key_type is int else None
        index = RecordIndex(keys if key_array is None else key_array,
                            np.asarray(offsets, dtype=np.int64), name)  # fmt: skip
    else:
        index = RecordIndex(parsed[0], parsed[1], name)
    _check_offsets(index, lines)
    _check_unique(index, lines)
    if local_ints and isinstance(index.keys, np.ndarray):
        dense = index.dense_table
        if write_cache(path, before, index.keys, index.offsets, *(dense if dense else (None, 0))):
            # the copy just written, mapped: what a spawned DataLoader
            # worker receives is then its name, not the arrays
            cached = read_cache(path, before)
            if cached is not None:
                return _from_copy(cached, name)
    return index


def _from_copy(cached: Cached, name: str) -> RecordIndex:
    """An index over the arrays of a binary copy (:func:`read_cache`)."""
    index = RecordIndex(cached.keys, cached.offsets, name)
    if len(cached.table):
        index.use_table(cached.table, cached.base)
    elif not index.build_lookup():
        raise duplicate_error(name, None, index.key_list())
    return index


def index_arrays(path: str | os.PathLike[str]) -> tuple[Any, np.ndarray]:
    """``(keys, offsets)`` of an ``.idx`` as it is, for the commands that
    judge it (duplicates and stray offsets are theirs to report): int64
    arrays for integer keys (8 bytes a record each, parsed a block at a
    time), else a list of keys; a malformed line raises
    :class:`IndexFormatError` naming it."""
    import numpy as np

    parsed = parse_file_fast(path, None)
    if parsed is not None:
        return parsed
    keys, offsets = read_index_entries(path)
    bad = next((i for i, off in enumerate(offsets) if not _INT64_MIN < off < _INT64_MAX), None)
    if bad is not None:  # (line numbers: the text's, blank lines counted as read_index_entries)
        raise offset_error(os.fspath(path), None, bad, keys[bad], offsets[bad])
    key_array = _int64_or_none(keys)
    return (keys if key_array is None else key_array), np.asarray(offsets, dtype=np.int64)


def _int64_or_none(keys: list[Any]) -> np.ndarray | None:
    """Integer keys as an int64 array; None when one does not fit."""
    import numpy as np

    if keys and not all(_INT64_MIN < k < _INT64_MAX for k in (min(keys), max(keys))):
        return None
    return np.asarray(keys, dtype=np.int64)


def _py(key: Any) -> Any:
    return key.item() if hasattr(key, "item") else key  # numpy scalar -> int


def _check_offsets(index: RecordIndex, lines: list[int] | None) -> None:
    import numpy as np

    off = index.offsets
    bad = np.flatnonzero(~can_start(off))
    if len(bad):
        i = int(bad[0])
        raise offset_error(index.name, lines, i, _py(index.keys[i]), int(off[i]))


def _check_unique(index: RecordIndex, lines: list[int] | None) -> None:
    """Build the lookup table, which finds a key written twice on the way."""
    if not index.build_lookup():
        raise duplicate_error(index.name, lines, index.key_list())

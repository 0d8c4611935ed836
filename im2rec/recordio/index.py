"""``.idx`` files: one ``key<TAB>offset`` line per record (spec §2.2).

``offset`` is the byte position of the record's first magic word in the
``.rec``. Lines are in write order, not sorted. im2rec.py writes the ``.lst``
index as the key; rec2idx.py writes 0..N-1.

Loading is vectorised for the common case (integer keys, one TAB per line):
a million lines parse in about a tenth of a second. Anything unusual (string
keys, blank lines, space separators, extra columns) takes a line-by-line path
that also produces the precise error for a malformed line.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported on first use: `rec verify`/`rec index` start without it
    import numpy as np

from ..errors import DuplicateKeyError, IndexFormatError, MissingFileError
from .files import split_lines

__all__ = ["RecordIndex", "format_index_line", "load_index", "read_index_entries"]

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
KeyType = Callable[[str], Any]
# Integer `key<TAB>offset` lines and nothing else (the last newline optional).
_SIMPLE_LINES = re.compile(rb"(?:-?[0-9]+\t-?[0-9]+\n)*(?:-?[0-9]+\t-?[0-9]+)?")


class RecordIndex:
    """Keys and record offsets of one ``.rec``, in ``.idx`` line order.

    ``keys`` is an int64 array for integer keys, else a list; ``offsets`` is
    an int64 array (made on first access when the index was built from a
    list, so counting and saving one need no numpy). Lookups by key build
    their table on first use: a flat list when integer keys are dense (the
    usual 0..N-1 permutation), a dict otherwise.
    """

    __slots__ = ("_by_key", "_dense", "_dense_base", "_offsets", "keys", "name")

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
        self._dense: list[int] | None = None
        self._dense_base = 0

    @property
    def offsets(self) -> np.ndarray:
        offsets = self._offsets
        if isinstance(offsets, Sequence):
            import numpy as np

            offsets = self._offsets = np.asarray(offsets, dtype=np.int64)
        return offsets

    def __len__(self) -> int:
        return len(self._offsets)

    def key_list(self) -> list[Any]:
        """Keys as a list of Python objects."""
        return _as_list(self.keys)

    def offset_map(self) -> dict[Any, int]:
        """``{key: offset}`` (built once, then cached)."""
        if self._by_key is None:
            self._by_key = dict(zip(self.key_list(), _as_list(self._offsets), strict=True))
        return self._by_key

    def offset_of(self, key: Any) -> int:
        """Offset of the record stored under ``key``; ``KeyError`` if none."""
        dense = self._dense
        if dense is None and self._by_key is None:
            dense = self._build_dense()
        if dense is not None and type(key) is int:
            i = key - self._dense_base
            if 0 <= i < len(dense) and dense[i] >= 0:
                return dense[i]
            raise KeyError(key)
        try:
            return self.offset_map()[key]
        except KeyError:
            raise KeyError(key) from None

    def _build_dense(self) -> list[int] | None:
        import numpy as np

        keys = self.keys
        if not isinstance(keys, np.ndarray) or not len(keys):
            return None
        base, span = int(keys.min()), int(keys.max()) - int(keys.min()) + 1
        if span > 4 * len(keys) + 1024:
            return None  # sparse keys: a dict is smaller
        table = np.full(span, -1, dtype=np.int64)
        table[keys - base] = self.offsets
        self._dense, self._dense_base = table.tolist(), base
        return self._dense

    def text(self) -> str:
        """The ``.idx`` file's text."""
        return "".join(map(format_index_line, self.key_list(), _as_list(self._offsets)))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write as a ``.idx`` file, atomically (temp file + rename; to a
        URL, one upload: an object appears whole)."""
        from ..storage import write_bytes  # stdlib only, like this package

        write_bytes(path, self.text().encode("utf-8"))

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


def _read(
    path: str | os.PathLike[str], storage_options: dict[str, Any] | None = None
) -> tuple[str, bytes]:
    from ..storage import read_bytes

    name = os.fspath(path)
    try:
        return name, read_bytes(path, storage_options)
    except FileNotFoundError:
        raise MissingFileError(
            f"{name}: index file not found; rebuild it from the .rec with `rec index REC` "
            "(in Python: build_index(RecordReader(rec)).save(idx))"
        ) from None


def read_index_entries(
    path: str | os.PathLike[str], key_type: KeyType = int, *, check: bool = False
) -> tuple[list[Any], list[int]]:
    """The ``.idx`` lines as ``(keys, offsets)`` lists, without numpy.

    The syntax is checked (a malformed line raises :class:`IndexFormatError`
    naming it); with ``check``, also what :func:`load_index` checks (keys
    unique, offsets that can start a record), else duplicate keys and
    offsets that are not record heads are the caller's to judge, as ``rec
    verify`` does. Use :func:`load_index` for lookups.
    """
    name, data = _read(path)
    lines: list[int] | None = None
    if key_type is int and _SIMPLE_LINES.fullmatch(data):
        values = list(map(int, data.split()))
        keys, offsets = values[0::2], values[1::2]
    else:
        keys, offsets, lines = _parse_lines(data, name, key_type)
    if check:
        bad = next((i for i, off in enumerate(offsets) if off < 0 or off % 4), None)
        if bad is not None:
            raise _offset_error(name, lines, bad, keys[bad], offsets[bad])
        if len(set(keys)) != len(keys):
            raise _duplicate_error(name, lines, keys)
    return keys, offsets


def load_index(
    path: str | os.PathLike[str],
    key_type: KeyType = int,
    *,
    storage_options: dict[str, Any] | None = None,
) -> RecordIndex:
    """Read a ``.idx`` file (a path or a URL). Duplicate keys, malformed lines
    and negative or unaligned offsets raise :class:`IndexFormatError` naming
    the line."""
    import numpy as np

    name, data = _read(path, storage_options)
    parsed = _parse_fast(data) if key_type is int else None
    lines: list[int] | None = None  # position -> line number, when they differ
    if parsed is None:
        keys, offsets, lines = _parse_lines(data, name, key_type)
        # an offset past int64 is past any file: refused before the array
        # conversion (which would raise OverflowError)
        bad = next((i for i, off in enumerate(offsets) if not 0 <= off < 1 << 63), None)
        if bad is not None:
            raise _offset_error(name, lines, bad, keys[bad], offsets[bad])
        index = RecordIndex(keys, np.asarray(offsets, dtype=np.int64), name)
    else:
        index = RecordIndex(parsed[0::2], parsed[1::2], name)
    _check_offsets(index, lines)
    _check_unique(index, lines)
    return index


def _parse_fast(data: bytes) -> np.ndarray | None:
    """Parse ``int<TAB>int<LF>`` lines with numpy, or return None to fall back."""
    import numpy as np

    if b"\r" in data or b" " in data:
        return None
    if data and not data.endswith(b"\n"):
        data += b"\n"
    raw = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(raw == 10)
    tabs = np.flatnonzero(raw == 9)
    # Exactly one TAB inside every line: TABs and newlines must interleave.
    if len(tabs) != len(newlines) or not (
        (tabs < newlines).all() and (tabs[1:] > newlines[:-1]).all()
    ):
        return None
    if not len(newlines):
        return np.empty(0, dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            values = np.fromstring(data, dtype=np.int64, sep=" ")
        except (ValueError, DeprecationWarning):
            return None
    # fromstring saturates on overflow and tolerates empty fields; re-check.
    if (
        len(values) != 2 * len(newlines)
        or (values == _INT64_MAX).any()
        or (values == _INT64_MIN).any()
    ):
        return None
    return values


def _parse_lines(
    data: bytes, name: str, key_type: KeyType
) -> tuple[list[Any], list[int], list[int]]:
    keys: list[Any] = []
    offsets: list[int] = []
    linenos: list[int] = []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad_line = data[: exc.start].count(b"\n") + 1
        raise IndexFormatError(
            f"{name}:{bad_line}: not UTF-8 text; an .idx holds `key<TAB>offset` lines"
        ) from exc
    for lineno, line in enumerate(split_lines(text), 1):
        if not line.strip():
            continue  # blank lines carry nothing; MXNet raised here, we skip
        fields = line.split("\t")
        if len(fields) < 2:
            fields = line.split()
        if len(fields) < 2:
            raise IndexFormatError(
                f"{name}:{lineno}: expected `key<TAB>offset`, got {line!r}; "
                "rebuild the index from the .rec"
            )
        try:
            key = key_type(fields[0].strip())
        except (TypeError, ValueError) as exc:
            raise IndexFormatError(
                f"{name}:{lineno}: key {fields[0]!r} does not parse as "
                f"{getattr(key_type, '__name__', key_type)}: {exc}"
            ) from exc
        try:
            offset = int(fields[1].strip())
        except ValueError as exc:
            raise IndexFormatError(
                f"{name}:{lineno}: offset {fields[1]!r} is not an integer byte position"
            ) from exc
        keys.append(key)
        offsets.append(offset)
        linenos.append(lineno)
    return keys, offsets, linenos


def _py(key: Any) -> Any:
    return key.item() if hasattr(key, "item") else key  # numpy scalar -> int


def _line(lines: list[int] | None, position: int) -> int:
    return position + 1 if lines is None else lines[position]


def _check_offsets(index: RecordIndex, lines: list[int] | None) -> None:
    import numpy as np

    off = index.offsets
    bad = np.flatnonzero((off < 0) | (off % 4 != 0))
    if len(bad):
        i = int(bad[0])
        raise _offset_error(index.name, lines, i, _py(index.keys[i]), int(off[i]))


def _offset_error(
    name: str, lines: list[int] | None, i: int, key: Any, offset: int
) -> IndexFormatError:
    return IndexFormatError(
        f"{name}:{_line(lines, i)}: key {key!r} has offset {offset}, which cannot start a "
        "record (offsets are non-negative multiples of 4); rebuild the index from the .rec"
    )


def _has_duplicates(keys: np.ndarray) -> bool:
    import numpy as np

    if not len(keys):
        return False
    base, span = int(keys.min()), int(keys.max()) - int(keys.min()) + 1
    if span <= 4 * len(keys) + 1024:  # dense keys: counting beats sorting
        return bool(np.bincount(keys - base, minlength=span).max() > 1)
    ordered = np.sort(keys)
    return bool((ordered[1:] == ordered[:-1]).any())


def _check_unique(index: RecordIndex, lines: list[int] | None) -> None:
    import numpy as np

    keys = index.keys
    if isinstance(keys, np.ndarray):
        if not _has_duplicates(keys):
            return
        key_list = keys.tolist()
    else:
        key_list = keys
        if len(set(key_list)) == len(key_list):
            return
    raise _duplicate_error(index.name, lines, key_list)


def _duplicate_error(name: str, lines: list[int] | None, keys: list[Any]) -> DuplicateKeyError:
    """The error naming the first key of ``keys`` seen twice (there is one)."""
    seen: dict[Any, int] = {}
    for i, key in enumerate(keys):
        if key in seen:
            return DuplicateKeyError(
                f"{name}:{_line(lines, i)}: key {key!r} appears again (first on line "
                f"{_line(lines, seen[key])}); keys must be unique: rebuild the index from the .rec"
            )
        seen[key] = i
    raise AssertionError("no key appears twice")

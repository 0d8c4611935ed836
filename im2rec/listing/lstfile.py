"""Reading and writing ``.lst`` files and class maps (finding them and their
image root: :mod:`.finding`).

A ``.lst`` line is ``index<TAB>label[<TAB>label ...]<TAB>path`` (docs/format.md, "List files",
``read_list``): fields are TAB-separated and stripped, the index is an integer
(it becomes the record key and header id), labels are floats, the path is the
last field. im2rec.py printed a message and skipped a malformed line; here it
is an error naming the line, because a silently shorter dataset is worse.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DatasetError, Im2RecError, MissingFileError
from ..native import load
from ..recordio.header import stored_label
from ..storage.files import open_regular, split_lines

_EXACT = float(1 << 24)  # float32 holds every whole number up to here, and nothing overflows

__all__ = [
    "ListItem",
    "ListStream",
    "iter_lst",
    "bad_chars",
    "cannot_carry",
    "float_texts",
    "format_lst_line",
    "item_line",
    "lst_pieces",
    "lst_text",
    "printable",
    "read_lst",
]


@dataclass(frozen=True, slots=True)
class ListItem:
    """One ``.lst`` line."""

    key: int
    labels: tuple[float, ...]
    path: str
    line: int


def read_lst(path: str | os.PathLike[str]) -> list[ListItem]:
    """Parse a ``.lst`` file; blank lines are skipped, anything else that is
    not ``index<TAB>label...<TAB>path`` raises :class:`DatasetError`, as does
    an index used twice. A Python object a line: :class:`ListStream` reads
    one without holding it."""
    stream = ListStream.scan(path)
    return list(stream)


class ListStream:
    """A ``.lst`` read as a stream: checked whole once (:meth:`scan`: the
    line syntax, and every index used once, with 8 bytes an entry), then
    read again a block at a time whenever its entries are needed, so a list
    of 42M lines costs no memory that grows with it but those 8 bytes
    during the scan (docs/performance.md, "Scale")."""

    def __init__(self, path: str | os.PathLike[str], count: int, multi_label: int):
        self.path = Path(os.fspath(path))
        self.count = count
        #: entries with more than one label
        self.multi_label = multi_label

    @classmethod
    def scan(cls, path: str | os.PathLike[str]) -> ListStream:
        """Check the whole list (raising :class:`DatasetError` naming the
        line, as :func:`read_lst` does) and count its entries."""
        from array import array

        keys = array("Q")
        multi = 0
        for item in iter_lst(path):
            keys.append(item.key)
            multi += len(item.labels) > 1
        _refuse_repeated_keys(path, keys)
        return cls(path, len(keys), multi)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[ListItem]:
        return iter_lst(self.path)

    def from_position(self, start: int) -> Iterator[ListItem]:
        """The entries from the ``start``-th on."""
        return itertools.islice(iter_lst(self.path), start, None)

    def find(self, key: int) -> tuple[int, ListItem] | None:
        """``(position, entry)`` of the entry with index ``key`` (a pass over
        the list), or None."""
        for position, item in enumerate(iter_lst(self.path)):
            if item.key == key:
                return position, item
        return None


def _refuse_repeated_keys(path: str | os.PathLike[str], keys: Any) -> None:
    """The first index used twice is an error naming both lines: the keys
    are sorted in place (no copy) to find it, then the list is read again
    for the lines."""
    import numpy as np

    if len(keys) < 2:
        return
    ordered = np.frombuffer(keys, dtype=np.uint64)
    ordered.sort()
    repeated = None
    for start in range(0, len(ordered) - 1, 1 << 20):
        piece = ordered[start : start + (1 << 20) + 1]
        hits = np.flatnonzero(piece[1:] == piece[:-1])
        if len(hits):
            repeated = int(piece[hits[0]])
            break
    if repeated is None:
        return
    name = os.fspath(path)
    first = None
    for item in iter_lst(path):
        if item.key != repeated:
            continue
        if first is None:
            first = item.line
            continue
        raise DatasetError(
            f"{name}:{item.line}: index {repeated} is already used on line {first}; "
            "indexes become .idx keys and must be unique"
        )


#: the bytes of a list decoded and cut into lines at a time
_BLOCK = 1 << 18


def iter_lst(path: str | os.PathLike[str]) -> Iterator[ListItem]:
    """The entries of a ``.lst``, read a block at a time (memory does not
    grow with the list); lines end at ``\n``, ``\r\n`` or ``\r`` only, as
    :func:`~im2rec.storage.files.split_lines` cuts them. A malformed line
    raises :class:`DatasetError` naming it; repeated indexes are
    :meth:`ListStream.scan`'s to find."""
    name = os.fspath(path)
    try:
        fd, _ = open_regular(name)
    except FileNotFoundError:
        raise MissingFileError(f"{name}: list file not found") from None
    except Im2RecError as exc:
        raise DatasetError(str(exc)) from None
    lineno, consumed, rest = 0, 0, b""
    with os.fdopen(fd, "rb") as f:
        first = True
        while True:
            block = f.read(_BLOCK)
            data = rest + block
            if first and data.startswith(b"\xef\xbb\xbf"):  # a BOM (Windows editors)
                data, consumed = data[3:], 3
            first = False
            if block:  # cut after the last line end (not a final \r: \r\n may follow)
                cut = max(data.rfind(b"\n"), data.rfind(b"\r", 0, len(data) - 1)) + 1
            else:
                cut = len(data)
            if cut == 0 and block:
                rest = data
                continue
            try:
                text = data[:cut].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(
                    f"{name}: not UTF-8 text ({exc.reason} at byte {consumed + exc.start:,})"
                ) from exc
            consumed += cut
            rest = data[cut:]
            for raw in split_lines(text):
                lineno += 1
                item = _parse_line(raw, lineno, name)
                if item is not None:
                    yield item
            if not block:
                return


def _parse_line(raw: str, lineno: int, name: str) -> ListItem | None:
    """One line as an entry (None for a blank line); :class:`DatasetError`
    naming the line when it is not ``index<TAB>label...<TAB>path``."""
    fields = [f.strip() for f in raw.strip().split("\t")]
    if fields == [""]:
        return None
    if len(fields) < 3:
        raise DatasetError(
            f"{name}:{lineno}: expected `index<TAB>label<TAB>path` (TAB-separated), "
            f"got {raw!r}; fix or delete the line"
        )
    try:
        key = int(fields[0])
        labels = tuple(float(v) for v in fields[1:-1])
        for value in labels:  # (OverflowError past float32, as pack() would raise later)
            if not -_EXACT <= value <= _EXACT and stored_label(value) is None:
                raise DatasetError(
                    f"{name}:{lineno}: the label {value:.0f} is a whole number float32 "
                    "cannot hold (past 16,777,216 not every one can): records store labels "
                    "as float32, where it would become another label; renumber the classes"
                )
    except OverflowError:
        raise DatasetError(
            f"{name}:{lineno}: a label does not fit float32 (largest about 3.4e38), and "
            "records store labels as float32; fix the line"
        ) from None
    except ValueError as exc:
        raise DatasetError(
            f"{name}:{lineno}: {exc}; the index must be an integer and labels numbers"
        ) from None
    if key < 0 or key >= 1 << 64:
        raise DatasetError(
            f"{name}:{lineno}: index {key} is outside 0..2**64-1 (it becomes the record id)"
        )
    if "\0" in fields[-1]:
        raise DatasetError(
            f"{name}:{lineno}: the path holds a NUL character, which no file name can; "
            "fix or delete the line"
        )
    return ListItem(key, labels, fields[-1], lineno)


# -- writing -------------------------------------------------------------


def bad_chars(text: str) -> bool:
    """Whether ``text`` holds what no ``.lst`` line can: a TAB (the field
    separator), a newline or carriage return (the line separators, see
    :func:`~im2rec.storage.files.split_lines`), or undecodable bytes (the
    file is UTF-8)."""
    if "\t" in text or "\n" in text or "\r" in text:
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes arrive as surrogates
        return True
    return False


def cannot_carry(path: str) -> bool:
    """Whether a ``.lst`` line cannot carry ``path`` as its last field:
    :func:`bad_chars`, or whitespace at either end (readers strip fields)."""
    return not path or bad_chars(path) or path[0].isspace() or path[-1].isspace()


def format_lst_line(entry: tuple[int, int, str]) -> str:
    """``index<TAB>label<TAB>path``; the label as ``%f``, like im2rec.py 1.9.1,
    which both MXNet readers (read_list and ImageRecordIter) parse."""
    key, label, path = entry
    return f"{key}\t{label:f}\t{path}\n"


def item_line(item: ListItem) -> str:
    """A parsed ``.lst`` line written back; :func:`read_lst` reads the same
    key, labels (``repr`` keeps every float exactly) and path."""
    return "\t".join([str(item.key), *map(repr, item.labels), item.path]) + "\n"


def lst_text(entries: Sequence[tuple[int, int, str]], label_texts: list[str]) -> str:
    # format_lst_line for a whole list, with each label's text made once
    return "".join(lst_pieces(entries, label_texts))


def lst_pieces(
    entries: Iterable[tuple[int, int, str]], label_texts: list[str], lines: int = 1 << 13
) -> Iterator[str]:
    """:func:`lst_text` a ``lines``-line piece at a time (memory: one piece)."""
    source = iter(entries)
    while piece := list(itertools.islice(source, lines)):
        yield "".join([f"{i}\t{label_texts[label]}\t{path}\n" for i, label, path in piece])


def box_lst_pieces(
    indices: Sequence[int],
    paths: Callable[[Sequence[int]], list[str]],
    spans: Callable[[Sequence[int]], tuple[Any, Any, Any]],
    lines: int = 1 << 13,
) -> Iterator[str]:
    """Detection ``.lst`` text of the entries ``indices``, ``lines`` lines a
    piece: the index, the entry's label vector (:func:`float_texts`), then
    its path; ``paths(indices)`` gives the paths, ``spans(indices)`` the
    float32 values and where each label starts and ends in them."""
    for start in range(0, len(indices), lines):
        piece = indices[start : start + lines]
        rows = zip(piece, float_texts(*spans(piece)), paths(piece), strict=True)
        yield "".join([f"{i}\t{text}\t{path}\n" for i, text, path in rows])


#: the magnitude from which numpy's str() writes a float32 in scientific
#: notation (numpy 2: 1e6; numpy 1: 1e16), read off the numpy in use
_POSITIONAL_BELOW: float | None = None


def float_texts(values: Any, starts: Any, ends: Any) -> list[str]:
    """Each run ``values[starts[k]:ends[k]]`` (float32) as ``.lst`` label
    text: each value as numpy's ``str`` writes it (its shortest text, which
    reads back to the same float32), TAB-separated. The C extension writes
    the very same text (``im2rec.listing._text``, tested against numpy)."""
    import numpy as np

    global _POSITIONAL_BELOW
    if _POSITIONAL_BELOW is None:
        _POSITIONAL_BELOW = 1e6 if str(np.float32(1e6)) == "1e+06" else 1e16
    native = load("text")
    values = np.ascontiguousarray(values, np.float32)
    starts = np.ascontiguousarray(starts, np.int64)
    ends = np.ascontiguousarray(ends, np.int64)
    if native is not None:
        return list(native.floats_text(values, starts, ends, _POSITIONAL_BELOW))
    pairs = zip(starts.tolist(), ends.tolist(), strict=True)
    return ["\t".join(map(str, values[s:e])) for s, e in pairs]


def printable(path: str) -> str:
    """A path for reports: undecodable bytes and control characters escaped."""
    text = path.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")

"""The text of a ``.idx``: ``key<TAB>offset`` lines, parsed the fast way
(integer lines, by numpy, a block at a time into arrays of the exact size)
or line by line (anything else, with the line named in errors). See
:mod:`.index` for what is made of them."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .codec import can_start

if TYPE_CHECKING:  # numpy is imported on first use: `rec verify`/`rec index` start without it
    import numpy as np

from ..errors import DuplicateKeyError, IndexFormatError, MissingFileError
from ..storage.files import pread, split_lines

__all__ = ["duplicate_error", "line_of", "offset_error", "parse_file_fast", "parse_lines",
           "read_index_entries", "read_text"]  # fmt: skip

KeyType = Callable[[str], Any]
_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
# Integer `key<TAB>offset` lines and nothing else (the last newline optional).
_SIMPLE_LINES = re.compile(rb"(?:-?[0-9]+\t-?[0-9]+\n)*(?:-?[0-9]+\t-?[0-9]+)?")
#: the text parsed at a time (the arrays grow with the index; the text does
#: not: a small block keeps the temporaries small at no cost in speed)
_BLOCK = 2 << 20


def read_text(
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
    name, data = read_text(path)
    lines: list[int] | None = None
    if key_type is int and _SIMPLE_LINES.fullmatch(data):
        values = list(map(int, data.split()))
        keys, offsets = values[0::2], values[1::2]
    else:
        keys, offsets, lines = parse_lines(data, name, key_type)
    if check:
        bad = next((i for i, off in enumerate(offsets) if not can_start(off)), None)
        if bad is not None:
            raise offset_error(name, lines, bad, keys[bad], offsets[bad])
        if len(set(keys)) != len(keys):
            raise duplicate_error(name, lines, keys)
    return keys, offsets


def parse_file_fast(
    path: str | os.PathLike[str], storage_options: dict[str, Any] | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(keys, offsets)`` of an ``.idx`` of plain ``int<TAB>int`` lines, read
    and parsed a block at a time into arrays of the exact size (the lines are
    counted first, at memory speed); None when any line is not that simple
    (the caller then parses line by line)."""
    from ..storage import is_url

    fd = -1
    if is_url(path):
        _, data = read_text(path, storage_options)
        blocks: Callable[[], Iterator[bytes]] = lambda: _split_blocks(data)  # noqa: E731
    else:
        from ..storage.files import open_regular

        try:
            fd, size = open_regular(path)
        except FileNotFoundError:
            read_text(path)  # (raises the message for a missing index)
            raise
        blocks = lambda: _file_blocks(fd, size)  # noqa: E731
    try:
        return _fill(blocks)
    finally:
        if fd >= 0:
            os.close(fd)


def _fill(blocks: Callable[[], Iterator[bytes]]) -> tuple[np.ndarray, np.ndarray] | None:
    import numpy as np

    count = sum(block.count(b"\n") + (not block.endswith(b"\n")) for block in blocks())
    keys = np.empty(count, dtype=np.int64)
    offsets = np.empty(count, dtype=np.int64)
    at = 0
    for block in blocks():
        values = _parse_fast(block)
        if values is None:
            return None
        n = len(values) // 2
        if at + n > count:  # the file grew between the passes
            return None
        keys[at : at + n] = values[0::2]
        offsets[at : at + n] = values[1::2]
        at += n
    if at != count:
        return None
    return keys, offsets


def _split_blocks(data: bytes) -> Iterator[bytes]:
    """``data`` in pieces of about :data:`_BLOCK` bytes, each ending at a newline."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", min(start + _BLOCK, len(data)) - 1)
        end = len(data) if end < 0 else end + 1
        yield data[start:end]
        start = end


def _file_blocks(fd: int, size: int) -> Iterator[bytes]:
    """The first ``size`` bytes of the file in pieces of about :data:`_BLOCK`
    bytes, each ending at a newline (or the file's end); read with pread,
    so each pass starts afresh."""
    rest, at = b"", 0
    while at < size:
        piece = pread(fd, min(_BLOCK, size - at), at)
        if not piece:
            break
        at += len(piece)
        piece = rest + piece
        cut = piece.rfind(b"\n") + 1
        rest, piece = piece[cut:], piece[:cut]
        if piece:
            yield piece
    if rest:
        yield rest


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


def parse_lines(
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


def line_of(lines: list[int] | None, position: int) -> int:
    return position + 1 if lines is None else lines[position]


def offset_error(
    name: str, lines: list[int] | None, i: int, key: Any, offset: int
) -> IndexFormatError:
    return IndexFormatError(
        f"{name}:{line_of(lines, i)}: key {key!r} has offset {offset}, which cannot start a "
        "record (offsets are non-negative multiples of 4); rebuild the index from the .rec"
    )


def duplicate_error(name: str, lines: list[int] | None, keys: list[Any]) -> DuplicateKeyError:
    """The error naming the first key of ``keys`` seen twice (there is one)."""
    seen: dict[Any, int] = {}
    for i, key in enumerate(keys):
        if key in seen:
            return DuplicateKeyError(
                f"{name}:{line_of(lines, i)}: key {key!r} appears again (first on line "
                f"{line_of(lines, seen[key])}); keys must be unique: rebuild the index from the "
                ".rec"
            )
        seen[key] = i
    raise AssertionError("no key appears twice")

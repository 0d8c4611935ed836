"""Large JSON annotation files read as a stream into columns
(docs/performance.md, "Detection at scale"): a COCO-style file of any size
(Objects365's several GB) costs its columns, a few bytes an annotation, not
a Python object a field.

The file is one JSON object; each *section* named in the spec is a list of
objects whose named *fields* become columns, one row an item, in file
order, whatever the sections' order in the file. A field's column holds
its kind (:data:`MISSING`, :data:`INT`, ..., one byte a row) and, by the
field's type: ``"i"`` an int64, ``"f"`` a float64, ``"b"`` 0 or 1 when the
value is a number (or bool) equal to it and 2 otherwise, ``"q"`` four
float64 (kind :data:`QUAD` when the value is a list of exactly four
numbers), ``"s"`` UTF-8 text. Other keys and values are read past. The
JSON is Python's (``NaN`` and ``Infinity`` too, the last of a key given
twice), in UTF-8; a section given twice is refused.

The reading is C's (``im2rec.listing._text``) where it was built, else
Python's ``json`` an item at a time: the same columns either way. Rules
(what a good value is) are the caller's; to name a bad value, it reads the
item back (:func:`item_at`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from ...errors import DatasetError, MissingFileError
from ...native import load
from ...storage import is_url
from .jsonkinds import DTYPES, STRING, Spec
from .jsonpython import PyReader

__all__ = ["Column", "Columns", "PyReader", "Spec", "item_at", "read_columns"]


#: the bytes read at a time
PIECE = 4 << 20
#: the largest one item (or one top-level value) may be
MAX_ITEM = 256 << 20


class Column(NamedTuple):
    """A field's rows, in pieces as read: each piece ``(kinds, values)``,
    values ``(text, ends)`` for text fields."""

    name: str
    type: str
    pieces: list[tuple[np.ndarray, Any]]

    def kinds(self) -> np.ndarray:
        return _joined([kinds for kinds, _ in self.pieces], np.uint8)

    def values(self) -> np.ndarray:
        width = 4 if self.type == "q" else 1
        out = _joined([values for _, values in self.pieces], DTYPES[self.type])
        return out.reshape(-1, 4) if width == 4 else out

    def texts(self) -> list[str | None]:
        """Each row's text (``None`` where it was not text)."""
        out: list[str | None] = []
        for kinds, (text, ends) in self.pieces:
            start = 0
            for kind, end in zip(kinds.tolist(), ends.tolist(), strict=True):
                text_k = text[start:end].decode("utf-8", "surrogatepass")
                out.append(text_k if kind == STRING else None)
                start = end
        return out


def _joined(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, dtype)


class Columns(NamedTuple):
    """What :func:`read_columns` read: ``sections[name][field]`` and how each
    section was (``how[name]``: :data:`ABSENT`, :data:`LIST`, :data:`FALSY`,
    :data:`TRUTHY`) with its item count."""

    sections: dict[str, dict[str, Column]]
    how: dict[str, tuple[int, int]]


def _pieces(path: str, size: int) -> Iterator[bytes]:
    """The file's bytes, ``size`` at a time (a leading UTF-8 BOM dropped)."""
    first = True
    if is_url(path):
        from ...storage import open_view

        view = open_view(path)
        try:
            offset = 0
            while offset < view.size:
                data = view.read(offset, min(size, view.size - offset))
                offset += len(data)
                yield data[3:] if first and data.startswith(b"\xef\xbb\xbf") else data
                first = False
        finally:
            view.close()
        return
    from ...storage.files import open_regular

    try:
        fd, _ = open_regular(path)
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such annotation file") from None
    with os.fdopen(fd, "rb") as f:
        while data := f.read(size):
            yield data[3:] if first and data.startswith(b"\xef\xbb\xbf") else data
            first = False


def _reader(spec: Spec, find: tuple[str, int] | None) -> Any:
    native = load("text")
    return native.Reader(spec, find) if native is not None else PyReader(spec, find)


def _run(path: str, reader: Any, stop_when_found: bool = False) -> Iterator[tuple[bytes, int]]:
    """Feed ``path`` to ``reader``; yields (the data fed, bytes used) after
    each feed. DatasetError naming the byte for a syntax error."""
    pending = b""
    base = 0  # the file offset of pending's first byte
    source = _pieces(path, PIECE)
    eof = False
    while True:
        if not eof:
            data = next(source, None)
            if data is None:
                eof = True
            else:
                pending = pending + data if pending else data
        if len(pending) > MAX_ITEM and not eof:
            eof_now = True  # (an item this large is refused: read as if it were the end)
        else:
            eof_now = eof
        try:
            used = reader.feed(pending, eof_now)
        except ValueError as exc:
            at, what = exc.args if len(exc.args) == 2 else (0, str(exc))
            raise DatasetError(_syntax(path, base + at, what, eof_now and not eof)) from None
        yield pending, used
        if stop_when_found and reader.found is not None:
            return
        pending = pending[used:]
        base += used
        if eof_now:
            return


def _syntax(path: str, at: int, what: str, too_large: bool) -> str:
    big = f" (or an item of more than {MAX_ITEM >> 20} MiB)" if too_large else ""
    if what == "not UTF-8 text":
        return f"{path}: not UTF-8 text (byte {at:,})"
    if what.startswith("nested deeper"):
        return f"{path}: nested deeper than a COCO file is (byte {at:,})"
    return f"{path}: not JSON ({what} at byte {at:,}{big})"


def read_columns(path: str, spec: Spec) -> Columns:
    """The columns of ``spec``'s sections and fields in the JSON file at
    ``path`` (local or a URL), read a piece at a time."""
    reader = _reader(spec, None)
    sections: dict[str, dict[str, Column]] = {
        name: {field: Column(field, kind, []) for field, kind in fields} for name, fields in spec
    }
    for _ in _run(path, reader):
        for name, fields in reader.take().items():
            for field, kinds, values, lengths in fields:
                column = sections[name][field]
                k = np.frombuffer(kinds, np.uint8)
                if not len(k):
                    continue
                if column.type == "s":
                    ends = np.cumsum(np.frombuffer(lengths, np.int64))
                    column.pieces.append((k, (values, ends)))
                else:
                    column.pieces.append((k, np.frombuffer(values, DTYPES[column.type])))
    return Columns(sections, reader.sections())


def item_at(path: str, section: str, k: int) -> Any:
    """Item ``k`` of ``section`` in the JSON file at ``path``, as Python's
    ``json`` reads it (to name a value in a message)."""
    reader = _reader([(section, [])], (section, k))
    for data, _ in _run(path, reader, stop_when_found=True):
        if reader.found is not None:
            start, end = reader.found
            return json.loads(bytes(data[start:end]))
    raise DatasetError(f"{path}: {section} has no item {k}")

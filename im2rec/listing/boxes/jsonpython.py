"""The Python reader of :mod:`.jsoncolumns`, where the C one was not
built (and its reference in the tests): Python's ``json`` an item at a
time, the same feeds and the same columns as ``im2rec.listing._text.Reader``
(a value's kind and number as the C reader gives them)."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from .jsonkinds import (
    ABSENT,
    ARRAY,
    BIGINT,
    DTYPES,
    FALSE,
    FALSY,
    FLOAT,
    INT,
    LIST,
    MISSING,
    NULL,
    OBJECT,
    QUAD,
    STRING,
    TRUE,
    TRUTHY,
    Spec,
)  # fmt: skip

__all__ = ["PyReader", "kind_of"]

_WS = re.compile(r"[ \t\n\r]*")
#: what may follow a number to the end of a piece and still be part of it
_TAIL = re.compile(r"[0-9.eE+\-]*\Z")
_START, _FIRST_KEY, _KEY, _VALUE, _FIRST_ITEM, _ITEM, _AFTER_ITEM, _AFTER_VALUE, _END = range(9)


class _More(Exception):
    """The text ran out in the middle of a token."""


class _Syntax(Exception):
    """A syntax error at a character of the text (its byte offset is
    counted once, when it is reported)."""

    def __init__(self, at: int, what: str) -> None:
        super().__init__(at, what)
        self.at, self.what = at, what


class PyReader:
    """What ``_text.Reader`` does, in Python: the same feeds, the same
    columns (a value's kind and number as the C reader gives them)."""

    def __init__(self, spec: Spec, find: tuple[str, int] | None = None) -> None:
        self._fields = {name: list(fields) for name, fields in spec}
        self._rows: dict[str, dict[str, list[Any]]] = {
            name: {f: [] for f, _ in fields} for name, fields in spec
        }
        self._how = {name: ABSENT for name in self._fields}
        self._items = dict.fromkeys(self._fields, 0)
        self._state, self._current = _START, None
        self._find = find
        self.found: tuple[int, int] | None = None
        self._decoder = json.JSONDecoder()

    def feed(self, data: bytes, eof: bool) -> int:
        self.found = None
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            if eof or exc.reason != "unexpected end of data":
                raise ValueError(exc.start, "not UTF-8 text") from None
            text = bytes(data[: exc.start]).decode("utf-8")
        used = self._run(text, eof)
        return len(text[:used].encode("utf-8"))

    def _value(self, text: str, at: int, eof: bool) -> tuple[Any, int]:
        try:
            value, end = self._decoder.raw_decode(text, at)
            if not eof and _TAIL.match(text, end):  # (a number may go on in the next piece)
                raise _More()
            return value, end
        except json.JSONDecodeError as exc:
            if not eof:
                raise _More() from None
            raise _Syntax(exc.pos, exc.msg) from None
        except RecursionError:
            raise _Syntax(at, "nested deeper than 512") from None

    def _run(self, text: str, eof: bool) -> int:
        at = 0
        while True:
            mark = at
            at = _WS.match(text, at).end()  # type: ignore[union-attr]
            if at >= len(text):
                if not eof or self._state == _END:
                    return at
                raise ValueError(len(text.encode("utf-8")), "Expecting value")
            try:
                at = self._step(text, at, eof)
            except _More:
                return mark
            except _Syntax as exc:
                raise ValueError(len(text[: exc.at].encode("utf-8")), exc.what) from None
            if self.found is not None:
                return at

    def _step(self, text: str, at: int, eof: bool) -> int:
        ch, state = text[at], self._state
        where = at
        if state == _START:
            if ch != "{":
                raise _Syntax(where, "not a JSON object")
            self._state = _FIRST_KEY
            return at + 1
        if state in (_FIRST_KEY, _KEY):
            if ch == "}" and state == _FIRST_KEY:
                self._state = _END
                return at + 1
            if ch != '"':
                raise _Syntax(where, "Expecting property name enclosed in double quotes")
            key, at = self._value(text, at, eof)
            at = _WS.match(text, at).end()  # type: ignore[union-attr]
            if at >= len(text):
                if eof:
                    raise _Syntax(len(text), "Expecting ':' delimiter")
                raise _More()
            if text[at] != ":":
                raise _Syntax(at, "Expecting ':' delimiter")
            if key in self._how and self._how[key] != ABSENT:
                raise _Syntax(where, "a section given twice")
            self._current = key if key in self._how else None
            self._state = _VALUE
            return at + 1
        if state == _VALUE:
            if ch == "[":
                if self._current is not None:
                    self._how[self._current] = LIST
                self._state = _FIRST_ITEM
                return at + 1
            value, at = self._value(text, at, eof)
            if self._current is not None:
                self._how[self._current] = TRUTHY if value else FALSY
            self._state = _AFTER_VALUE
            return at
        if state in (_FIRST_ITEM, _ITEM):
            if ch == "]" and state == _FIRST_ITEM:
                self._state = _AFTER_VALUE
                return at + 1
            start = at
            item, at = self._value(text, at, eof)
            self._state = _AFTER_ITEM
            if self._current is not None:
                k = self._items[self._current]
                self._add(self._current, item)
                if self._find == (self._current, k):
                    head = len(text[:start].encode("utf-8"))
                    self.found = (head, head + len(text[start:at].encode("utf-8")))
            return at
        if state in (_AFTER_ITEM, _AFTER_VALUE):
            close = "]" if state == _AFTER_ITEM else "}"
            if ch == ",":
                self._state = _ITEM if state == _AFTER_ITEM else _KEY
                return at + 1
            if ch == close:
                self._state = _AFTER_VALUE if state == _AFTER_ITEM else _END
                return at + 1
            raise _Syntax(where, "Expecting ',' delimiter")
        raise _Syntax(where, "Extra data")

    def _add(self, section: str, item: Any) -> None:
        self._items[section] += 1
        rows = self._rows[section]
        for field, kind in self._fields[section]:
            present = isinstance(item, dict) and field in item
            rows[field].append(_cell(item[field], kind) if present else _cell_missing(kind))

    def take(self) -> dict[str, list[tuple[str, bytes, bytes, bytes | None]]]:
        out: dict[str, list[tuple[str, bytes, bytes, bytes | None]]] = {}
        for section, fields in self._fields.items():
            taken: list[tuple[str, bytes, bytes, bytes | None]] = []
            for field, kind in fields:
                cells = self._rows[section][field]
                kinds = bytes(c[0] for c in cells)
                if kind == "s":
                    texts = [c[1] for c in cells]
                    lengths = np.asarray([len(t) for t in texts], np.int64).tobytes()
                    taken.append((field, kinds, b"".join(texts), lengths))
                else:
                    values = np.asarray([c[1] for c in cells], DTYPES[kind]).tobytes()
                    taken.append((field, kinds, values, None))
                cells.clear()
            out[section] = taken
        return out

    def sections(self) -> dict[str, tuple[int, int]]:
        return {name: (self._how[name], self._items[name]) for name in self._fields}


def kind_of(value: Any) -> int:
    if value is None:
        return NULL
    if value is True or value is False:
        return TRUE if value else FALSE
    if isinstance(value, int):
        return INT if -(1 << 63) <= value < (1 << 63) else BIGINT
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, str):
        return STRING
    return ARRAY if isinstance(value, list) else OBJECT


def _number(value: Any) -> float:
    """A number's float64 (a huge int: infinite, as the C reader reads it)."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def _cell_missing(kind: str) -> tuple[int, Any]:
    return (MISSING, {"i": 0, "f": 0.0, "b": 2, "q": (0.0,) * 4, "s": b""}[kind])


def _cell(value: Any, kind: str) -> tuple[int, Any]:
    k = kind_of(value)
    numeric = k in (INT, BIGINT, FLOAT, TRUE, FALSE)
    if kind == "i":
        return (k, value if k == INT else 0)
    if kind == "f":
        return (k, _number(value) if numeric else 0.0)
    if kind == "b":
        number = _number(value) if numeric else None
        return (k, 0 if number == 0 else 1 if number == 1 else 2)
    if kind == "q":
        quad = (
            k == ARRAY
            and len(value) == 4
            and all(kind_of(v) in (INT, BIGINT, FLOAT) for v in value)
        )
        return (QUAD, tuple(map(_number, value))) if quad else (k, (0.0,) * 4)
    return (k, value.encode("utf-8", "surrogatepass") if k == STRING else b"")

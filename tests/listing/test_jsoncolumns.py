"""Large JSON annotation files as columns (listing.boxes.jsoncolumns): the C
reader and the Python one give the same columns for any document, fed in
any pieces, and both agree with Python's json on what a value is; float32
labels are written as numpy's str() writes them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from im2rec import native
from im2rec.errors import DatasetError
from im2rec.listing.boxes import jsoncolumns, jsonkinds
from im2rec.listing.boxes.jsoncolumns import PyReader, item_at, read_columns
from im2rec.listing.boxes.jsonpython import kind_of
from im2rec.listing.lstfile import float_texts
from im2rec.storage.confined import all_plain, is_plain

TEXT = native.load("text")
needs_native = pytest.mark.skipif(TEXT is None, reason="the C extension is not built")

SPEC = [
    ("images", [("id", "i"), ("file_name", "s"), ("width", "i")]),
    ("annotations", [("image_id", "i"), ("bbox", "q"), ("iscrowd", "b"), ("area", "f")]),
]
_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.just(10**400), st.just(-(10**400)),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
)  # fmt: skip
_VALUE = st.recursive(
    _SCALAR, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=4), inner,
                                                                          max_size=3),
    max_leaves=8,
)  # fmt: skip
_KEYS = st.sampled_from(["id", "file_name", "width", "image_id", "bbox", "iscrowd", "area", "x"])
_ITEM = st.one_of(
    st.dictionaries(_KEYS, _VALUE | st.lists(_SCALAR, min_size=4, max_size=4), max_size=6),
    _VALUE,
)
_DOC = st.dictionaries(
    st.sampled_from(["images", "annotations", "info", "categories"]),
    st.lists(_ITEM, max_size=6) | _VALUE,
    max_size=4,
)


def feed(reader: Any, data: bytes, piece: int) -> None:
    """Feed ``data`` a ``piece`` at a time, as read_columns does: what is
    not used is fed again with the next piece."""
    pending, at = b"", 0
    while True:
        chunk = data[at : at + piece]
        at += len(chunk)
        pending += chunk
        eof = at >= len(data)
        pending = pending[reader.feed(pending, eof) :]
        if eof:
            return


def columns(reader: Any) -> Any:
    return reader.take(), reader.sections()


def both(data: bytes, piece: int) -> tuple[Any, Any]:
    """What each reader makes of ``data``: its columns, or its error."""
    out = []
    for reader in (TEXT.Reader(SPEC), PyReader(SPEC)):
        try:
            feed(reader, data, piece)
            out.append(columns(reader))
        except ValueError as exc:
            out.append(("error", exc.args[1] if len(exc.args) == 2 else exc.args))
    return out[0], out[1]


def same(native_got: Any, python_got: Any) -> None:
    if native_got[0] == "error" or python_got[0] == "error":
        assert native_got[0] == python_got[0] == "error", (native_got, python_got)
        return
    assert native_got[1] == python_got[1]  # each section's form and item count
    for section in native_got[0]:
        for (name, kinds, values, lengths), (_, kinds2, values2, lengths2) in zip(
            native_got[0][section], python_got[0][section], strict=True
        ):
            assert kinds == kinds2, (section, name)
            assert lengths == lengths2, (section, name)
            if lengths is None:  # (numbers: NaN's bits may differ)
                a, b = np.frombuffer(values, np.uint8), np.frombuffer(values2, np.uint8)
                dtype = {"i": np.int64, "f": np.float64, "b": np.uint8, "q": np.float64}[
                    dict(dict(SPEC)[section])[name]
                ]
                x, y = a.view(dtype), b.view(dtype)
                assert np.array_equal(
                    x, y, equal_nan=dtype is not np.int64 and dtype is not np.uint8
                )
            else:
                assert values == values2, (section, name)


@needs_native
@settings(max_examples=300, deadline=None)
@given(doc=_DOC, piece=st.sampled_from([1, 2, 3, 7, 64, 1 << 20]), indent=st.sampled_from([None, 1]),
       ascii_only=st.booleans())  # fmt: skip
def test_both_readers_make_the_same_columns(
    doc: dict, piece: int, indent: int | None, ascii_only: bool
) -> None:
    data = json.dumps(doc, indent=indent, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    native_got, python_got = both(data, piece)
    same(native_got, python_got)
    if native_got[0] != "error":  # a document json.dumps wrote is read, as json reads it
        _agrees_with_json(doc, native_got[0])


@needs_native
@settings(max_examples=300, deadline=None)
@given(doc=_DOC, cut=st.integers(0, 10_000), insert=st.binary(max_size=3),
       piece=st.sampled_from([1, 5, 1 << 20]))  # fmt: skip
def test_both_readers_refuse_the_same_damage(
    doc: dict, cut: int, insert: bytes, piece: int
) -> None:
    data = json.dumps(doc).encode("utf-8", "surrogatepass")
    cut %= len(data) + 1
    same(*both(data[:cut] + insert + data[cut + len(insert) :], piece))


def _agrees_with_json(doc: dict, got: dict) -> None:
    """The columns say of each item what json.loads does."""
    for section, fields in SPEC:
        items = doc.get(section)
        if not isinstance(items, list):
            continue
        for name, kind in fields:
            _, kinds, values, lengths = next(c for c in got[section] if c[0] == name)
            for k, item in enumerate(items):
                value = item.get(name, jsoncolumns) if isinstance(item, dict) else jsoncolumns
                want = _expected_kind(value, kind)
                assert kinds[k] == want, (section, name, value)
                if kind == "i" and want == jsonkinds.INT:
                    assert np.frombuffer(values, np.int64)[k] == value
                if kind == "q" and want == jsonkinds.QUAD:
                    got4 = np.frombuffer(values, np.float64).reshape(-1, 4)[k]
                    for v, g in zip(value, got4, strict=True):
                        assert _same_number(v, g)


def _expected_kind(value: Any, kind: str) -> int:
    if value is jsoncolumns:
        return jsonkinds.MISSING
    if (
        kind == "q" and isinstance(value, list) and len(value) == 4
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    ):  # fmt: skip
        return jsonkinds.QUAD
    return kind_of(value)


def _same_number(value: float, got: float) -> bool:
    try:
        want = float(value)
    except OverflowError:
        want = math.inf if value > 0 else -math.inf
    return (math.isnan(want) and math.isnan(got)) or want == got


@pytest.mark.parametrize("use_native", [True, False])
def test_sections_in_any_order_and_items_across_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_native: bool
) -> None:
    if use_native and TEXT is None:
        pytest.skip("the C extension is not built")
    if not use_native:
        monkeypatch.setattr(jsoncolumns, "load", lambda name: None)
    images = [{"id": 7, "file_name": "a/é.jpg", "width": 3}, {"id": 9, "width": 2.5}]
    anns = [{"image_id": 9, "bbox": [1, 2.5, 3, 4e0], "iscrowd": True}, [1, 2]]
    got = []
    for order in (("images", "annotations"), ("annotations", "images")):
        doc = {"info": {"x": [1, {"y": None}]}, **{name: {"images": images,
               "annotations": anns}[name] for name in order}}  # fmt: skip
        path = tmp_path / f"{order[0]}.json"
        path.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc, ensure_ascii=False).encode())
        monkeypatch.setattr(jsoncolumns, "PIECE", 3)
        cols = read_columns(str(path), SPEC)
        got.append((
            cols.how, cols.sections["images"]["file_name"].texts(),
            cols.sections["images"]["width"].kinds().tolist(),
            cols.sections["annotations"]["bbox"].values().tolist(),
            cols.sections["annotations"]["iscrowd"].values().tolist(),
        ))  # fmt: skip
        assert item_at(str(path), "annotations", 1) == [1, 2]
        assert item_at(str(path), "images", 0) == images[0]
    assert got[0] == got[1]
    how, names, widths, bboxes, crowds = got[0]
    assert how == {"images": (jsonkinds.LIST, 2), "annotations": (jsonkinds.LIST, 2)}
    assert names == ["a/é.jpg", None]
    assert widths == [jsonkinds.INT, jsonkinds.FLOAT]
    assert bboxes == [[1, 2.5, 3, 4], [0, 0, 0, 0]]
    assert crowds == [1, 2]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (b'{"images": [{"id": 1}], "images": []}', "a section given twice"),
        (b'{"images": [{"id": 1}]} x', "not JSON (Extra data at byte 24"),
        (b'{"images": [{"id": 1}', "not JSON"),
        (b'[{"images": []}]', "not a JSON object"),
        (b'{"images": [{"file_name": "\xff"}]}', "not UTF-8 text"),
        # (the C reader's bound is 512, Python's json its recursion limit)
        (b'{"images": [' + b"[" * 5000 + b"]" * 5000 + b"]}", "nested deeper than a COCO file is"),
    ],
)
def test_a_broken_file_is_one_clear_error(tmp_path: Path, text: bytes, words: str) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(text)
    with pytest.raises(DatasetError, match=words.replace("(", r"\(")):
        read_columns(str(path), SPEC)


# --- float32 labels as text ----------------------------------------------------------


def _numpy_texts(values: np.ndarray) -> list[str]:
    return [str(v) for v in values.astype(np.float32)]


def _texts(values: np.ndarray) -> list[str]:
    n = len(values)
    return float_texts(values, np.arange(n), np.arange(n) + 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), max_size=50))
def test_float_texts_are_numpys(values: list[float]) -> None:
    array = np.asarray(values, np.float32)
    assert _texts(array) == _numpy_texts(array)


def test_float_texts_are_numpys_where_it_is_hard() -> None:
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    twos = np.float32(2.0) ** np.arange(-149, 128, dtype=np.float32)
    edges = np.asarray([1e-4, 1e6, 1e16, 1e14, 1e-14, 16777216, 0.0, -0.0], np.float32)
    near = np.concatenate([np.nextafter(edges, np.float32(np.inf)),
                           np.nextafter(edges, np.float32(-np.inf))])  # fmt: skip
    widths = rng.integers(1, 5000, 100_000)
    fractions = np.round(rng.random(100_000) * widths, 2) / widths  # (COCO's boxes over widths)
    for values in (bits, twos, -twos, edges, near, fractions, np.arange(0, 1 << 24, 997)):
        values = values.astype(np.float32)
        assert _texts(values) == _numpy_texts(values)
    rows = float_texts(fractions.astype(np.float32), [0, 2, 5], [2, 5, 5])
    assert rows == [
        "\t".join(_numpy_texts(fractions[:2])),
        "\t".join(_numpy_texts(fractions[2:5])),
        "",
    ]


@needs_native
def test_float_texts_refuse_rows_outside_the_values() -> None:
    with pytest.raises(ValueError, match="outside"):
        TEXT.floats_text(np.zeros(3, np.float32), np.asarray([2], np.int64),
                         np.asarray([4], np.int64), 1e6)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(st.sampled_from("ab./\n -_é"), max_size=6), max_size=4))
def test_all_plain_is_each_plain(names: list[str]) -> None:
    assert all_plain(names) == all(map(is_plain, names))

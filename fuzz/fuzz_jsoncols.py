"""Large JSON annotation files as columns (``im2rec.listing._text.Reader``,
the C reader of ``rec list --boxes coco``): any bytes, fed in any pieces.
The C reader gives the columns the Python reader gives, or refuses what it
refuses; and the float32 text writer gives numpy's text for any bits."""

from __future__ import annotations

import atheris
from _harness import run

with atheris.instrument_imports():
    import numpy as np

    from im2rec.listing import _text
    from im2rec.listing.boxes.jsonpython import PyReader

SPEC = [
    ("images", [("id", "i"), ("file_name", "s"), ("width", "i")]),
    ("annotations", [("image_id", "i"), ("bbox", "q"), ("iscrowd", "b"), ("area", "f")]),
]


def read(reader: object, data: bytes, piece: int) -> object:
    pending, at = b"", 0
    try:
        while True:
            chunk = data[at : at + piece]
            at += len(chunk)
            pending += chunk
            eof = at >= len(data)
            pending = pending[reader.feed(pending, eof) :]  # type: ignore[attr-defined]
            if eof:
                break
    except ValueError:
        return "error"
    taken = reader.take()  # type: ignore[attr-defined]
    out = {}
    for section, fields in taken.items():
        for field, kinds, values, lengths in fields:
            if dict(dict(SPEC)[section])[field] in "fq":  # (a NaN's bits may differ)
                values = np.nan_to_num(np.frombuffer(values, np.float64), nan=7.5).tobytes()
            out[section, field] = (kinds, values, lengths)
    return reader.sections(), out  # type: ignore[attr-defined]


def test_one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    piece = fdp.ConsumeIntInRange(1, 64)
    floats = fdp.ConsumeBytes(4 * fdp.ConsumeIntInRange(0, 8))
    text = fdp.ConsumeBytes(fdp.remaining_bytes())
    native, python = read(_text.Reader(SPEC), text, piece), read(PyReader(SPEC), text, piece)
    if max(text.count(b"["), text.count(b"{")) > 500:  # (C's bound is 512, json's its recursion's)
        return
    assert (native == "error") == (python == "error"), (text, native, python)
    assert native == "error" or native == python, (text, native, python)
    values = np.frombuffer(floats[: len(floats) // 4 * 4], np.float32)
    n = len(values)
    upto = 1e6 if str(np.float32(1e6)) == "1e+06" else 1e16
    starts = np.arange(n, dtype=np.int64)
    got = _text.floats_text(values, starts, starts + 1, upto)
    assert got == [str(v) for v in values], (values, got)


if __name__ == "__main__":
    run(test_one)

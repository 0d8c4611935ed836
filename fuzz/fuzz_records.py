"""A ``.rec`` and its ``.idx`` read back (``recordio``, and ``rec verify``'s
walk): any bytes. An im2rec error, never another exception."""

from __future__ import annotations

import atheris
from _harness import run, scratch_file

with atheris.instrument_imports():
    from im2rec.errors import Im2RecError
    from im2rec.inspect.verifying import verify
    from im2rec.recordio import IndexedRecordReader, RecordReader, unpack


def test_one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    idx = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 256))
    rec = scratch_file(fdp.ConsumeBytes(fdp.remaining_bytes()), "d.rec")
    scratch_file(idx, "d.idx")
    try:
        for record in RecordReader(rec):
            unpack(record)
    except Im2RecError:
        pass
    try:
        reader = IndexedRecordReader(rec)
        for key in list(reader.keys)[:16]:
            reader.read_key(key)
    except Im2RecError:
        pass
    try:
        verify(rec)
    except Im2RecError:
        pass


if __name__ == "__main__":
    run(test_one)

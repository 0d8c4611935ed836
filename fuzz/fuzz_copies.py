"""The record copier (``im2rec.storage._copies.copy_records``): glue and
ranges of a source file, any offsets and lengths. The output is exactly the
glue and the ranges (or the index of the range the file ended in); bad
ranges are ValueError or OverflowError before anything is written."""

from __future__ import annotations

import os

import atheris
from _harness import SCRATCH, run, scratch_file

with atheris.instrument_imports():
    from im2rec.storage import _copies


def test_one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    source = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 4096))
    items = []
    for _ in range(fdp.ConsumeIntInRange(0, 6)):
        glue = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 16))
        if fdp.ConsumeIntInRange(0, 9) == 0:
            offset, length = fdp.ConsumeIntInRange(-(1 << 63), (1 << 63) - 1), fdp.ConsumeInt(8)
        else:
            offset, length = fdp.ConsumeIntInRange(0, 5000), fdp.ConsumeIntInRange(0, 5000)
        items.append((glue, offset, length))
    src = os.open(scratch_file(source, "src"), os.O_RDONLY)
    out_path = os.path.join(SCRATCH, "out")
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            ended = _copies.copy_records(out, [(g, src, o, n) for g, o, n in items])
        except (ValueError, OverflowError):
            assert os.fstat(out).st_size == 0
            return
        except OSError:  # the kernel's refusal (EOVERFLOW near 2**63): an error, as documented
            return
    finally:
        os.close(src)
        os.close(out)
    with open(out_path, "rb") as f:
        written = f.read()
    want, stop = b"", -1
    for i, (glue, offset, length) in enumerate(items):
        want += glue + source[offset : offset + length]
        if offset + length > len(source) and length:
            stop = i
            break
    assert ended == stop and written == want, (ended, stop, len(written), len(want))


if __name__ == "__main__":
    run(test_one)

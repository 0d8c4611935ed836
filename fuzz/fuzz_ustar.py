"""The C tar-header check (``im2rec.formats._ustar.plain_file``) against the
Python one it stands in for: whatever C accepts, Python accepts with the
same name and size."""

from __future__ import annotations

import atheris
from _harness import run

with atheris.instrument_imports():
    from im2rec.formats import _ustar
    from im2rec.formats.tars import _ustar_file


def test_one(data: bytes) -> None:
    block = data[:512].ljust(512, b"\0") if len(data) >= 300 else data
    found = _ustar.plain_file(block)
    if found is not None:
        assert _ustar_file(block) == found, (block, found)


if __name__ == "__main__":
    run(test_one)

"""Writing tar members: headers as tarfile writes them, and sizes read from a
header are never allocated before the bytes are there."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from im2rec.errors import DatasetError
from im2rec.formats.tars import samples
from im2rec.formats.tarwriter import member_header


@pytest.mark.parametrize("suffix", [".tar", ".tar.gz"])
def test_a_size_in_a_header_is_not_allocated_before_it_is_read(tmp_path: Path, suffix: str) -> None:
    """A header that claims 400 MB in a small shard: an error naming the
    member, with no 400 MB buffer made first (read directly, or by tarfile
    through a decompressor)."""
    import gzip
    import tracemalloc

    shard = tmp_path / f"liar{suffix}"
    data = member_header("a.jpg", 400 << 20) + b"\xff\xd8" * 600 + bytes(1024)
    shard.write_bytes(gzip.compress(data) if suffix == ".tar.gz" else data)
    tracemalloc.start()
    try:
        # (compressed, the claim is refused before a byte is inflated: no
        # real shard inflates to 400 MB from 2 kB)
        why = "is cut short" if suffix == ".tar" else "would inflate the shard past"
        with pytest.raises(DatasetError, match=f"member a.jpg {why}"):
            list(samples(str(shard)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


@given(
    name=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=120),
    size=st.integers(0, 8**11 + 5),
)
def test_member_headers_are_tarfiles_own(name: str, size: int) -> None:
    """The patched header template is byte for byte what tarfile writes (its
    ustar header; pax for names ustar cannot hold)."""
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o444, 0
    fmt = tarfile.USTAR_FORMAT if len(name) <= 100 and size < 8**11 else tarfile.PAX_FORMAT
    assert member_header(name, size) == info.tobuf(fmt, "utf-8", "surrogateescape")

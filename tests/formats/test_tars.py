"""Reading tar shards: members across and past read chunks, links and oversized
members skipped unread, image-sized members copied by the kernel, plain
headers read as tarfile reads them, and the C header check no looser than
the Python one."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from im2rec.errors import DatasetError
from im2rec.formats.tars import _sums_to, _ustar_file, plain_header, samples
from im2rec.formats.webdataset import import_webdataset
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.recordio.framing import MAGIC_BYTES, has_aligned_magic
from im2rec.storage.files import FileRange

from ..imagenet.test_members import read, tar_of
from .conftest import export_and_import, hostile, image, image_sized


def test_links_and_oversized_members_are_skipped_unread(tmp_path: Path) -> None:
    shard = hostile(tmp_path / "odd.tar", [
        ("a.jpg", tarfile.SYMTYPE, b""), ("a.cls", tarfile.REGTYPE, b"1"),
        ("b.jpg", tarfile.REGTYPE, b"y" * 300), ("b.cls", tarfile.REGTYPE, b"2"),
        ("c.jpg", tarfile.REGTYPE, image("JPEG", 1)), ("c.cls", tarfile.REGTYPE, b"3"),
    ])  # fmt: skip
    got = list(samples(str(shard), limit=200))
    assert got[0].skipped == {"jpg": "not a regular file"} and "jpg" not in got[0].fields
    assert got[1].skipped == {"jpg": "300 bytes, more than a record holds"}
    result = import_webdataset([str(shard)], tmp_path / "out")
    assert result.records == 2  # under the real bound, b's 300 bytes are fine
    assert result.skipped == {"no image": 1}  # a's image is a link


@pytest.mark.parametrize("range_from", [1000, 32 << 10])
@pytest.mark.parametrize("chunk", [512, 1024, 4096, 1 << 20])
@pytest.mark.slow
def test_members_across_and_beyond_read_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, range_from: int
) -> None:
    """A shard is read through one reused chunk: members that straddle a
    chunk's end, or are larger than a chunk, read as tarfile reads them,
    and keep their bytes while later chunks are read (small ones copied,
    large ones as ranges of the shard, scanned for the magic word piece by
    piece: an aligned word is found wherever the pieces end)."""
    from im2rec.formats import tars

    monkeypatch.setattr(tars._Ahead, "SIZE", chunk)
    monkeypatch.setattr(tars, "RANGE_FROM", range_from)
    rng = np.random.default_rng(chunk)
    shard = tmp_path / "chunks.tar"
    want = {}
    with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i, size in enumerate([0, 1, 511, 512, 513, 1023, 3000, 5000, 10_000, 7, 2048]):
            body = bytearray(rng.bytes(size))
            if size >= 3000:  # the magic word: unaligned, aligned, aligned past 4096
                at = {3000: 1001, 5000: 1024, 10_000: 4100}[size]
                body[at : at + 4] = MAGIC_BYTES
            for ext, data in (("bin", bytes(body)), ("cls", str(i).encode())):
                info = tarfile.TarInfo(f"s{i:03d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                want[(f"s{i:03d}", ext)] = data
    got = list(samples(str(shard)))  # all kept while later chunks are read
    assert {(s.key, ext): bytes(v) for s in got for ext, v in s.fields.items()} == want
    ranges = {s.key: v for s in got for v in s.fields.values() if isinstance(v, FileRange)}
    assert sorted(ranges) == [f"s{i:03d}" for i in (5, 6, 7, 8, 10)] * (range_from == 1000)
    # members that fit in a chunk are handed on as its bytes, larger ones as
    # ranges only; the chunks views hold are not filled again (at most
    # CHUNKS of them: then ranges only)
    in_memory = sorted(k for k, v in ranges.items() if v.data is not None)
    if chunk == 1 << 20:
        assert in_memory == sorted(ranges)
    elif chunk == 512:
        assert in_memory == []
    for key, found in ranges.items():
        assert found.magic == has_aligned_magic(bytes(found)) == (key in ("s007", "s008"))
    cut = shard.read_bytes()[: 512 * 30 + 100]  # inside the 10,000-byte member
    shard.write_bytes(cut)
    with pytest.raises(DatasetError, match="cut short|truncated"):
        list(samples(str(shard)))


@pytest.mark.parametrize("copy", ["from memory", "sendfile", "copy_file_range", "read and write"])
def test_image_sized_members_are_copied_by_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copy: str
) -> None:
    """Images from RANGE_FROM bytes go from .rec to shard and back as ranges:
    written from the chunk that read them, or (larger than a chunk) copied
    by whichever copy the system has; the .rec is byte-identical: whole
    records, records split at an aligned magic word (in the image or only
    in a header of several labels), odd lengths."""
    import errno

    from im2rec.formats import tars

    if copy != "from memory":  # every image larger than a chunk: copied file to file
        from im2rec.recordio.chunks import Chunks

        monkeypatch.setattr(Chunks, "SIZE", tars.RANGE_FROM - 512)  # (export's and import's)
    for name in ("sendfile", "copy_file_range")[
        : ("sendfile", "copy_file_range", "read and write").index(copy)
        if copy != "from memory"
        else 0
    ]:

        def refuse(*args: object, name: str = name) -> int:
            raise OSError(errno.ENOSYS, f"no {name} here")

        monkeypatch.setattr(os, name, refuse)
    rng = np.random.default_rng(7)
    size = tars.RANGE_FROM
    path = tmp_path / "large.rec"
    with IndexedRecordWriter(path) as w:
        w.write_key(0, pack((0, 1.0, 0, 0), image_sized(rng, size + 5, None)))
        w.write_key(1, pack((0, 2.0, 1, 0), image_sized(rng, size, size // 2 & ~3)))
        w.write_key(2, pack((0, 3.0, 2, 0), image_sized(rng, size + 3, size // 2 | 1)))
        magic_label = float(np.frombuffer(MAGIC_BYTES, "<f4")[0])
        w.write_key(3, pack((0, [magic_label, 1.0], 3, 0), image_sized(rng, size * 3, None)))
        w.write_key(4, pack((0, 4.0, 4, 0), image_sized(rng, size * 2 + 1, size)))
    back = export_and_import(path, tmp_path, maxcount=2)
    assert back.with_suffix(".rec").read_bytes() == path.read_bytes()
    assert back.with_suffix(".idx").read_bytes() == path.with_suffix(".idx").read_bytes()
    kept = [f for shard in sorted(tmp_path.glob("wds-*.tar")) for s in samples(str(shard))
            for f in s.fields.values() if isinstance(f, FileRange)]  # fmt: skip
    assert [f.magic for f in kept] == [False, True, False, False, True]
    assert all((f.data is None) == (copy != "from memory") for f in kept)


@given(
    name=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=100),
    size=st.integers(0, 8**11 - 1),
    fmt=st.sampled_from([tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT]),
)
def test_plain_headers_read_as_tarfile_reads_them(name: str, size: int, fmt: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o644
    block = info.tobuf(fmt, "utf-8", "strict")[:512]
    got = _ustar_file(block)
    if name.endswith("/"):  # a folder: tarfile's to read
        assert got is None
    else:
        parsed = tarfile.TarInfo.frombuf(block, "utf-8", "strict")
        assert got == (parsed.name, parsed.size) == (name, size)
    damaged = block[:200] + bytes([block[200] ^ 1]) + block[201:]
    assert _ustar_file(damaged) is None  # a checksum that does not add up


@given(
    name=st.text(st.characters(min_codepoint=1, max_codepoint=255), min_size=1, max_size=100),
    size=st.integers(0, 8**11 - 1),
    fmt=st.sampled_from([tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT]),
    edits=st.lists(st.tuples(st.integers(0, 511), st.integers(0, 255)), max_size=3),
)
@example(name="0", size=0, fmt=tarfile.USTAR_FORMAT, edits=[(157, 128)])  # a non-ASCII linkname
def test_the_header_shortcut_accepts_only_what_tarfile_reads_alike(
    name: str, size: int, fmt: int, edits: list[tuple[int, int]]
) -> None:
    """``plain_header`` is a shortcut for the usual spelling: on any
    header, it says None or exactly the name and size tarfile reads; on
    tarfile's own plain headers it answers itself."""
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o644
    try:
        block = bytearray(info.tobuf(fmt, "latin-1", "strict")[:512])
    except ValueError:  # (a name tarfile refuses)
        return
    fresh = bytes(block)
    for at, value in edits:  # damage anywhere, with the checksum set right or not
        block[at] = value
        if at % 2:
            block[148:156] = b"%06o\0 " % (sum(block[:148]) + 256 + sum(block[156:]))
    for data in (fresh, bytes(block)):
        got = plain_header(memoryview(data))
        if got is not None:
            # (as rec import's tarfile reads: its default encoding and errors)
            read = tarfile.TarInfo.frombuf(data, tarfile.ENCODING, "surrogateescape")
            assert read.isfile() and got == (read.name, read.size)
    plain = fresh[156] in b"0\0" and fresh[:100].split(b"\0")[0].isascii()
    if plain and not name.endswith("/") and len(name.encode("latin-1")) <= 100:
        assert plain_header(fresh) == _ustar_file(fresh) == (name, size)


@given(block=st.binary(min_size=512, max_size=512), delta=st.integers(-131_000, 131_000))
def test_the_fast_byte_sum_is_the_byte_sum(block: bytes, delta: int) -> None:
    total = sum(block)
    assert _sums_to(block, total)
    assert _sums_to(block, total + delta) == (delta == 0)
    assert not _sums_to(block, total + 65521) and not _sums_to(block, total - 255)


@pytest.mark.parametrize("size", [b"-0000000012", b"-0000077777", b" 0000000 12"])
def test_a_size_that_is_not_octal_digits_is_damage(tmp_path: Path, size: bytes) -> None:
    from im2rec.formats.tars import plain_header

    blob = bytearray(tar_of([("a.JPEG", b"x" * 10), ("b.JPEG", b"y" * 10)], tarfile.GNU_FORMAT))
    blob[124:135] = size
    blob[148:156] = b"        "
    blob[148:155] = b"%06o\0" % sum(blob[:512])
    assert plain_header(bytes(blob[:512])) is None
    with pytest.raises(DatasetError, match="damaged tar"):
        list(read(tmp_path, bytes(blob)))


def test_a_size_of_twelve_digits_is_read_as_tarfile_reads_it() -> None:
    # tar numbers end at a NUL: twelve digits and no terminator are one
    # number (10 here), not eleven digits (1) and a byte to ignore
    info = tarfile.TarInfo("a.jpg")
    info.size = 10
    block = bytearray(info.tobuf(tarfile.USTAR_FORMAT, "ascii", "strict")[:512])
    block[124:136] = b"000000000012"
    block[148:156] = b"%06o\0 " % (sum(block[:148]) + 256 + sum(block[156:]))
    read = tarfile.TarInfo.frombuf(bytes(block), "ascii", "strict")
    assert read.size == 10 and plain_header(bytes(block)) == ("a.jpg", 10)
    block[136] = (
        0x01  # a damaged mtime: tarfile refuses the header, so the shortcut does not take it
    )
    block[148:156] = b"%06o\0 " % (sum(block[:148]) + 256 + sum(block[156:]))
    assert plain_header(bytes(block)) is None

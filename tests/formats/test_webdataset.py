"""``rec export --to webdataset`` and ``rec import webdataset``: shards read by
the real ``webdataset`` library, round trips byte for byte, shards from
WebDataset's own ``ShardWriter``, and hostile tars."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from im2rec.errors import ConfigError, DatasetError, Im2RecError, MissingFileError
from im2rec.formats.shards import _braces, expand_shards
from im2rec.formats.tars import _sums_to, _ustar_file, samples
from im2rec.formats.tarwriter import member_header
from im2rec.formats.webdataset import export_webdataset, import_webdataset
from im2rec.packing import PackOptions, pack_list
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, pack, unpack
from im2rec.recordio.framing import MAGIC_BYTES, has_aligned_magic
from im2rec.storage.files import FileRange

from .test_faces import make_faces

wds = pytest.importorskip("webdataset")


def image(kind: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(out, kind)
    return out.getvalue()


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """Every kind of record a .rec holds: JPEG and PNG, whole and fractional
    labels, several labels, no payload, a payload that is no image and holds
    the magic word (a split record), ids that repeat and go back."""
    path = tmp_path / "mixed.rec"
    with IndexedRecordWriter(path) as w:
        for i in range(12):
            w.write_key(i, pack((0, float(i % 3), i, 0), image("JPEG", i)))
        w.write_key(12, pack((0, 0.5, 12, 7), image("PNG", 12)))
        w.write_key(13, pack((0, [1.0, 2.5, -1.0], 13, 0), image("JPEG", 13)))
        w.write_key(14, pack((0, [3.0, 4.0], 0, 0), b""))  # id 0 again, no image
        w.write_key(15, pack((0, 2.0, 15, 0), b"abcd" + MAGIC_BYTES + b"xyz" * 5))
        w.write_key(16, pack((0, 1.0, 15, 0), image("JPEG", 16)))  # the same id twice
    return path


def export_and_import(rec: Path, out: Path, **kw: int) -> Path:
    result = export_webdataset(rec, str(out / "wds-%04d.tar"), **kw)
    assert result.shards
    back = out / "back"
    import_webdataset(result.shards, back)
    return back


@pytest.mark.parametrize("headers", ["C check", "Python check"])
def test_round_trip_is_byte_identical(
    mixed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, headers: str
) -> None:
    from im2rec.formats import tars

    if headers == "Python check":  # (as built without a compiler)
        monkeypatch.setattr(tars, "_plain_file", None)
    back = export_and_import(mixed, tmp_path, maxcount=5)
    assert back.with_suffix(".rec").read_bytes() == mixed.read_bytes()
    assert back.with_suffix(".idx").read_bytes() == mixed.with_suffix(".idx").read_bytes()
    assert len(list(tmp_path.glob("wds-*.tar"))) == 4  # 17 samples, 5 a shard


def test_export_reads_the_index_in_any_order_and_refuses_a_bad_one(
    mixed: Path, tmp_path: Path
) -> None:
    """Each sample's .json names its record's .idx key: the lines may come
    in any order; an index with a key twice or an offset that cannot start
    a record is refused, naming the line, with no shard left."""
    idx = mixed.with_suffix(".idx")
    lines = idx.read_text().splitlines(keepends=True)
    idx.write_text("".join(reversed(lines)))
    back = export_and_import(mixed, tmp_path / "any-order")
    assert back.with_suffix(".rec").read_bytes() == mixed.read_bytes()
    assert sorted(back.with_suffix(".idx").read_text().splitlines(keepends=True)) == sorted(lines)
    for bad, message in (
        (lines[:3] + [lines[1]], r"mixed.idx:4: key 1 appears again \(first on line 2\)"),
        (lines[:2] + ["7\t6\n"], r"mixed.idx:3: key 7 has offset 6, which cannot start a record"),
    ):
        idx.write_text("".join(bad))
        out = tmp_path / "refused"
        with pytest.raises(Im2RecError, match=message):
            export_webdataset(mixed, str(out / "s-%04d.tar"))
        assert not out.exists() or not list(out.iterdir())


@pytest.mark.parametrize("first_key", [0, -5, 2**63 + 5])
def test_every_key_comes_back(tmp_path: Path, first_key: int) -> None:
    """Keys are kept as int64 arrays while exporting; keys past int64 as
    they are."""
    path = tmp_path / "keys.rec"
    with IndexedRecordWriter(path) as w:
        for i in range(3):
            w.write_key(first_key + i * 7, pack((0, 1.0, i, 0), image("JPEG", i)))
    result = export_webdataset(path, str(tmp_path / "k-%03d.tar"))
    keys = [json.loads(bytes(s.fields["json"]))["key"] for s in samples(result.shards[0])]
    assert keys == [first_key + i * 7 for i in range(3)]


# webdataset leaves its shard files for the garbage collector to close
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_webdataset_library_reads_every_sample(mixed: Path, tmp_path: Path) -> None:
    result = export_webdataset(mixed, str(tmp_path / "s-%06d.tar"), maxcount=6)
    got = list(wds.WebDataset(result.shards, shardshuffle=False))
    reader = IndexedRecordReader(mixed)
    assert len(got) == len(reader.keys) == 17
    keys = [s["__key__"] for s in got]
    assert len(set(keys)) == 17 and all("." not in k for k in keys)
    assert keys[:3] == ["000000000", "000000001", "000000002"]
    assert keys[14] == "000000000-14" and keys[16] == "000000015-16"
    for sample, key in zip(got, reader.keys, strict=True):
        header, payload = unpack(reader.read_key(key))
        meta = json.loads(sample["json"])
        assert meta["id"] == header.id and meta["id2"] == header.id2 and meta["key"] == key
        assert meta["flag"] == header.flag
        images = {ext: v for ext, v in sample.items() if ext in ("jpg", "png", "bin")}
        if payload:
            ((ext, data),) = images.items()
            assert data == payload
            assert ext == ("png" if key == 12 else "bin" if key == 15 else "jpg")
        else:
            assert not images
        if header.flag == 0 and float(header.label).is_integer():
            assert int(sample["cls"]) == int(header.label)
        else:
            assert "cls" not in sample
            assert meta["label"] == (
                header.label.tolist() if header.flag else [float(header.label)]
            )


def test_face_layout_round_trip(tmp_path: Path) -> None:
    make_faces(tmp_path / "faces", [3, 2, 4])
    lst = tmp_path / "faces.lst"
    lst.write_text("".join(f"{i}\t{i % 3}.000000\tid{i % 3}/{i // 3:03d}.jpg\n"
                           for i in range(8)))  # fmt: skip
    pack_list(lst, PackOptions(pass_through=True, layout="insightface"))
    back = export_and_import(lst.with_suffix(".rec"), tmp_path)
    assert back.with_suffix(".rec").read_bytes() == lst.with_suffix(".rec").read_bytes()
    assert back.with_suffix(".idx").read_bytes() == lst.with_suffix(".idx").read_bytes()


def test_shards_from_webdatasets_shardwriter(tmp_path: Path) -> None:
    pattern = str(tmp_path / "theirs-%03d.tar")
    with wds.ShardWriter(pattern, maxcount=4, verbose=0) as sink:
        for i in range(10):
            sample = {"__key__": f"dir/s{i:04d}", "jpg": image("JPEG", i), "cls": i % 4,
                      "json": {"class_id": float(i % 5), "caption": "x"}}  # fmt: skip
            if i == 3:
                del sample["cls"]  # no label
            if i == 7:
                del sample["jpg"]  # no image
            sink.write(sample)
    shards = expand_shards([str(tmp_path / "theirs-{000..002}.tar")])
    assert len(shards) == 3
    result = import_webdataset(shards, tmp_path / "from-cls")
    assert result.records == 8 and result.skipped == {"no label": 1, "no image": 1}
    assert result.report is not None
    report = result.report.read_text()
    assert "dir/s0003\tno label" in report and "dir/s0007\tno image" in report
    reader = IndexedRecordReader(tmp_path / "from-cls.rec")
    kept = [i for i in range(10) if i not in (3, 7)]
    for key, i in zip(reader.keys, kept, strict=True):
        header, payload = unpack(reader.read_key(key))
        assert header.id == key and header.label == i % 4 and payload == image("JPEG", i)
    by_json = import_webdataset(shards, tmp_path / "from-json", label_key="class_id")
    assert by_json.records == 9  # sample 3 has its .json label
    labels = [unpack(r)[0].label for r in IndexedRecordReader(tmp_path / "from-json.rec")]
    assert labels == [float(i % 5) for i in range(10) if i != 7]


def hostile(path: Path, members: list[tuple[str, bytes, bytes]]) -> Path:
    """A tar of ``(name, type, data)`` members."""
    with tarfile.open(path, "w") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.type, info.size = kind, len(data) if kind == tarfile.REGTYPE else 0
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return path


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([("../up/x.jpg", tarfile.REGTYPE, b"x")], "must be relative paths inside"),
        ([("/abs/x.jpg", tarfile.REGTYPE, b"x")], "is an absolute path"),
        ([("a.jpg", tarfile.REGTYPE, b"x"), ("a.jpg", tarfile.REGTYPE, b"y")], "appears twice"),
    ],
)
def test_hostile_tars_are_refused(
    tmp_path: Path, members: list[tuple[str, bytes, bytes]], message: str
) -> None:
    shard = hostile(tmp_path / "bad.tar", members)
    with pytest.raises(DatasetError, match=message):
        import_webdataset([str(shard)], tmp_path / "out")
    assert not (tmp_path / "out.rec").exists()


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


def image_sized(rng: np.random.Generator, size: int, magic_at: int | None) -> bytes:
    body = bytearray(b"\xff\xd8\xff\xe0" + rng.bytes(size - 4))
    body[:] = body.replace(MAGIC_BYTES, b"____")
    if magic_at is not None:
        body[magic_at : magic_at + 4] = MAGIC_BYTES
    return bytes(body)


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
    import os

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


def test_a_shard_changed_while_it_is_read_is_refused(mixed: Path, tmp_path: Path) -> None:
    """Ranges of a shard are copied after it was scanned: a shard that
    another program writes to meanwhile is refused, not copied half-new."""
    import os

    (shard,) = export_webdataset(mixed, str(tmp_path / "one.tar")).shards
    reading = samples(shard)
    next(reading)
    os.utime(shard, ns=(0, 1))  # as a write would leave it
    with pytest.raises(DatasetError, match="changed while it was being read"):
        list(reading)


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


def test_damaged_and_missing_shards(mixed: Path, tmp_path: Path) -> None:
    (shard,) = export_webdataset(mixed, str(tmp_path / "one.tar")).shards
    data = Path(shard).read_bytes()
    Path(shard).write_bytes(data[: len(data) // 2 + 100])
    with pytest.raises(DatasetError, match="one.tar: .*(cut short|damaged|truncated)"):
        import_webdataset([shard], tmp_path / "out")
    (tmp_path / "not.tar").write_bytes(b"hello" * 100)
    with pytest.raises(DatasetError, match="not.tar: not a readable tar file"):
        import_webdataset([str(tmp_path / "not.tar")], tmp_path / "out")
    with pytest.raises(MissingFileError, match="nope-000.tar: shard not found"):
        expand_shards([str(tmp_path / "nope-{000..001}.tar")])
    assert not (tmp_path / "out.rec").exists()


def rec(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "im2rec", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)  # fmt: skip


@pytest.mark.slow
def test_cli_export_and_import(mixed: Path, tmp_path: Path) -> None:
    done = rec("export", "mixed.rec", "--to", "webdataset", "-o", "wds/m-%03d.tar",
               "--maxcount", "10", "--json", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["samples"] == 17 and out["shards"] == ["wds/m-000.tar", "wds/m-001.tar"]
    done = rec("import", "webdataset", "wds/m-{000..001}.tar", "-o", "again", "--json",
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records"] == 17
    assert (tmp_path / "again.rec").read_bytes() == mixed.read_bytes()
    done = rec("import", "webdataset", "wds/*.tar", "-o", "again", cwd=tmp_path)
    assert done.returncode == 1 and "again.rec: already exists; pass --overwrite" in done.stderr
    done = rec("export", "mixed.rec", "--to", "webdataset", "-o", "one.tar", "--maxcount", "3",
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "needs a number pattern" in done.stderr
    assert not list(tmp_path.glob("*one.tar*"))


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


def test_brace_notation() -> None:
    assert _braces("a-{08..11}.tar") == ["a-08.tar", "a-09.tar", "a-10.tar", "a-11.tar"]
    assert _braces("{x,y}-{1..2}") == ["x-1", "x-2", "y-1", "y-2"]
    assert _braces("plain{}.tar") == ["plain{}.tar"]
    with pytest.raises(ConfigError, match="over 1,000,000 shards"):
        _braces("s-{0..99999999}.tar")


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
def test_the_c_header_check_accepts_only_what_the_python_one_does(
    name: str, size: int, fmt: int, edits: list[tuple[int, int]]
) -> None:
    """``_ustar.plain_file`` (C) is a shortcut for the usual spelling: on any
    header, it says None or exactly what ``_ustar_file`` says; on tarfile's
    own plain headers it answers itself."""
    c_check = pytest.importorskip("im2rec.formats._ustar", reason="built without a compiler")
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
        got = c_check.plain_file(memoryview(data))
        assert got is None or got == _ustar_file(data)
    plain = fresh[156] in b"0\0" and fresh[:100].split(b"\0")[0].isascii()
    if plain and not name.endswith("/") and len(name.encode("latin-1")) <= 100:
        assert c_check.plain_file(fresh) == _ustar_file(fresh) == (name, size)


@given(block=st.binary(min_size=512, max_size=512), delta=st.integers(-131_000, 131_000))
def test_the_fast_byte_sum_is_the_byte_sum(block: bytes, delta: int) -> None:
    total = sum(block)
    assert _sums_to(block, total)
    assert _sums_to(block, total + delta) == (delta == 0)
    assert not _sums_to(block, total + 65521) and not _sums_to(block, total - 255)


@pytest.mark.parametrize("where", ["in memory", "in the file"])
def test_an_export_whose_copies_fail_leaves_no_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Images read into a chunk are written from it at once; larger ones are
    copied into the shards on a thread, a batch at a time: a write or copy
    that fails (here: the disk is full) is raised by export, and no shard,
    finished or temporary, is left."""
    import errno

    from im2rec.recordio.chunks import Chunks
    from im2rec.storage import copying

    rng = np.random.default_rng(3)
    path = tmp_path / "big.rec"
    with IndexedRecordWriter(path) as w:
        for i in range(40):
            w.write_key(i, pack((0, float(i), i, 0), image_sized(rng, 100_000, None)))

    def full(fd: int, items: list[object]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    if where == "in the file":
        monkeypatch.setattr(Chunks, "SIZE", 50_000)
    monkeypatch.setattr(copying, "copy_batch", full)  # (here and on the copying thread)
    out = tmp_path / "out"
    with pytest.raises(OSError, match="No space left"):
        export_webdataset(path, str(out / "s-%04d.tar"), maxcount=15)
    assert not out.exists() or not list(out.iterdir())

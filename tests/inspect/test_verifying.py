"""rec index / verify / info: damage found at its offset, indexes rebuilt."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from array import array
from pathlib import Path

import pytest
from click.testing import CliRunner

from im2rec.cli import main
from im2rec.errors import RecordFormatError
from im2rec.inspect.scanning import rebuild_index
from im2rec.inspect.verifying import verify
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.recordio.framing import MAGIC_BYTES

from .test_scanning import corrupt


def test_verify_a_good_file(packed: Path) -> None:
    result = verify(packed, decode=True, manifest=packed.with_suffix(".pack.json"))
    assert result.ok and result.records == 30 and result.indexed == 30 and result.decoded == 30


def test_truncated_file(packed: Path) -> None:
    data = packed.read_bytes()
    packed.write_bytes(data[:-100])
    result = verify(packed)
    assert not result.ok
    assert "truncated inside a" in result.problems[0].message
    assert any("lists 30 records, the file holds 29" in p.message for p in result.problems)


def test_idx_from_another_file(packed: Path, tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "other.rec") as w:
        for i in range(30):
            w.write_key(i, b"x" * (i * 3 + 1))
    result = verify(packed, tmp_path / "other.idx")
    assert not result.ok and any(
        "is not the start of a record" in p.message for p in result.problems
    )


def test_changed_payload_fails_the_manifest_and_decode(packed: Path) -> None:
    index = rebuild_index(packed, keys="id")[0]
    head, key = index.offsets.tolist()[3], index.key_list()[3]
    corrupt(packed, head + 8 + 24, b"\x00" * 200)  # the JPEG's markers: it cannot decode
    result = verify(packed, decode=True, manifest=packed.with_suffix(".pack.json"))
    assert any("the .rec's SHA-256 differs" in p.message for p in result.problems)
    assert [(p.offset, p.key, p.message) for p in result.problems if p.offset is not None] == [
        (head, key, "the payload is not an image Pillow can read")
    ]
    assert result.decoded == 29


def test_verify_decode_reports_each_image_that_does_not_decode(packed: Path) -> None:
    index = rebuild_index(packed, keys="id")[0]
    heads, keys = index.offsets.tolist(), index.key_list()
    data = packed.read_bytes()
    for i in (4, 17):  # the frame says baseline JPEG, then lossless: libjpeg-turbo stops
        corrupt(packed, data.index(b"\xff\xc0", heads[i]), b"\xff\xc3")
    assert verify(packed).ok  # the frames are whole: only decoding finds it
    result = verify(packed, decode=True)
    assert not result.ok and result.decoded == 28
    assert [(p.offset, p.key) for p in result.problems] == [
        (heads[4], keys[4]),
        (heads[17], keys[17]),
    ]
    assert all(p.message.startswith("the image does not decode: ") for p in result.problems)


@pytest.mark.parametrize("word", ["magic", "length"])
def test_a_changed_frame_word_is_reported_at_its_record(packed: Path, word: str) -> None:
    heads = rebuild_index(packed)[0].offsets.tolist()
    for i in (0, 11, 29):
        whole = packed.read_bytes()
        at = heads[i] + (0 if word == "magic" else 4)
        corrupt(
            packed, at, b"\xde\xad\xbe\xef" if word == "magic" else (10**6).to_bytes(4, "little")
        )
        result = verify(packed)
        assert not result.ok and result.problems[0].offset == heads[i], (i, result.problems)
        packed.write_bytes(whole)


def test_cli(packed: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["verify", str(packed)])
    assert result.exit_code == 0 and result.output.endswith(": OK\n")
    result = runner.invoke(main, ["info", str(packed), "--json"])
    assert json.loads(result.output)["records"] == 30
    packed.with_suffix(".idx").unlink()
    result = runner.invoke(main, ["index", str(packed), "--keys", "id"])
    assert result.exit_code == 0 and "30 records indexed" in result.output
    corrupt(packed, 0, b"JUNK")
    result = runner.invoke(main, ["verify", str(packed), "--json"])
    assert result.exit_code == 1 and json.loads(result.output)["problems"][0]["offset"] == 0
    result = runner.invoke(main, ["index", str(packed)])
    assert (
        result.exit_code == 1 and result.output.startswith("Error: ") and "byte 0" in result.output
    )
    result = runner.invoke(
        main, ["index", str(packed), "--recover", "-o", str(packed.parent / "r.idx")]
    )
    assert (
        result.exit_code == 0
        and "29 records indexed, 1 damaged stretch(es) skipped" in result.output
    )


def test_verify_reports_each_duplicate_key_and_odd_offset(packed: Path) -> None:
    idx = packed.with_suffix(".idx")
    lines = idx.read_text().splitlines(True)
    key0, off0 = lines[0].split("\t")
    lines[1] = f"{key0}\t{lines[1].split(chr(9))[1]}"  # key 0 twice
    lines[2] = f"{lines[2].split(chr(9))[0]}\t{int(off0) + 2}\n"  # unaligned
    idx.write_text("".join(lines))
    result = verify(packed)
    messages = [p.message for p in result.problems]
    assert f"p.idx: 1 key(s) appear more than once: {key0}" in messages
    assert any(p.offset == int(off0) + 2 and "not the start of a record" in p.message
               for p in result.problems)  # fmt: skip
    assert result.indexed == 30 and result.records == 30


@pytest.mark.parametrize("command", [["verify"], ["index", "-o", "x.idx"]])
@pytest.mark.slow
def test_header_walks_start_without_numpy_rich_or_pillow(packed: Path, command: list[str]) -> None:
    # start-up is most of a warm `rec verify`: these imports would double it
    probe = (
        "import sys\nfrom im2rec.cli import main\n"
        f"try:\n    main({[command[0], str(packed), *command[1:]]!r})\nexcept SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print(sorted(m for m in ('numpy', 'rich', 'PIL') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=packed.parent, capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines()[-1] == "[]"


def test_damage_then_a_magic_word_in_the_last_bytes(tmp_path: Path) -> None:
    """The search for the next record head after damage must not read a
    header past the end when the file's last 4-7 bytes hold a magic word."""
    from im2rec.recordio import frame

    path = tmp_path / "tail.rec"
    path.write_bytes(frame(b"abcd") + b"\xff" * 8 + MAGIC_BYTES)
    result = verify(path)
    assert result.records == 1
    assert [p.offset for p in result.problems] == [12]


def test_manifest_record_count_that_disagrees_is_reported(packed: Path) -> None:
    manifest = packed.with_suffix(".pack.json")
    data = json.loads(manifest.read_text())
    data["records"] = 31  # the bytes and hashes still match: only the count lies
    manifest.write_text(json.dumps(data))
    result = verify(packed, manifest=manifest)
    assert [p.message for p in result.problems] == [
        "p.pack.json says 31 records, the file holds 30"
    ]


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_a_length_word_cut_into_the_padding_is_damage(tmp_path: Path, cut: int) -> None:
    """A record whose length word lost 1-3 bytes still ends where it did
    (the lost bytes became padding): verify reports the padding that is not
    zeros, and merge refuses the file, where both saw a whole file."""
    from im2rec.inspect.merging import merge_recs

    path = tmp_path / "cut.rec"
    with IndexedRecordWriter(path) as w:
        w.write_key(0, pack((0, 1.0, 0, 0), b"\xff\xd8" + b"\x07" * 98))  # 124 bytes: no padding
        w.write_key(1, pack((0, 2.0, 1, 0), b"\xff\xd8" + b"\x01" * 50))
    assert verify(path).ok
    data = bytearray(path.read_bytes())
    data[4] -= cut  # the first record's length, low byte: 124 - cut
    path.write_bytes(bytes(data))
    report = verify(path)
    assert report.records == 2
    assert [(p.offset, p.message) for p in report.problems] == [
        (0, f"the padding after the record's data at byte {132 - cut:,} is not zeros (MXNet "
            "pads with zeros): its length word is damaged")
    ]  # fmt: skip
    with pytest.raises(RecordFormatError, match=r"cut.rec: the padding .* is not zeros.*merged"):
        merge_recs([path], tmp_path / "merged.rec")
    assert not (tmp_path / "merged.rec").exists()


@pytest.mark.parametrize("damage", ["repeated and unaligned", "a line that is no entry"])
def test_an_index_parsed_beside_the_walk_is_judged_as_one_parsed_after(
    packed: Path, damage: str
) -> None:
    """``--boxes`` parses the .idx on a thread while the walk runs
    (im2rec.inspect.indexcheck.parse_ahead); what it finds of the index is
    what the parse after the walk finds, problems and count alike."""
    idx = packed.with_suffix(".idx")
    lines = idx.read_text().splitlines(True)
    if damage == "a line that is no entry":
        lines[4] = "four\tscore\n"
    else:
        key0, off0 = lines[0].split("\t")
        lines[1] = f"{key0}\t{lines[1].split(chr(9))[1]}"
        lines[2] = f"{lines[2].split(chr(9))[0]}\t{int(off0) + 2}\n"
    idx.write_text("".join(lines))

    def of_the_index(boxes: bool) -> tuple[int | None, list[tuple[int | None, object, str]]]:
        result = verify(packed, boxes=boxes)
        found = [(p.offset, p.key, p.message) for p in result.problems if "p.idx" in p.message]
        return result.indexed, found

    after, beside = of_the_index(False), of_the_index(True)
    assert beside == after and after[1]
    if damage == "a line that is no entry":
        assert after[0] is None and "p.idx:5: " in after[1][0][2]
    else:
        assert after[0] == 30 and len(after[1]) == 2


def test_parse_ahead_gives_the_parse_or_raises_its_error(packed: Path) -> None:
    from im2rec.errors import IndexFormatError
    from im2rec.inspect.indexcheck import parse_ahead
    from im2rec.recordio.index import index_arrays

    idx = str(packed.with_suffix(".idx"))
    keys, offsets = parse_ahead(idx)()
    want_keys, want_offsets = index_arrays(idx)
    assert keys.tolist() == want_keys.tolist() and offsets.tolist() == want_offsets.tolist()
    Path(idx).write_text("0\t0\n0\tx\n")
    with pytest.raises(IndexFormatError) as caught:
        index_arrays(idx)
    with pytest.raises(IndexFormatError, match=f"^{re.escape(str(caught.value))}$"):
        parse_ahead(idx)()


def _resident(path: Path) -> list[bool]:
    """Which of the file's pages are in the page cache: ``mincore`` over a
    read-only mapping made with libc (the test's own look at the cache)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]  # fmt: skip
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = (ctypes.c_ubyte * pages)()
    with open(path, "rb") as f:
        at = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
        assert at not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        try:
            assert libc.mincore(ctypes.c_void_p(at), size, vec) == 0, ctypes.get_errno()
        finally:
            libc.munmap(ctypes.c_void_p(at), size)
    return [bool(v & 1) for v in vec]


@pytest.mark.skipif(sys.platform != "linux", reason="posix_fadvise and mincore: Linux")
def test_a_cold_walk_has_the_heads_its_index_lists_read_ahead(tmp_path: Path) -> None:
    """Over a cold file a walk of frame heads waited for one read at a
    time; the heads the .idx lists are now asked of the kernel at once
    (indexcheck.parse_ahead's hints): their pages come into the page cache, the
    pages between them do not, and verify finds what it found before."""
    import os
    import time

    from im2rec.inspect.indexcheck import parse_ahead
    from im2rec.recordio import read_index_entries

    rec = tmp_path / "big.rec"
    with IndexedRecordWriter(rec) as w:
        for i in range(24):
            w.write_key(i, pack((0, float(i % 3), i, 0), bytes([i]) * (256 << 10)))
    os.sync()
    fd = os.open(rec, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        if any(_resident(rec)):
            pytest.skip("this file system keeps the file's pages (tmpfs?): nothing to read ahead")
        offsets = read_index_entries(rec.with_suffix(".idx"))[1]
        hints = (fd, rec.stat().st_size, 100)
        parsed = parse_ahead(str(rec.with_suffix(".idx")), lists=True, hints=hints)
        page = 4096
        heads = {o // page for o in offsets}
        deadline = time.monotonic() + 30
        while not all((cached := _resident(rec))[p] for p in heads):
            assert time.monotonic() < deadline, "the heads' pages were not read ahead"
            time.sleep(0.01)
        assert parsed() == read_index_entries(rec.with_suffix(".idx"))  # (and the hints stop)
        middles = [(o + (128 << 10)) // page for o in offsets]
        assert not any(cached[p] for p in middles)
    finally:
        os.close(fd)
    good = verify(rec)
    assert good.ok and good.records == good.indexed == 24


@pytest.mark.parametrize("damage", ["repeated and unaligned", "a line that is no entry", "none"])
def test_a_walk_head_to_head_judges_the_index_its_hints_came_from(
    tmp_path: Path, damage: str
) -> None:
    """A file of fewer, larger records is walked head to head, its .idx
    parsed beside the walk (for the hints): what verify finds of the index
    is what the check finds of it parsed after the walk."""
    from im2rec.inspect.indexcheck import index_problems

    rec = tmp_path / "h.rec"
    with IndexedRecordWriter(rec) as w:
        for i in range(100):
            w.write_key(i, pack((0, float(i % 3), i, 0), bytes([i]) * 300))
    idx = rec.with_suffix(".idx")
    lines = idx.read_text().splitlines(True)
    if damage == "a line that is no entry":
        lines[70] = "seventy\tone\n"
    elif damage == "repeated and unaligned":
        key0, off0 = lines[0].split("\t")
        lines[80] = f"{key0}\t{lines[80].split(chr(9))[1]}"
        lines[90] = f"{lines[90].split(chr(9))[0]}\t{int(off0) + 2}\n"
    idx.write_text("".join(lines))
    result = verify(rec)
    heads = rebuild_index(rec)[0].offsets.tolist()
    count, found = index_problems(str(idx), array("q", heads), rec.stat().st_size)
    assert result.records == 100 and result.indexed == count
    assert [(p.offset, p.key, p.message) for p in result.problems] == found
    assert bool(found) == (damage != "none")

"""Framing: the record layout on disk (docs/format.md, "Records on disk")."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from im2rec.errors import RecordFormatError, RecordTooLargeError, TruncatedRecordError
from im2rec.recordio import MAX_RECORD_SIZE, frame, framing, read_record
from im2rec.recordio.framing import _VECTOR_SCAN, MAGIC_BYTES, frame_parts, iter_heads, needs_split

M = MAGIC_BYTES


def h(hexwords: str) -> bytes:
    return bytes.fromhex(hexwords.replace("M", "0a23d7ce").replace(" ", ""))


# Framed records as MXRecordIO.write produced them (docs/format.md, "Records on disk").
GOLDEN_FRAMES = [
    (b"", "M 00000000"),
    (b"a", "M 01000000 61000000"),
    (b"abcd", "M 04000000 61626364"),
    (b"abcde", "M 05000000 61626364 65000000"),
    (M, "M 00000020 M 00000060"),
    (b"abcd" + M + b"xy", "M 04000020 61626364 M 02000060 78790000"),
    (b"ab" + M + b"xy", "M 08000000 61620a23 d7ce7879"),
    (b"abcd" + M, "M 04000020 61626364 M 00000060"),
    (M + M, "M 00000020 M 00000040 M 00000060"),
    (
        b"1234" + M + b"5678" + M + b"9",
        "M 04000020 31323334 M 04000040 35363738 M 01000060 39000000",
    ),
]


@pytest.mark.parametrize(("record", "expected"), GOLDEN_FRAMES, ids=[e for _, e in GOLDEN_FRAMES])
def test_frame_matches_mxnet_bytes(record: bytes, expected: str) -> None:
    assert frame(record) == h(expected)
    assert read_record(h(expected), 0, len(h(expected)), "t.rec") == (record, len(h(expected)))


def test_magic_bytes_on_disk() -> None:
    assert frame(b"")[:4] == b"\x0a\x23\xd7\xce"


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_frame_accepts_bytes_like(kind: type) -> None:
    data = b"abcd" + M + b"xy"
    assert frame(kind(data)) == frame(data)


payloads = st.lists(
    st.one_of(st.binary(max_size=9), st.just(M), st.just(b"\x0a\x23"), st.just(b"\xd7\xce")),
    max_size=12,
).map(b"".join)


@given(payloads)
def test_round_trip_and_size(record: bytes) -> None:
    framed = frame(record)
    aligned_magics = sum(1 for i in range(0, len(record) - 3, 4) if record[i : i + 4] == M)
    # 8 + 4k + ceil4(N) bytes (docs/format.md, "Records on disk")
    assert len(framed) == 8 + 4 * aligned_magics + (len(record) + 3) // 4 * 4
    assert read_record(framed, 0, len(framed), "t.rec") == (record, len(framed))
    assert list(iter_heads(framed, len(framed), "t.rec")) == [(0, len(framed))]


@given(st.lists(payloads, max_size=8))
def test_concatenated_records_read_back_in_order(records: list[bytes]) -> None:
    blob = b"".join(frame(r) for r in records)
    pos, out = 0, []
    while pos < len(blob):
        data, pos = read_record(blob, pos, len(blob), "t.rec")
        out.append(data)
    assert out == records


# Pieces as writers pass them: a header-like piece, then a payload, either side
# of the size from which the magic-word scan is vectorised.
big_payloads = st.tuples(
    st.integers(_VECTOR_SCAN - 64, _VECTOR_SCAN + 64),
    st.lists(st.tuples(st.integers(0, _VECTOR_SCAN + 60), st.sampled_from([M, b"\x0a\x23"]))),
)


@given(st.lists(payloads, min_size=1, max_size=3), big_payloads)
@pytest.mark.slow
def test_frame_parts_equal_framing_the_joined_record(
    pieces: list[bytes], big: tuple[int, list[tuple[int, bytes]]]
) -> None:
    size, inserts = big
    payload = bytearray(b"\xa5" * size)
    for at, word in inserts:  # magic words at aligned and unaligned places
        payload[at : at + len(word)] = word
    for record in (pieces, [*pieces, bytes(payload)], [bytes(24), bytes(payload)]):
        parts, total = frame_parts(*record)
        framed = frame(b"".join(record))
        assert b"".join(parts) == framed and total == len(framed)


def _reference_frame(data: bytes) -> bytes:
    # docs/format.md, "Records on disk" read literally: cut at each 4-aligned magic word, one search at a time
    parts, start, pos = [], 0, 0
    while (hit := data.find(M, pos)) != -1:
        if hit % 4:
            pos = hit + 1
            continue
        parts.append(data[start:hit])
        start = pos = hit + 4
    parts.append(data[start:])
    if len(parts) == 1:
        return h("M") + struct.pack("<I", len(data)) + data + bytes(-len(data) % 4)
    out = b""
    for i, part in enumerate(parts):
        cflag = 1 if i == 0 else 3 if i == len(parts) - 1 else 2
        out += h("M") + struct.pack("<I", cflag << 29 | len(part)) + part
    return out + bytes(-len(data) % 4)


@pytest.mark.parametrize("every", [4, 8, 1000, 4099])
@pytest.mark.slow
def test_large_records_full_of_magic_words_split_like_the_spec(every: int) -> None:
    data = bytearray(b"\x11" * (3 * _VECTOR_SCAN + 6))
    for at in range(0, len(data) - 4, every):  # aligned and (for 4099) unaligned
        data[at : at + 4] = M
    assert frame(bytes(data)) == _reference_frame(bytes(data))
    parts, size = frame_parts(bytes(24), bytes(data))
    assert b"".join(parts) == _reference_frame(bytes(24) + bytes(data)) and size == sum(
        map(len, parts)
    )


def test_frame_parts_keep_bytes_and_copy_mutable_buffers() -> None:
    header, image, scratch = bytes(24), b"\xff\xd8" * 9000, bytearray(b"abcd")
    parts, _ = frame_parts(header, image)
    assert parts[1] is header and parts[2] is image  # no copy of the image
    parts, _ = frame_parts(scratch)
    scratch[:] = b"zzzz"  # the caller reuses its buffer
    assert b"".join(parts)[8:] == b"abcd"
    # a caller that leaves its buffers alone says so: they are kept as they are
    view = memoryview(bytearray(b"\xff\xd8" * 9000))
    parts, size = frame_parts(header, view, copy=False)
    assert (
        parts[2] is view
        and b"".join(parts) == frame(header + bytes(view))
        and size == len(frame(header + bytes(view)))
    )


def test_zero_copy_view_of_whole_record() -> None:
    framed = frame(b"hello")
    view, nxt = read_record(memoryview(framed), 0, len(framed), "t.rec")
    assert isinstance(view, memoryview) and bytes(view) == b"hello" and nxt == 16


def test_record_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeBig(bytes):  # (a length only Python sees: the C frame reads the buffer)
        def __len__(self) -> int:
            return MAX_RECORD_SIZE

    monkeypatch.setattr(framing, "_frame_whole", None)
    with pytest.raises(RecordTooLargeError, match=r"536,870,912 bytes is too large"):
        frame(FakeBig())


@pytest.mark.slow
def test_largest_record_is_accepted() -> None:
    data = bytes(MAX_RECORD_SIZE - 1)
    framed = frame(data)
    assert len(framed) == 536_870_920  # docs/format.md, "Records on disk"
    del framed


@pytest.mark.parametrize(
    ("blob", "cut", "where"),
    [
        (frame(b"abcdefgh"), 5, "inside a record header at byte 0"),
        (frame(b"abcdefgh"), 12, "inside a 8-byte payload at byte 0"),
        (frame(b"abcde"), 15, "inside a 5-byte payload at byte 0"),  # only padding missing
        (frame(b"abcd" + M + b"xy"), 16, "split record that starts at byte 0"),
        (frame(b"abcd" + M + b"xy"), 20, "inside a 2-byte payload at byte 12"),
    ],
    ids=["header", "payload", "padding", "after-part-1", "last-part"],
)
def test_truncated_records_raise_with_offset(blob: bytes, cut: int, where: str) -> None:
    with pytest.raises(TruncatedRecordError, match=where) as info:
        read_record(blob[:cut], 0, cut, "train.rec")
    assert str(info.value).startswith("train.rec: truncated")
    assert f"(the file has {cut:,} bytes)" in str(info.value)


def test_non_magic_word_at_a_boundary() -> None:
    blob = frame(b"abcd") + b"\xde\xad\xbe\xef" + frame(b"x")[4:]
    _, nxt = read_record(blob, 0, len(blob), "a.rec")
    with pytest.raises(
        RecordFormatError, match=r"a.rec: no record starts at byte 12 \(found 0xEFBEADDE"
    ):
        read_record(blob, nxt, len(blob), "a.rec")


def test_reading_from_a_continuation_part_is_refused() -> None:
    blob = frame(b"abcd" + M + b"xy")
    with pytest.raises(RecordFormatError, match="byte 12 is not the start of a record .*part 3"):
        read_record(blob, 12, len(blob), "a.rec")


def test_split_record_interrupted_by_a_new_record() -> None:
    first = frame(b"abcd" + M + b"xy")
    blob = first[:12] + frame(b"zz")  # part 1, then a whole record where part 3 belongs
    with pytest.raises(
        RecordFormatError, match="split record that starts at byte 0 is not finished"
    ):
        read_record(blob, 0, len(blob), "a.rec")


def test_iter_heads_reports_damage() -> None:
    good = frame(b"abc") + frame(b"abcd" + M + b"xy")
    assert list(iter_heads(good, len(good), "a.rec")) == [(0, 12), (12, 36)]
    with pytest.raises(TruncatedRecordError, match="byte 24"):
        list(iter_heads(good[:24], 24, "a.rec"))
    with pytest.raises(RecordFormatError, match="byte 0 holds part 3"):
        list(iter_heads(good[24:], 12, "a.rec"))


def test_read_only_views_of_bytes_are_kept_and_other_views_copied() -> None:
    """A read-only view of ``bytes`` cannot change, so it is written as it is
    (``rec import`` hands the writer views of the tar it read); a view of a
    buffer the caller may reuse is copied."""
    chunk = b"\x11" * 100 + b"\xff\xd8" * 9000
    image = memoryview(chunk)[100:]
    parts, _ = frame_parts(bytes(24), image)
    assert parts[2] is image
    scratch = bytearray(chunk)
    parts, _ = frame_parts(bytes(24), memoryview(scratch)[100:])
    scratch[100:104] = b"zzzz"
    assert b"".join(parts)[32:36] == b"\xff\xd8\xff\xd8"
    # read-only but of a bytearray; of bytes but not a plain run of bytes
    for piece in (memoryview(scratch).toreadonly(), memoryview(chunk).cast("I"),
                  memoryview(chunk)[::2]):  # fmt: skip
        parts, size = frame_parts(bytes(24), piece)
        assert parts[2] is not piece
        joined = b"".join(parts)
        assert joined == frame(bytes(24) + piece.tobytes()) and size == len(joined)


@pytest.mark.parametrize("at", [0, 4, 40_000, 99_996])
def test_needs_split_scans_views_without_copying_them(at: int) -> None:
    data = bytearray(b"\xa5" * 100_000)
    data[at : at + 4] = M
    view = memoryview(bytes(data))
    assert needs_split(bytes(24), view) and needs_split(view)
    assert not needs_split(bytes(24), view[at + 4 :]) and not needs_split(view[: at + 2])
    assert not needs_split(bytes(22), view)  # joined, the word is no longer 4-aligned


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=700),
    st.lists(st.integers(min_value=0, max_value=700), max_size=3),
    st.integers(min_value=0, max_value=3),
)
@pytest.mark.slow
def test_the_magic_word_scan_is_the_same_with_and_without_c(
    body: bytes, places: list[int], skip: int
) -> None:
    """has_aligned_magic, by the C scan (when built), by numpy and by
    bytes.find, on buffers of every length and start (a view from any
    offset), with magic words placed at aligned and unaligned offsets."""
    data = bytearray(body)
    for at in places:
        data[at : at + 4] = framing.MAGIC_BYTES
    want = any(not i & 3 for i in _find_all(bytes(data[skip:]), framing.MAGIC_BYTES))
    for piece in (bytes(data[skip:]), memoryview(data)[skip:], bytearray(data[skip:])):
        assert framing.has_aligned_magic(piece) == want
    c_scan = framing._has_word
    try:
        framing._has_word = None  # as built without a compiler
        assert framing.has_aligned_magic(bytes(data[skip:])) == want
        assert framing.has_aligned_magic(memoryview(data)[skip:]) == want
    finally:
        framing._has_word = c_scan


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=300),
    st.lists(st.integers(min_value=0, max_value=300), max_size=3),
    st.integers(min_value=0, max_value=3),
)
@pytest.mark.slow
def test_the_c_frame_writes_what_python_does(body: bytes, places: list[int], skip: int) -> None:
    """frame by the C call (when built) and by Python: the same bytes for
    every length and start, a record to split (a magic word at a multiple
    of 4) left to Python, any buffer type."""
    data = bytearray(body)
    for at in places:
        data[at : at + 4] = framing.MAGIC_BYTES
    pieces = (bytes(data[skip:]), memoryview(data)[skip:], bytearray(data[skip:]))
    got = [frame(piece) for piece in pieces]
    c_frame = framing._frame_whole
    try:
        framing._frame_whole = None  # as built without a compiler
        want = frame(bytes(data[skip:]))
    finally:
        framing._frame_whole = c_frame
    assert got == [want] * 3
    assert read_record(want, 0, len(want), "t.rec") == (bytes(data[skip:]), len(want))
    if c_frame is not None:
        whole = c_frame(bytes(data[skip:]))
        assert whole == (None if framing.has_aligned_magic(bytes(data[skip:])) else want)
        assert c_frame(memoryview(bytes(data))[::2]) in (None, frame(bytes(data)[::2]))


def _find_all(data: bytes, word: bytes) -> list[int]:
    return [i for i in range(len(data) - 3) if data[i : i + 4] == word]


def test_the_c_scan_takes_large_and_odd_buffers() -> None:
    words = pytest.importorskip("im2rec.recordio._words", reason="built without a compiler")
    big = bytearray(3 << 20)
    assert not words.has_word(big, framing.MAGIC_BYTES)
    big[(2 << 20) + 4 : (2 << 20) + 8] = framing.MAGIC_BYTES  # past the GIL-free threshold
    assert words.has_word(big, framing.MAGIC_BYTES)
    assert not words.has_word(memoryview(big)[1:], framing.MAGIC_BYTES)  # now unaligned
    with pytest.raises(ValueError, match="4 bytes"):
        words.has_word(b"abcd", b"abc")

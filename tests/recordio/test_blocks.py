"""The block walk (rec info's and rec verify's): the same records, damage
and order as the per-record walk, whatever the block size; the C walk the
same as the Python one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from im2rec import native
from im2rec.errors import RecordFormatError
from im2rec.recordio import RecordReader, blocks, frame, pack
from im2rec.recordio import runs as runs_module
from im2rec.recordio.blocks import Block, _whole_frames, walk_blocks, whole_frames
from im2rec.recordio.codec import IR_HEADER_SIZE, MAGIC_BYTES, decode_length
from im2rec.recordio.header import IRHeader
from im2rec.recordio.runs import runs
from im2rec.recordio.walking import Damage, header_at, walk_records

payloads = st.one_of(
    st.binary(max_size=40),
    st.binary(max_size=12).map(lambda b: b + MAGIC_BYTES * 2 + b),  # (split when aligned)
    st.integers(0, 600).map(bytes),  # (larger than the smallest blocks)
)
records = st.lists(
    st.tuples(st.integers(0, 3), payloads).map(
        lambda t: (
            pack(IRHeader(0, float(t[0]), t[0], 0), t[1])
            if t[0] < 2
            else pack(IRHeader(0, np.arange(t[0], dtype=np.float32), 7, 0), t[1])
        )
    ),
    max_size=25,
)


def _flatten(items: list[object]) -> list[object]:
    out: list[object] = []
    for item in items:
        if isinstance(item, Block):
            out.extend((item.base + int(h), None) for h in item.heads)
        elif isinstance(item, Damage):
            out.append(item)
        else:
            out.append((item[0], None))  # type: ignore[index]
    return out


@settings(max_examples=150, deadline=None)
@given(
    records, st.sampled_from([16, 64, 256, 4096]), st.binary(max_size=24), st.booleans(),
    st.sampled_from([2, 1 << 16]),
)  # fmt: skip
@example(  # (a magic word in a payload, resumed at after damage: a record of 0 bytes)
    recs=[bytes(31) + MAGIC_BYTES + bytes(2)], block=16, junk=b"\x00", damaged=True, most=2
)
def test_blocks_hold_the_records_the_walk_finds(
    tmp_path_factory: pytest.TempPathFactory,
    recs: list[bytes],
    block: int,
    junk: bytes,
    damaged: bool,
    most: int,
) -> None:
    framed = [frame(r) for r in recs]
    cut = len(framed) // 2
    data = b"".join(framed[:cut]) + (junk if damaged else b"") + b"".join(framed[cut:])
    path = tmp_path_factory.mktemp("b") / "x.rec"
    path.write_bytes(data)
    reader = RecordReader(path)
    want = list(walk_records(reader, recover=True))
    buf, _ = reader.mapping()
    got = []
    with pytest.MonkeyPatch.context() as mp:  # (a block of more records: several Blocks)
        mp.setattr(blocks, "MAX_RECORDS", most)
        for item in walk_blocks(reader, recover=True, block=block):
            got.append(item)
            if isinstance(item, Block):  # the header fields read on arrays are the headers
                assert len(item.heads) <= most
                fields = item.header_fields()  # (while the block's buffer is its own)
                again = Block(item.data, item.base, item.heads).header_fields()  # (numpy's)
                assert fields.tobytes() == again.tobytes()
                for row, h in zip(fields, item.heads.tolist(), strict=True):
                    if decode_length(int(row["lrec"])) < IR_HEADER_SIZE:  # (no header: the
                        with pytest.raises(RecordFormatError):  # fields are the next bytes)
                            header_at(buf, item.base + h, len(data), reader.name)
                        continue
                    header = header_at(buf, item.base + h, len(data), reader.name)
                    assert (int(row["flag"]), int(row["id"])) == (header.flag, header.id)
    assert _flatten(got) == [(w[0], None) if isinstance(w, tuple) else w for w in want]
    if not damaged or not junk:
        assert not any(isinstance(w, Damage) for w in want)


@given(st.binary(max_size=300), st.integers(0, 80), st.integers(0, 40))
def test_the_c_walk_is_the_python_walk(data: bytes, start: int, room: int) -> None:
    if not native.load("words") or not hasattr(native.load("words"), "whole_frames"):
        pytest.skip("the C extension is not built")
    start -= start % 4
    if start > len(data):
        return
    ours, theirs = np.zeros(room, np.int64), np.zeros(room, np.int64)
    assert whole_frames(data, start, ours) == _whole_frames(data, start, theirs)
    assert np.array_equal(ours, theirs)


@given(records, st.integers(0, 40))
def test_the_c_walk_is_the_python_walk_on_records(recs: list[bytes], room: int) -> None:
    if not native.load("words") or not hasattr(native.load("words"), "whole_frames"):
        pytest.skip("the C extension is not built")
    data = b"".join(frame(r) for r in recs)
    ours, theirs = np.zeros(room, np.int64), np.zeros(room, np.int64)
    assert whole_frames(data, 0, ours) == _whole_frames(data, 0, theirs)
    assert np.array_equal(ours, theirs)


def test_bad_arguments_are_refused() -> None:
    if not native.load("words") or not hasattr(native.load("words"), "whole_frames"):
        pytest.skip("the C extension is not built")
    out = np.zeros(4, np.int64)
    for start in (-4, 2, 12):
        with pytest.raises(ValueError, match="multiple of 4"):
            whole_frames(b"\0" * 8, start, out)
    with pytest.raises(ValueError, match="int64"):
        whole_frames(b"\0" * 8, 0, bytearray(5))


def test_a_file_of_one_large_record(tmp_path: Path) -> None:
    path = tmp_path / "x.rec"
    path.write_bytes(frame(b"x" * 5000) + frame(b"y"))
    items = list(walk_blocks(RecordReader(path), block=1024))
    assert items[0] == (0, 5008)
    assert isinstance(items[1], Block) and items[1].base == 5008


@given(
    st.binary(min_size=4, max_size=200),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 12)), max_size=8),
)
def test_the_c_gather_is_the_numpy_gather(data: bytes, runs: list[tuple[int, int]]) -> None:
    if runs_module._gather is None:
        pytest.skip("the C extension is not built")
    words = len(data) // 4
    runs = [(4 * (a % words), min(n, words - a % words)) for a, n in runs]
    first = np.asarray([a for a, _ in runs], np.int64)
    counts = np.asarray([n for _, n in runs], np.int64)
    values = np.frombuffer(data, "<f4", count=words)
    got = runs_module.runs(values, first >> 2, counts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runs_module, "_gather", None)
        want = runs_module.runs(values, first >> 2, counts)
    assert np.array_equal(got[0].view(np.uint32), want[0].view(np.uint32))
    assert np.array_equal(got[1], want[1])
    if runs:  # a run past the end, or more than out holds, is refused before a copy
        out = np.zeros(int(counts.sum()), "<f4")
        with pytest.raises(ValueError, match="outside the data"):
            runs_module._gather(data, first + 4 * words, counts + 1, out)


@given(
    st.lists(st.integers(-1000, 1000), max_size=60),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 12)), max_size=8),
    st.sampled_from([np.float32, np.float64, np.int32]),
)
def test_runs_of_any_array_are_its_slices(
    values: list[int], spans: list[tuple[int, int]], dtype: type
) -> None:
    """runs() copies slices, of any dtype (C for 4-byte values, else numpy)."""
    array = np.asarray(values, dtype)
    size = len(array)
    spans = [(a % size, min(n, size - a % size)) if size else (0, 0) for a, n in spans]
    first = np.asarray([a for a, _ in spans], np.int64)
    counts = np.asarray([n for _, n in spans], np.int64)
    got, starts = runs(array, first, counts)
    want = [array[a : a + n] for a, n in spans]
    assert got.dtype == array.dtype
    assert np.array_equal(got, np.concatenate(want) if want else np.empty(0, dtype))
    assert starts.tolist() == (np.cumsum(counts) - counts).tolist()


@given(st.binary(max_size=300), st.integers(0, 40))
def test_the_c_walk_copies_the_header_fields_numpy_reads(data: bytes, room: int) -> None:
    """whole_frames' copy of each record's header fields is what
    Block.header_fields reads with numpy (zeros past the end)."""
    walk = getattr(native.load("words"), "whole_frames", None)
    if walk is None:
        pytest.skip("the C extension is not built")
    heads = np.zeros(room, np.int64)
    fields = np.zeros(room, blocks.HEADER_FIELDS)
    count, stop = walk(data, 0, heads, fields)
    assert (count, stop) == whole_frames(data, 0, np.zeros(room, np.int64))
    want = Block(data, 0, heads[:count]).header_fields()
    assert fields[:count].tobytes() == want.tobytes()
    with pytest.raises(ValueError, match="32 bytes"):
        walk(data, 0, np.zeros(2, np.int64), np.zeros(1, blocks.HEADER_FIELDS))

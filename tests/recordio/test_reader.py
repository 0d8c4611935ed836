"""Readers: sequential, by offset, by key; thread-, fork- and pickle-safety."""

from __future__ import annotations

import os
import pickle
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from im2rec.errors import (
    Im2RecError,
    IndexFormatError,
    MissingFileError,
    RecordFormatError,
)
from im2rec.listing.lstfile import read_lst
from im2rec.recordio import (
    IndexedRecordReader,
    IndexedRecordWriter,
    RecordReader,
    build_index,
    frame,
)
from im2rec.recordio.framing import MAGIC_BYTES

RECORDS = [b"", b"a", b"abcd" + MAGIC_BYTES + b"xy", bytes(range(256)), b"z" * 1001]


@pytest.fixture
def rec(tmp_path: Path) -> Path:
    keys = [7, 3, 9, 0, 5]
    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        for key, data in zip(keys, RECORDS, strict=True):
            w.write_key(key, data)
    return tmp_path / "d.rec"


def test_sequential_iteration(rec: Path) -> None:
    with RecordReader(rec) as reader:
        assert list(reader) == RECORDS
        assert reader.size == rec.stat().st_size


def test_read_next_walks_and_ends(rec: Path) -> None:
    reader = RecordReader(rec)
    pos, out = 0, []
    while True:
        data, pos = reader.read_next(pos)
        if data is None:
            break
        out.append(data)
    assert out == RECORDS and pos == reader.size


def test_empty_file_is_an_empty_record_file(tmp_path: Path) -> None:
    (tmp_path / "e.rec").write_bytes(b"")
    assert list(RecordReader(tmp_path / "e.rec")) == []


def test_random_access(rec: Path) -> None:
    reader = IndexedRecordReader(rec)
    assert len(reader) == 5 and reader.keys == [7, 3, 9, 0, 5]
    assert reader.read_key(9) == RECORDS[2]
    assert reader[4] == RECORDS[4] and reader[-1] == RECORDS[4]
    assert list(reader) == RECORDS
    assert reader.read_at(int(reader.index.offsets[1])) == RECORDS[1]
    with pytest.raises(KeyError):
        reader.read_key(1)


def test_copy_false_is_accepted_and_gives_the_record(rec: Path) -> None:
    reader = IndexedRecordReader(rec)
    assert reader.read_key(5, copy=False) == RECORDS[4]
    assert reader.read_key(9, copy=False) == RECORDS[2]  # a split record, joined
    reader.close()


def test_a_closed_reader_opens_again_on_use(rec: Path) -> None:
    reader = RecordReader(rec)
    reader.close()
    assert reader.read_at(0) == b"" and list(reader) == RECORDS


def test_threads_share_one_reader(rec: Path) -> None:
    reader = IndexedRecordReader(rec)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(300):
                assert list(reader) == RECORDS
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_pickled_reader_reopens_lazily(rec: Path) -> None:
    reader = IndexedRecordReader(rec)
    state = pickle.dumps(reader)
    assert len(state) < 4096  # paths and the index, not the file
    copy = pickle.loads(state)
    assert copy._view is None  # nothing opened until first use
    assert copy.read_key(0) == RECORDS[3] and list(copy) == RECORDS
    assert reader.read_key(0) == RECORDS[3]  # the original still works


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.slow
def test_forked_child_reads(rec: Path) -> None:
    reader = IndexedRecordReader(rec)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write_end, b"ok" if list(reader) == RECORDS else b"bad")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read_end, 16) == b"ok"
    assert reader.read_key(7) == RECORDS[0]


def test_missing_rec(tmp_path: Path) -> None:
    with pytest.raises(MissingFileError, match="nope.rec: record file not found"):
        RecordReader(tmp_path / "nope.rec")


def test_directory_instead_of_rec(tmp_path: Path) -> None:
    with pytest.raises(Im2RecError, match="is a directory"):
        RecordReader(tmp_path)


def test_an_idx_path_given_is_never_scanned_around(rec: Path, tmp_path: Path) -> None:
    with pytest.raises(MissingFileError, match=r"typo.idx: index not found .*check the path"):
        IndexedRecordReader(rec, tmp_path / "typo.idx", missing_index="scan")
    with pytest.raises(ValueError, match="missing_index must be 'error' or 'scan'"):
        IndexedRecordReader(rec, missing_index="build")  # type: ignore[arg-type]


def test_missing_idx_errors_or_scans(rec: Path) -> None:
    rec.with_suffix(".idx").unlink()
    with pytest.raises(MissingFileError, match=r"d.idx: index not found for .*d.rec; rebuild it"):
        IndexedRecordReader(rec)
    reader = IndexedRecordReader(rec, missing_index="scan")
    assert reader.keys == [0, 1, 2, 3, 4] and list(reader) == RECORDS


def test_build_index_matches_written_offsets(rec: Path, tmp_path: Path) -> None:
    written = IndexedRecordReader(rec).index.offsets.tolist()
    index = build_index(RecordReader(rec))
    assert index.offsets.tolist() == written and index.key_list() == [0, 1, 2, 3, 4]
    index.save(tmp_path / "rebuilt.idx")  # keys 0..N-1, like rec2idx.py
    assert (tmp_path / "rebuilt.idx").read_text() == "".join(
        f"{i}\t{o}\n" for i, o in enumerate(written)
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.idx", "d.rec", "rebuilt.idx"]


def test_idx_past_end_of_rec(rec: Path, tmp_path: Path) -> None:
    (tmp_path / "short.rec").write_bytes(rec.read_bytes()[:40])
    with pytest.raises(IndexFormatError, match="past the end of .*short.rec"):
        IndexedRecordReader(tmp_path / "short.rec", rec.with_suffix(".idx"))


def test_stale_idx_entry_names_key_and_offset(rec: Path) -> None:
    rec.with_suffix(".idx").write_text("7\t0\n3\t4\n")
    reader = IndexedRecordReader(rec)
    with pytest.raises(RecordFormatError, match=r"no record starts at byte 4 .*d.idx: key 3\]"):
        reader.read_key(3)
    with pytest.raises(RecordFormatError, match=r"d.idx: entry 1\]"):
        reader[1]


def test_truncated_rec_while_iterating(rec: Path, tmp_path: Path) -> None:
    data = rec.read_bytes()
    (tmp_path / "cut.rec").write_bytes(data[:-3])
    reader = RecordReader(tmp_path / "cut.rec")
    with pytest.raises(
        RecordFormatError, match=f"truncated .* \\(the file has {len(data) - 3:,} bytes\\)"
    ):
        list(reader)


def test_frames_are_what_the_writer_wrote(rec: Path) -> None:
    assert rec.read_bytes() == b"".join(frame(r) for r in RECORDS)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**63 - 1),
            st.lists(st.one_of(st.binary(max_size=7), st.just(MAGIC_BYTES)), max_size=6).map(
                b"".join
            ),
        ),
        max_size=30,
        unique_by=lambda kv: kv[0],
    )
)
def test_files_round_trip(
    tmp_path_factory: pytest.TempPathFactory, items: list[tuple[int, bytes]]
) -> None:
    path = tmp_path_factory.mktemp("rt") / "rt.rec"
    with IndexedRecordWriter(path) as w:
        offsets = [w.write_key(k, data) for k, data in items]
    reader = IndexedRecordReader(path)
    assert reader.keys == [k for k, _ in items]
    assert reader.index.offsets.tolist() == offsets
    assert list(reader) == [data for _, data in items] == list(RecordReader(path))
    for k, data in items:
        assert reader.read_key(k) == data


def test_read_position_reads_each_record_in_one_pread(
    rec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from im2rec.recordio import reader as reader_module

    reader = IndexedRecordReader(rec)
    assert reader.stops is not None  # the writer's offsets rise
    calls: list[int] = []

    def counted(fd: int, n: int, offset: int) -> bytes:
        calls.append(offset)
        return os.pread(fd, n, offset)

    monkeypatch.setattr(reader_module, "pread", counted)
    for i, want in enumerate(RECORDS):
        got = reader.read_position(i)
        assert bytes(got) == want == reader[i]
    # one read a whole record; the split one (a magic word inside) is read
    # the usual way, its parts after its head
    whole = [i for i, data in enumerate(RECORDS) if MAGIC_BYTES not in data]
    offsets = [int(o) for o in reader.index.offsets]
    assert [o for o in calls if o in offsets] == [offsets[i] for i in range(len(RECORDS))]
    assert isinstance(reader.read_position(whole[-1]), memoryview)


def test_spans_that_are_not_one_record_are_read_as_before(rec: Path) -> None:
    offsets = [int(o) for o in IndexedRecordReader(rec).index.offsets]
    idx = rec.with_suffix(".idx")
    # every other record: each span then holds two records
    idx.write_text("".join(f"{k}\t{offsets[k]}\n" for k in (0, 2, 4)))
    reader = IndexedRecordReader(rec)
    assert reader.stops is not None
    assert [bytes(reader.read_position(i)) for i in range(3)] == [RECORDS[k] for k in (0, 2, 4)]
    # falling offsets: no spans at all
    idx.write_text("".join(f"{k}\t{offsets[k]}\n" for k in reversed(range(5))))
    reader = IndexedRecordReader(rec)
    assert reader.stops is None
    assert [bytes(reader.read_position(i)) for i in range(5)] == RECORDS[::-1]
    # a stale offset fails as reader[i] does, naming the entry
    idx.write_text(f"0\t{offsets[0]}\n1\t{offsets[1] + 4}\n")
    with pytest.raises(RecordFormatError, match=r"d.idx: entry 1\]"):
        IndexedRecordReader(rec).read_position(1)


def test_a_span_past_its_limit_or_the_file_is_read_as_before(
    rec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from im2rec.recordio import reader as reader_module

    reader = RecordReader(rec)
    offsets = [int(o) for o in IndexedRecordReader(rec).index.offsets]
    last = offsets[-1]
    assert bytes(reader.read_span(last, reader.size)) == RECORDS[-1]
    assert bytes(reader.read_span(last, reader.size + 100)) == RECORDS[-1]  # the file shrank
    assert bytes(reader.read_span(last, reader.size - 4)) == RECORDS[-1]  # or grew
    monkeypatch.setattr(reader_module, "SPAN_LIMIT", 64)
    assert bytes(reader.read_span(last, reader.size)) == RECORDS[-1]


def test_rising_looks_at_every_chunk() -> None:
    import numpy as np

    from im2rec.recordio.reader import rising

    offsets = np.arange(0, 3 << 21, 2, dtype=np.int64)  # three million, three chunks
    assert rising(offsets) and rising(offsets[:1]) and rising(offsets[:0])
    for at in (1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, len(offsets) - 1):
        bent = offsets.copy()
        bent[at] = bent[at - 1]
        assert not rising(bent), at


def test_a_reader_stops_reading_spans_that_keep_missing(
    rec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from im2rec.recordio import reader as reader_module

    offsets = [int(o) for o in IndexedRecordReader(rec).index.offsets]
    # an .idx of every other record: each span holds two records
    rec.with_suffix(".idx").write_text("".join(f"{k}\t{offsets[k]}\n" for k in (0, 2, 4)))
    reader = IndexedRecordReader(rec)
    spans: list[int] = []

    def counted(fd: int, n: int, offset: int) -> bytes:
        spans.append(n)
        return os.pread(fd, n, offset)

    monkeypatch.setattr(reader_module, "pread", counted)
    monkeypatch.setattr(reader_module, "SPAN_MISSES", 2)
    assert bytes(reader.read_position(0)) == RECORDS[0]
    assert bytes(reader.read_position(1)) == RECORDS[2]
    assert len(spans) == 2  # two spans read for nothing
    assert [bytes(reader.read_position(i)) for i in range(3)] == [RECORDS[k] for k in (0, 2, 4)]
    assert len(spans) == 2  # and no more


def test_fifos_are_refused_not_waited_on(rec: Path, tmp_path: Path) -> None:
    """Opening a FIFO for reading waits for a writer: every input refuses one."""
    import signal

    def hung(_signum: int, _frame: object) -> None:
        raise TimeoutError("a FIFO was opened and waited on")

    signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)  # a regression fails here instead of hanging the suite
    fifo = tmp_path / "f.rec"
    os.mkfifo(fifo)
    with pytest.raises(Im2RecError, match="f.rec: not a regular file"):
        RecordReader(fifo)
    os.mkfifo(tmp_path / "f.idx")
    with pytest.raises(Im2RecError, match="f.idx: not a regular file"):
        IndexedRecordReader(rec, tmp_path / "f.idx")
    os.mkfifo(tmp_path / "f.lst")
    with pytest.raises(Im2RecError, match="f.lst: not a regular file"):
        read_lst(tmp_path / "f.lst")
    signal.alarm(0)


def test_a_missing_key_names_the_index(tmp_path: Path) -> None:
    """`reader.read_key(42)` on a missing key was a bare `KeyError: 42`."""
    from im2rec.errors import MissingKeyError
    from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter

    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        for key in range(3):
            w.write_key(key, b"x")
    reader = IndexedRecordReader(tmp_path / "d.rec")
    for key in (42, "name", 2.5):
        with pytest.raises(KeyError, match=r"d.idx: no record has key .* \(3 keys\)") as caught:
            reader.read_key(key)
        assert isinstance(caught.value, MissingKeyError)
    assert 42 not in reader.index and 2 in reader.index

"""Writers: atomic finish, indexes, and refusing what would corrupt output."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import pickle
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from im2rec.errors import DuplicateKeyError, ModeError
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, RecordWriter, frame
from im2rec.recordio.framing import MAGIC_BYTES, needs_split

from ..writing import ranges_of, with_small_files


def test_indexed_writer_writes_mxnet_style_idx(tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        for key in range(3):
            w.write_key(key, b"abcd")
        assert w.index_path == tmp_path / "d.idx"
    assert (tmp_path / "d.idx").read_text() == "0\t0\n1\t12\n2\t24\n"
    reader = IndexedRecordReader(tmp_path / "d.rec")
    assert [reader.read_key(k) for k in range(3)] == [b"abcd"] * 3


def test_key_type_and_custom_idx_path(tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "d.rec", tmp_path / "keys.txt", key_type=str) as w:
        w.write_key(5, b"x")
    assert (tmp_path / "keys.txt").read_text() == "5\t0\n"


def test_duplicate_key_refused_before_writing(tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        w.write_key(1, b"x")
        with pytest.raises(DuplicateKeyError, match="key 1 was already written"):
            w.write_key(1, b"y")
        assert w.tell() == 12
    assert (tmp_path / "d.idx").read_text() == "1\t0\n"


def test_writer_refuses_pickling(tmp_path: Path) -> None:
    w = RecordWriter(tmp_path / "a.rec")
    w.write(b"data")
    with pytest.raises(TypeError, match="writers cannot be pickled"):
        pickle.dumps(w)
    w.close()
    assert (tmp_path / "a.rec").read_bytes() == frame(b"data")  # nothing truncated


def test_write_after_close(tmp_path: Path) -> None:
    w = RecordWriter(tmp_path / "a.rec")
    w.close()
    with pytest.raises(ModeError, match="the writer is closed"):
        w.write(b"x")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.slow
def test_forked_child_cannot_write(tmp_path: Path) -> None:
    w = RecordWriter(tmp_path / "a.rec")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            w.write(b"x")
            os.write(write_end, b"wrote")
        except ModeError as exc:
            os.write(write_end, str(exc).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    message = os.read(read_end, 4096).decode()
    assert "opened in process" in message and "interleave" in message
    w.write(b"parent")
    w.close()
    assert (tmp_path / "a.rec").read_bytes() == frame(b"parent")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("atomic", [True, False])
@pytest.mark.slow
def test_child_dropping_an_inherited_writer_writes_nothing(tmp_path: Path, atomic: bool) -> None:
    import gc

    w = IndexedRecordWriter(tmp_path / "a.rec", atomic=atomic)
    w.write_key(0, b"pending in the parent's buffer")
    pid = os.fork()
    if pid == 0:
        del w
        gc.collect()
        os._exit(0)
    os.waitpid(pid, 0)
    w.close()
    assert (tmp_path / "a.rec").read_bytes() == frame(b"pending in the parent's buffer")
    assert (tmp_path / "a.idx").read_text() == "0\t0\n"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=24).map(lambda b: b[: len(b) & ~3]),  # a header: whole words
            st.binary(max_size=300),
            st.sampled_from([None, 0, 4, 5, 8]),  # where a magic word goes in the body
            st.booleans(),  # split known to the caller, or not
        ),
        min_size=1, max_size=6,
    ),
    st.booleans(),
)  # fmt: skip
def test_a_body_still_in_a_file_is_framed_as_bytes_are(
    tmp_path: Path, records: list[tuple[bytes, bytes, int | None, bool]], hashing: bool
) -> None:
    """write(head, FileRange): the same file and index as writing the bytes,
    split at aligned magic words in the header or the body, whether the
    caller says so, the range's own scan does, or nobody did; bodies in
    memory (``data``, as a shard's reader gives them) or only in the file;
    a hashing writer reads the body and hashes what it wrote."""
    bodies = []
    for _, body, at, _ in records:
        if at is not None and len(body) >= at + 4:
            body = body[:at] + MAGIC_BYTES + body[at + 4 :]
        bodies.append(body)
    ranges = ranges_of(tmp_path, bodies)
    for name, use_range in (("bytes", False), ("range", True)):
        with IndexedRecordWriter(tmp_path / f"{name}.rec", hashing=hashing) as w:
            for i, ((head, _, _, told), body, where) in enumerate(
                zip(records, bodies, ranges, strict=True)
            ):
                split = needs_split(head, body) if told else None
                if use_range and i % 2:
                    where = dataclasses.replace(where, magic=None)  # never scanned
                if use_range and i % 3 == 0:
                    where = dataclasses.replace(where, data=memoryview(body))
                w.write_key(i, head, where if use_range else body, split=split)
        if hashing:
            assert w.sha256() == hashlib.sha256((tmp_path / f"{name}.rec").read_bytes()).hexdigest()
    assert (tmp_path / "range.rec").read_bytes() == (tmp_path / "bytes.rec").read_bytes()
    assert (tmp_path / "range.idx").read_bytes() == (tmp_path / "bytes.idx").read_bytes()


@pytest.mark.slow
def test_a_pair_lands_whole_or_not_at_all(tmp_path: Path) -> None:
    """``close()`` moves the ``.rec`` and ``.idx`` into place only once both
    are written: an ``.idx`` that fails (here it is the larger file: empty
    records under long keys) leaves the old pair as it was, and the
    temporary files for the caller to keep (resume) or remove."""
    (tmp_path / "d.rec").write_bytes(b"old rec")
    (tmp_path / "d.idx").write_bytes(b"old idx")
    seen = with_small_files(
        """
        from im2rec.recordio import IndexedRecordWriter

        small_files()
        w = IndexedRecordWriter(os.path.join(FOLDER, "d.rec"))
        for i in range(1000):
            w.write_key(10**9 + i, b"")
        seen = {}
        try:
            w.close()
        except OSError as exc:
            seen["close"] = exc.errno
        seen["kept"] = sorted(os.listdir(FOLDER))
        w.abort()
        seen["left"] = sorted(os.listdir(FOLDER))
        print(json.dumps(seen))
        """,
        tmp_path,
        12_000,  # the .rec, 8,000 bytes, fits; the .idx, 16,000, does not
    )
    pid = int(seen["kept"][0].split(".")[3])
    assert seen == {
        "close": errno.EFBIG,
        "kept": [f".d.idx.{pid}.tmp", f".d.rec.{pid}.tmp", "d.idx", "d.rec"],
        "left": ["d.idx", "d.rec"],
    }
    assert (tmp_path / "d.rec").read_bytes() == b"old rec"
    assert (tmp_path / "d.idx").read_bytes() == b"old idx"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=40),
            st.integers(0, 20_000),  # the image's length: either side of 16 KiB in all
            st.sampled_from([None, 0, 3, 4, 16]),  # where a magic word goes in the image
            st.sampled_from(["bytes", "bytearray", "view"]),
        ),
        min_size=1, max_size=5,
    )
)  # fmt: skip
def test_a_record_in_two_pieces_is_framed_as_one_piece_is(
    tmp_path: Path, records: list[tuple[bytes, int, int | None, str]]
) -> None:
    """write(head, image): the bytes of frame(head + image), small records
    (joined first) and large ones, split where a magic word is aligned from
    the record's start; a buffer the caller reuses afterwards changes
    nothing written."""
    rng = random.Random(len(records))
    expected, path = [], tmp_path / f"{rng.random()}.rec"
    with RecordWriter(path) as w:
        for head, n, at, kind in records:
            image = bytearray(rng.randbytes(n))
            if at is not None and n >= at + 4:
                image[at : at + 4] = MAGIC_BYTES
            expected.append(frame(head + bytes(image)))
            piece: Any = {"bytes": bytes(image), "bytearray": image,
                          "view": memoryview(bytes(image))}[kind]  # fmt: skip
            w.write(head, piece)
            image[:] = bytes(len(image))  # (reused by the caller: written already, or copied)
    assert path.read_bytes() == b"".join(expected)

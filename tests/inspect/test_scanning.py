"""Walking a .rec's headers: the index rebuilt equals the one written, a
flipped header reported at its offset, recovery around garbage, and a
repeated id named with where it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from im2rec.cli import main
from im2rec.errors import RecordFormatError
from im2rec.inspect.scanning import rebuild_index
from im2rec.inspect.verifying import verify
from im2rec.recordio import IndexedRecordWriter, RecordReader, pack
from im2rec.recordio.framing import MAGIC_BYTES
from im2rec.recordio.walking import Damage, walk_records


def corrupt(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_rebuilt_index_equals_the_written_one(packed: Path) -> None:
    written = packed.with_suffix(".idx").read_text()
    index, damages = rebuild_index(packed, keys="id")
    assert damages == []
    assert (
        "".join(
            f"{k}\t{o}\n" for k, o in zip(index.key_list(), index.offsets.tolist(), strict=True)
        )
        == written
    )
    seq, _ = rebuild_index(packed)
    assert seq.key_list() == list(range(30)) and seq.offsets.tolist() == index.offsets.tolist()


def test_flipped_header_is_reported_at_its_offset(packed: Path) -> None:
    offsets = rebuild_index(packed)[0].offsets.tolist()
    corrupt(packed, offsets[5], b"\x00\x00\x00\x00")
    result = verify(packed)
    messages = [(p.offset, p.message) for p in result.problems]
    assert messages[0][0] == offsets[5] and "no record starts at byte" in messages[0][1]
    assert f"bytes {offsets[5]:,} to {offsets[6]:,} skipped" in messages[0][1]
    assert any(
        p.offset == offsets[5] and "not the start of a record" in p.message for p in result.problems
    )
    with pytest.raises(RecordFormatError, match=f"no record starts at byte {offsets[5]:,}"):
        rebuild_index(packed)
    index, damages = rebuild_index(packed, recover=True)
    assert len(index) == 29 and damages == [Damage(offsets[5], offsets[6], damages[0].reason)]


def test_recover_walks_around_garbage(tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "g.rec") as w:
        for i in range(5):
            w.write_key(i, pack((0, i, i, 0), b"payload" * 10 + MAGIC_BYTES))
    data = bytearray((tmp_path / "g.rec").read_bytes())
    data[100:140] = b"\xff" * 40  # the tail of record 0 (108 bytes) and the head of record 1
    (tmp_path / "g.rec").write_bytes(bytes(data))
    items = list(walk_records(RecordReader(tmp_path / "g.rec"), recover=True))
    damages = [i for i in items if isinstance(i, Damage)]
    assert [(d.offset, d.end) for d in damages] == [(108, 216)]  # record 1, up to record 2
    assert len([i for i in items if not isinstance(i, Damage)]) == 4


def test_index_by_id_names_a_repeated_id_and_where(tmp_path: Path) -> None:
    rec = tmp_path / "d.rec"
    with IndexedRecordWriter(rec) as w:
        for key, id_ in enumerate([5, 9, 5]):
            w.write_key(key, pack((0, 1.0, id_, 0), b"x" * 10))
    third = rebuild_index(rec)[0].offsets.tolist()[2]
    result = CliRunner().invoke(
        main, ["index", str(rec), "--keys", "id", "-o", str(tmp_path / "x.idx")]
    )
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {rec}: header id 5 appears in more than one record (again at byte {third:,}); "
        "use --keys seq\n"
    )
    assert not (tmp_path / "x.idx").exists()

"""rec export into WebDataset shards: byte-identical round trips, every key
back, the index read in any order and a bad one refused, damaged or missing
shards named, and a shard changed while read refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from im2rec.errors import DatasetError, Im2RecError, MissingFileError
from im2rec.formats.shards import expand_shards
from im2rec.formats.tars import samples
from im2rec.formats.webdataset import export_webdataset, import_webdataset
from im2rec.recordio import IndexedRecordWriter, pack

from .conftest import export_and_import, image


def test_round_trip_is_byte_identical(mixed: Path, tmp_path: Path) -> None:
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

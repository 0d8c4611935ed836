"""rec unpack: back to files that pack again byte for byte, class maps and
multi-labels kept, a non-empty folder refused, every header read before
anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.errors import DatasetError, RecordFormatError
from im2rec.inspect.unpacking import unpack_rec
from im2rec.packing import PackOptions, pack_list
from im2rec.recordio import IndexedRecordWriter, pack


def test_unpack_then_pack_is_byte_identical(dataset: Path) -> None:
    out = dataset / "back"
    result = unpack_rec(dataset / "d.rec", out)
    assert result.images == 15 and result.lst == dataset / "back.lst"
    pack_list(result.lst, PackOptions(pass_through=True))  # root: the folder named like the list
    assert (dataset / "back.rec").read_bytes() == (dataset / "d.rec").read_bytes()
    assert (dataset / "back.idx").read_bytes() == (dataset / "d.idx").read_bytes()


def test_unpack_with_class_map_and_multi_labels(dataset: Path) -> None:
    result = unpack_rec(dataset / "d.rec", dataset / "named", classes={0: "cats", 1: "dogs"})
    assert sorted(p.name for p in (dataset / "named").iterdir()) == ["cats", "dogs"]
    assert len(list((dataset / "named" / "dogs").iterdir())) == 8 and result.other == 0
    with IndexedRecordWriter(dataset / "m.rec") as w:
        w.write_key(
            5, pack((0, [1.0, 0.1, 2.5], 5, 0), (dataset / "imgs" / "cats" / "1.jpg").read_bytes())
        )
        w.write_key(6, pack((0, 3, 6, 0), b"not an image"))
    multi = unpack_rec(dataset / "m.rec", dataset / "multi")
    assert multi.images == 1 and multi.other == 1
    assert multi.lst.read_text() == "5\t1.000000\t0.10000000149011612\t2.5\tmulti-label/5.jpg\n"
    pack_list(multi.lst, PackOptions(pass_through=True, pack_label=True))
    assert (dataset / "multi.rec").read_bytes() == (dataset / "m.rec").read_bytes()[
        : (dataset / "multi.rec").stat().st_size
    ]


def test_unpack_refuses_a_non_empty_folder(dataset: Path) -> None:
    (dataset / "busy").mkdir()
    (dataset / "busy" / "file").write_text("x")
    with pytest.raises(DatasetError, match="busy: exists and is not empty; pass --force"):
        unpack_rec(dataset / "d.rec", dataset / "busy")
    assert unpack_rec(dataset / "d.rec", dataset / "busy", force=True).images == 15


def test_unpack_reads_every_header_before_writing(dataset: Path) -> None:
    """A record that pack() did not write (here at the end) fails the run
    before any file exists: no OUT, no OUT.partial, no OUT.lst."""
    jpeg = (dataset / "imgs" / "cats" / "1.jpg").read_bytes()
    with IndexedRecordWriter(dataset / "odd.rec") as w:
        w.write_key(0, pack((0, 1.0, 0, 0), jpeg))
        w.write_key(1, b"raw")
    with pytest.raises(RecordFormatError, match=r"odd.rec: the record at byte [\d,]+ has no"):
        unpack_rec(dataset / "odd.rec", dataset / "odd")
    assert sorted(p.name for p in dataset.glob("odd*")) == ["odd.idx", "odd.rec"]


def test_unpack_folders_and_duplicate_ids(dataset: Path) -> None:
    """A single label that is not a whole number names its folder as written
    in the list; a repeated header id takes the smallest unused id."""
    jpeg = (dataset / "imgs" / "cats" / "1.jpg").read_bytes()
    with IndexedRecordWriter(dataset / "dup.rec") as w:
        for key, (label, id_) in enumerate([(2.5, 0), (1.0, 0), (1.0, 3), (1.0, 0)]):
            w.write_key(key, pack((0, label, id_, 0), jpeg))
    result = unpack_rec(dataset / "dup.rec", dataset / "dup")
    assert result.lst.read_text().splitlines() == [
        "0\t2.5\t2.5/0.jpg", "1\t1.000000\t1/1.jpg", "3\t1.000000\t1/3.jpg",
        "2\t1.000000\t1/2.jpg",
    ]  # fmt: skip
    assert not (dataset / "dup.partial").exists()

"""rec unpack / show / merge."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from im2rec.cli import main
from im2rec.errors import DatasetError, DuplicateKeyError, RecordFormatError
from im2rec.inspect.merging import merge_recs
from im2rec.inspect.sheets import contact_sheet
from im2rec.inspect.unpacking import unpack_rec
from im2rec.listing import ListOptions, make_lists
from im2rec.packing import PackOptions, pack_list
from im2rec.recordio import IndexedRecordWriter, pack

from ..conftest import photo


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    for c in ("cats", "dogs"):
        (tmp_path / "imgs" / c).mkdir(parents=True)
        for i in range(7):
            photo(40 + i, 30 + i, i).save(tmp_path / "imgs" / c / f"{i}.jpg")
    (tmp_path / "imgs" / "dogs" / "x.png").write_bytes(
        (tmp_path / "imgs" / "cats" / "0.jpg").read_bytes()
    )
    make_lists(tmp_path / "imgs", tmp_path / "d", ListOptions(recursive=True))
    pack_list(tmp_path / "d.lst", PackOptions(pass_through=True), root=tmp_path / "imgs")
    return tmp_path


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


def test_show_draws_the_grid(dataset: Path) -> None:
    shown, size = contact_sheet(dataset / "d.rec", dataset / "s.png", n=10, thumb=64)
    assert shown == 10 and size == (4 * 64, 3 * (64 + 14))
    with Image.open(dataset / "s.png") as im:
        assert im.format == "PNG" and im.size == size
    shown, _ = contact_sheet(dataset / "d.rec", dataset / "r.png", n=5, shuffle=True, label=1.0)
    assert shown == 5
    with pytest.raises(DatasetError, match="no records with label 9 to show"):
        contact_sheet(dataset / "d.rec", dataset / "none.png", label=9)


def test_show_marks_non_images(dataset: Path) -> None:
    with IndexedRecordWriter(dataset / "t.rec") as w:
        w.write_key(0, pack((0, 1, 0, 0), b"text, not pixels"))
    assert contact_sheet(dataset / "t.rec", dataset / "t.png")[0] == 1


def test_merge_equals_packing_the_concatenated_list(dataset: Path) -> None:
    lines = (dataset / "d.lst").read_text().splitlines(keepends=True)
    (dataset / "a.lst").write_text("".join(lines[:6]))
    (dataset / "b.lst").write_text("".join(lines[6:]))
    (dataset / "ab.lst").write_text("".join(lines))
    for name in ("a", "b", "ab"):
        pack_list(dataset / f"{name}.lst", PackOptions(pass_through=True), root=dataset / "imgs")
    assert merge_recs([dataset / "a.rec", dataset / "b.rec"], dataset / "m.rec") == (
        15,
        (dataset / "ab.rec").stat().st_size,
    )
    assert (dataset / "m.rec").read_bytes() == (dataset / "ab.rec").read_bytes()
    assert (dataset / "m.idx").read_bytes() == (dataset / "ab.idx").read_bytes()
    with pytest.raises(DuplicateKeyError, match="pass --renumber"):
        merge_recs([dataset / "a.rec", dataset / "a.rec"], dataset / "aa.rec")
    merge_recs([dataset / "a.rec", dataset / "a.rec"], dataset / "aa.rec", renumber=True)
    assert (dataset / "aa.idx").read_text().splitlines()[6].startswith("6\t")


def test_merge_refuses_a_damaged_input_and_writes_nothing(dataset: Path) -> None:
    """Concatenating a cut or mis-indexed .rec would give a merged file whose
    index points into the next input's bytes: refused, naming the input."""
    from im2rec.errors import IndexFormatError, TruncatedRecordError

    pack_list(dataset / "d.lst", PackOptions(pass_through=True), root=dataset / "imgs")
    whole = (dataset / "d.rec").read_bytes()
    (dataset / "cut.rec").write_bytes(whole[: len(whole) - 10])
    (dataset / "cut.idx").write_bytes((dataset / "d.idx").read_bytes())
    with pytest.raises(TruncatedRecordError, match=r"cut.rec: .*nothing was merged: check"):
        merge_recs([dataset / "cut.rec", dataset / "d.rec"], dataset / "m.rec", renumber=True)
    (dataset / "moved.rec").write_bytes(whole)
    lines = (dataset / "d.idx").read_text().splitlines()
    key, offset = lines[3].split("\t")
    lines[3] = f"{key}\t{int(offset) + 8}"
    (dataset / "moved.idx").write_text("\n".join(lines) + "\n")
    with pytest.raises(IndexFormatError, match=r"moved.idx: offset [\d,]+ is not the start"):
        merge_recs([dataset / "d.rec", dataset / "moved.rec"], dataset / "m.rec", renumber=True)
    (dataset / "moved.idx").write_text("\n".join(lines[:3]) + "\n")
    with pytest.raises(IndexFormatError, match=r"lists 3 entries for the \d+ records of .*moved"):
        merge_recs([dataset / "d.rec", dataset / "moved.rec"], dataset / "m.rec", renumber=True)
    assert not (dataset / "m.rec").exists() and not (dataset / "m.idx").exists()


def test_cli(dataset: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "unpack",
            str(dataset / "d.rec"),
            str(dataset / "u"),
            "--classes",
            str(dataset / "d.classes.tsv"),
        ],
    )
    assert result.exit_code == 0 and "15 images written" in result.output
    result = runner.invoke(main, ["unpack", str(dataset / "d.rec"), str(dataset / "u")])
    assert result.exit_code == 1 and "exists and is not empty; pass --force" in result.output
    result = runner.invoke(
        main, ["show", str(dataset / "d.rec"), "-o", str(dataset / "sheet.png"), "-n", "4"]
    )
    assert result.exit_code == 0 and "4 records" in result.output
    shutil.copy(dataset / "d.rec", dataset / "e.rec")
    shutil.copy(dataset / "d.idx", dataset / "e.idx")
    result = runner.invoke(
        main,
        ["merge", str(dataset / "d.rec"), str(dataset / "e.rec"), "-o", str(dataset / "de.rec")],
    )
    assert result.exit_code == 1 and "pass --renumber" in result.output


def test_show_tiles_hold_the_images_in_order_and_grey_for_the_rest(tmp_path: Path) -> None:
    """Each tile holds its record's image, scaled to fit and centred, in
    record order; a payload that is not an image is a grey tile."""
    colours = [(250, 20, 20), (20, 250, 20), (20, 20, 250)]
    with IndexedRecordWriter(tmp_path / "c.rec") as w:
        for i, colour in enumerate(colours):
            out = io.BytesIO()
            Image.new("RGB", (60, 30), colour).save(out, "PNG")  # wide: scaled to 60 x 30
            w.write_key(i, pack((0, float(i), i, 0), out.getvalue()))
        w.write_key(3, pack((0, 3.0, 3, 0), b"not an image"))
    shown, size = contact_sheet(tmp_path / "c.rec", tmp_path / "c.png", thumb=64)
    assert shown == 4 and size == (2 * 64, 2 * (64 + 14))
    with Image.open(tmp_path / "c.png") as sheet:
        pixels = sheet.convert("RGB")
        for i, colour in enumerate(colours):
            x, y = (i % 2) * 64, (i // 2) * 78
            assert pixels.getpixel((x + 32, y + 32)) == colour  # the image, centred
            assert pixels.getpixel((x + 32, y + 5)) == (255, 255, 255)  # above it: letterbox
        assert pixels.getpixel((64 + 32, 78 + 20)) == (0x99, 0x99, 0x99)  # the grey tile
        caption = [pixels.getpixel((x, 78 + 64 + 7)) for x in range(64, 128)]
        assert any(p != (255, 255, 255) for p in caption)  # "3: 3" is written under it

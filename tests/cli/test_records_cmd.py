"""rec unpack, rec show and rec merge through the real CLI: outputs that are
never replaced unasked, captions and label choices by class name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from im2rec.recordio import RecordReader, unpack

from .conftest import run


def _caption_strip(sheet: Image.Image, thumb: int = 128) -> Image.Image:
    return sheet.crop((0, thumb, thumb, thumb + 14))


def test_merge_refuses_an_existing_output(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    assert run("merge", "example.rec", "-o", "all.rec")[0] == 0
    code, out = run("merge", "example.rec", "-o", "all.rec")
    assert code == 1 and "all.rec: already exists; pass --overwrite to replace it" in out
    assert run("merge", "example.rec", "-o", "all.rec", "--overwrite")[0] == 0


def test_show_captions_use_the_class_map_beside_the_rec(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    code, out = run("show", "example.rec", "-o", "sheet.png", "-n", "4")
    assert code == 0, out
    header, _ = unpack(next(iter(RecordReader(listed / "example.rec"))))
    expected = Image.new("RGB", (128, 14), "white")
    ImageDraw.Draw(expected).text((3, 0), f"{header.id}: class{int(header.label)}", fill="black")
    with Image.open(listed / "sheet.png") as sheet:
        assert np.array_equal(
            np.asarray(_caption_strip(sheet.convert("RGB"))), np.asarray(expected)
        )
    # a map given with --classes wins; by number when there is none
    (listed / "other.tsv").write_text("0\tzero\n1\tone\n2\ttwo\n")
    assert (
        run("show", "example.rec", "-o", "named.png", "-n", "4", "--classes", "other.tsv")[0] == 0
    )
    (listed / "example.classes.tsv").unlink()
    assert run("show", "example.rec", "-o", "numbers.png", "-n", "4")[0] == 0
    numbers = Image.new("RGB", (128, 14), "white")
    ImageDraw.Draw(numbers).text((3, 0), f"{header.id}: {int(header.label)}", fill="black")
    with Image.open(listed / "numbers.png") as sheet:
        assert np.array_equal(np.asarray(_caption_strip(sheet.convert("RGB"))), np.asarray(numbers))


def test_show_label_by_class_name(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    code, out = run("show", "example.rec", "-o", "sheet.png", "--label", "class1")
    assert code == 0 and "sheet.png: 6 records" in out
    code, out = run("show", "example.rec", "-o", "sheet.png", "--label", "clas1")
    assert code == 2 and "no class named 'clas1' in the class map; did you mean 'class1'?" in out
    (listed / "example.classes.tsv").unlink()
    code, out = run("show", "example.rec", "-o", "sheet.png", "--label", "class1")
    assert code == 2 and "there is no class map to look it up in" in out


def test_unpack_names_the_folders_from_the_class_map_beside_the_rec(listed: Path) -> None:
    """It wrote folders 0/1/2 while rec info and rec show used the names."""
    assert run("pack", "--pass-through", "-q")[0] == 0
    assert run("unpack", "example.rec", "named")[0] == 0
    assert sorted(p.name for p in (listed / "named").iterdir()) == ["class0", "class1", "class2"]
    assert run("unpack", "example.rec", "numbered", "--by-label")[0] == 0
    assert sorted(p.name for p in (listed / "numbered").iterdir()) == ["0", "1", "2"]
    (listed / "example.classes.tsv").unlink()
    assert run("unpack", "example.rec", "plain")[0] == 0
    assert sorted(p.name for p in (listed / "plain").iterdir()) == ["0", "1", "2"]

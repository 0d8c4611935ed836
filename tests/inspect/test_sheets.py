"""rec show's contact sheets: the grid, images in order with grey tiles for the
rest, and non-images marked."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from im2rec.errors import DatasetError
from im2rec.inspect.sheets import contact_sheet
from im2rec.recordio import IndexedRecordWriter, pack


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

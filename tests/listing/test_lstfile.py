"""The .lst line format: written and read back as im2rec.py writes it."""

from __future__ import annotations

from im2rec.listing import Entry
from im2rec.listing.lstfile import format_lst_line


def test_lst_line_format() -> None:
    assert format_lst_line(Entry(4, 3, "b_dir/img1.jpg")) == "4\t3.000000\tb_dir/img1.jpg\n"

"""Fixtures the tests of inspect share."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.listing import ListOptions, make_lists
from im2rec.packing import PackOptions, pack_list

from ..conftest import photo, photo_folder, write_lst


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


@pytest.fixture
def packed(tmp_path: Path) -> Path:
    names = photo_folder(tmp_path / "p", 30, lambda i: (20 + i, 16 + i % 7))
    lst = write_lst(tmp_path / "p.lst", names)
    # keys in an order unlike the file order, as im2rec.py's shuffled lists give
    lst.write_text(
        "".join(
            f"{(i * 7) % 30}\t{line.split(chr(9), 1)[1]}"
            for i, line in enumerate(lst.read_text().splitlines(True))
        )
    )
    pack_list(lst, PackOptions(pass_through=True))
    return tmp_path / "p.rec"

"""Fixtures the tests of packing share."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import (
    make_odd_images,
    photo,
    photo_folder,
    write_lst,
)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shards") / "images"
    for i in range(60):
        folder = root / f"class{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        photo(60 + i % 17, 48 + i % 11, i).save(folder / f"{i:03d}.jpg", quality=90)
    (root / "class0" / "broken.jpg").write_bytes(b"not a jpeg")
    return root


@pytest.fixture
def odd(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    cases = make_odd_images(tmp_path / "imgs")
    write_lst(tmp_path / "odd.lst", list(cases))
    return tmp_path / "odd.lst", cases


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    """120 small photos in a folder named like the list."""
    size = lambda i: (40 + i % 50, 30 + i % 40)  # noqa: E731
    names = photo_folder(tmp_path / "ph", 120, size, "p{i:03d}.jpg", quality=85)
    return write_lst(tmp_path / "ph.lst", names, [[float(i % 5), float(i)] for i in range(120)])

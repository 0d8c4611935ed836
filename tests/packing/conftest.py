"""Fixtures the tests of packing share."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import (
    photo,
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

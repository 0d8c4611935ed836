"""Fixtures the tests of listing share."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import touch


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "example"
    touch(
        root,
        "top.jpg", "notes.txt", ".jpg",  # root images; a text file; splitext(".jpg") has no suffix
        "b_dir/img1.jpg", "b_dir/IMG2.JPEG", "b_dir/img3.Png", "b_dir/img4.gif",
        "a_dir/z.jpg", "a_dir/sub/y.jpg", "a_dir/sub/deeper/x.png",
        "c_empty/readme.md",
    )  # fmt: skip
    (root / "d_nothing").mkdir()
    return root

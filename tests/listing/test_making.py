"""Writing a listing's files: a failed run leaves the previous outputs, and
stale lists of the previous run are removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.errors import DatasetError
from im2rec.listing import ListOptions, make_lists

from .test_entries import R


def test_failed_run_leaves_previous_outputs(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "ex"
    make_lists(tree, out, R)
    before = (tmp_path / "ex.lst").read_bytes()
    (tree / "bad\tname.jpg").write_bytes(b"x")
    with pytest.raises(
        DatasetError, match=r"1 name cannot be stored in a .lst line; nothing written \(--strict\)"
    ):
        make_lists(tree, out, R, strict=True)

    def interrupt(_folders: int, _images: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        make_lists(tree, out, ListOptions(recursive=True, shuffle=False), on_progress=interrupt)
    assert (tmp_path / "ex.lst").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ex.classes.tsv",
        "ex.lists.json",
        "ex.lst",
        "example",
    ]


def test_stale_lists_of_the_previous_run_are_removed(tree: Path, tmp_path: Path) -> None:
    make_lists(tree, tmp_path / "ex", ListOptions(recursive=True, chunks=2))
    assert (tmp_path / "ex_1.lst").exists()
    (tmp_path / "unrelated.lst").write_text("keep me")
    make_lists(tree, tmp_path / "ex", R)
    assert sorted(p.name for p in tmp_path.glob("*.lst")) == ["ex.lst", "unrelated.lst"]

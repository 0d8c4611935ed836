"""Finding the lists to pack: a list named, every list in a folder, or every
list of a prefix (im2rec.py's rule); sorted, each once."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.errors import Im2RecError
from im2rec.listing.finding import find_lists


def test_lists_by_name_folder_and_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("b_val.lst", "b_train.lst", "other.lst", "b.rec"):
        (tmp_path / name).write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "s.lst").write_text("")
    monkeypatch.chdir(tmp_path)
    assert [p.name for p in find_lists([])] == ["b_train.lst", "b_val.lst", "other.lst"]
    assert [p.name for p in find_lists(["b"])] == ["b_train.lst", "b_val.lst"]
    assert [p.name for p in find_lists(["sub"])] == ["s.lst"]
    assert [p.name for p in find_lists(["other.lst", "other.lst"])] == ["other.lst"]


def test_a_missing_list_is_named(tmp_path: Path) -> None:
    with pytest.raises(Im2RecError, match="nope.lst: list file not found"):
        find_lists([str(tmp_path / "nope.lst")])

"""Names that come from files, and the writes they lead to: a name that is not
a plain relative path is refused, and writes below a root never follow a
link swapped in for one of its folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from im2rec.errors import DatasetError
from im2rec.storage.confined import ConfinedWriter, plain_path, relative_name


@given(
    st.text(
        st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from("/.\\ \t\n"),
        max_size=40,
    )
)
def test_relative_name_only_ever_names_a_path_inside(name: str) -> None:
    try:
        rel = relative_name(name, "map.tsv:1")
    except DatasetError as exc:
        assert str(exc).startswith("map.tsv:1: the name ")
        return
    parts = rel.split("/")
    assert ".." not in parts and "" not in parts and not rel.startswith("/")
    assert not any(c in rel for c in "\0\t\n\r") and not rel[0].isspace()
    assert ".." not in rel.replace("\\", "/").split("/")


def test_confined_writer_refuses_a_symlink_swapped_in_for_a_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    with ConfinedWriter(root) as files:
        files.write("a/1.bin", b"1")
        (root / "b").symlink_to(outside)
        with pytest.raises(DatasetError, match="does not write through links"):
            files.write("b/2.bin", b"2")
        (root / "a" / "3.bin").symlink_to(outside / "3.bin")
        with pytest.raises(DatasetError, match="does not write through links"):
            files.write("a/3.bin/x", b"3")
    assert list(outside.iterdir()) == []


@given(st.text(alphabet=st.sampled_from("ab./\\:\t"), max_size=12))
def test_a_plain_path_never_leaves_its_folder(name: str) -> None:
    """plain_path (archive members, object keys) holds only for names whose
    every part is a plain name; relative_name takes each such name (as it
    is, when it is plain ASCII)."""
    parts = name.replace("\\", "/").split("/")
    leaves = name[:1] in ("/", "\\") or (name[1:2] == ":" and name[:1].isalpha())
    plain = not leaves and all(p not in ("", ".", "..") for p in parts)
    assert plain_path(name) == plain
    if plain and "\t" not in name and not name[:1].isspace() and ":" not in name:
        assert relative_name(name, "here") == name.replace("\\", "/")

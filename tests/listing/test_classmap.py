"""Class maps: what a map may say, one rule for the names written, and
names that read back as themselves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from im2rec.errors import DatasetError
from im2rec.listing.classmap import check_class_names, class_map_text, read_class_map


def test_a_class_map_numbering_past_its_lines_is_refused(tmp_path: Path) -> None:
    """One line naming label 1,000,000,000 made every reader of the map
    (RecordDataset.classes, rec export's ClassLabel) make a list that long."""
    path = tmp_path / "m.classes.tsv"
    path.write_text("0\tcat\n1000000000\tdog\n")
    with pytest.raises(DatasetError, match=r"m.classes.tsv:2: label 1,000,000,000 in a map of 2"):
        read_class_map(path)
    path.write_text("0\tcat\n1027\tdog\n")  # (gaps: 1024 and twice the lines)
    assert read_class_map(path) == {0: "cat", 1027: "dog"}


@pytest.mark.parametrize(
    ("name", "words"),
    [("a\tb", "TAB"), ("a\nb", "newline"), ("../x", "'..'"), ("a//b", "read back"),
     ("./a", "read back"), ("/abs", "absolute"), (" lead", "whitespace"), ("", "empty")],
)  # fmt: skip
def test_class_names_a_map_cannot_carry_are_refused(name: str, words: str) -> None:
    with pytest.raises(DatasetError, match=words):
        check_class_names([(name, "classes.txt: class 0")])
    with pytest.raises(ValueError, match=words):
        class_map_text(["ok", name])


def test_every_name_a_map_is_written_with_reads_back(tmp_path: Path) -> None:
    names = [".", "cat", "traffic light", "a/b", "dog\x85x", "ünïcode", "x "]
    path = tmp_path / "m.classes.tsv"
    path.write_text(class_map_text(names))
    assert list(read_class_map(path).values()) == names


def test_a_recursive_listings_root_class_reads_back(tmp_path: Path) -> None:
    """rec list --recursive labels the images at the top `.`, as im2rec.py
    does: every reader of the class map refused that name."""
    (tmp_path / "ex" / "a").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(tmp_path / "ex" / "x.jpg")
    Image.new("RGB", (8, 8), (9, 9, 9)).save(tmp_path / "ex" / "a" / "y.jpg")

    def rec(*args: str) -> None:
        subprocess.run([sys.executable, "-m", "im2rec", *args], check=True, cwd=tmp_path,
                       capture_output=True)  # fmt: skip

    rec("list", "ex", "--recursive", "--no-shuffle", "-q")
    assert (tmp_path / "ex.classes.tsv").read_text() == "0\t.\n1\ta\n"
    rec("pack", "ex.lst", "--pass-through", "-q")
    from im2rec.training import RecordDataset

    assert RecordDataset(tmp_path / "ex.rec").classes == [".", "a"]
    rec("unpack", "ex.rec", "out", "--classes", "ex.classes.tsv")
    assert sorted(p.relative_to(tmp_path / "out").as_posix()
                  for p in (tmp_path / "out").rglob("*.jpg")) == ["0.jpg", "a/1.jpg"]  # fmt: skip

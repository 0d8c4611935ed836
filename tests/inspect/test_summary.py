"""What rec info reports of a .rec."""

from __future__ import annotations

from pathlib import Path

from im2rec.inspect.summary import summarise


def test_info(packed: Path) -> None:
    info = summarise(packed)
    assert info["records"] == 30 and info["split_records"] == 0
    assert info["formats"] == {"JPEG": 30} and info["width"] == [20, 49]
    assert info["labels"] == {"0": 10, "1": 10, "2": 10} and info["ids"] == [0, 29]
    assert info["index"]["agrees"] is True


def test_an_index_that_does_not_agree_or_parse_is_said_so(packed: Path) -> None:
    """The .idx is parsed beside the walk (indexcheck.parse_ahead): an
    offset that is no record's head, or a line that does not parse, is an
    index that does not agree, not an error of ``rec info``."""
    idx = packed.with_suffix(".idx")
    good = idx.read_text()
    lines = good.splitlines(True)
    key, offset = lines[3].split("\t")
    for changed in (f"{key}\t{int(offset) + 4}\n", "three\tfour\n"):
        idx.write_text("".join([*lines[:3], changed, *lines[4:]]))
        assert summarise(packed)["index"] == {"path": str(idx), "exists": True, "agrees": False}
    idx.unlink()
    assert summarise(packed)["index"]["agrees"] is None
    idx.write_text(good)
    assert summarise(packed)["index"]["agrees"] is True

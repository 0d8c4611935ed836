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

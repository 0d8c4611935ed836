"""rec merge: the same bytes as packing the concatenated list, and a damaged
input refused with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.errors import DuplicateKeyError
from im2rec.inspect.merging import merge_recs
from im2rec.packing import PackOptions, pack_list


def test_merge_equals_packing_the_concatenated_list(dataset: Path) -> None:
    lines = (dataset / "d.lst").read_text().splitlines(keepends=True)
    (dataset / "a.lst").write_text("".join(lines[:6]))
    (dataset / "b.lst").write_text("".join(lines[6:]))
    (dataset / "ab.lst").write_text("".join(lines))
    for name in ("a", "b", "ab"):
        pack_list(dataset / f"{name}.lst", PackOptions(pass_through=True), root=dataset / "imgs")
    assert merge_recs([dataset / "a.rec", dataset / "b.rec"], dataset / "m.rec") == (
        15,
        (dataset / "ab.rec").stat().st_size,
    )
    assert (dataset / "m.rec").read_bytes() == (dataset / "ab.rec").read_bytes()
    assert (dataset / "m.idx").read_bytes() == (dataset / "ab.idx").read_bytes()
    with pytest.raises(DuplicateKeyError, match="pass --renumber"):
        merge_recs([dataset / "a.rec", dataset / "a.rec"], dataset / "aa.rec")
    merge_recs([dataset / "a.rec", dataset / "a.rec"], dataset / "aa.rec", renumber=True)
    assert (dataset / "aa.idx").read_text().splitlines()[6].startswith("6\t")


def test_merge_refuses_a_damaged_input_and_writes_nothing(dataset: Path) -> None:
    """Concatenating a cut or mis-indexed .rec would give a merged file whose
    index points into the next input's bytes: refused, naming the input."""
    from im2rec.errors import IndexFormatError, TruncatedRecordError

    pack_list(dataset / "d.lst", PackOptions(pass_through=True), root=dataset / "imgs")
    whole = (dataset / "d.rec").read_bytes()
    (dataset / "cut.rec").write_bytes(whole[: len(whole) - 10])
    (dataset / "cut.idx").write_bytes((dataset / "d.idx").read_bytes())
    with pytest.raises(TruncatedRecordError, match=r"cut.rec: .*nothing was merged: check"):
        merge_recs([dataset / "cut.rec", dataset / "d.rec"], dataset / "m.rec", renumber=True)
    (dataset / "moved.rec").write_bytes(whole)
    lines = (dataset / "d.idx").read_text().splitlines()
    key, offset = lines[3].split("\t")
    lines[3] = f"{key}\t{int(offset) + 8}"
    (dataset / "moved.idx").write_text("\n".join(lines) + "\n")
    with pytest.raises(IndexFormatError, match=r"moved.idx: offset [\d,]+ is not the start"):
        merge_recs([dataset / "d.rec", dataset / "moved.rec"], dataset / "m.rec", renumber=True)
    (dataset / "moved.idx").write_text("\n".join(lines[:3]) + "\n")
    with pytest.raises(IndexFormatError, match=r"lists 3 entries for the \d+ records of .*moved"):
        merge_recs([dataset / "d.rec", dataset / "moved.rec"], dataset / "m.rec", renumber=True)
    assert not (dataset / "m.rec").exists() and not (dataset / "m.idx").exists()

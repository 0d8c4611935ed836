"""WebDataset round trips of files im2rec.py wrote (``make compat``): a .rec
made by MXNet's own tool, exported to tar shards and imported back, is the
same file byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.formats.webdataset import export_webdataset, import_webdataset

from ..conftest import MXNet, photo

pytestmark = pytest.mark.compat


@pytest.mark.parametrize("flags", [["--pass-through"], ["--resize", "40", "--pack-label"]])
def test_im2rec_py_files_round_trip(tmp_path: Path, mxnet: MXNet, flags: list[str]) -> None:
    root = tmp_path / "imgs"
    for c in range(3):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(7):
            kind = "PNG" if i == 3 else "JPEG"
            photo(60 + 9 * i, 50 + 7 * c, 10 * c + i).save(root / f"c{c}" / f"{i}.jpg", kind)
    mxnet.im2rec(str(tmp_path / "data"), str(root), "--list", "--recursive")
    mxnet.im2rec(str(tmp_path / "data"), str(root), "--num-thread", "2", *flags)
    rec = tmp_path / "data.rec"
    result = export_webdataset(rec, str(tmp_path / "wds-%03d.tar"), maxcount=8)
    assert len(result.shards) == 3 and result.samples == 21
    back = import_webdataset(result.shards, tmp_path / "back")
    assert back.records == 21
    assert (tmp_path / "back.rec").read_bytes() == rec.read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == rec.with_suffix(".idx").read_bytes()

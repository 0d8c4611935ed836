"""rec list --boxes against real MXNet 1.9.1 (``make compat``): its own
im2rec.py packs our detection list to the same records as rec pack, and its
ImageDetRecordIter reads every object we listed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from im2rec.listing.lstfile import read_lst
from im2rec.recordio import IndexedRecordReader, unpack

from ..boxsets import voc_set
from ..conftest import MXNet

pytestmark = pytest.mark.compat


def test_mxnet_packs_and_iterates_our_detection_list(mxnet: MXNet, tmp_path: Path) -> None:
    root = voc_set(tmp_path / "voc")
    subprocess.run([sys.executable, "-m", "im2rec", "list", str(root), "--boxes", "voc",
                    "-o", str(tmp_path / "ours"), "-q"], check=True)  # fmt: skip
    subprocess.run([sys.executable, "-m", "im2rec", "pack", "--pass-through", "--pack-label",
                    "--root", str(root), str(tmp_path / "ours.lst")], check=True,
                   capture_output=True)  # fmt: skip
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "ours.lst").write_bytes((tmp_path / "ours.lst").read_bytes())
    mxnet.im2rec("--pass-through", "--pack-label", str(theirs / "ours"), str(root) + "/")
    ours_reader = IndexedRecordReader(tmp_path / "ours.rec")
    theirs_reader = IndexedRecordReader(theirs / "ours.rec")
    assert ours_reader.keys == theirs_reader.keys
    for key in ours_reader.keys:  # the same header and label, the same image bytes
        assert ours_reader.read_key(key) == theirs_reader.read_key(key)
    labels = {item.key: item.labels for item in read_lst(tmp_path / "ours.lst")}
    rows = mxnet.run(
        """
        it = mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 32, 32), batch_size=3,
                                      label_pad_width=-1)
        result = [row.tolist() for batch in it for row in batch.label[0].asnumpy()]
        """,
        rec=str(tmp_path / "ours.rec"),
    )
    got = []
    for row in rows:  # the output shape, the label's length, the label, padding
        length = int(row[3])
        got.append(row[4 : 4 + length])
    expected = [list(np.asarray(labels[k], np.float32)) for k in ours_reader.keys]
    assert sorted(map(tuple, got)) == sorted(map(tuple, expected))
    for key in ours_reader.keys:
        header, _ = unpack(ours_reader.read_key(key))
        assert np.array_equal(header.label, np.asarray(labels[key], np.float32))

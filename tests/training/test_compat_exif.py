"""EXIF orientation: one policy in every reader, checked against MXNet 1.9.1
(``make compat``).

MXNet's ``ImageRecordIter`` and ``unpack_img`` (OpenCV's ``imdecode`` with
flags 1 and 0) turn an image upright by its EXIF orientation; so do ours,
and so does ``RecordDataset``. ``mx.image.imdecode`` (and Gluon's
``ImageRecordDataset`` built on it) does not: the README says so.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from im2rec import ImageRecordIter, RecordDataset
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, pack, unpack_img

from ..conftest import MXNet

pytestmark = pytest.mark.compat


def banded(width: int, height: int) -> Image.Image:
    """Bands and a block in distinct colours: any flip or turn changes it."""
    arr = np.zeros((height, width, 3), np.uint8)
    arr[: height // 3, :, 0] = 250
    arr[height // 3 : 2 * height // 3, : width // 2, 1] = 250
    arr[2 * height // 3 :, :, 2] = 200
    arr[:, -4:, :] = 90
    return Image.fromarray(arr)


@pytest.fixture(scope="module")
def oriented(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Records 0..7: one 64x48 JPEG with EXIF orientation 1..8 each."""
    rec = tmp_path_factory.mktemp("exif") / "exif.rec"
    with IndexedRecordWriter(rec) as w:
        for orientation in range(1, 9):
            exif = Image.Exif()
            exif[0x0112] = orientation
            out = io.BytesIO()
            banded(64, 48).save(out, "JPEG", quality=100, exif=exif.tobytes())
            w.write_key(
                orientation - 1, pack((0, float(orientation), orientation - 1, 0), out.getvalue())
            )
    return rec


MX_DECODES = """
import cv2
r = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
result = {"unpack_img": [], "imdecode": [], "oriented": []}
for key in range(8):
    s = r.read_idx(key)
    result["unpack_img"].append(mx.recordio.unpack_img(s, 1)[1].tolist())
    payload = mx.recordio.unpack(s)[1]
    result["imdecode"].append(list(mx.image.imdecode(payload).shape))
    rgb = cv2.imdecode(np.frombuffer(payload, np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1]
    result["oriented"].append(rgb.tolist())
it = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 48, 64),
                           batch_size=8, preprocess_threads=1)
result["iter"] = it.next().data[0].asnumpy().tolist()
"""


def test_every_reader_applies_exif_orientation_as_mxnet(mxnet: MXNet, oriented: Path) -> None:
    idx = oriented.with_suffix(".idx")
    theirs = mxnet.run(MX_DECODES, rec=str(oriented), idx=str(idx))
    # MXNet's own decoders disagree: the iterator and OpenCV turn, imdecode does not
    assert theirs["imdecode"][5] == [48, 64, 3]
    assert np.asarray(theirs["oriented"][5]).shape == (64, 48, 3)

    reader = IndexedRecordReader(oriented)
    dataset = RecordDataset(oriented, output="numpy")
    it = ImageRecordIter(
        path_imgrec=str(oriented), path_imgidx=str(idx), data_shape=(3, 48, 64), batch_size=8,
        preprocess_threads=1,
    )  # fmt: skip
    batch = it.next().data[0]
    it.close()
    mx_batch = np.asarray(theirs["iter"], np.float32)
    for key in range(8):
        # unpack_img: the same BGR array as MXNet's (OpenCV 4.11 turns it)
        bgr = unpack_img(reader.read_key(key), 1)[1]
        assert bgr is not None
        assert np.array_equal(bgr, np.asarray(theirs["unpack_img"][key], np.uint8)), key
        # RecordDataset: the upright RGB image OpenCV decodes, pixel for pixel
        rgb = dataset[key][0]
        assert np.array_equal(rgb, np.asarray(theirs["oriented"][key], np.uint8)), key
        # ImageRecordIter: MXNet's batch, including the crop of the turned image
        diff = np.abs(batch[key] - mx_batch[key])
        assert diff.max() <= 1, (key, diff.max())

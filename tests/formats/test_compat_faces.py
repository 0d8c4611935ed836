"""Our InsightFace layout read by InsightFace's own reading logic on real
MXNet 1.9.1 (``make compat``): ``arcface_torch``'s ``MXFaceDataset`` (header
record 0, image keys ``1 .. label[0]-1``, identity ``label[0]``) and the older
``FaceImageIter``'s identity ranges (``id2range``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from im2rec.listing.lstfile import read_lst
from im2rec.packing import PackOptions, pack_list

from ..conftest import MXNet
from ..faces_data import check_layout, make_faces

pytestmark = pytest.mark.compat

READER = """
import numbers
imgrec = mx.recordio.MXIndexedRecordIO(idx, rec, 'r')
header, _ = mx.recordio.unpack(imgrec.read_idx(0))
assert header.flag > 0
header0 = (int(header.label[0]), int(header.label[1]))
samples = []
for key in range(1, header0[0]):  # MXFaceDataset's imgidx
    h, img = mx.recordio.unpack(imgrec.read_idx(key))
    label = h.label
    if not isinstance(label, numbers.Number):
        label = label[0]
    shape = mx.image.imdecode(img).asnumpy().shape
    samples.append([int(label), list(shape), __import__('hashlib').sha256(img).hexdigest()])
id2range = {}
for identity in range(header0[0], header0[1]):  # FaceImageIter's identity records
    h, _ = mx.recordio.unpack(imgrec.read_idx(identity))
    id2range[identity] = [int(h.label[0]), int(h.label[1])]
result = {"header0": list(header0), "samples": samples, "id2range": id2range}
"""


@pytest.mark.parametrize("options", [PackOptions(pass_through=True, layout="insightface"),
                                     PackOptions(resize=32, layout="insightface")])  # fmt: skip
def test_insightface_reads_our_layout(tmp_path: Path, mxnet: MXNet, options: PackOptions) -> None:
    files = make_faces(tmp_path / "faces", [4, 2, 6, 1, 3])
    lines = [f"{i}\t{int(p[2])}.000000\t{p}\n" for i, p in enumerate(sorted(files, reverse=True))]
    (tmp_path / "faces.lst").write_text("".join(lines))  # identities out of order
    pack_list(tmp_path / "faces.lst", options)
    rec = tmp_path / "faces.rec"
    ranges = check_layout(rec, 16, 5)
    got = mxnet.run(READER, rec=str(rec), idx=str(rec.with_suffix(".idx")))
    assert got["header0"] == [17, 22]
    assert got["id2range"] == {str(17 + j): [start, end] for j, (_, start, end) in
                               enumerate(ranges)}  # fmt: skip
    items = read_lst(tmp_path / "faces.lst")
    expected = []
    for identity, _, _ in ranges:  # grouped, list order within each identity
        for item in items:
            if int(item.labels[0]) == identity:
                expected.append((identity, files[item.path]))
    assert [s[0] for s in got["samples"]] == [identity for identity, _ in expected]
    side = 48 if options.pass_through else 32
    assert all(s[1] == [side, side, 3] for s in got["samples"])
    if options.pass_through:  # the very file bytes
        assert [s[2] for s in got["samples"]] == [
            hashlib.sha256(data).hexdigest() for _, data in expected
        ]

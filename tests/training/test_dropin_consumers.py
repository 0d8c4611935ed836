"""The code that reads RecordIO in the wild, run unchanged against the
drop-in: InsightFace's ``MXFaceDataset`` (arcface_torch) and Gluon's
``RecordFileDataset``/``ImageRecordDataset`` (what GluonCV's recipes use),
their logic transcribed with ``mx.recordio`` replaced by
``im2rec.recordio``. Since the drop-in serves ``keys`` and ``idx`` as views
over arrays (docs/performance.md, "Scale"), these check that what such code
does with them (``np.array(list(keys))``, numpy-integer keys,
``keys[i]``, ``len(keys)``, pickling into DataLoader workers) still works."""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from im2rec import recordio
from im2rec.packing import PackOptions, pack_list

from ..faces_data import make_faces


class FaceDataset:
    """arcface_torch's MXFaceDataset, as it reads the file."""

    def __init__(self, rec: Path):
        self.imgrec = recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
        header, _ = recordio.unpack(self.imgrec.read_idx(0))
        if header.flag > 0:
            self.header0 = (int(header.label[0]), int(header.label[1]))
            self.imgidx = np.array(range(1, int(header.label[0])))
        else:
            self.imgidx = np.array(list(self.imgrec.keys))

    def __getitem__(self, index: int) -> tuple[Any, int]:
        idx = self.imgidx[index]  # a numpy integer key
        header, img = recordio.unpack(self.imgrec.read_idx(idx))
        label = header.label
        if not isinstance(label, numbers.Number):
            label = label[0]
        _, image = recordio.unpack_img(recordio.pack(header, img))
        return image, int(label)

    def __len__(self) -> int:
        return len(self.imgidx)


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("faces")
    files = make_faces(root / "faces", [3, 2, 4])
    (root / "f.lst").write_text(
        "".join(f"{i}\t{int(p[2])}\t{p}\n" for i, p in enumerate(sorted(files)))
    )
    pack_list(
        root / "f.lst", PackOptions(pass_through=True, layout="insightface"), root=root / "faces"
    )
    return root / "f.rec"


class GluonRecordDataset:
    """Gluon's RecordFileDataset + ImageRecordDataset."""

    def __init__(self, rec: Path):
        self._record = recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")

    def __getitem__(self, idx: int) -> tuple[Any, Any]:
        record = self._record.read_idx(self._record.keys[idx])
        header, img = recordio.unpack(record)
        _, image = recordio.unpack_img(recordio.pack(header, img), 1)
        return image, header.label

    def __len__(self) -> int:
        return len(self._record.keys)


def _transform_label(label: Any, height: Any = None, width: Any = None) -> Any:
    """GluonCV's gluoncv/data/recordio/detection.py, as it is."""
    label = np.array(label).ravel()
    header_len = int(label[0])  # label header
    label_width = int(label[1])  # the label width for each object, >= 5
    if label_width < 5:
        raise ValueError(f"Label info for each object should >= 5, given {label_width}")
    min_len = header_len + 5
    if len(label) < min_len:
        raise ValueError(f"Expected label length >= {min_len}, got {len(label)}")
    if (len(label) - header_len) % label_width:
        raise ValueError("Broken label")
    gcv_label = label[header_len:].reshape(-1, label_width)
    # swap columns, gluon-cv requires [xmin-ymin-xmax-ymax-id-extra0-extra1-xxx]
    ids = gcv_label[:, 0].copy()
    gcv_label[:, :4] = gcv_label[:, 1:5]
    gcv_label[:, 4] = ids
    # restore to absolute coordinates
    if height is not None:
        gcv_label[:, (0, 2)] *= width
    if width is not None:
        gcv_label[:, (1, 3)] *= height
    return gcv_label


class RecordFileDetection(GluonRecordDataset):
    """GluonCV's RecordFileDetection (coord_normalized=True)."""

    def __getitem__(self, idx: int) -> tuple[Any, Any]:
        img, label = super().__getitem__(idx)
        h, w, _ = img.shape
        return img, _transform_label(label, h, w)


def test_gluoncv_record_file_detection_reads_our_boxes(tmp_path: Path) -> None:
    """rec list --boxes, rec pack --pack-label, then GluonCV's reader: each
    box back in pixels, class id after the corners, as GluonCV trains on."""
    from im2rec.listing import ListOptions, make_lists
    from im2rec.listing.boxes import BoxOptions

    from ..boxsets import IMAGES, voc_set

    root = voc_set(tmp_path / "voc")
    make_lists(root, tmp_path / "voc", ListOptions(shuffle=False), boxes=BoxOptions("voc"))
    pack_list(tmp_path / "voc.lst", PackOptions(pass_through=True, pack_label=True), root=root)
    ds = RecordFileDetection(tmp_path / "voc.rec")
    listed = [image for image in IMAGES if image[3]]  # (images with objects: a, b, d)
    assert len(ds) == len(listed)
    for k, (_, w, h, objects) in enumerate(listed):
        image, label = ds[k]
        assert image.shape == (h, w, 3)
        classes = sorted({c for c, *_ in (o for _, _, _, obs in IMAGES for o in obs)})
        expected = [[x0, y0, x1, y1, classes.index(c), flag] for c, x0, y0, x1, y1, flag in objects]
        np.testing.assert_allclose(label, expected, atol=1e-4)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plain")
    files = make_faces(root / "faces", [3, 2])
    (root / "p.lst").write_text(
        "".join(f"{i}\t{int(p[2])}\t{p}\n" for i, p in enumerate(sorted(files)))
    )
    pack_list(root / "p.lst", PackOptions(pass_through=True), root=root / "faces")
    return root / "p.rec"


def test_mxfacedataset_reads_the_face_layout(faces: Path) -> None:
    ds = FaceDataset(faces)
    assert ds.header0 == (10, 13) and len(ds) == 9
    labels = sorted(ds[i][1] for i in range(len(ds)))
    assert labels == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    assert all(ds[i][0].shape[2] == 3 for i in range(len(ds)))


def test_mxfacedataset_reads_a_plain_file_through_its_keys(plain: Path) -> None:
    ds = FaceDataset(plain)
    assert list(ds.imgidx) == list(range(5)) and ds.imgidx.dtype.kind == "i"
    assert [ds[i][1] for i in range(5)] == [0, 0, 0, 1, 1]


def test_gluon_record_dataset(plain: Path) -> None:
    ds = GluonRecordDataset(plain)
    assert len(ds) == 5
    image, label = ds[4]
    assert image.ndim == 3 and float(label) == 1.0


@pytest.mark.parametrize(("make", "which"), [(FaceDataset, "faces"), (FaceDataset, "plain"),
                                             (GluonRecordDataset, "plain")])  # fmt: skip
@pytest.mark.slow
def test_in_a_dataloader_with_workers(faces: Path, plain: Path, make: Any, which: str) -> None:
    torch = pytest.importorskip("torch")
    for rec in [faces if which == "faces" else plain]:
        ds = make(rec)
        loader = torch.utils.data.DataLoader(
            ds, batch_size=2, num_workers=2, collate_fn=lambda batch: [int(lab) for _, lab in batch]
        )
        got = sorted(label for batch in loader for label in batch)
        assert got == sorted(int(ds[i][1]) for i in range(len(ds)))

"""RecordDataset(labels="boxes"): detection targets as torchvision's
detection models take them, from a rec that rec list --boxes made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from im2rec.errors import ConfigError, DatasetError
from im2rec.listing import ListOptions, make_lists
from im2rec.listing.boxes import BoxOptions
from im2rec.packing import PackOptions, pack_list
from im2rec.training.dataset import RecordDataset

from ..boxsets import IMAGES, voc_set

CLASSES = ["cat", "dog", "person"]


@pytest.fixture(scope="module")
def voc_rec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("voc")
    root = voc_set(tmp / "voc")
    make_lists(root, tmp / "voc", ListOptions(shuffle=False), boxes=BoxOptions("voc"))
    pack_list(tmp / "voc.lst", PackOptions(pass_through=True, pack_label=True), root=root)
    return tmp / "voc.rec"


def expected(k: int) -> tuple[np.ndarray, list[int]]:
    _, _, _, objects = [image for image in IMAGES if image[3]][k]
    boxes = [(x0, y0, x1, y1) for _, x0, y0, x1, y1, _ in objects]
    return np.asarray(boxes, np.float32), [CLASSES.index(c) for c, *_ in objects]


@pytest.mark.parametrize("output", ["pil", "numpy", "bytes"])
def test_targets_hold_pixel_boxes_and_int64_classes(voc_rec: Path, output: str) -> None:
    ds = RecordDataset(voc_rec, output=output, labels="boxes")
    for k in range(len(ds)):
        _, target = ds[k]
        boxes, classes = expected(k)
        np.testing.assert_allclose(target["boxes"], boxes, atol=1e-3)
        assert target["labels"].dtype == np.int64 and target["labels"].tolist() == classes
        assert target["extra"].shape == (len(classes), 1)  # the difficult flag


def test_transforms_move_image_and_target_together(voc_rec: Path) -> None:
    def flip(image, target):  # type: ignore[no-untyped-def]
        width = image.width
        boxes = target["boxes"].copy()
        boxes[:, [0, 2]] = width - target["boxes"][:, [2, 0]]
        return image.transpose(0), {**target, "boxes": boxes}

    ds = RecordDataset(voc_rec, labels="boxes", transforms=flip)
    image, target = ds[0]
    boxes, _ = expected(0)
    assert target["boxes"][0].tolist() == [
        64 - boxes[0, 2],
        boxes[0, 1],
        64 - boxes[0, 0],
        boxes[0, 3],
    ]
    with pytest.raises(ConfigError, match="leave the boxes where they were"):
        RecordDataset(voc_rec, labels="boxes", transform=lambda image: image)


def test_a_record_without_boxes_is_one_clear_error(tmp_path: Path) -> None:
    from im2rec.recordio import IndexedRecordWriter, pack

    with IndexedRecordWriter(tmp_path / "c.rec") as w:
        w.write_key(0, pack((0, 3.0, 0, 0), b"not even an image"))
    ds = RecordDataset(tmp_path / "c.rec", output="bytes", labels="boxes")
    with pytest.raises(DatasetError, match="record 0: its label is not a detection label"):
        ds[0]


@pytest.mark.slow
def test_a_dataloader_batch_keeps_each_images_objects(voc_rec: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    ds = RecordDataset(voc_rec, output="numpy", labels="boxes")
    loader = DataLoader(ds, batch_size=3, num_workers=1, collate_fn=RecordDataset.collate_boxes,
                        multiprocessing_context="fork")  # fmt: skip
    images, targets = next(iter(loader))
    assert isinstance(images, list) and [tuple(i.shape[:2]) for i in images] == [
        (48, 64),
        (50, 50),
        (60, 40),
    ]
    assert [len(t["boxes"]) for t in targets] == [2, 1, 3]
    assert all(
        t["labels"].dtype == torch.int64 and t["boxes"].dtype == torch.float32 for t in targets
    )

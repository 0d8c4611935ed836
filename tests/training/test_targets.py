"""RecordDataset(labels="boxes"): detection targets as torchvision's
detection models take them, from a rec that rec list --boxes made."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from im2rec.errors import ConfigError, DatasetError
from im2rec.listing import ListOptions, make_lists
from im2rec.listing.boxes import BoxOptions
from im2rec.packing import PackOptions, pack_list
from im2rec.training import targets as targets_module
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


@pytest.fixture(params=["torchvision", "plain"])
def tv(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """torchvision's tv_tensors where it is installed; None for the targets
    made where it is not (the module's lookup answering as it does there)."""
    if request.param == "plain":
        monkeypatch.setattr(targets_module, "tv_tensors", lambda: None)
        return None
    return pytest.importorskip("torchvision.tv_tensors")


@pytest.mark.parametrize("output", ["pil", "numpy", "bytes"])
def test_targets_hold_pixel_boxes_and_int64_classes(voc_rec: Path, output: str, tv: Any) -> None:
    torch = pytest.importorskip("torch")
    ds = RecordDataset(voc_rec, output=output, labels="boxes")
    sizes = [(48, 64), (50, 50), (60, 40)]
    for k in range(len(ds)):
        _, target = ds[k]
        boxes, classes = expected(k)
        np.testing.assert_allclose(np.asarray(target["boxes"]), boxes, atol=1e-3)
        assert np.asarray(target["labels"]).dtype == np.int64
        assert np.asarray(target["labels"]).tolist() == classes
        assert tuple(target["extra"].shape) == (len(classes), 1)  # the difficult flag
        assert target["size"] == sizes[k]
        if tv is None:  # plain tensors
            assert all(type(target[key]) is torch.Tensor for key in ("boxes", "labels", "extra"))
        else:
            assert isinstance(target["boxes"], tv.BoundingBoxes)
            assert target["boxes"].format == tv.BoundingBoxFormat.XYXY
            assert target["boxes"].canvas_size == sizes[k]


def test_without_torch_the_targets_are_numpy_arrays(voc_rec: Path) -> None:
    # (run by the test matrix's environments, which have no torch)
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed: the targets are tensors")
    _, target = RecordDataset(voc_rec, output="numpy", labels="boxes")[0]
    assert all(isinstance(target[key], np.ndarray) for key in ("boxes", "labels", "extra"))
    np.testing.assert_allclose(target["boxes"], expected(0)[0], atol=1e-3)


def test_transforms_move_image_and_target_together(voc_rec: Path, tv: Any) -> None:
    def flip(image, target):  # type: ignore[no-untyped-def]
        width = image.width
        boxes = np.asarray(target["boxes"]).copy()
        boxes[:, [0, 2]] = width - boxes[:, [2, 0]]
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


def test_torchvision_transforms_v2_move_the_boxes(voc_rec: Path) -> None:
    tv = pytest.importorskip("torchvision.tv_tensors")
    from torchvision.transforms import v2

    plain = RecordDataset(voc_rec, output="numpy", labels="boxes")
    moved = RecordDataset(voc_rec, labels="boxes", transforms=v2.Compose([
        v2.ToImage(), v2.RandomHorizontalFlip(p=1.0), v2.Resize((96, 128)),
    ]))  # fmt: skip
    for k in range(len(plain)):
        image, target = plain[k]
        drawn, after = moved[k]
        height, width = image.shape[:2]
        assert isinstance(drawn, tv.Image) and isinstance(after["boxes"], tv.BoundingBoxes)
        assert after["boxes"].canvas_size == (96, 128) == tuple(drawn.shape[1:])
        want = np.asarray(target["boxes"]).copy()
        want[:, [0, 2]] = width - want[:, [2, 0]]
        want *= np.asarray([128 / width, 96 / height] * 2, np.float32)
        np.testing.assert_allclose(after["boxes"].numpy(), want, atol=1e-3)
        assert after["labels"].tolist() == np.asarray(target["labels"]).tolist()


def test_a_torchvision_that_does_not_import_leaves_plain_targets(
    voc_rec: Path, tmp_path: Path
) -> None:
    # a torchvision built for another torch fails on import with a
    # RuntimeError ("operator torchvision::nms does not exist"): said once,
    # and the targets are those made without torchvision
    pytest.importorskip("torch")
    (tmp_path / "torchvision").mkdir()
    (tmp_path / "torchvision" / "__init__.py").write_text(
        "raise RuntimeError('operator torchvision::nms does not exist')\n"
    )
    code = (
        "import sys, warnings, numpy as np\n"
        "from im2rec.training import RecordDataset\n"
        "ds = RecordDataset(sys.argv[1], output='numpy', labels='boxes')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    targets = [ds[k][1] for k in range(len(ds))]\n"
        "print(type(targets[0]['boxes']).__name__, len(caught))\n"
        "print(caught[0].message)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", code, str(voc_rec)], capture_output=True,
                         text=True, check=True, env=env).stdout.splitlines()  # fmt: skip
    assert out[0] == "Tensor 1"  # a plain tensor
    assert "torchvision is installed but does not import" in out[1] and "nms" in out[1]


def test_a_record_without_boxes_is_one_clear_error(tmp_path: Path) -> None:
    from im2rec.recordio import IndexedRecordWriter, pack

    with IndexedRecordWriter(tmp_path / "c.rec") as w:
        w.write_key(0, pack((0, 3.0, 0, 0), b"not even an image"))
    ds = RecordDataset(tmp_path / "c.rec", output="bytes", labels="boxes")
    with pytest.raises(DatasetError, match="record 0: its label is not a detection label"):
        ds[0]


@pytest.mark.slow
def test_a_dataloader_batch_keeps_each_images_objects(voc_rec: Path, tv: Any) -> None:
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
    for target, size in zip(targets, [(48, 64), (50, 50), (60, 40)], strict=True):
        assert target["size"] == size
        if tv is not None:  # (a tensor subclass, sent from the worker as one)
            assert isinstance(target["boxes"], tv.BoundingBoxes)
            assert target["boxes"].canvas_size == size
        else:
            assert type(target["boxes"]) is torch.Tensor


# -- the pixels' own canvas, on every output --------------------------------


@pytest.fixture(scope="module")
def resized_rec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The VOC set packed with --resize 30: the labels' headers still name
    the annotation's sizes (64x48, ...), the stored images are smaller."""
    tmp = tmp_path_factory.mktemp("resized")
    root = voc_set(tmp / "voc")
    make_lists(root, tmp / "voc", ListOptions(shuffle=False), boxes=BoxOptions("voc"))
    pack_list(tmp / "voc.lst", PackOptions(pack_label=True, resize=30), root=root)
    return tmp / "voc.rec"


def stored_sizes(rec: Path) -> list[tuple[int, int]]:
    """(height, width) of each stored image, decoded."""
    ds = RecordDataset(rec, output="numpy", labels="float")
    return [ds[k][0].shape[:2] for k in range(len(ds))]


@pytest.mark.parametrize("output", ["pil", "numpy", "bytes"])
def test_boxes_are_in_the_stored_images_pixels_not_the_labels_size(
    resized_rec: Path, output: str, tv: Any
) -> None:
    """A rec packed with --pack-label --resize: the label's header keeps the
    annotation's width and height; the boxes and size are the image's."""
    ds = RecordDataset(resized_rec, output=output, labels="boxes")
    original = [(48, 64), (50, 50), (60, 40)]
    for k, (height, width) in enumerate(stored_sizes(resized_rec)):
        assert (height, width) != original[k] or k == 1
        _, target = ds[k]
        assert target["size"] == (height, width)
        boxes, _ = expected(k)
        scale = np.asarray([width / original[k][1], height / original[k][0]] * 2, np.float32)
        np.testing.assert_allclose(np.asarray(target["boxes"]), boxes * scale, atol=1e-3)
        if tv is not None:
            assert target["boxes"].canvas_size == (height, width)


def test_a_labels_own_width_and_height_are_never_used(tmp_path: Path) -> None:
    """A label whose header says width -8 (or nothing sane) still gives the
    boxes on the image's own pixels."""
    from ..boxsets import det_rec

    rec = det_rec(tmp_path / "odd.rec", [(40, 30)], [[[1, 0.25, 0.5, 0.75, 1.0, 0]]], (-8, 0))
    for output in ("pil", "numpy", "bytes"):
        _, target = RecordDataset(rec, output=output, labels="boxes")[0]
        assert np.asarray(target["boxes"]).tolist() == [[10, 15, 30, 30]]
        assert target["size"] == (30, 40)


def v2_flip() -> Any:
    from torchvision.transforms import v2

    return v2.RandomHorizontalFlip(p=1.0)


@pytest.mark.parametrize("output", ["pil", "numpy"])
def test_a_v2_flip_moves_image_and_boxes_together_on_every_output(
    resized_rec: Path, output: str
) -> None:
    """v2 passes a numpy array through and takes the first plain tensor for
    the image: a detection target's labels. The numpy image reaches v2 as a
    tv_tensors.Image, so the image flips with its boxes and the labels stay."""
    tv = pytest.importorskip("torchvision.tv_tensors")
    plain = RecordDataset(resized_rec, output="numpy", labels="boxes")
    flipped = RecordDataset(resized_rec, output=output, labels="boxes", transforms=v2_flip())
    for k in range(len(plain)):
        image, target = plain[k]
        drawn, after = flipped[k]
        pixels = np.asarray(drawn) if output == "pil" else drawn.numpy().transpose(1, 2, 0)
        if output == "numpy":
            assert isinstance(drawn, tv.Image)
        assert np.array_equal(pixels, image[:, ::-1])  # the image flipped
        width = image.shape[1]
        want = np.asarray(target["boxes"]).copy()
        want[:, [0, 2]] = width - want[:, [2, 0]]
        np.testing.assert_allclose(np.asarray(after["boxes"]), want, atol=1e-4)
        assert after["labels"].tolist() == np.asarray(target["labels"]).tolist()


def test_bytes_with_a_v2_transform_is_refused_and_det_transform_flips(resized_rec: Path) -> None:
    pytest.importorskip("torchvision.tv_tensors")
    with pytest.raises(ConfigError, match="v2 cannot move undecoded bytes"):
        RecordDataset(resized_rec, output="bytes", labels="boxes", transforms=v2_flip())
    with pytest.raises(ConfigError, match="v2 cannot move undecoded bytes"):
        RecordDataset(resized_rec, output="bytes", transform=v2_flip())
    from im2rec.training import DetAugmenter
    from im2rec.training.detdraw import DetTransform

    plain = RecordDataset(resized_rec, output="numpy", labels="boxes")
    aug = DetTransform(DetAugmenter((3, 40, 40), rand_mirror_prob=1.0, resize_mode="shrink"))
    drawn = RecordDataset(resized_rec, output="bytes", labels="boxes", transforms=aug)
    for k in range(len(plain)):
        image, target = plain[k]
        _, after = drawn[k]
        height, width = after["size"]
        scale = np.asarray([width / image.shape[1], height / image.shape[0]] * 2, np.float32)
        want = np.asarray(target["boxes"]) * scale
        want[:, [0, 2]] = width - want[:, [2, 0]]
        np.testing.assert_allclose(np.asarray(after["boxes"]), want, atol=1e-2)


def test_a_v2_classification_transform_gets_the_numpy_image(resized_rec: Path) -> None:
    """(v2 on a numpy array did nothing: the image came back as it was.)"""
    pytest.importorskip("torchvision.tv_tensors")
    plain = RecordDataset(resized_rec, output="numpy", labels="float")
    flipped = RecordDataset(resized_rec, output="numpy", labels="float", transform=v2_flip())
    image, _ = plain[0]
    drawn, _ = flipped[0]
    assert np.array_equal(drawn.numpy().transpose(1, 2, 0), image[:, ::-1])


@pytest.mark.parametrize("output", ["pil", "numpy", "bytes"])
def test_an_image_listed_with_keep_empty_has_a_target_of_no_objects(
    tmp_path: Path, output: str
) -> None:
    """`rec list --keep-empty` writes an image without objects as a header
    alone (`4 6 w h`): the dataset gives it no boxes, as GluonCV's reader and
    torchvision's models take it, drawn or not; MXNet's iterator refuses it."""
    from im2rec.errors import RecordFormatError
    from im2rec.training import DetAugmenter
    from im2rec.training.detdraw import DetTransform
    from im2rec.training.detiter import ImageDetRecordIter

    root = voc_set(tmp_path / "voc")
    options = BoxOptions("voc", keep_empty=True)
    make_lists(root, tmp_path / "voc", ListOptions(shuffle=False), boxes=options)
    pack_list(tmp_path / "voc.lst", PackOptions(pass_through=True, pack_label=True), root=root)
    rec = tmp_path / "voc.rec"
    aug = DetTransform(DetAugmenter((3, 32, 32), rand_mirror_prob=1.0))
    for transforms in (None, aug) if output == "bytes" else (None,):  # (DetTransform: bytes)
        ds = RecordDataset(rec, output=output, labels="boxes", transforms=transforms)
        assert len(ds) == len(IMAGES)
        for k, (_, w, h, objects) in enumerate(IMAGES):
            _, target = ds[k]
            assert np.asarray(target["boxes"]).shape == (len(objects), 4)
            assert np.asarray(target["labels"]).shape == (len(objects),)
            assert target["size"] == ((h, w) if transforms is None else (32, 32))
    with pytest.raises(RecordFormatError, match="not a detection label"):
        with ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=4,
                                verbose=False, preprocess_threads=1) as it:  # fmt: skip
            next(iter(it))

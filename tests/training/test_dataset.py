"""RecordDataset: decoding, labels, InsightFace layout, real torch DataLoaders."""

from __future__ import annotations

import io
import multiprocessing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from im2rec.errors import DatasetError, ImageCodecError
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.training.dataset import RecordDataset

from ..conftest import photo


def jpeg(width: int, height: int, seed: int) -> bytes:
    out = io.BytesIO()
    photo(width, height, seed).save(out, "JPEG", quality=90)
    return out.getvalue()


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    with IndexedRecordWriter(tmp_path / "plain.rec") as w:
        for i in range(24):
            label = [float(i), 0.5] if i % 5 == 0 else float(i % 4)
            w.write_key(i, pack((0, label, i, 0), jpeg(20 + i, 16, i)))
    return tmp_path / "plain.rec"


@pytest.fixture
def insightface(tmp_path: Path) -> Path:
    """The MS1M/Glint360K layout: a header record, images, identity records."""
    identities = [(1, 4), (4, 9), (9, 11)]  # image key ranges per identity
    first, end = 11, 11 + len(identities)
    with IndexedRecordWriter(tmp_path / "faces.rec") as w:
        w.write_key(0, pack((2, [first, end], 0, 0), b""))
        for ident, (lo, hi) in enumerate(identities):
            for key in range(lo, hi):
                w.write_key(key, pack((0, float(ident), key, 0), jpeg(16, 16, key)))
        for ident, (lo, hi) in enumerate(identities):
            w.write_key(first + ident, pack((2, [lo, hi], 0, 0), b""))
    return tmp_path / "faces.rec"


def test_items(plain: Path) -> None:
    ds = RecordDataset(plain)
    assert len(ds) == 24 and ds.layout == "plain"
    image, label = ds[3]
    assert isinstance(image, Image.Image) and image.mode == "RGB" and image.size == (23, 16)
    assert label == 3.0
    image, label = ds[5]
    assert label.dtype == np.float32 and label.tolist() == [5.0, 0.5]
    array, _ = RecordDataset(plain, output="numpy")[7]
    assert array.shape == (16, 27, 3) and array.dtype == np.uint8
    raw, _ = RecordDataset(plain, output="bytes")[7]
    assert raw == jpeg(27, 16, 7)


def test_transforms(plain: Path) -> None:
    ds = RecordDataset(
        plain, output="numpy", transform=lambda a: a.shape, target_transform=lambda y: -y
    )
    assert ds[2] == ((16, 22, 3), -2.0)


def test_insightface_layout(insightface: Path) -> None:
    ds = RecordDataset(insightface)
    assert ds.layout == "insightface" and len(ds) == 10
    assert [ds[i][1] for i in range(10)] == [0.0] * 3 + [1.0] * 5 + [2.0] * 2
    assert RecordDataset(insightface, layout="plain").layout == "plain"


def test_corrupt_image_names_key_and_offset(tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "bad.rec") as w:
        w.write_key(0, pack((0, 1, 0, 0), jpeg(8, 8, 0)))
        w.write_key(7, pack((0, 1, 7, 0), b"broken"))
    ds = RecordDataset(tmp_path / "bad.rec")
    with pytest.raises(
        ImageCodecError,
        match=r"the image of key 7 \(byte \d+\) does not decode: not an image Pillow can read",
    ):
        ds[1]


def corrupt_rec(tmp_path: Path) -> Path:
    """Keys 0..5 with undecodable images at keys 2 and 5 (the last)."""
    with IndexedRecordWriter(tmp_path / "bad.rec") as w:
        for key in range(6):
            image = b"broken" if key in (2, 5) else jpeg(8 + key, 8, key)
            w.write_key(key, pack((0, float(key), key, 0), image))
    return tmp_path / "bad.rec"


def test_corrupt_image_in_a_transform_names_key_and_offset(tmp_path: Path) -> None:
    from im2rec.training.augment import Augmenter

    ds = RecordDataset(corrupt_rec(tmp_path), output="bytes", transform=Augmenter((3, 4, 4)))
    assert ds[1][0].shape == (3, 4, 4)
    with pytest.raises(
        ImageCodecError, match=r"the image of key 2 \(byte [\d,]+\) does not decode"
    ):
        ds[2]


@pytest.mark.parametrize("output", ["pil", "bytes"])
def test_on_corrupt_skip_returns_the_next_record_that_decodes(tmp_path: Path, output: str) -> None:
    from im2rec.training.augment import Augmenter

    transform = Augmenter((3, 4, 4), dtype="uint8") if output == "bytes" else None
    ds = RecordDataset(corrupt_rec(tmp_path), output=output, transform=transform, on_corrupt="skip")  # type: ignore[arg-type]
    with pytest.warns(UserWarning, match=r"key 2 \(byte [\d,]+\) does not decode.*skipped"):
        assert ds[2][1] == 3.0
    with pytest.warns(UserWarning, match="key 5"):
        assert ds[5][1] == 0.0  # wraps around to the first record
    assert [(key, reason != "") for key, _, reason in ds.skipped] == [(2, True), (5, True)]
    offsets = RecordDataset(corrupt_rec(tmp_path)).reader.index
    assert [offset for _, offset, _ in ds.skipped] == [offsets.offset_of(2), offsets.offset_of(5)]
    assert ds[4][1] == 4.0 and len(ds.skipped) == 2  # good records are untouched
    with pytest.raises(IndexError):
        ds[6]  # the end of the sequence, not a skip
    with pytest.warns(UserWarning, match="key 5"):
        assert ds[-1][1] == 0.0  # the last record, which is skipped


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"layout": "mxface"}, "layout must be"),
        ({"min_size": "ab"}, "min_size must be"),
        ({"min_size": (1.5, 2)}, "min_size must be"),
        ({"min_size": (0, 4)}, "min_size must be"),
        ({"output": "tensor"}, "output must be"),
    ],
)
def test_bad_arguments(plain: Path, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RecordDataset(plain, **kw)


def test_on_corrupt_skip_with_nothing_decodable(tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "all-bad.rec") as w:
        for key in range(3):
            w.write_key(key, pack((0, 0.0, key, 0), b"broken"))
    ds = RecordDataset(tmp_path / "all-bad.rec", on_corrupt="skip")
    with pytest.warns(UserWarning), pytest.raises(ImageCodecError, match="none of its 3 records"):
        ds[0]
    with pytest.raises(ValueError, match="on_corrupt must be"):
        RecordDataset(tmp_path / "all-bad.rec", on_corrupt="ignore")  # type: ignore[arg-type]


def test_missing_index_is_scanned_or_refused(plain: Path) -> None:
    plain.with_suffix(".idx").unlink()
    with pytest.warns(UserWarning, match=r"plain.rec: no .idx beside it, so its 24 records"):
        assert len(RecordDataset(plain)) == 24
    from im2rec.errors import MissingFileError

    with pytest.raises(MissingFileError, match="index not found"):
        RecordDataset(plain, missing_index="error")


def shape_of(image: np.ndarray) -> tuple[int, ...]:
    return image.shape


@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.slow
def test_torch_dataloader_with_workers(plain: Path, method: str) -> None:
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    ds = RecordDataset(plain, output="numpy", transform=shape_of)
    loader = DataLoader(
        ds, batch_size=4, num_workers=2, multiprocessing_context=multiprocessing.get_context(method),
        collate_fn=list,
    )  # fmt: skip
    seen = [item for batch in loader for item in batch]
    assert [shape for shape, _ in seen] == [(16, 20 + i, 3) for i in range(24)]
    labels = [np.ravel(np.asarray(label)).tolist() for _, label in seen]
    assert labels == [[float(i), 0.5] if i % 5 == 0 else [float(i % 4)] for i in range(24)]


def first_label(label: object) -> float:
    return float(np.ravel(np.asarray(label))[0])


@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.slow
def test_augmenter_as_transform_in_a_dataloader(plain: Path, method: str) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from im2rec.training.augment import Augmenter

    augment = Augmenter((3, 12, 12), random_resized_crop=True, rand_mirror=True)
    ds = RecordDataset(plain, output="bytes", transform=augment, target_transform=first_label)
    context = multiprocessing.get_context(method)

    def run(seed: int = 3) -> list[Any]:
        torch.manual_seed(seed)  # seeds `random` in each worker, which the augmenter draws from
        loader = DataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context=context)
        return list(loader)

    first, again = run(), run()
    images, labels = first[0]
    assert images.shape == (8, 3, 12, 12) and images.dtype == torch.float32
    assert labels.tolist() == [0, 1, 2, 3, 0, 5, 2, 3]
    for (a, _), (b, _) in zip(first, again, strict=True):
        assert torch.equal(a, b)
    other = run(4)
    assert not all(torch.equal(a, b) for (a, _), (b, _) in zip(first, other, strict=True))


def test_min_size_decodes_jpegs_at_a_reduced_scale(tmp_path: Path) -> None:
    png = io.BytesIO()
    photo(160, 120, 1).save(png, "PNG")
    with IndexedRecordWriter(tmp_path / "big.rec") as w:
        w.write_key(0, pack((0, 0.0, 0, 0), jpeg(160, 120, 1)))
        w.write_key(1, pack((0, 1.0, 1, 0), png.getvalue()))
    full = RecordDataset(tmp_path / "big.rec")[0][0]
    small = RecordDataset(tmp_path / "big.rec", min_size=(32, 32))
    assert small[0][0].size == (80, 60)  # 1/2: 1/4 would give 40x30, 1/8 too small
    assert small[1][0].size == (160, 120)  # not a JPEG: decoded in full
    shrunk = np.asarray(full.resize((80, 60), Image.Resampling.BOX), np.int16)
    assert np.abs(np.asarray(small[0][0], np.int16) - shrunk).mean() < 3
    with pytest.raises(ValueError, match="min_size"):
        RecordDataset(tmp_path / "big.rec", min_size=(0, 5))


def test_single_labels_are_class_indexes_as_imagefolder_gives(plain: Path) -> None:
    """MXNet stores labels as float32; a PyTorch user's first loop feeds them
    to CrossEntropyLoss, which wants integers ("expected target dtype to be
    Long"). Single labels are ints by default, multi-labels stay float32."""
    image, label = RecordDataset(plain)[3]
    assert type(label) is int and label == 3
    _, multi = RecordDataset(plain)[5]
    assert multi.dtype == np.float32 and multi.tolist() == [5.0, 0.5]
    _, as_float = RecordDataset(plain, labels="float")[3]
    assert type(as_float) is float and as_float == 3.0


def test_a_label_that_is_no_class_index_says_to_ask_for_floats(tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "scores.rec") as w:
        w.write_key(0, pack((0, 0.25, 0, 0), jpeg(16, 16, 0)))
    with pytest.raises(DatasetError, match=r"record 0 has label 0.25, not a class index; .*"
                                           r"labels='float'"):  # fmt: skip
        RecordDataset(tmp_path / "scores.rec")[0]
    assert RecordDataset(tmp_path / "scores.rec", labels="float")[0][1] == 0.25
    with pytest.raises(ValueError, match="labels must be 'class', 'float' or 'boxes'"):
        RecordDataset(tmp_path / "scores.rec", labels="int")  # type: ignore[arg-type]


def test_the_readme_loop_trains_with_cross_entropy(tmp_path: Path) -> None:
    """The README's DataLoader example, one training step further."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from im2rec.training import Augmenter

    with IndexedRecordWriter(tmp_path / "three.rec") as w:
        for i in range(12):
            w.write_key(i, pack((0, float(i % 3), i, 0), jpeg(40, 36, i)))
    augment = Augmenter((3, 32, 32), rand_crop=True, rand_mirror=True)
    train = RecordDataset(tmp_path / "three.rec", output="bytes", transform=augment)
    images, labels = next(iter(DataLoader(train, batch_size=4, shuffle=True)))
    assert labels.dtype == torch.int64
    logits = torch.nn.Linear(3 * 32 * 32, 3)(torch.as_tensor(images).flatten(1))
    torch.nn.CrossEntropyLoss()(logits, labels).backward()


@pytest.mark.slow
def test_classes_and_class_to_idx_as_image_folder_has_them(tmp_path: Path) -> None:
    """From the class map `rec list` wrote beside the list the .rec was
    packed from (example_train.rec -> example.classes.tsv), through the real
    CLI; a .rec with no map beside it has none, and one can be named."""
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2] / "examples" / "example"
    shutil.copytree(root, tmp_path / "example")
    for args in (["list", "example", "--recursive", "--train-ratio", "0.8", "-q"],
                 ["pack", "--pass-through", "-q"]):  # fmt: skip
        subprocess.run([sys.executable, "-m", "im2rec", *args], cwd=tmp_path, check=True)
    train = RecordDataset(tmp_path / "example_train.rec")
    assert train.classes == ["birds", "cats", "dogs"]
    assert train.class_to_idx == {"birds": 0, "cats": 1, "dogs": 2}
    assert {train.classes[label] for _, label in (train[i] for i in range(len(train)))} <= {
        "birds",
        "cats",
        "dogs",
    }
    moved = tmp_path / "alone"
    moved.mkdir()
    for ext in (".rec", ".idx"):
        shutil.copy(tmp_path / f"example_train{ext}", moved / f"x{ext}")
    alone = RecordDataset(moved / "x.rec")
    assert (alone.classes, alone.class_to_idx) == ([], {})
    named = RecordDataset(moved / "x.rec", class_map=tmp_path / "example.classes.tsv")
    assert named.classes == train.classes


def test_an_augmenter_on_decoded_images_says_to_read_bytes(tmp_path: Path) -> None:
    """With the default output='pil' (or 'numpy') the Augmenter failed deep
    inside, with a TypeError or a ValueError about an array's truth value."""
    from im2rec.errors import ConfigError
    from im2rec.training import Augmenter, DetAugmenter, DetTransform

    from .test_iterator import jpeg_rec

    rec = jpeg_rec(tmp_path / "a.rec", 3, (16, 12))
    augment = Augmenter((3, 8, 8), rand_crop=True)
    for output in ("pil", "numpy"):
        with pytest.raises(ConfigError, match=f"pass output='bytes', not '{output}'"):
            RecordDataset(rec, output=output, transform=augment)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="DetTransform decodes the stored image bytes"):
            RecordDataset(rec, output=output, labels="boxes",  # type: ignore[arg-type]
                          transforms=DetTransform(DetAugmenter((3, 8, 8))))  # fmt: skip
    for image in (Image.new("RGB", (8, 8)), np.zeros((8, 8, 3), np.uint8)):
        with pytest.raises(ConfigError, match=r"given (Image|ndarray): read the records with"):
            augment(image)  # type: ignore[arg-type]
    assert RecordDataset(rec, output="bytes", transform=augment)[0][0].shape == (3, 8, 8)

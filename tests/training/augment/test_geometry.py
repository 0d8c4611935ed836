"""MXNet's augmenters, one at a time, without MXNet: exact where the
operation is deterministic (padding, fill value, a fixed rotation, image
size bounds), by their effect where it is random (the cross-checks against
real MXNet are in test_compat_augment.py)."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from PIL import Image

from im2rec import ImageRecordIter
from im2rec.errors import ConfigError
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.training.augment import Augmenter
from im2rec.training.augment.ndarray_file import load_ndarrays, save_ndarrays

from ...conftest import photo
from ..test_iterator import png

SRC = np.random.default_rng(5).integers(0, 256, (16, 20, 3), dtype=np.uint8)


def run(aug: Augmenter, payload: bytes, seed: int = 0) -> np.ndarray:
    out = np.empty(aug.data_shape, aug.dtype)
    aug.write(payload, out, np.random.default_rng(seed))
    return out


# --- geometry: exact -----------------------------------------------------------


def test_pad_and_fill_value_are_exact() -> None:
    aug = Augmenter((3, 24, 28), pad=4, fill_value=7, dtype="uint8")
    got = run(aug, png(SRC)).transpose(1, 2, 0)
    want = np.full((24, 28, 3), 7, np.uint8)
    want[4:20, 4:24] = SRC
    np.testing.assert_array_equal(got, want)


def test_a_fixed_rotation_is_exact() -> None:
    """rotate=90 of a square: MXNet's matrix maps column x to row (w - x),
    so the first row is the fill and the rest is the image turned."""
    square = SRC[:16, :16]
    aug = Augmenter((3, 16, 16), rotate=90, fill_value=0, dtype="uint8", inter_method=1)
    got = run(aug, png(square)).transpose(1, 2, 0)
    want = np.zeros_like(square)
    want[1:] = np.rot90(square, 1)[:-1]  # out[y, x] = src[x, 16 - y]
    np.testing.assert_array_equal(got, want)


def test_max_img_size_cuts_the_centre_without_scaling() -> None:
    aug = Augmenter((3, 10, 10), max_img_size=10, dtype="uint8", inter_method=1)
    got = run(aug, png(SRC)).transpose(1, 2, 0)
    np.testing.assert_array_equal(got, SRC[3:13, 5:15])  # offsets (16-10)/2, (20-10)/2


def test_min_img_size_fills_around_a_small_image() -> None:
    aug = Augmenter((3, 24, 24), min_img_size=24, fill_value=9, dtype="uint8")
    got = run(aug, png(SRC)).transpose(1, 2, 0)
    assert (got[:4] == 9).all() and (got[20:] == 9).all()  # (24 - 16) / 2 rows above and below
    np.testing.assert_array_equal(got[4:20, 2:22], SRC)


def test_random_scale_and_crop_size_vary_and_refuse_too_small_images() -> None:
    payload = png(np.asarray(photo(64, 48, 2)))
    scaled = Augmenter((3, 8, 8), max_random_scale=1.5, min_random_scale=0.5, dtype="uint8")
    assert len({run(scaled, payload, seed).tobytes() for seed in range(20)}) > 15
    sized = Augmenter((3, 8, 8), min_crop_size=10, max_crop_size=40, rand_crop=True)
    assert len({run(sized, payload, seed).tobytes() for seed in range(20)}) > 15
    # a crop of the whole height: the image squeezed into 8 x 8
    whole = Augmenter((3, 8, 8), min_crop_size=48, max_crop_size=48, dtype="uint8")
    want = np.asarray(Image.open(io.BytesIO(payload)).resize((8, 8), Image.Resampling.BILINEAR,
                                                               box=(8, 0, 56, 48)))  # fmt: skip
    np.testing.assert_array_equal(run(whole, payload).transpose(1, 2, 0), want)
    with pytest.raises(ConfigError, match="smaller than max_crop_size 100"):
        run(Augmenter((3, 8, 8), max_crop_size=100), payload)


def test_inter_methods_auto_and_random_run() -> None:
    payload = png(SRC)
    for method in (0, 1, 2, 3, 4, 9, 10):
        for extra in ({}, {"max_rotate_angle": 20}, {"resize": 40}):
            out = run(Augmenter((3, 12, 12), inter_method=method, **extra), payload)
            assert np.isfinite(out).all()
    with pytest.raises(ConfigError, match="inter_method must be one of 0, 1, 2, 3, 4, 9, 10"):
        Augmenter((3, 12, 12), inter_method=5)


# --- colour: by their effect ---------------------------------------------------------


# --- the mean image -----------------------------------------------------------------


def write_rec(path: Path, images: list[np.ndarray]) -> Path:
    with IndexedRecordWriter(path) as w:
        for i, arr in enumerate(images):
            w.write_key(i, pack((0, float(i % 3), i, 0), png(arr)))
    return path


def test_mean_image_is_computed_saved_and_used(tmp_path: Path) -> None:
    images = [np.random.default_rng(i).integers(0, 256, (12, 12, 3), dtype=np.uint8)
              for i in range(10)]  # fmt: skip
    rec = write_rec(tmp_path / "m.rec", images)
    mean_file = tmp_path / "mean.bin"
    kw: dict[str, Any] = dict(path_imgrec=str(rec), data_shape=(3, 12, 12), batch_size=4,
                              preprocess_threads=1, verbose=False, mean_img=str(mean_file))  # fmt: skip
    with ImageRecordIter(**kw) as it:
        batch = it.next()
    want = np.mean([a.transpose(2, 0, 1) for a in images], axis=0, dtype=np.float64)
    ((name, saved),) = load_ndarrays(mean_file)
    assert name == "mean_img" and saved.shape == (3, 12, 12)
    np.testing.assert_allclose(saved, want, atol=1e-4)
    np.testing.assert_allclose(batch.data[0][0], images[0].transpose(2, 0, 1) - saved, atol=1e-4)
    # a second iterator reads the file (a different mean proves it is read, not recomputed)
    save_ndarrays(mean_file, [("mean_img", np.full((3, 12, 12), 5, np.float32))])
    with ImageRecordIter(**kw) as it:
        np.testing.assert_array_equal(it.next().data[0][0], images[0].transpose(2, 0, 1) - 5.0)
    save_ndarrays(mean_file, [("mean_img", np.zeros((3, 8, 8), np.float32))])
    with pytest.raises(ConfigError, match=r"the mean image is \(3, 8, 8\)"):
        ImageRecordIter(**kw)


def test_mean_image_is_subtracted_before_mirroring(tmp_path: Path) -> None:
    src = np.random.default_rng(3).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    mean = np.random.default_rng(4).random((3, 8, 8)).astype(np.float32) * 100
    aug = Augmenter((3, 8, 8), mirror=True, mean_img=mean)
    got = run(aug, png(src))
    np.testing.assert_allclose(got, (src.transpose(2, 0, 1) - mean)[:, :, ::-1], atol=1e-4)


# --- batches MXNet code can use ---------------------------------------------------


def test_augmenter_for_a_dataloader_takes_the_same_options(tmp_path: Path) -> None:
    from im2rec.training.dataset import RecordDataset

    rec = write_rec(tmp_path / "d.rec", [np.asarray(photo(64, 48, i)) for i in range(4)])
    recipe = Augmenter((3, 32, 32), random_resized_crop=True, min_random_area=0.08,
                       min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3, rand_mirror=True,
                       brightness=0.4, contrast=0.4, saturation=0.4, pca_noise=0.1,
                       mean=(123.68, 116.78, 103.94), std=(58.4, 57.12, 57.38))  # fmt: skip
    ds = RecordDataset(rec, output="bytes", transform=recipe)
    image, label = ds[1]
    assert image.shape == (3, 32, 32) and image.dtype == np.float32 and label == 1.0
    assert abs(float(image.mean())) < 3


def _jpeg_rec(path: Path, n: int) -> Path:
    with IndexedRecordWriter(path) as w:
        for i in range(n):
            out = io.BytesIO()
            photo(300 if i % 2 else 200, 200 if i % 2 else 300, i).save(out, "JPEG", quality=90)
            w.write_key(i, pack((0, float(i % 10), i, 0), out.getvalue()))
    return path


@pytest.mark.slow
def test_gluoncv_imagenet_recipe_runs_unchanged(tmp_path: Path) -> None:
    """The keyword sets of GluonCV's train_imagenet.py ``get_data_rec``
    (training and validation), as it writes them, and its ``batch_fn``."""
    rec = _jpeg_rec(tmp_path / "train.rec", 24)
    rec_train = rec_val = str(rec)
    rec_train_idx = rec_val_idx = str(rec.with_suffix(".idx"))
    batch_size, num_workers, rank, local_rank = 8, 2, 0, 0
    jitter_param, lighting_param = 0.4, 0.1
    mean_rgb = [123.68, 116.779, 103.939]
    std_rgb = [58.393, 57.12, 57.375]
    mx = SimpleNamespace(io=SimpleNamespace(ImageRecordIter=ImageRecordIter))  # the import
    train_data = mx.io.ImageRecordIter(
        path_imgrec=rec_train, path_imgidx=rec_train_idx, preprocess_threads=num_workers,
        shuffle=True, batch_size=batch_size, data_shape=(3, 224, 224),
        mean_r=mean_rgb[0], mean_g=mean_rgb[1], mean_b=mean_rgb[2],
        std_r=std_rgb[0], std_g=std_rgb[1], std_b=std_rgb[2],
        rand_mirror=True, random_resized_crop=True, max_aspect_ratio=4.0 / 3.0,
        min_aspect_ratio=3.0 / 4.0, max_random_area=1, min_random_area=0.08,
        brightness=jitter_param, saturation=jitter_param, contrast=jitter_param,
        pca_noise=lighting_param, num_parts=1, part_index=rank, device_id=local_rank,
        verbose=False,
    )  # fmt: skip
    val_data = mx.io.ImageRecordIter(
        path_imgrec=rec_val, path_imgidx=rec_val_idx, preprocess_threads=num_workers,
        shuffle=False, batch_size=batch_size, resize=256, data_shape=(3, 224, 224),
        mean_r=mean_rgb[0], mean_g=mean_rgb[1], mean_b=mean_rgb[2],
        std_r=std_rgb[0], std_g=std_rgb[1], std_b=std_rgb[2], verbose=False,
    )  # fmt: skip

    def batch_fn(batch: Any, ctx: Any) -> tuple[Any, Any]:
        data = batch.data[0].as_in_context(ctx)
        label = batch.label[0].as_in_context(ctx)
        return data, label

    for it in (train_data, val_data):
        with it:
            labels = []
            for batch in it:
                data, label = batch_fn(batch, "cpu(0)")
                assert data.shape == (8, 3, 224, 224) and data.dtype == np.float32
                assert np.isfinite(data.asnumpy()).all() and abs(float(data.mean())) < 1.5
                labels += label.asnumpy().tolist()
            assert sorted(labels) == sorted(float(i % 10) for i in range(24))

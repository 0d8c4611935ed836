"""MXNet's augmenters, one at a time, without MXNet: exact where the
operation is deterministic (padding, fill value, a fixed rotation, image
size bounds), by their effect where it is random (the cross-checks against
real MXNet are in test_compat_augment.py)."""

from __future__ import annotations

import colorsys
import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from PIL import Image

from im2rec import ImageRecordInt8Iter, ImageRecordIter, ImageRecordUInt8Iter
from im2rec.errors import ConfigError, DatasetError
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.training.augment import Augmenter
from im2rec.training.augment.color import EIGVEC, from_hls, to_hls
from im2rec.training.augment.ndarray_file import load_ndarrays, save_ndarrays

from ..conftest import photo


def png(arr: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(arr).save(out, "PNG")
    return out.getvalue()


def run(aug: Augmenter, payload: bytes, seed: int = 0) -> np.ndarray:
    out = np.empty(aug.data_shape, aug.dtype)
    aug.write(payload, out, np.random.default_rng(seed))
    return out


SRC = np.random.default_rng(5).integers(0, 256, (16, 20, 3), dtype=np.uint8)


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


def test_mxnet_random_resized_crop_needs_an_area_or_ratio() -> None:
    payload = png(np.asarray(photo(64, 48, 2)))
    plain = Augmenter((3, 16, 16), dtype="uint8")
    alone = Augmenter((3, 16, 16), dtype="uint8", random_resized_crop=True)
    # MXNet's random_resized_crop=True alone changes nothing: a centre crop.
    np.testing.assert_array_equal(run(plain, payload), run(alone, payload, seed=3))
    rrc = Augmenter((3, 16, 16), dtype="uint8", random_resized_crop=True, min_random_area=0.08,
                    min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3)  # fmt: skip
    crops = {run(rrc, payload, seed).tobytes() for seed in range(10)}
    assert len(crops) == 10


def test_inter_methods_auto_and_random_run() -> None:
    payload = png(SRC)
    for method in (0, 1, 2, 3, 4, 9, 10):
        for extra in ({}, {"max_rotate_angle": 20}, {"resize": 40}):
            out = run(Augmenter((3, 12, 12), inter_method=method, **extra), payload)
            assert np.isfinite(out).all()
    with pytest.raises(ConfigError, match="inter_method must be one of 0, 1, 2, 3, 4, 9, 10"):
        Augmenter((3, 12, 12), inter_method=5)


# --- colour: by their effect ---------------------------------------------------------


def flat(value: tuple[int, int, int], size: int = 12) -> bytes:
    return png(np.full((size, size, 3), value, np.uint8))


def test_brightness_scales_every_pixel_by_one_factor() -> None:
    aug = Augmenter((3, 12, 12), brightness=0.5, dtype="uint8")
    ratios = []
    for seed in range(200):
        out = run(aug, flat((100, 60, 20)), seed).astype(float)
        factor = out[0, 0, 0] / 100
        assert np.allclose(out[1], np.rint(60 * factor), atol=1)
        ratios.append(factor)
    assert 0.5 <= min(ratios) < 0.6 and 1.4 < max(ratios) <= 1.5


def test_contrast_keeps_the_grey_mean_and_saturation_the_grey() -> None:
    grey = np.array([[10, 200], [90, 250]], np.uint8).repeat(6, 0).repeat(6, 1)
    payload = png(np.stack([grey] * 3, axis=2))
    for seed in range(20):
        out = run(Augmenter((3, 12, 12), contrast=0.5, dtype="uint8"), payload, seed)
        assert abs(out.astype(float).mean() - grey.mean()) < 1.5
        # a grey image has no saturation to change
        same = run(Augmenter((3, 12, 12), saturation=0.9, dtype="uint8"), payload, seed)
        np.testing.assert_array_equal(same[0], grey)


def test_saturation_moves_colours_toward_mxnet_grey() -> None:
    aug = Augmenter((3, 12, 12), saturation=1.0, dtype="uint8")
    grey = round(0.114 * 200 + 0.587 * 100 + 0.299 * 50)  # BGR data through RGB2GRAY
    outs = [run(aug, flat((200, 100, 50)), seed)[:, 0, 0].astype(int) for seed in range(100)]
    spreads = [int(o.max() - o.min()) for o in outs]
    assert min(spreads) < 20 and max(spreads) > 200  # from nearly grey to twice as vivid
    nearly = outs[int(np.argmin(spreads))]
    assert np.abs(nearly - grey).max() < 20


def test_hls_round_trip_and_colorsys() -> None:
    rgb = np.random.default_rng(1).integers(0, 256, (40, 40, 3)).astype(np.float32)
    h, s, light = to_hls(rgb)
    back = from_hls(h, light, s)
    assert np.abs(back - rgb).max() <= 4  # 8-bit H (2 degree steps), L and S
    r, g, b = rgb[3, 5] / 255
    ch, cl, cs = colorsys.rgb_to_hls(r, g, b)
    assert (h[3, 5], light[3, 5], s[3, 5]) == (round(ch * 180), round(cl * 255), round(cs * 255))


def test_hsl_shifts_lightness() -> None:
    aug = Augmenter((3, 12, 12), random_l=60, dtype="uint8")
    means = {round(float(run(aug, flat((120, 120, 120)), seed).mean())) for seed in range(30)}
    assert min(means) < 110 and max(means) > 130


def test_pca_noise_adds_one_rgb_offset_along_the_eigenvectors() -> None:
    aug = Augmenter((3, 12, 12), pca_noise=0.1, dtype="uint8")
    for seed in range(20):
        out = run(aug, flat((120, 120, 120)), seed).astype(float)
        shift = out[:, 0, 0] - 120
        assert (out == out[:, :1, :1]).all()
        rng = np.random.default_rng(seed)
        alpha = rng.normal(0, 0.1, 3).astype(np.float32)
        assert np.abs(shift - np.trunc(120 + EIGVEC @ alpha) + 120).max() == 0


def test_random_contrast_and_illumination_are_affine_per_image() -> None:
    aug = Augmenter((3, 12, 12), max_random_contrast=0.5, max_random_illumination=10)
    src = np.random.default_rng(2).integers(0, 256, (12, 12, 3), dtype=np.uint8)
    out = run(aug, png(src), 4)
    planes = src.transpose(2, 0, 1).astype(np.float64)
    slope, intercept = np.polyfit(planes.ravel(), out.ravel(), 1)
    assert 0.5 <= slope <= 1.5 and -10 <= intercept <= 10 and slope != 1


# --- the mean image -----------------------------------------------------------------


def write_rec(path: Path, images: list[np.ndarray]) -> Path:
    with IndexedRecordWriter(path) as w:
        for i, arr in enumerate(images):
            w.write_key(i, pack((0, float(i % 3), i, 0), png(arr)))
    return path


def test_ndarray_file_round_trip_and_hostile_sizes(tmp_path: Path) -> None:
    arrays = [("mean_img", np.arange(24, dtype=np.float32).reshape(2, 3, 4)),
              ("x", np.array([1, 2], np.int64))]  # fmt: skip
    save_ndarrays(tmp_path / "a.nd", arrays)
    loaded = load_ndarrays(tmp_path / "a.nd")
    assert [n for n, _ in loaded] == ["mean_img", "x"]
    for (_, want), (_, got) in zip(arrays, loaded, strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    data = (tmp_path / "a.nd").read_bytes()
    (tmp_path / "cut.nd").write_bytes(data[:60])
    with pytest.raises(DatasetError, match="not a whole MXNet NDArray file"):
        load_ndarrays(tmp_path / "cut.nd")
    huge = bytearray(data)
    huge[16:24] = (1 << 60).to_bytes(8, "little")  # the array count
    (tmp_path / "huge.nd").write_bytes(bytes(huge))
    with pytest.raises(DatasetError, match="holds at most 1,024"):
        load_ndarrays(tmp_path / "huge.nd")
    huge[16:24] = (1000).to_bytes(8, "little")  # few enough, but more than the bytes hold
    (tmp_path / "huge.nd").write_bytes(bytes(huge))
    with pytest.raises(DatasetError, match="more than its"):
        load_ndarrays(tmp_path / "huge.nd")
    wrap = bytearray(data)  # 2**32 * 2**32 * 4: a product that wraps to 0 in 64 bits
    wrap[36:44] = wrap[44:52] = (1 << 32).to_bytes(8, "little")
    (tmp_path / "wrap.nd").write_bytes(bytes(wrap))
    with pytest.raises(DatasetError, match="ends inside array 0's values"):
        load_ndarrays(tmp_path / "wrap.nd")
    dims = bytearray(data)
    dims[36:44] = (1 << 40).to_bytes(8, "little")  # the first dimension
    (tmp_path / "dims.nd").write_bytes(bytes(dims))
    with pytest.raises(DatasetError, match="ends inside array 0's values"):
        load_ndarrays(tmp_path / "dims.nd")


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


def test_batches_answer_asnumpy_and_the_typed_iterators(tmp_path: Path) -> None:
    rec = write_rec(tmp_path / "b.rec", [SRC] * 6)
    kw: dict[str, Any] = dict(path_imgrec=str(rec), data_shape=(3, 12, 12), batch_size=3,
                              preprocess_threads=1, verbose=False, mean_r=100)  # fmt: skip
    with ImageRecordIter(**kw) as it:
        batch = it.next()
        data = batch.data[0]
        assert isinstance(data.asnumpy(), np.ndarray) and type(data.asnumpy()) is np.ndarray
        assert data.asnumpy().shape == (3, 3, 12, 12) and data.dtype == np.float32
        assert data.astype(np.uint8).dtype == np.uint8
        assert batch.label[0].asnumpy().tolist() == [0.0, 1.0, 2.0]
        assert it.provide_data[0].shape == (3, 3, 12, 12)
    with ImageRecordUInt8Iter(**kw) as it:
        assert it.next().data[0].dtype == np.uint8
    with ImageRecordInt8Iter(**kw) as it:
        out = it.next().data[0]
        assert out.dtype == np.int8
        want = np.clip(SRC[2:14, 4:16, 0].astype(int) - 100, -128, 127)
        np.testing.assert_array_equal(out[0, 0], want)
    with pytest.raises(ConfigError, match="makes uint8 batches"):
        ImageRecordUInt8Iter(**kw, dtype="float32")


def test_shuffle_chunks_visit_byte_ranges_in_a_new_order_each_epoch(tmp_path: Path) -> None:
    big = [np.random.default_rng(i).integers(0, 256, (300, 300, 3), dtype=np.uint8)
           for i in range(12)]  # fmt: skip
    rec = write_rec(tmp_path / "c.rec", big)  # ~270 kB each: a 1 MB chunk holds ~3
    kw: dict[str, Any] = dict(path_imgrec=str(rec), data_shape=(3, 8, 8), batch_size=12,
                              preprocess_threads=1, verbose=False, shuffle_chunk_size=1,
                              shuffle_chunk_seed=5, dtype="uint8")  # fmt: skip
    with ImageRecordIter(**kw) as it:
        orders = []
        for _ in range(3):
            orders.append([int(v) for v in it.next().index])
            it.reset()
    ids = [[int(v) for v in order] for order in orders]
    for order in orders:  # records of a chunk stay together and in file order
        runs = np.split(np.array(order), np.where(np.diff(order) != 1)[0] + 1)
        assert len(runs) > 1 and sorted(sum((r.tolist() for r in runs), [])) == list(range(12))
    assert len({tuple(o) for o in ids}) > 1


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

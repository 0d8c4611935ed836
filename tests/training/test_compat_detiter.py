"""ImageDetRecordIter against real MXNet 1.9.1's ``mx.io.ImageDetRecordIter``
on the same rec (``make compat``): label rows byte-identical and images
within the decoders' tolerance with every deterministic option; for random
crops and pads, every box within the sampler's constraint on both sides and
the crop/pad size distributions alike (two-sample KS test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from im2rec.training.detiter import ImageDetRecordIter

from ..boxsets import det_rec
from ..conftest import MXNet

pytestmark = pytest.mark.compat

#: pixel levels: OpenCV's and Pillow's JPEG decoders and resamplers differ by
#: about one level on average (MXNet resizes twice where we resample once)
MEAN_TOLERANCE, P99_TOLERANCE = 2.0, 10.0


def both(mxnet: MXNet, rec: Path, **kw: Any) -> tuple[np.ndarray, ...]:
    """(their data, their labels, our data, our labels), each epoch whole."""
    result = mxnet.run(
        """
        it = mx.io.ImageDetRecordIter(path_imgrec=rec, preprocess_threads=1, **kw)
        result = [[b.data[0].asnumpy().tolist(), b.label[0].asnumpy().tolist()] for b in it]
        """,
        rec=str(rec), kw=kw,
    )  # fmt: skip
    theirs_d = np.concatenate([np.asarray(r[0], np.float32) for r in result])
    theirs_l = np.concatenate([np.asarray(r[1], np.float32) for r in result])
    with ImageDetRecordIter(path_imgrec=str(rec), preprocess_threads=1, verbose=False, **kw) as it:
        batches = [(b.data[0].copy(), b.label[0].copy()) for b in it]
    return (theirs_d, theirs_l, np.concatenate([b[0] for b in batches]),
            np.concatenate([b[1] for b in batches]))  # fmt: skip


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 photos of assorted sizes, 1-3 objects each, a difficult flag,
    an extra header (A = 4) and, every fourth, an empty box MXNet drops."""
    rng = np.random.default_rng(1)
    sizes = [(int(rng.integers(40, 120)), int(rng.integers(40, 120))) for _ in range(12)]
    objects = [
        [[j, 0.1 * j, 0.2, 0.1 * j + 0.4, 0.7, j % 2] for j in range(1 + i % 3)]
        + ([[5, 0.5, 0.5, 0.5, 0.6, 0]] if i % 4 == 0 else [])
        for i in range(12)
    ]
    return det_rec(tmp_path_factory.mktemp("det") / "d.rec", sizes, objects, header=(7.0, 8.0))


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"rand_mirror_prob": 1.0},
        {"resize_mode": "shrink", "resize": 40},
        {"resize_mode": "fit"},
        {"inter_method": 2, "label_pad_width": 40, "label_pad_value": -2.0},
        {"mean_r": 120, "mean_g": 110, "mean_b": 100, "std_r": 50, "std_g": 60, "std_b": 55},
    ],
    ids=["plain", "mirror", "shrink", "fit", "cubic-padded", "normalised"],
)
def test_label_rows_are_byte_identical_and_images_close(
    mxnet: MXNet, mixed: Path, options: dict[str, Any]
) -> None:
    kw = {"data_shape": [3, 48, 64], "batch_size": 4, "label_pad_width": -1, **options}
    theirs_d, theirs_l, ours_d, ours_l = both(mxnet, mixed, **kw)
    assert ours_l.dtype == theirs_l.dtype == np.float32
    assert ours_l.tobytes() == theirs_l.tobytes()
    scale = 1 / 50 if "std_r" in options else 1.0  # levels, whatever the normalisation
    diff = np.abs(theirs_d - ours_d) / scale
    assert diff.mean() < MEAN_TOLERANCE
    assert np.percentile(diff, 99) <= P99_TOLERANCE


def test_mirror_is_the_plain_sample_flipped(mixed: Path) -> None:
    kw: dict[str, Any] = {"data_shape": (3, 48, 64), "batch_size": 4, "verbose": False}
    with ImageDetRecordIter(path_imgrec=str(mixed), **kw) as it:
        plain = [(b.data[0].copy(), b.label[0].copy()) for b in it]
    with ImageDetRecordIter(path_imgrec=str(mixed), rand_mirror_prob=1.0, **kw) as it:
        mirrored = [(b.data[0].copy(), b.label[0].copy()) for b in it]
    for (data, label), (mdata, mlabel) in zip(plain, mirrored, strict=True):
        assert np.array_equal(mdata, data[:, :, :, ::-1])
        length = int(label[0, 3])
        objects = label[:, 4 + 4 : 4 + length].reshape(len(label), -1, 6)[0]
        flipped = mlabel[:, 4 + 4 : 4 + length].reshape(len(label), -1, 6)[0]
        assert np.array_equal(flipped[:, 1], np.float32(1) - objects[:, 3])


#: one object, centred, 0.3 of each side: its box after a crop tells the
#: crop's size whenever the crop holds it whole
OBJECT = (0.35, 0.35, 0.65, 0.65)


@pytest.fixture(scope="module")
def centred(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sizes = [(64, 48)] * 480
    objects = [[[1, *OBJECT, 0]]] * 480
    return det_rec(tmp_path_factory.mktemp("centred") / "c.rec", sizes, objects)


def _boxes(labels: np.ndarray) -> np.ndarray:
    start = 4 + int(labels[0, 4])  # after the row's 4 values and the label's A-value header
    return labels[:, start + 1 : start + 5]  # the first object's corners


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import ks_2samp

    return float(ks_2samp(a, b).pvalue)


def test_random_crops_keep_the_constraint_and_the_distribution(mxnet: MXNet, centred: Path) -> None:
    kw = {"data_shape": [3, 24, 32], "batch_size": 48, "label_pad_width": -1,
          "rand_crop_prob": 1.0, "num_crop_sampler": 2, "min_crop_scales": [0.3, 0.5],
          "max_crop_scales": [1.0, 1.0], "min_crop_aspect_ratios": [0.5, 0.5],
          "max_crop_aspect_ratios": [2.0, 2.0], "min_crop_sample_coverages": [0.2, 0.0],
          "max_crop_overlaps": [1.0, 0.5]}  # fmt: skip
    _, theirs, _, ours = both(mxnet, centred, **kw)
    stats = {}
    for side, labels in (("mxnet", theirs), ("im2rec", ours)):
        boxes = _boxes(labels)
        w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
        assert (boxes >= 0).all() and (boxes <= 1).all() and (w > 0).all() and (h > 0).all()
        cropped = ~np.all(boxes == np.float32(OBJECT), axis=1)
        whole = cropped & (boxes > 0).all(axis=1) & (boxes < 1).all(axis=1)
        # a crop holding the object whole: its width and height from the box
        crop_w, crop_h = 0.3 / w[whole], 0.3 / h[whole]
        # sampler 0 needs coverage >= 0.2, sampler 1 IoU <= 0.5: one holds
        iou = (0.09 / (crop_w * crop_h)).astype(np.float32)
        coverage = (w * h)[whole]
        assert ((coverage >= 0.2 - 1e-4) | (iou <= 0.5 + 1e-4)).all(), side
        stats[side] = (cropped.mean(), crop_w * crop_h, (crop_w / crop_h) * (64 / 48))
    assert abs(stats["mxnet"][0] - stats["im2rec"][0]) < 0.08
    assert _ks(stats["mxnet"][1], stats["im2rec"][1]) > 1e-3  # crop area
    assert _ks(stats["mxnet"][2], stats["im2rec"][2]) > 1e-3  # crop aspect, in pixels


def test_random_pads_have_the_same_scales(mxnet: MXNet, centred: Path) -> None:
    kw = {"data_shape": [3, 24, 32], "batch_size": 48, "label_pad_width": -1,
          "rand_pad_prob": 0.7, "max_pad_scale": 3.0}  # fmt: skip
    _, theirs, _, ours = both(mxnet, centred, **kw)
    scales = {}
    for side, labels in (("mxnet", theirs), ("im2rec", ours)):
        boxes = _boxes(labels)
        scale = 0.3 / (boxes[:, 2] - boxes[:, 0])
        assert (boxes >= 0).all() and (boxes <= 1).all()
        assert np.allclose(scale, 0.3 / (boxes[:, 3] - boxes[:, 1]), rtol=1e-4)  # square pads
        scales[side] = scale
    padded = {side: s[s > 1.0001] for side, s in scales.items()}
    assert abs(len(padded["mxnet"]) - len(padded["im2rec"])) < 0.08 * 480
    assert padded["im2rec"].min() >= 1.05 - 1e-4 and padded["im2rec"].max() <= 3.0 + 1e-4
    assert _ks(padded["mxnet"], padded["im2rec"]) > 1e-3

"""Each augmenter against real MXNet 1.9.1 (``make compat``): the same record
file through ``mx.io.ImageRecordIter`` and ours, unshuffled, and the
distribution of what the augmenter changes compared. Two random generators
never draw the same numbers, so the checks compare distributions: quantiles
of a per-image statistic whose spread the augmenter sets, within a tolerance
a few times the sampling error of N images (said at each check). Where the
operation is deterministic the outputs are compared directly."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw

from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.training.iterator import ImageRecordIter

from ..conftest import MXNet, photo

pytestmark = pytest.mark.compat

N = 480  # images per check

MX_RUN = """
it = mx.io.ImageRecordIter(**kw) if not uint8 else mx.io.ImageRecordUInt8Iter(**kw)
out = []
for batch in it:
    n = batch.data[0].shape[0] - batch.pad
    out.append(batch.data[0].asnumpy()[:n])
np.save(path, np.concatenate(out))
result = None
"""


def _rec(path: Path, images: list[Image.Image]) -> Path:
    with IndexedRecordWriter(path) as w:
        for i, im in enumerate(images):
            out = io.BytesIO()
            im.save(out, "PNG")  # lossless: both sides decode the same pixels
            w.write_key(i, pack((0, float(i % 5), i, 0), out.getvalue()))
    return path


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("aug")
    return _rec(folder / "photos.rec", [photo(48, 40, i) for i in range(N)])


def disc(radius: int, size: int = 64) -> Image.Image:
    im = Image.new("RGB", (size, size), (0, 0, 0))
    c = size / 2
    ImageDraw.Draw(im).ellipse((c - radius, c - radius, c + radius, c + radius), fill=(255,) * 3)
    return im


@pytest.fixture(scope="module")
def discs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A white disc of radius 16 on black, N times: geometry shows as the
    disc's area, centre and shape."""
    folder = tmp_path_factory.mktemp("disc")
    return _rec(folder / "discs.rec", [disc(16)] * N)


def both(mxnet: MXNet, rec: Path, tmp: Path, **kw: Any) -> tuple[np.ndarray, np.ndarray]:
    uint8 = kw.pop("dtype", None) == "uint8"
    kw = {"batch_size": 16, "shuffle": False, "round_batch": False, **kw}
    kw.update(path_imgrec=str(rec), path_imgidx=str(rec.with_suffix(".idx")))
    path = str(tmp / "mx.npy")
    mxnet.run(MX_RUN, kw=kw, path=path, uint8=uint8)
    theirs = np.load(path)
    kw.pop("preprocess_threads", None)
    out = []
    with ImageRecordIter(**kw, dtype="uint8" if uint8 else None, preprocess_threads=2,
                         verbose=False) as it:  # fmt: skip
        for batch in it:
            out.append(np.asarray(batch.data[0])[: len(batch.data[0]) - batch.pad])
    ours = np.concatenate(out)
    assert ours.shape == theirs.shape
    return theirs.astype(np.float64), ours.astype(np.float64)


def quantiles(values: np.ndarray) -> np.ndarray:
    return np.quantile(values, [0.1, 0.25, 0.5, 0.75, 0.9])


def within(width: float) -> float:
    """The tolerance for comparing quantiles of two samples of N values
    spread over ``width``: four standard errors of the difference of two
    medians (the widest quantile error), ``4 * sqrt(2) * width / (2 sqrt(N))``:
    0.13 of the width for N = 480. A wrong spread (half the range, a shifted
    centre) moves the 10% and 90% quantiles by a quarter of the width or more."""
    return 2 * np.sqrt(2) * width / np.sqrt(N)


def same_spread(theirs: np.ndarray, ours: np.ndarray, tolerance: float) -> None:
    """Quantiles 10-90% of a per-image statistic agree within ``tolerance``."""
    q_theirs, q_ours = quantiles(theirs), quantiles(ours)
    assert np.abs(q_theirs - q_ours).max() <= tolerance, (q_theirs, q_ours)


# --- photometric --------------------------------------------------------------


@pytest.fixture(scope="module")
def plain(mxnet: MXNet, photos: Path, tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    """The unaugmented crops, the reference each statistic is relative to."""
    theirs, ours = both(mxnet, photos, tmp_path_factory.mktemp("p"), data_shape=(3, 32, 32),
                        dtype="uint8")  # fmt: skip
    assert np.array_equal(theirs, ours)  # lossless, no resampling: the same pixels
    return ours


def _grey(x: np.ndarray) -> np.ndarray:
    return 0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]


@pytest.mark.parametrize(
    ("option", "statistic"),
    [
        # the per-image factor 1 + U(-0.5, 0.5) shows as the ratio of mean levels
        ("brightness", lambda x, p: x.mean(axis=(1, 2, 3)) / p.mean(axis=(1, 2, 3))),
        # ... as the ratio of standard deviations
        ("contrast", lambda x, p: x.std(axis=(1, 2, 3)) / p.std(axis=(1, 2, 3))),
        # ... as the ratio of distances from grey
        (
            "saturation",
            lambda x, p: (
                np.abs(x - _grey(x)[:, None]).mean(axis=(1, 2, 3))
                / np.abs(p - _grey(p)[:, None]).mean(axis=(1, 2, 3))
            ),
        ),
    ],
)
def test_colour_jitter_spreads_like_mxnet(
    mxnet: MXNet, photos: Path, plain: np.ndarray, tmp_path: Path, option: str, statistic: Any
) -> None:
    theirs, ours = both(mxnet, photos, tmp_path, data_shape=(3, 32, 32), dtype="uint8",
                        **{option: 0.5})  # fmt: skip
    # A U(0.5, 1.5) factor; clipping bends both sides alike.
    same_spread(statistic(theirs, plain), statistic(ours, plain), within(1.0))


def test_pca_noise_spreads_like_mxnet(
    mxnet: MXNet, photos: Path, plain: np.ndarray, tmp_path: Path
) -> None:
    theirs, ours = both(mxnet, photos, tmp_path, data_shape=(3, 32, 32), dtype="uint8",
                        pca_noise=0.5)  # fmt: skip
    for c in range(3):  # the per-channel shift: N(0, ~0.5 * 55 * 0.58) for each channel
        shift_theirs = (theirs[:, c] - plain[:, c]).mean(axis=(1, 2))
        shift_ours = (ours[:, c] - plain[:, c]).mean(axis=(1, 2))
        spread = shift_theirs.std()
        assert 10 < spread < 25 and abs(shift_ours.std() - spread) < 0.2 * spread
        same_spread(shift_theirs, shift_ours, within(4 * spread))  # +-2 sigma holds most


@pytest.mark.parametrize("option", ["random_h", "random_s", "random_l"])
def test_hsl_jitter_spreads_like_mxnet(
    mxnet: MXNet, photos: Path, plain: np.ndarray, tmp_path: Path, option: str
) -> None:
    from im2rec.training.augment.color import to_hls

    theirs, ours = both(mxnet, photos, tmp_path, data_shape=(3, 32, 32), dtype="uint8",
                        **{option: 40})  # fmt: skip
    channel = {"random_h": 0, "random_s": 1, "random_l": 2}[option]

    def shift(x: np.ndarray) -> np.ndarray:
        def stat(a: np.ndarray) -> np.ndarray:
            return np.array([to_hls(img.transpose(1, 2, 0))[channel].mean() for img in a])

        return stat(x) - stat(plain)

    # a shift of (U + 4U)/5 * 80 - 40 levels, most within +-20
    same_spread(shift(theirs), shift(ours), within(40.0))


def test_random_contrast_and_illumination_like_mxnet(
    mxnet: MXNet, photos: Path, plain: np.ndarray, tmp_path: Path
) -> None:
    theirs, ours = both(mxnet, photos, tmp_path, data_shape=(3, 32, 32),
                        max_random_contrast=0.4, max_random_illumination=20)  # fmt: skip

    def fit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pairs = [np.polyfit(p.ravel(), o.ravel(), 1) for p, o in zip(plain, x, strict=True)]
        slopes, intercepts = np.array(pairs).T
        return slopes, intercepts

    s_theirs, i_theirs = fit(theirs)
    s_ours, i_ours = fit(ours)
    same_spread(s_theirs, s_ours, within(0.8))  # U(0.6, 1.4)
    same_spread(i_theirs, i_ours, within(40.0))  # U(-20, 20)


# --- geometry: the disc's area, position and shape -------------------------------


def area(x: np.ndarray) -> np.ndarray:
    return (x.mean(axis=1) > 127).mean(axis=(1, 2))


def fill_share(x: np.ndarray, fill: float) -> np.ndarray:
    """The share of pixels that are exactly the fill (interpolated edges are not)."""
    return (x == fill).all(axis=1).mean(axis=(1, 2))


@pytest.mark.parametrize(
    ("kw", "statistic", "tolerance"),
    [
        # random area 0.08-1 and aspect 3/4-4/3 of a 64 x 64 image into 32 x 32
        ({"random_resized_crop": True, "min_random_area": 0.08, "max_random_area": 1.0,
          "min_aspect_ratio": 0.75, "max_aspect_ratio": 4 / 3}, area, within(1.0)),
        # a random square side 20-60, resized to 32: the disc's share of it
        ({"min_crop_size": 20, "max_crop_size": 60, "rand_crop": True}, area, within(0.8)),
        # a random scale 0.6-1.4 of the whole image, then the centre 32 x 32
        ({"min_random_scale": 0.6, "max_random_scale": 1.4}, area, within(0.7)),
        # rotations up to 30 degrees bring in corners of fill (grey 128 on the
        # black and white discs)
        ({"max_rotate_angle": 30, "fill_value": 128, "data_shape": (3, 64, 64)},
         lambda x: fill_share(x, 128), within(0.2)),
        # a random shear up to 0.3: corners of fill too
        ({"max_shear_ratio": 0.3, "fill_value": 128, "data_shape": (3, 64, 64)},
         lambda x: fill_share(x, 128), within(0.2)),
        # a random aspect of 1 +- 0.3 squeezes the disc: its width over height
        ({"max_aspect_ratio": 0.3, "data_shape": (3, 64, 64)},
         lambda x: (x.mean(axis=1) > 127).any(axis=1).sum(axis=1)
         / np.maximum((x.mean(axis=1) > 127).any(axis=2).sum(axis=1), 1), within(0.6)),
        # a random 32 x 32 window of 64 x 64: where the disc's centre lands
        ({"rand_crop": True},
         lambda x: np.array([np.argwhere(img.mean(axis=0) > 127).mean(axis=0)[1]
                             if (img.mean(axis=0) > 127).any() else 0 for img in x]), within(32)),
    ],
    ids=["random_resized_crop", "crop_size", "random_scale", "max_rotate_angle",
         "max_shear_ratio", "aspect_ratio", "rand_crop"],
)  # fmt: skip
def test_geometry_spreads_like_mxnet(
    mxnet: MXNet, discs: Path, tmp_path: Path, kw: dict[str, Any], statistic: Any, tolerance: float
) -> None:
    kw = {"data_shape": (3, 32, 32), "dtype": "uint8", **kw}
    theirs, ours = both(mxnet, discs, tmp_path, **kw)
    same_spread(statistic(theirs), statistic(ours), tolerance)


@pytest.mark.parametrize(
    "kw",
    [
        {"pad": 4, "fill_value": 7, "data_shape": (3, 48, 56)},  # the whole padded image
        {"pad": 6, "fill_value": 200, "data_shape": (3, 40, 40)},  # its centre
        {"max_img_size": 30, "data_shape": (3, 28, 28)},  # the centre 30 x 30, then 28 x 28
        {"min_img_size": 60, "fill_value": 0, "data_shape": (3, 60, 60)},  # framed in fill
    ],
    ids=["pad", "pad_crop", "max_img_size", "min_img_size"],
)
def test_deterministic_geometry_equals_mxnet(
    mxnet: MXNet, photos: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    theirs, ours = both(mxnet, photos, tmp_path, dtype="uint8", **kw)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("angle", [45, 90, 180])
def test_a_fixed_rotation_matches_mxnet(
    mxnet: MXNet, photos: Path, tmp_path: Path, angle: int
) -> None:
    theirs, ours = both(mxnet, photos, tmp_path, dtype="uint8", rotate=angle, fill_value=0,
                        data_shape=(3, 40, 48))  # fmt: skip
    # the same matrix and fill; bilinear weights in OpenCV's 1/32 steps
    # against Pillow's exact ones: at most a few levels apart, the same on average
    diff = np.abs(ours - theirs)
    assert diff.mean() < 1.0 and np.quantile(diff, 0.99) <= 6, (diff.mean(), diff.max())


@pytest.mark.parametrize("method", [0, 1, 2, 3, 4, 9, 10])
def test_every_inter_method_resizes_like_mxnet(
    mxnet: MXNet, photos: Path, tmp_path: Path, method: int
) -> None:
    theirs, ours = both(mxnet, photos, tmp_path, dtype="uint8", resize=60, inter_method=method,
                        data_shape=(3, 56, 56))  # fmt: skip
    # OpenCV's and Pillow's filters differ (Pillow's antialias when shrinking,
    # OpenCV's do not; 10 draws a different filter on each side): close on
    # average, the README gives the measured difference.
    assert np.abs(ours - theirs).mean() < (12 if method == 10 else 4)

"""MXNet 1.9.1's own ImageRecordIter tests (test_io.py), verbatim, on a
CIFAR-10-like record file made here (no download): once under real MXNet,
once with ``mx.io.ImageRecordIter`` mapped to im2rec's (``make compat``).
The mean image each one computes is then read by the other."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import warnings
from itertools import zip_longest
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from PIL import Image

from im2rec.errors import Im2RecError
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.training.augment.ndarray_file import load_ndarrays
from im2rec.training.iterator import ImageRecordIter
from im2rec.training.vocabulary import UnknownOptionWarning

from ..conftest import MXNet

pytestmark = [pytest.mark.compat, pytest.mark.slow]

TESTS = Path(__file__).parents[1] / "upstream" / "mxnet_test_io_records.py"
NAMES = [
    "test_Cifar10Rec",
    "test_inter_methods_in_augmenter",
    "test_image_iter_exception",
    "test_ImageRecordIter_seed_augmentation",
]


def _cifar_like(folder: Path, per_class: int) -> None:
    """``data/cifar/{train,test}.{rec,lst}`` as the CIFAR-10 zip MXNet's
    tests download holds them: 32 x 32 JPEGs, labels 0-9, ``per_class``
    training images of each class, in class-interleaved order."""
    cifar = folder / "data" / "cifar"
    cifar.mkdir(parents=True)
    rng = np.random.default_rng(0)
    palette = rng.integers(0, 256, (10, 4, 4, 3), dtype=np.uint8)  # one colour field a class
    for split, count in (("train", per_class * 10), ("test", 100)):
        lines = []
        with IndexedRecordWriter(cifar / f"{split}.rec") as w:
            for i in range(count):
                label = i % 10
                base = Image.fromarray(palette[label]).resize((32, 32), Image.Resampling.BILINEAR)
                noise = rng.integers(-20, 21, (32, 32, 3))
                arr = np.clip(np.asarray(base, np.int16) + noise, 0, 255).astype(np.uint8)
                out = io.BytesIO()
                Image.fromarray(arr).save(out, "JPEG", quality=90)
                w.write_key(i, pack((0, float(label), i, 0), out.getvalue()))
                lines.append(f"{i}\t{label}\t{split}/{i}.jpg\n")
        (cifar / f"{split}.lst").write_text("".join(lines))


@pytest.fixture(scope="module")
def cifar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cifar")
    _cifar_like(folder, 5000)  # test_Cifar10Rec counts 5,000 labels of each class
    return folder


def _assert_raises(expected: type[BaseException], func: Any, *args: Any, **kwargs: Any) -> None:
    """MXNet's tests/python/unittest/common.py assertRaises."""
    try:
        func(*args, **kwargs)
    except expected:
        pass
    else:
        raise AssertionError(f"{func.__name__} did not raise {expected.__name__}")


MX_DRIVER = """
import sys, os
import numpy as np
import mxnet as mx
from mxnet.base import MXNetError
from itertools import zip_longest
def get_cifar10():
    assert os.path.exists("data/cifar/train.rec")  # made by the test, never downloaded
def assertRaises(expected_exception, func, *args, **kwargs):
    try:
        func(*args, **kwargs)
    except expected_exception:
        pass
    else:
        assert False, "%s did not raise %s" % (func.__name__, expected_exception.__name__)
exec(open(sys.argv[1]).read())
for name in sys.argv[2:]:
    globals()[name]()
    print("passed", name, flush=True)
"""


def test_upstream_record_tests_pass_under_mxnet_and_im2rec(
    mxnet: MXNet, cifar: Path, tmp_path: Path
) -> None:
    theirs, ours = tmp_path / "mxnet", tmp_path / "im2rec"
    shutil.copytree(cifar, theirs)
    shutil.copytree(cifar, ours)
    # real MXNet first: the tests themselves, on this data
    driver = tmp_path / "driver.py"
    driver.write_text(MX_DRIVER)
    done = subprocess.run(
        [mxnet.python, str(driver), str(TESTS), *NAMES],
        cwd=theirs, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.count("passed") == len(NAMES)
    # then the same text with mx.io.ImageRecordIter mapped to ours
    namespace: dict[str, Any] = {
        "mx": SimpleNamespace(io=SimpleNamespace(ImageRecordIter=ImageRecordIter)),
        "MXNetError": Im2RecError,
        "np": np,
        "sys": sys,
        "zip_longest": zip_longest,
        "assertRaises": _assert_raises,
        "get_cifar10": lambda: None,
    }
    exec(compile(TESTS.read_text(), str(TESTS), "exec"), namespace)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ours)
        for name in NAMES:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", UnknownOptionWarning)
                namespace[name]()
            if name == "test_Cifar10Rec":  # its misspelt and_mirror: ignored, as by MXNet, but said
                assert any("'and_mirror'" in str(w.message) for w in caught)
    # each computed the mean image (the file did not exist): the same one
    ((_, mean_mx),) = load_ndarrays(theirs / "data" / "cifar" / "cifar10_mean.bin")
    ((_, mean_ours),) = load_ndarrays(ours / "data" / "cifar" / "cifar10_mean.bin")
    assert mean_mx.shape == mean_ours.shape == (3, 28, 28)
    # the same libjpeg-turbo decode and centre crop: equal up to float summation
    np.testing.assert_allclose(mean_ours, mean_mx, atol=1e-3)


def test_mean_images_are_exchanged_both_ways(mxnet: MXNet, tmp_path: Path) -> None:
    _cifar_like(tmp_path, 20)
    rec = str(tmp_path / "data" / "cifar" / "train.rec")
    kw = dict(path_imgrec=rec, data_shape=(3, 28, 28), batch_size=10, shuffle=False,
              preprocess_threads=1)  # fmt: skip
    made_by_mx = str(tmp_path / "mx_mean.bin")
    made_by_us = str(tmp_path / "our_mean.bin")
    first = mxnet.run(
        """
it = mx.io.ImageRecordIter(mean_img=made_by_mx, **kw)
b = it.next()
mean = mx.nd.load(made_by_mx)
result = {"keys": sorted(mean), "first": b.data[0].asnumpy()[0].tolist()}
""",
        kw=kw, made_by_mx=made_by_mx,
    )  # fmt: skip
    assert first["keys"] == ["mean_img"]
    with ImageRecordIter(**kw, mean_img=made_by_mx, verbose=False) as it:  # reads MXNet's file
        ours_first = it.next().data[0][0]
    np.testing.assert_allclose(ours_first, np.asarray(first["first"], np.float32), atol=1e-3)
    with ImageRecordIter(**kw, mean_img=made_by_us, verbose=False) as it:  # computes and saves
        it.next()
    theirs = mxnet.run(
        """
loaded = mx.nd.load(made_by_us)
it = mx.io.ImageRecordIter(mean_img=made_by_us, **kw)
result = {"keys": sorted(loaded), "mean": loaded["mean_img"].asnumpy().tolist(),
          "first": it.next().data[0].asnumpy()[0].tolist()}
""",
        kw=kw, made_by_us=made_by_us,
    )  # fmt: skip
    assert theirs["keys"] == ["mean_img"]
    ((_, saved),) = load_ndarrays(made_by_us)
    np.testing.assert_array_equal(np.asarray(theirs["mean"], np.float32), saved)
    np.testing.assert_allclose(np.asarray(theirs["first"], np.float32), ours_first, atol=1e-3)

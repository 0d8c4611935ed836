"""``rec imagenet --with-rec`` output read by MXNet's ImageRecordIter (``make compat``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.imagenet import ImagenetOptions, prepare_imagenet

from ..conftest import MXNet
from ..imagenet_fixture import VAL_CLASSES, WNIDS, make_fake_imagenet

pytestmark = pytest.mark.compat


def test_imagenet_recs_read_by_image_record_iter(mxnet: MXNet, tmp_path: Path) -> None:
    fake = make_fake_imagenet(tmp_path / "download")
    fake.write_pklz(fake.download / "imagenet_val_maps.pklz")
    target = tmp_path / "imagenet"
    prepare_imagenet(ImagenetOptions(fake.download, target, with_rec=True))
    counts = mxnet.run(
        """
        result = {}
        for split in ("train", "val"):
            it = mx.io.ImageRecordIter(path_imgrec=f"{rec}/{split}.rec", path_imgidx=f"{rec}/{split}.idx",
                                       data_shape=(3, 24, 24), batch_size=4, round_batch=False)
            labels = []
            for batch in it:
                labels += batch.label[0].asnumpy()[: 4 - batch.pad].tolist()
            result[split] = labels
        """,
        rec=str(target / "rec"),
    )
    assert counts["val"] == [float(WNIDS.index(w)) for w in VAL_CLASSES]  # PNG and CMYK decode too
    assert sorted(counts["train"]) == sorted(
        float(WNIDS.index(w)) for w in fake.train for _ in range(3)
    )

"""Multi-label records holding different numbers of labels: RecordDataset
gives each its own length (a DataLoader batch, a list of tensors), and
ImageRecordIter pads each row to label_width with label_pad_value."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from im2rec.errors import ConfigError
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.training import ImageRecordIter
from im2rec.training.dataset import RecordDataset

from ..conftest import photo

LABELS = [[1.0, 2.0], [3.0, 4.0, 5.0], [6.0], [7.0, 8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0]]


@pytest.fixture
def ragged(tmp_path: Path) -> Path:
    with IndexedRecordWriter(tmp_path / "ragged.rec") as w:
        for key, labels in enumerate(LABELS):
            out = io.BytesIO()
            photo(24, 20, key).save(out, "JPEG", quality=90)
            label = labels if len(labels) > 1 else labels[0]
            w.write_key(key, pack((0, label, key, 0), out.getvalue()))
    return tmp_path / "ragged.rec"


def padded(width: int, pad: float) -> np.ndarray:
    return np.asarray([labels + [pad] * (width - len(labels)) for labels in LABELS], np.float32)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_iterator_pads_each_row_to_label_width(ragged: Path, threads: int) -> None:
    it = ImageRecordIter(path_imgrec=str(ragged), data_shape=(3, 16, 16), batch_size=5,
                         label_width=5, preprocess_threads=threads)  # fmt: skip
    (batch,) = list(it)
    assert np.array_equal(batch.label[0].asnumpy(), padded(5, -1))
    it = ImageRecordIter(path_imgrec=str(ragged), data_shape=(3, 16, 16), batch_size=5,
                         label_width=6, label_pad_value=0, preprocess_threads=threads)  # fmt: skip
    assert np.array_equal(next(iter(it)).label[0].asnumpy(), padded(6, 0))


def test_more_labels_than_label_width_is_still_an_error(ragged: Path) -> None:
    it = ImageRecordIter(path_imgrec=str(ragged), data_shape=(3, 16, 16), batch_size=5,
                         label_width=4, preprocess_threads=1)  # fmt: skip
    with pytest.raises(ConfigError, match="has 5 label.s. but label_width is 4; set label_width=5"):
        list(it)


def test_the_dataset_gives_each_label_its_own_length(ragged: Path) -> None:
    ds = RecordDataset(ragged, output="numpy")
    got = [ds[i][1] for i in range(len(ds))]
    assert [np.asarray(g, np.float32).tolist() for g in got[:2]] == LABELS[:2]
    assert got[2] == 6  # a single label: a class index, as ever
    assert [len(g) for g in (got[0], got[1], got[3], got[4])] == [2, 3, 5, 3]


@pytest.mark.slow
def test_a_dataloader_batch_of_ragged_labels_is_a_list_of_tensors(ragged: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from im2rec.training.augment import Augmenter

    for output, transform in [("bytes", Augmenter((3, 16, 16))),
                              ("pil", lambda image: np.array(image.resize((16, 16))))]:  # fmt: skip
        ds = RecordDataset(ragged, output=output, labels="float", transform=transform)
        loader = DataLoader(ds, batch_size=5, num_workers=1, collate_fn=RecordDataset.collate,
                            multiprocessing_context="fork")  # fmt: skip
        images, labels = next(iter(loader))
        assert len(images) == 5
        assert isinstance(labels, list) and [t.dtype for t in labels] == [torch.float32] * 5
        assert [t.tolist() for t in labels] == [[float(v) for v in x] for x in LABELS]

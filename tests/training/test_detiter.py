"""ImageDetRecordIter's own rules: label rows, padding width, parts,
shuffling, workers, path_imglist, bad records, and the SSD objects view."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from im2rec.errors import ConfigError, RecordFormatError
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.recordio.detection import MAX_LENGTH, make_label
from im2rec.training.detiter import ImageDetRecordIter, label_widths, objects_view
from im2rec.training.vocabulary import UnknownOptionWarning

from ..boxsets import det_rec
from ..conftest import photo

SIZES = [(40 + 3 * i, 30 + 2 * i) for i in range(10)]
OBJECTS = [
    [[j, 0.05 * j, 0.1, 0.05 * j + 0.5, 0.8, 0] for j in range(1 + i % 4)] for i in range(10)
]


@pytest.fixture
def rec(tmp_path: Path) -> Path:
    return det_rec(tmp_path / "d.rec", SIZES, OBJECTS)


def epoch(**kw: object) -> tuple[np.ndarray, np.ndarray, list[int]]:
    with ImageDetRecordIter(verbose=False, **kw) as it:  # type: ignore[arg-type]
        got = [(b.data[0].copy(), b.label[0].copy(), b.pad) for b in it]
    return (
        np.concatenate([g[0] for g in got]),
        np.concatenate([g[1] for g in got]),
        [g[2] for g in got],
    )


def test_rows_are_shape_length_label_then_padding(rec: Path) -> None:
    data, rows, pads = epoch(path_imgrec=rec, data_shape=(3, 32, 48), batch_size=5,
                             preprocess_threads=1)  # fmt: skip
    widest = 4 + 6 * 4  # A = 4 (two extra header values), four 6-value objects
    assert data.shape == (10, 3, 32, 48) and rows.shape == (10, widest + 4) and pads == [0, 0]
    for i, row in enumerate(rows):
        label = make_label(OBJECTS[i], SIZES[i])
        assert row[:4].tolist() == [3, 32, 48, len(label)]
        assert row[4 : 4 + len(label)].tobytes() == label.tobytes()
        assert (row[4 + len(label) :] == -1).all()
    # an offset past the end is not read past it; the one record there is 4 + 6 wide
    assert label_widths(str(rec), np.asarray([0, 10**9])) == 4 + 6


def test_a_narrow_pad_width_is_widened_with_a_warning(rec: Path) -> None:
    with pytest.warns(UserWarning, match="label_pad_width 10 is smaller than the widest label, 28"):
        _, rows, _ = epoch(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=5,
                           label_pad_width=10, preprocess_threads=1)  # fmt: skip
    assert rows.shape[1] == 32
    _, wide, _ = epoch(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=5,
                       label_pad_width=50, label_pad_value=-7.5, preprocess_threads=1)  # fmt: skip
    assert wide.shape[1] == 54 and (wide[:, 32:] == -7.5).all()


def test_workers_parts_and_shuffling(rec: Path) -> None:
    kw = {"path_imgrec": rec, "data_shape": (3, 16, 16), "batch_size": 4, "rand_mirror_prob": 0.5,
          "rand_crop_prob": 0.5, "rand_pad_prob": 0.5, "max_pad_scale": 2.0, "seed": 3}  # fmt: skip
    one = epoch(preprocess_threads=1, **kw)
    two = epoch(preprocess_threads=2, **kw)
    assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1])
    assert one[2] == [0, 0, 2]  # 10 records in batches of 4: the last wraps around
    plain = {"path_imgrec": rec, "data_shape": (3, 16, 16), "batch_size": 5}
    ordered = epoch(preprocess_threads=1, **plain)[1][:, 3].tolist()
    shuffled = epoch(preprocess_threads=1, shuffle=True, **plain)[1][:, 3].tolist()
    assert sorted(shuffled) == sorted(ordered) and shuffled != ordered
    halves = [epoch(preprocess_threads=1, num_parts=2, part_index=i, round_batch=False, **kw)
              for i in range(2)]  # fmt: skip
    # 5 records a part: a batch of 4, then one of 1 and 3 empty slots
    assert [h[2] for h in halves] == [[0, 3], [0, 3]]
    assert (halves[1][1][5:] == 0).all() and (halves[1][1][:5, 0] == 3).all()


def test_path_imglist_labels_replace_the_records(rec: Path, tmp_path: Path) -> None:
    lst = tmp_path / "d.lst"
    lst.write_text("".join(f"{i}\t2\t5\t{i % 3}\t0.1\t0.1\t0.9\t0.9\tx.jpg\n" for i in range(10)))
    _, rows, _ = epoch(path_imgrec=rec, path_imglist=lst, data_shape=(3, 16, 16), batch_size=5,
                       preprocess_threads=2)  # fmt: skip
    assert rows.shape == (10, 7 + 4)
    assert rows[:, 3].tolist() == [7] * 10 and rows[:, 6].tolist() == [i % 3 for i in range(10)]


def test_a_record_without_boxes_is_named(tmp_path: Path) -> None:
    with IndexedRecordWriter(tmp_path / "m.rec") as w:
        for i in range(3):
            buf = io.BytesIO()
            photo(20, 20, i).save(buf, "JPEG")
            label = make_label([[0, 0.1, 0.1, 0.5, 0.5]]) if i != 1 else np.float32([1, 2, 3])
            w.write_key(i, pack((len(label), label, i, 0), buf.getvalue()))
    kw = {"path_imgrec": tmp_path / "m.rec", "data_shape": (3, 16, 16), "batch_size": 3,
          "preprocess_threads": 1}  # fmt: skip
    with pytest.raises(
        RecordFormatError, match=r"m.rec: the record at byte \d+ .* not a detection label"
    ):
        epoch(**kw)
    with ImageDetRecordIter(verbose=False, on_corrupt="skip", round_batch=False, **kw) as it:
        batch = next(iter(it))
    assert batch.pad == 1 and len(it.skipped) == 1


def test_a_header_flag_the_record_cannot_hold_does_not_widen_the_rows(
    rec: Path, tmp_path: Path
) -> None:
    """One damaged header saying 100,000,000 labels made every batch's label
    rows 400 MB: a flag counts only where its labels fit in the record."""
    data = bytearray(rec.read_bytes())
    offsets = [int(line.split()[1]) for line in rec.with_suffix(".idx").read_text().splitlines()]
    data[offsets[3] + 8 : offsets[3] + 12] = (100_000_000).to_bytes(4, "little")
    bad = tmp_path / "bad.rec"
    bad.write_bytes(bytes(data))
    (tmp_path / "bad.idx").write_bytes(rec.with_suffix(".idx").read_bytes())
    assert label_widths(str(bad), np.asarray(offsets)) == 4 + 6 * 4
    kw = {"path_imgrec": bad, "data_shape": (3, 16, 16), "batch_size": 5,
          "preprocess_threads": 1}  # fmt: skip
    with pytest.raises(RecordFormatError, match=r"bad.rec: the record at byte \d+"):
        epoch(**kw)
    with ImageDetRecordIter(verbose=False, on_corrupt="skip", **kw) as it:
        rows = [b.label[0].shape for b in it]
    assert rows == [(5, 4 + 6 * 4 + 4)] * 2 and len(it.skipped) == 1


def test_a_label_the_record_holds_but_no_row_should_is_refused(tmp_path: Path) -> None:
    """A record that really holds more label values than a detection label
    may (MAX_LENGTH) is that record's error, not every batch's width."""
    with IndexedRecordWriter(tmp_path / "w.rec") as w:
        for i in range(3):
            buf = io.BytesIO()
            photo(20, 20, i).save(buf, "JPEG")
            label = make_label([[0, 0.1, 0.1, 0.5, 0.5]] * (1 if i != 1 else MAX_LENGTH // 5 + 1))
            w.write_key(i, pack((len(label), label, i, 0), buf.getvalue()))
    kw = {"path_imgrec": tmp_path / "w.rec", "data_shape": (3, 16, 16), "batch_size": 3,
          "preprocess_threads": 1}  # fmt: skip
    with ImageDetRecordIter(verbose=False, on_corrupt="skip", round_batch=False, **kw) as it:
        batch = next(iter(it))
        assert it.label_pad_width == 7
    assert batch.pad == 1 and "at most" in it.skipped[0][1]


def test_options_mxnet_would_take_differently(rec: Path) -> None:
    kw = {"path_imgrec": rec, "data_shape": (3, 16, 16), "batch_size": 5, "verbose": False}
    with pytest.raises(ConfigError, match="label_width is 3"):
        ImageDetRecordIter(label_width=3, **kw)
    with pytest.raises(ConfigError, match="mean_img"):
        ImageDetRecordIter(mean_img="mean.bin", **kw)
    with pytest.warns(UnknownOptionWarning, match="rand_crop_probability"):
        ImageDetRecordIter(rand_crop_probability=0.5, **kw).close()


def test_objects_view_is_what_the_ssd_example_reshapes() -> None:
    row = np.full((2, 4 + 2 + 3 * 5), -1, np.float32)
    row[:, :4] = [3, 8, 8, 12]
    row[:, 4:6] = [2, 5]
    row[0, 6:16] = [0, 0.1, 0.1, 0.5, 0.5, 1, 0.2, 0.2, 0.6, 0.6]
    view = objects_view(row)
    assert view.shape == (2, 3, 5)
    assert view[0, 1].tolist() == pytest.approx([1, 0.2, 0.2, 0.6, 0.6])
    assert (view[0, 2] == -1).all() and (view[1] == -1).all()
    with pytest.raises(ConfigError, match="not a detection label"):
        objects_view(np.zeros((2, 10), np.float32))


def _dataset(rec: Path, **options: object):  # type: ignore[no-untyped-def]
    from im2rec.training import RecordDataset
    from im2rec.training.augment.detection import DetAugmenter
    from im2rec.training.detdraw import DetTransform

    aug = DetAugmenter((3, 24, 32), **options)  # type: ignore[arg-type]
    return RecordDataset(rec, output="bytes", labels="boxes", transforms=DetTransform(aug))


def test_the_dataset_draws_what_the_iterator_draws(rec: Path) -> None:
    options = {"rand_mirror_prob": 1.0, "resize_mode": "shrink"}
    data, rows, _ = epoch(path_imgrec=rec, data_shape=(3, 24, 32), batch_size=5,
                          preprocess_threads=1, **options)  # fmt: skip
    ds = _dataset(rec, **options)
    for i in range(10):
        image, target = ds[i]
        assert np.array_equal(image, data[i])
        height, width = int(rows[i, 1]), int(rows[i, 2])
        assert target["size"] == (height, width)
        objects = objects_view(rows[i : i + 1])[0]
        objects = objects[objects[:, 0] >= 0]
        scale = np.asarray([width, height, width, height], np.float32)
        assert np.allclose(target["boxes"], objects[:, 1:5] * scale, atol=1e-3)
        assert target["labels"].tolist() == objects[:, 0].astype(int).tolist()


def test_a_dataloader_gets_batches_drawn_in_shared_memory(rec: Path) -> None:
    import random

    torch = pytest.importorskip("torch")
    from im2rec.training import RecordDataset

    options = {"rand_crop_prob": 1.0, "num_crop_sampler": 2, "rand_pad_prob": 0.5,
               "max_pad_scale": 3.0, "rand_mirror_prob": 0.5,
               "crop_options": {"min_crop_scales": 0.3, "min_crop_overlaps": (0.1, 0.5)}}  # fmt: skip
    import im2rec.training.augment.seeding as seeding

    ds = _dataset(rec, **options)
    random.seed(5)
    seeding._RNG = None  # this process's generator, seeded from random anew
    batch = ds.__getitems__(list(range(10)))
    images, targets = RecordDataset.collate_boxes(batch)
    random.seed(5)
    seeding._RNG = None  # the per-sample path from the same seed draws the same samples
    for i in range(10):
        image, target = ds[i]
        assert np.array_equal(images[i].numpy(), image)
        assert np.array_equal(targets[i]["boxes"].numpy(), target["boxes"])
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2,
                                         collate_fn=RecordDataset.collate_boxes)  # fmt: skip
    from im2rec.training.targets import tv_tensors

    tv, seen = tv_tensors(), 0
    for images, targets in loader:
        assert images.dtype == torch.float32 and images.shape[1:] == (3, 24, 32)
        for target in targets:
            boxes = target["boxes"]
            assert boxes.dtype == torch.float32 and target["labels"].dtype == torch.int64
            assert len(boxes) == len(target["labels"]) >= 1
            assert (boxes[:, 2] >= boxes[:, 0]).all() and (boxes[:, 3] >= boxes[:, 1]).all()
            height, width = target["size"]
            if tv is not None:  # boxes on the canvas of the drawn image
                assert isinstance(boxes, tv.BoundingBoxes) and boxes.canvas_size == (height, width)
            assert (boxes >= 0).all() and (boxes[:, 2] <= width + 1e-3).all()
            assert (boxes[:, 3] <= height + 1e-3).all()
        seen += len(targets)
    assert seen == 10


def test_det_augmenter_takes_the_iterators_names_and_three_channel_means() -> None:
    """min_crop_scales= was a TypeError (only crop_options={...} worked) and
    mean/std wanted four numbers where Augmenter takes three."""
    from im2rec.training import DetAugmenter

    named = DetAugmenter((3, 8, 8), num_crop_sampler=2, min_crop_scales=(0.3, 0.5),
                         max_crop_trials=10, mean=(1, 2, 3), std=(4, 5, 6))  # fmt: skip
    given = DetAugmenter((3, 8, 8), num_crop_sampler=2, mean=(1, 2, 3, 0), std=(4, 5, 6, 0),
                         crop_options={"min_crop_scales": (0.3, 0.5), "max_crop_trials": 10})  # fmt: skip
    assert named.samplers == given.samplers and [s.min_scale for s in named.samplers] == [0.3, 0.5]
    assert named.mean == given.mean == (1, 2, 3, 0.0)
    with pytest.raises(ConfigError, match="min_crop_scales: give each crop option once"):
        DetAugmenter((3, 8, 8), min_crop_scales=0.3, crop_options={"min_crop_scales": 0.2})
    with pytest.raises(ConfigError, match="mean needs a finite number for each of the 3 channels"):
        DetAugmenter((3, 8, 8), mean=(1, 2))

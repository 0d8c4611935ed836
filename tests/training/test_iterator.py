"""ImageRecordIter: batches, crops, normalisation, epochs, shuffling, sharding,
labels and bad input, with real worker processes and shared memory."""

from __future__ import annotations

import io
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from im2rec.errors import (
    ConfigError,
    Im2RecError,
    ImageCodecError,
    MissingFileError,
    TruncatedRecordError,
)
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.training import epochs as epochs_module
from im2rec.training.iterator import ImageRecordIter
from im2rec.training.listlabels import lst_labels
from im2rec.training.parts import record_stops
from im2rec.training.vocabulary import UnknownOptionWarning

from ..conftest import photo

N = 10
H, W = 24, 20


def source(i: int) -> np.ndarray:
    """Record i's pixels: a distinct random RGB image, 30-37 x 26-29 px."""
    rng = np.random.default_rng(100 + i)
    return rng.integers(0, 256, (26 + i % 4, 30 + i % 8, 3), dtype=np.uint8)


def png(arr: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(arr).save(out, "PNG")
    return out.getvalue()


def write_rec(path: Path, payloads: list[bytes], labels: list[Any] | None = None) -> Path:
    with IndexedRecordWriter(path) as w:
        for i, payload in enumerate(payloads):
            label = float(i) if labels is None else labels[i]
            w.write_key(i, pack((0, label, 1000 + i, 0), payload))
    return path


@pytest.fixture
def rec(tmp_path: Path) -> Path:
    return write_rec(tmp_path / "data.rec", [png(source(i)) for i in range(N)])


def make(rec: Path, **kw: Any) -> ImageRecordIter:
    params: dict[str, Any] = dict(
        path_imgrec=str(rec),
        path_imgidx=str(rec.with_suffix(".idx")),
        data_shape=(3, H, W),
        batch_size=4,
        preprocess_threads=1,
        verbose=False,
    )
    params.update(kw)
    return ImageRecordIter(**params)


def centre(i: int) -> np.ndarray:
    arr = source(i)
    y, x = (arr.shape[0] - H) // 2, (arr.shape[1] - W) // 2
    return arr[y : y + H, x : x + W].transpose(2, 0, 1)


def epoch(it: ImageRecordIter) -> list[Any]:
    return [it.next() for _ in range(len(it))]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.slow
def test_centre_crop_pixels_labels_and_wrapping(rec: Path, threads: int) -> None:
    with make(rec, dtype="uint8", preprocess_threads=threads) as it:
        assert it.provide_data[0].shape == (4, 3, H, W)
        assert it.provide_label[0].shape == (4,)
        batches = epoch(it)
        with pytest.raises(StopIteration):
            it.next()
    assert [b.pad for b in batches] == [0, 0, 2]
    order = [*range(N), 0, 1]  # the last batch wraps to the start of the epoch
    data = np.concatenate([b.data[0] for b in batches])
    for slot, i in enumerate(order):
        np.testing.assert_array_equal(data[slot], centre(i))
    labels = np.concatenate([b.label[0] for b in batches])
    assert labels.dtype == np.float32 and labels.tolist() == [float(i) for i in order]
    assert np.concatenate([b.index for b in batches]).tolist() == [1000 + i for i in order]


def test_round_batch_false_pads_with_zeros_and_a_true_pad(rec: Path) -> None:
    it = make(rec, round_batch=False, dtype="uint8")
    last = epoch(it)[-1]
    assert (
        last.pad == 2
    )  # MXNet reports 0 and leaves garbage (docs/format.md, "ImageRecordIter, Batches")
    np.testing.assert_array_equal(last.data[0][:2], [centre(8), centre(9)])
    assert not last.data[0][2:].any() and not last.label[0][2:].any()


def test_reset_starts_the_next_epoch_at_its_first_record(rec: Path) -> None:
    it = make(rec)
    epoch(it)
    it.reset()
    # MXNet continues after the wrapped samples (records 2..); we rewind.
    assert it.next().label[0].tolist() == [0, 1, 2, 3]
    assert it.epoch == 1
    it.reset()
    it.reset()  # nothing taken since the last reset: no new epoch
    assert it.epoch == 2


def test_for_loops_run_one_epoch_each(rec: Path) -> None:
    it = make(rec, round_batch=False)
    seen = [[float(v) for b in it for v in b.label[0][: 4 - b.pad]] for _ in range(2)]
    assert seen == [[float(i) for i in range(N)]] * 2


def test_normalisation_and_mirror(rec: Path) -> None:
    mean, std, scale = (10.0, 20.0, 30.0), (2.0, 4.0, 8.0), 0.5
    it = make(
        rec,
        mirror=True,
        mean_r=mean[0],
        mean_g=mean[1],
        mean_b=mean[2],
        std_r=std[0],
        std_g=std[1],
        std_b=std[2],
        scale=scale,
    )
    got = it.next().data[0][1]
    pixels = centre(1)[:, :, ::-1].astype(np.float64)
    want = (pixels - np.array(mean)[:, None, None]) * scale / np.array(std)[:, None, None]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_int8_subtracts_the_rounded_mean_and_saturates(rec: Path) -> None:
    got = make(rec, dtype="int8", mean_r=100.4, mean_g=0, mean_b=0).next().data[0][0]
    want = np.clip(centre(0).astype(int) - np.array([100, 0, 0])[:, None, None], -128, 127)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want)


def test_gray_and_rgba_outputs(rec: Path) -> None:
    gray = make(rec, data_shape=(1, H, W), dtype="uint8").next().data[0]
    assert gray.shape == (4, 1, H, W)
    rgba = make(rec, data_shape=(4, H, W), dtype="uint8").next().data[0]
    assert rgba.shape == (4, 4, H, W) and (rgba[:, 3] == 255).all()
    np.testing.assert_array_equal(rgba[0, :3], centre(0))


def test_small_images_are_enlarged_to_cover_the_crop(rec: Path) -> None:
    batch = make(rec, data_shape=(3, 64, 40)).next()
    assert batch.data[0].shape == (4, 3, 64, 40)


def test_resize_sets_the_short_side_before_cropping(tmp_path: Path) -> None:
    arr = np.asarray(photo(120, 80, 3))
    rec = write_rec(tmp_path / "big.rec", [png(arr)] * 4)
    got = make(rec, resize=40, data_shape=(3, 40, 40), dtype="uint8").next().data[0][0]
    # resize: 120x80 -> 60x40, then the centre 40x40 window.
    want = np.asarray(Image.fromarray(arr).resize((60, 40), Image.Resampling.BILINEAR))
    want = want[:, 10:50].transpose(2, 0, 1)
    assert np.abs(got.astype(int) - want).mean() < 2


def test_random_resized_crop_full_area_is_a_plain_resize(tmp_path: Path) -> None:
    arr = np.asarray(photo(64, 48, 4))
    rec = write_rec(tmp_path / "rrc.rec", [png(arr)] * 4)
    it = make(
        rec,
        data_shape=(3, 24, 32),
        dtype="uint8",
        random_resized_crop=True,
        min_random_area=1.0,
        min_aspect_ratio=4 / 3,
        max_aspect_ratio=4 / 3,
    )
    want = np.asarray(Image.fromarray(arr).resize((32, 24), Image.Resampling.BILINEAR))
    np.testing.assert_array_equal(it.next().data[0][0], want.transpose(2, 0, 1))


def jpeg_rec(path: Path, count: int, size: tuple[int, int]) -> Path:
    payloads = []
    for i in range(count):
        out = io.BytesIO()
        photo(*size, i).save(out, "JPEG", quality=90)
        payloads.append(out.getvalue())
    return write_rec(path, payloads)


def test_random_resized_crop_varies_and_draft_decodes_large_jpegs(tmp_path: Path) -> None:
    rec = jpeg_rec(tmp_path / "jpeg.rec", 8, (640, 480))
    it = make(rec, data_shape=(3, 32, 32), random_resized_crop=True, batch_size=8)
    data = it.next().data[0]
    assert data.shape == (8, 3, 32, 32) and len({d.tobytes() for d in data}) == 8


@pytest.mark.slow
def test_records_are_read_in_one_span_or_two_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = jpeg_rec(tmp_path / "jpeg.rec", 10, (80, 60))
    options = dict(data_shape=(3, 32, 32), random_resized_crop=True, batch_size=4, shuffle=True)

    def batches(threads: int) -> list[Any]:
        with make(rec, preprocess_threads=threads, **options) as it:
            assert (it._size is not None) == spans
            return [(b.data[0].copy(), b.label[0].copy()) for b in it]

    spans = True
    fast = [batches(t) for t in (1, 2)]
    spans = False
    monkeypatch.setattr(epochs_module, "local_size", lambda rec: None)  # as for a URL
    for got in [batches(t) for t in (1, 2)] + fast[1:]:
        for (a, la), (b, lb) in zip(fast[0], got, strict=True):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(la, lb)


def test_record_stops_are_the_next_offsets() -> None:
    every = np.array([0, 40, 96, 200], np.int64)
    got = record_stops(every, np.array([96, 0, 200, 40], np.int64), 260)
    assert got.tolist() == [200, 40, 260, 96]


AUGMENT = dict(shuffle=True, rand_crop=True, rand_mirror=True, seed=7, dtype="uint8")


@pytest.mark.slow
def test_shuffle_and_augmentation_are_reproducible_and_worker_independent(rec: Path) -> None:
    runs = []
    for threads in (1, 2, 3):
        with make(rec, preprocess_threads=threads, **AUGMENT) as it:
            runs.append([b.data[0] for b in it] + [b.data[0] for b in it])
    for run in runs[1:]:
        for a, b in zip(runs[0], run, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_the_next_epoch_runs_ahead_and_resets_anywhere_keep_the_batches(rec: Path) -> None:
    # Workers start the next epoch's batches once this epoch's are all under
    # way; whatever the caller does (a reset mid-epoch, after the run-ahead
    # began or before), each epoch's batches are those of a run without it.
    def run(threads: int) -> list[np.ndarray]:
        with make(rec, preprocess_threads=threads, prefetch_buffer=6, **AUGMENT) as it:
            got = [b.data[0].copy() for b in it]  # epoch 0
            assert threads == 1 or it._ahead is not None and len(it._ahead[1]) > 0
            it.reset()
            got += [it.next().data[0].copy() for _ in range(len(it) - 1)]  # all but one
            it.reset()
            got.append(it.next().data[0].copy())  # one
            it.reset()
            got += [b.data[0].copy() for b in it]  # epoch 3
            return got

    want = run(1)
    assert len(want) == 3 + 2 + 1 + 3  # 10 records, batches of 4
    for a, b in zip(want, run(2), strict=True):
        np.testing.assert_array_equal(a, b)


def test_each_shuffled_epoch_is_a_new_permutation(rec: Path) -> None:
    it = make(rec, **AUGMENT, round_batch=False)
    orders = [[int(v) for b in it for v in b.label[0][: 4 - b.pad]] for _ in range(3)]
    assert all(sorted(o) == list(range(N)) for o in orders)
    assert len({tuple(o) for o in orders}) == 3
    other = make(rec, **{**AUGMENT, "seed": 8}, round_batch=False)
    assert [int(v) for b in other for v in b.label[0][: 4 - b.pad]] != orders[0]


@pytest.mark.parametrize("idx", [True, False])
def test_parts_cover_every_record_once(rec: Path, idx: bool) -> None:
    parts = []
    for part in range(3):
        it = make(
            rec,
            num_parts=3,
            part_index=part,
            batch_size=2,
            round_batch=False,
            path_imgidx=str(rec.with_suffix(".idx")) if idx else "",
        )
        parts.append([int(v) for b in it for v in b.label[0][: 2 - b.pad]])
    # MXNet's count split with an index: ceil(10 / 3) per part (docs/format.md, "ImageRecordIter, Which records").
    assert parts == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_sharding_mistakes(rec: Path) -> None:
    with pytest.raises(ConfigError, match="part 5 of 6 holds no records"):
        make(rec, num_parts=6, part_index=5)
    with pytest.raises(ConfigError, match="part_index"):
        make(rec, num_parts=2, part_index=2)
    with pytest.raises(ConfigError, match="batch_size 4 is larger than the 2 records"):
        make(rec, num_parts=5, part_index=4)
    assert make(rec, num_parts=5, part_index=4, round_batch=False).next().pad == 2


def test_unknown_keywords_are_ignored_with_a_warning(rec: Path) -> None:
    # MXNet silently ignores this typo (it is in its own test suite): so do
    # we, but not silently.
    with pytest.warns(
        UnknownOptionWarning,
        match="ignores the unknown option 'and_mirror'; did you mean 'rand_mirror'",
    ):
        make(rec, and_mirror=True)
    make(rec, max_rotate_angle=10, ctx="gpu", device_id=0)  # device hints are accepted


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"data_shape": (2, H, W)}, r"data_shape\[0\] must be 1 \(gray\), 3 \(RGB\) or 4"),
        ({"data_shape": (3, H)}, "data_shape must be"),
        ({"dtype": "float16"}, "dtype must be one of"),
        ({"inter_method": 5}, "inter_method must be"),
        ({"brightness": "x"}, "brightness must be a number"),
        ({"pad": float("nan")}, "pad must be finite"),
        ({"aug_seq": "aug_foo"}, "aug_seq='aug_foo'"),
        ({"random_resized_crop": True, "rand_crop": True}, "does not combine"),
        ({"saturation": 0.4, "data_shape": (1, H, W)}, "need data_shape\\[0\\] 3 or 4"),
        ({"std_g": 0}, "non-zero std"),
        ({"mean_r": "x"}, "mean, std and scale must be numbers"),
        ({"mean_b": float("nan")}, "must be finite"),
        ({"std_r": float("inf")}, "must be finite"),
        ({"scale": float("nan")}, "must be finite"),
        ({"path_imgrec": "a.rec;b.rec"}, "must name one .rec file"),
        ({"on_corrupt": "ignore"}, "on_corrupt must be"),
    ],
)
def test_bad_options(rec: Path, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make(rec, **kw)


def test_multi_label_records_and_label_width(tmp_path: Path) -> None:
    labels = [[float(i), float(i) / 2] for i in range(N)]
    rec = write_rec(tmp_path / "multi.rec", [png(source(i)) for i in range(N)], labels)
    batch = make(rec, label_width=2).next()
    assert batch.label[0].shape == (4, 2) and batch.label[0][3].tolist() == [3.0, 1.5]
    with pytest.raises(ConfigError, match="has 2 label"):
        make(rec).next()


def test_imglist_labels_override_the_records(rec: Path, tmp_path: Path) -> None:
    lst = tmp_path / "labels.lst"
    lst.write_text("".join(f"{1000 + i}\t{i * 10}\t{i}\tx{i}.png\n" for i in range(N)))
    batch = make(rec, path_imglist=str(lst), label_width=2).next()
    assert batch.label[0].tolist() == [[0, 0], [10, 1], [20, 2], [30, 3]]
    lst.write_text("1000\t5\tx.png\n")
    with pytest.raises(Im2RecError, match="record id 1001 .* has no line in path_imglist"):
        make(rec, path_imglist=str(lst)).next()


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(
        st.tuples(st.integers(0, 2**64 - 1) | st.integers(0, 20), st.floats(-1e6, 1e6, width=32)),
        max_size=30,
    ),
    asked=st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 20), max_size=10),
)
def test_imglist_labels_as_arrays_answer_as_a_dict_of_lines(
    tmp_path_factory: pytest.TempPathFactory, lines: list[tuple[int, float]], asked: list[int]
) -> None:
    # (the labels were a dict of arrays, ~200 bytes a line; a key listed
    # twice keeps its last line, as the dict did)
    lst = tmp_path_factory.mktemp("imglist") / "l.lst"
    lst.write_text("".join(f"{key}\t{label!r}\tx.png\n" for key, label in lines))
    table, expected = lst_labels(str(lst), 1), {key: label for key, label in lines}
    assert len(table) == len(expected)
    ids = np.array(asked, np.uint64)
    missing = [key for key in asked if key not in expected]
    if missing:
        with pytest.raises(KeyError) as caught:
            table.lookup(ids)
        assert caught.value.args[0] == missing[0]
    else:
        got = table.lookup(ids)
        assert got.shape == (len(asked), 1) and got.dtype == np.float32
        assert got[:, 0].tolist() == [np.float32(expected[key]) for key in asked]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.slow
def test_a_corrupt_image_raises_with_its_offset_or_is_skipped(tmp_path: Path, threads: int) -> None:
    payloads = [png(source(i)) for i in range(N)]
    payloads[5] = payloads[5][: len(payloads[5]) // 2]  # cut short
    rec = write_rec(tmp_path / "bad.rec", payloads)
    it = make(rec, preprocess_threads=threads)
    it.next()
    with pytest.raises(ImageCodecError, match=r"bad.rec: the record at byte [\d,]+ cannot be used"):
        it.next()
    it = make(rec, preprocess_threads=threads, on_corrupt="skip", round_batch=False)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 1, 2]
    kept = [int(v) for b in batches for v in b.label[0][: 4 - b.pad]]
    assert kept == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    assert len(it.skipped) == 1 and "cannot decode" in it.skipped[0][1]


def test_truncated_and_missing_files(rec: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.rec"
    cut.write_bytes(rec.read_bytes()[:-10])
    with pytest.raises(TruncatedRecordError):
        make(cut, path_imgidx="")
    with pytest.raises(TruncatedRecordError):
        make(cut, path_imgidx=str(rec.with_suffix(".idx")))
    with pytest.raises(MissingFileError):
        make(rec, path_imgidx=str(tmp_path / "nope.idx"))
    with pytest.raises(MissingFileError):
        make(tmp_path / "nope.rec")


def test_paths_may_be_path_objects(rec: Path) -> None:
    it = make(rec, path_imgrec=rec, path_imgidx=rec.with_suffix(".idx"))
    assert it.next().label[0].tolist() == [0, 1, 2, 3]


def test_without_an_index_the_file_is_scanned_with_a_note(
    rec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    it = make(rec, path_imgidx="", verbose=True)
    assert it.num_records == N and it.next().label[0].tolist() == [0, 1, 2, 3]
    assert f"indexed {N} records" in capsys.readouterr().err


@pytest.mark.slow
def test_close_frees_the_shared_memory(rec: Path) -> None:
    it = make(rec, preprocess_threads=2)
    it.next()
    assert it._workers.shm is not None
    name = it._workers.shm.name
    it.close()
    with pytest.raises(FileNotFoundError):
        shared_memory.SharedMemory(name)


def is_lent(data: np.ndarray) -> bool:
    """Whether a batch's pixels view the iterator's ring (not a copy, which
    lives in a bytearray of its own)."""
    base: Any = data
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, memoryview) and not isinstance(base.obj, bytearray)


@pytest.mark.slow
def test_batches_are_lent_views_of_the_ring_and_kept_ones_stay_intact(rec: Path) -> None:
    options = dict(rand_crop=True, rand_mirror=True, shuffle=True, batch_size=2)
    with make(rec, **options) as inline:  # one process: every batch a copy
        want = [b.data[0].copy() for _ in range(4) for b in inline]
    with make(rec, preprocess_threads=2, prefetch_buffer=4, **options) as it:
        lent = []
        for _ in range(3):  # a training loop drops each batch: all are views
            for b in it:
                lent.append(is_lent(b.data[0]))
        assert all(lent)
        del b  # the loop's last batch: given back
        it.reset()
        kept = epoch(it)  # kept batches: two lent, the rest copies
        assert [is_lent(b.data[0]) for b in kept] == [True, True, False, False, False]
    # closed with lent batches alive: their memory is still mapped and theirs
    np.testing.assert_array_equal(
        np.concatenate([b.data[0] for b in kept]), np.concatenate(want[15:])
    )  # the fourth epoch
    del kept
    with make(rec, preprocess_threads=2, **options) as it:
        got = [b.data[0] for _ in range(3) for b in it]  # kept, across epochs
    np.testing.assert_array_equal(np.concatenate(got), np.concatenate(want[:15]))
    with make(rec, preprocess_threads=2, **options) as it:
        # a plain view of part of each batch, the batch dropped: numpy points
        # a view of a view at the memory's first owner, not at the batch
        parts = [np.asarray(b.data[0])[:1] for _ in range(3) for b in it]
        np.testing.assert_array_equal(np.concatenate(parts), [w[0] for w in want[:15]])


@pytest.mark.slow
def test_copies_past_the_lendable_batches_reuse_their_buffers(rec: Path) -> None:
    """A loop that holds two batches besides the one it works on (a
    prefetcher's pattern) gets copies past the two the pool lends; each
    copy's buffer comes back when the copy is collected, so a long run makes
    a few buffers, not one a copy (fresh pages cost the training process a
    third of a core), and the batches are the same."""
    options = dict(rand_crop=True, rand_mirror=True, shuffle=True, batch_size=2)
    with make(rec, **options) as inline:  # one process: every batch a copy
        want = [b.data[0].copy() for _ in range(6) for b in inline]
        assert inline.worker_kind == "inline"
        assert inline._workers.slots.copy_buffers <= 2  # the loop's batch and the next
    with make(rec, preprocess_threads=2, prefetch_buffer=4, **options) as it:
        held: list[Any] = []
        got, copies = [], 0
        for _ in range(6):
            for b in it:
                got.append(b.data[0].copy())
                copies += not is_lent(b.data[0])
                held = [*held, b][-2:]
        del b
        assert copies >= len(got) // 3
        assert it._workers.slots.copy_buffers <= 3
        held.clear()
        assert it._workers.slots._spare  # given back
    assert not it._workers.slots._spare  # and let go at close()
    np.testing.assert_array_equal(np.concatenate(got), np.concatenate(want))


@pytest.mark.slow
def test_threads_when_forking_is_unsafe(rec: Path) -> None:
    """With other Python threads alive, workers are threads, not forks, and
    the batches are the same."""
    import threading

    want = [b.data[0] for b in make(rec, preprocess_threads=1, **AUGMENT)]
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with make(rec, preprocess_threads=2, **AUGMENT) as it:
            assert it.worker_kind == "threads"
            got = [b.data[0] for b in it]
    finally:
        stop.set()
        other.join()
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(a, b)
    with make(rec, preprocess_threads=2) as it:
        assert it.worker_kind == "processes"


@pytest.mark.parametrize("noticed", [False, True], ids=["racing", "all-gone"])
@pytest.mark.slow
def test_a_killed_worker_is_reported_not_a_hang(rec: Path, noticed: bool) -> None:
    """Whether every worker has already gone when the next batch is sent
    (the send itself fails then) or a death is only seen while waiting."""
    import os
    import signal
    import time

    from im2rec.executors import WorkerCrashed

    it = make(rec, preprocess_threads=2, batch_size=2)
    it.next()
    pool = it._workers.processes
    assert pool is not None
    for pid in pool.pids:
        os.kill(pid, signal.SIGKILL)
    if noticed:
        deadline = time.monotonic() + 30
        while any(p.exitcode is None for p in pool._procs) and time.monotonic() < deadline:
            time.sleep(0.01)
    with pytest.raises(WorkerCrashed, match="worker process died"):
        # this epoch's batches may all be made already; the next epoch's are not
        for _ in range(3 * len(it)):
            if not it.iter_next():
                it.reset()
    it.close()


@pytest.mark.slow
def test_a_forked_copy_does_not_release_the_parents_workers(rec: Path) -> None:
    """A process forked while an iterator lives (a DataLoader worker, another
    iterator's worker) may garbage-collect its copy: that must not stop the
    parent's workers or unlink its shared memory."""
    import os
    import warnings

    it = make(rec, preprocess_threads=2, batch_size=2)
    first = it.next()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:
        it._workers.finalizer()  # what the child's garbage collector would run
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    rest = [it.next() for _ in range(len(it) - 1)]
    labels = [v for b in [first, *rest] for v in b.label[0].tolist()]
    assert labels == [float(i) for i in range(N)]
    it.close()


def test_getdata_getlabel_getpad_getindex_are_the_current_batch(rec: Path) -> None:
    it = make(rec, round_batch=False)
    with pytest.raises(Im2RecError, match="no current batch: call iter_next"):
        it.getdata()
    seen = []
    while it.iter_next():
        data, label = it.getdata(), it.getlabel()
        assert len(data) == 1 and data[0].shape == (4, 3, H, W)
        assert label[0].tolist()[: 4 - it.getpad()] == [
            float(i) for i in range(len(seen) * 4, len(seen) * 4 + 4 - it.getpad())
        ]
        assert np.array_equal(data[0][0], centre(len(seen) * 4))
        index = it.getindex()
        assert index is not None
        seen.append((it.getpad(), index[: 4 - it.getpad()].tolist()))
    assert seen == [(0, [1000, 1001, 1002, 1003]), (0, [1004, 1005, 1006, 1007]), (2, [1008, 1009])]


def test_seed_aug_alone_decides_the_augmentation(rec: Path) -> None:
    def crops(**kw: Any) -> np.ndarray:
        it = make(rec, rand_crop=True, rand_mirror=True, **kw)
        return np.concatenate([b.data[0] for b in epoch(it)])

    same = crops(seed=1, seed_aug=7)
    assert np.array_equal(same, crops(seed=2, seed_aug=7))  # the seed only orders records
    assert not np.array_equal(same, crops(seed=1, seed_aug=8))
    assert np.array_equal(crops(seed=5), crops(seed=9, seed_aug=5))  # None: seed_aug = seed


@pytest.mark.parametrize("inter_method", [0, 1, 2, 3, 4])
def test_every_inter_method_is_its_pillow_filter(rec: Path, inter_method: int) -> None:
    from im2rec.training.augment import INTERPOLATION

    it = make(rec, resize=50, inter_method=inter_method, dtype="uint8")
    got = it.next().data[0][0]
    arr = source(0)  # 26 x 30: the short side becomes 50, then a centre 24 x 20 crop
    h, w = arr.shape[:2]
    vw, vh = (50, h * 50 // w) if w < h else (w * 50 // h, 50)
    x, y = (vw - W) // 2, (vh - H) // 2
    box = (x * w / vw, y * h / vh, (x + W) * w / vw, (y + H) * h / vh)
    if inter_method == 0:  # OpenCV's nearest: the source pixel floor(box + x * scale)
        xs = np.floor(box[0] + np.arange(W) * (box[2] - box[0]) / W).astype(int)
        ys = np.floor(box[1] + np.arange(H) * (box[3] - box[1]) / H).astype(int)
        want = arr[ys][:, xs]
    else:
        want = Image.fromarray(arr).resize((W, H), INTERPOLATION[inter_method], box=box)
    assert np.array_equal(got, np.asarray(want).transpose(2, 0, 1))


def test_without_path_imgidx_it_says_why_the_idx_beside_is_not_used(
    rec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It used to say only "(no path_imgidx)" with the .idx right there:
    MXNet reads an index only when given one (its parts are cut otherwise
    without), so the message says how to use it instead of taking it."""
    with make(rec, path_imgidx="", verbose=True):
        pass
    err = capsys.readouterr().err
    idx = rec.with_suffix(".idx")
    assert f"indexed {N} records of {rec} in memory, path_imgidx not given" in err
    assert f"({idx} is beside it: pass path_imgidx={str(idx)!r} to use it)" in err
    idx.unlink()
    with make(rec, path_imgidx="", verbose=True):
        pass
    err = capsys.readouterr().err
    assert "path_imgidx not given\n" in err and "beside" not in err


def test_both_iterators_declare_the_shared_keywords_alike() -> None:
    """ImageRecordIter and ImageDetRecordIter declare every reading keyword
    explicitly (MXNet's names, "did you mean"): each with ReadOptions'
    default, so one options object can check them once for both."""
    import dataclasses
    import inspect

    from im2rec.training.detiter import ImageDetRecordIter
    from im2rec.training.epochs import ReadOptions

    for iterator in (ImageRecordIter, ImageDetRecordIter):
        declared = inspect.signature(iterator.__init__).parameters
        for option in dataclasses.fields(ReadOptions):
            assert option.name in declared, (iterator.__name__, option.name)
            default = declared[option.name].default
            if option.default is dataclasses.MISSING:
                assert default is inspect.Parameter.empty, (iterator.__name__, option.name)
            else:
                assert default == option.default, (iterator.__name__, option.name, default)

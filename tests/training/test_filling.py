"""RecordDataset.__getitems__ and the iterator's workers reading a batch's
records at once (recordio/spans.py), planning its crops with numpy and
rendering them in one C call (im2rec/imaging/_batch.h,
fused.Writer.records): the same samples, labels, errors, skips and
generator state as the sample-at-a-time path, on files that hold
everything the batch hands back to the per-sample path (other formats,
several labels, damaged images, spans that are not one record, a crop left
to Pillow)."""

from __future__ import annotations

import io
import os
import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from im2rec import native
from im2rec.errors import DatasetError, ImageCodecError
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.recordio.reader import SPAN_MISSES
from im2rec.training.augment import Augmenter, fused
from im2rec.training.augment import seeding as augment_module
from im2rec.training.dataset import RecordDataset

from ..conftest import photo
from ..imaging.test_regions import encode
from .test_crop_native import RRC, without_quantisation_tables

jpeg_ext: Any = pytest.importorskip("im2rec.imaging._jpeg", reason="built without the extension")
pytestmark = pytest.mark.skipif(
    native.switched_off() or fused._jpeg is None, reason="no C crop without the extensions"
)


def damaged(seed: int) -> bytes:
    good = bytearray(encode(photo(120, 90, seed=seed)))
    good[len(good) // 2 : len(good) // 2 + 40] = b"\xff\x00" * 20  # still ends in EOI
    return bytes(good)


def png(seed: int) -> bytes:
    out = io.BytesIO()
    photo(50, 40, seed=seed).save(out, "PNG")
    return out.getvalue()


def records() -> list[tuple[Any, bytes]]:
    """(label, payload) of every kind the C loop stops at, among JPEGs."""
    kinds: list[tuple[Any, bytes]] = []
    for i in range(30):
        label: Any = float(i % 6)
        payload = encode(photo(60 + 7 * i, 40 + 5 * (i % 4), seed=i))
        if i % 7 == 3:
            payload = png(i)  # crop declines: nothing drawn
        elif i % 7 == 5:
            label = [float(i), 0.25]  # several labels: the Python path's header
        elif i in (11, 20):
            payload = without_quantisation_tables(payload)  # fails after the draws
        elif i == 27:
            payload = damaged(i)  # (libjpeg may make do: either way as one by one)
        kinds.append((label, payload))
    return kinds


def write_rec(path: Path, kinds: list[tuple[Any, bytes]]) -> Path:
    with IndexedRecordWriter(path) as w:
        for key, (label, payload) in enumerate(kinds):
            w.write_key(key, pack((0, label, key, 0), payload))
    return path


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_rec(tmp_path_factory.mktemp("batch") / "mixed.rec", records())


def dataset(rec: Path, shape: tuple[int, int, int] = (3, 20, 24), **kw: Any) -> RecordDataset:
    options = {**RRC, **kw.pop("augment", {})}
    return RecordDataset(rec, output="bytes", transform=Augmenter(shape, **options), **kw)


class Calls:
    """fused._jpeg with its calls of render seen: (samples, next, outcome)
    each; ``batch`` counts those of more than one sample (the per-sample
    path renders one at a time)."""

    def __init__(self) -> None:
        self.batch = 0
        self.seen: list[tuple[int, int, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(jpeg_ext, name)

    def render(self, *args: Any) -> Any:
        self.batch += len(args[2]) > 1
        got = jpeg_ext.render(*args)
        self.seen.append((len(args[2]), *got))
        return got


def both_ways(
    ds: RecordDataset, order: list[int], seed: int, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, Any, Any, list[Any]]]:
    """The batch, then the samples one by one, each from a fresh generator
    seeded alike: (error or "", images, generator state, skipped)."""
    runs = []
    for batched in (True, False):
        monkeypatch.setattr(augment_module, "_RNG", None)
        random.seed(seed)
        ds.skipped.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                if batched:
                    batch: Any = ds.__getitems__(order)
                    got = (batch.images.copy(), list(batch.labels))
                else:
                    samples = [ds[i] for i in order]
                    got = (np.stack([s[0] for s in samples]), [s[1] for s in samples])
                error = ""
            except (ImageCodecError, DatasetError, IndexError) as exc:
                got, error = None, f"{type(exc).__name__}: {exc}"
        state = augment_module.process_rng().bit_generator.state["state"]
        runs.append((error, got, state, list(ds.skipped)))
    return runs


def assert_same(runs: list[tuple[str, Any, Any, list[Any]]]) -> None:
    (error, got, state, skipped), (want_error, want, want_state, want_skipped) = runs
    assert error == want_error
    assert state == want_state  # draw for draw
    assert skipped == want_skipped
    if want is not None:
        np.testing.assert_array_equal(got[0], want[0])
        assert len(got[1]) == len(want[1])
        for a, b in zip(got[1], want[1], strict=True):
            assert type(a) is type(b) and np.array_equal(a, b)


def test_the_c_loop_runs_and_gives_the_per_sample_batch(
    mixed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = dataset(mixed, on_corrupt="skip")
    calls = Calls()
    monkeypatch.setattr(fused, "_jpeg", calls)
    order = [0, 1, 2, 4, 6, 7, 8, 9, 29, -2, 0]  # JPEGs only, a repeat, a negative index
    runs = both_ways(ds, order, 3, monkeypatch)
    assert calls.batch == 1  # one call for the whole batch
    assert runs[0][0] == "" and runs[0][3] == []
    assert_same(runs)
    assert runs[0][1][1] == [0, 1, 2, 4, 0, 1, 2, 3, 5, 4, 0]  # class indices, ints


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    order=st.lists(st.integers(-30, 29), min_size=1, max_size=24),
    seed=st.integers(0, 2**32 - 1),
    skip=st.booleans(),
    labels=st.sampled_from(["class", "float"]),
)
def test_any_batch_is_the_per_sample_batch(
    mixed: Path, order: list[int], seed: int, skip: bool, labels: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Other formats and several labels (nothing drawn in C), damaged images
    # (drawn, then failed): raised or skipped as one sample at a time does.
    ds = dataset(mixed, on_corrupt="skip" if skip else "raise", labels=labels)
    assert_same(both_ways(ds, order, seed, monkeypatch))


def test_errors_are_the_per_sample_errors(mixed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = dataset(mixed)
    runs = both_ways(ds, [0, 2, 11, 4], 1, monkeypatch)
    assert runs[0][0].startswith("ImageCodecError: ") and "key 11" in runs[0][0]
    assert_same(runs)
    runs = both_ways(ds, [0, 30], 1, monkeypatch)
    assert runs[0][0].startswith("IndexError")
    assert_same(runs)
    skipping = dataset(mixed, on_corrupt="skip")
    runs = both_ways(skipping, [10, 11, 20, 21], 2, monkeypatch)
    assert [key for key, _, _ in runs[0][3]] == [11, 20]
    assert_same(runs)


def test_a_label_that_is_not_a_class_fails_as_one_sample_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kinds = [(float(i), encode(photo(40, 30, seed=i))) for i in range(6)]
    kinds[4] = (2.5, kinds[4][1])
    ds = dataset(write_rec(tmp_path / "scores.rec", kinds))
    runs = both_ways(ds, [0, 1, 4, 5], 0, monkeypatch)
    assert runs[0][0].startswith("DatasetError: ") and "labels='float'" in runs[0][0]
    assert_same(runs)


def test_spans_of_several_records_go_the_python_way_then_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an .idx listing every other record: each span holds two records
    rec = write_rec(
        tmp_path / "all.rec", [(float(i), encode(photo(40, 30, i))) for i in range(140)]
    )
    lines = rec.with_suffix(".idx").read_text().splitlines()
    (tmp_path / "half.idx").write_text("".join(line + "\n" for line in lines[::2]))
    ds = RecordDataset(rec, tmp_path / "half.idx", output="bytes",
                       transform=Augmenter((3, 16, 16), **RRC))  # fmt: skip
    assert ds.reader.spans(np.arange(3)) is not None
    assert_same(both_ways(ds, list(range(20)), 4, monkeypatch))
    for start in range(0, 70, 20):
        ds.__getitems__(list(range(start, min(start + 20, 70))))
    assert ds.reader._span_misses >= SPAN_MISSES and ds.reader.spans(np.arange(3)) is None
    assert_same(both_ways(ds, [3, 1], 5, monkeypatch))


def test_a_crop_left_to_pillow_is_finished_with_its_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 16,384 columns to one: past the resampler's bound (test_crop_native)
    wide = encode(Image.new("RGB", (16384, 8), (40, 90, 200)))
    kinds = [(1.0, wide), (2.0, encode(photo(20000, 8, seed=1))), (3.0, wide)]
    options = dict(min_random_area=1.0, min_aspect_ratio=2048.0, max_aspect_ratio=2048.0)
    ds = dataset(write_rec(tmp_path / "wide.rec", kinds), (3, 1, 1), augment=options)
    calls = Calls()
    monkeypatch.setattr(fused, "_jpeg", calls)
    runs = both_ways(ds, [0, 1, 2, 0], 6, monkeypatch)
    assert calls.batch >= 2  # it stopped at a sample and went on after it
    assert_same(runs)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.slow
def test_the_iterators_workers_fill_batches_as_one_sample_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    from im2rec.training.iterator import ImageRecordIter

    kinds = [(label, payload) for label, payload in records() if not isinstance(label, list)]
    rec = write_rec(tmp_path / "iter.rec", kinds)

    def epochs(batched: bool) -> tuple[list[Any], list[Any]]:
        calls = Calls()
        monkeypatch.setattr(fused, "_jpeg", calls)
        if not batched:  # the per-sample path, which runs where the C loop is not built
            monkeypatch.setattr(fused.Writer, "batched", property(lambda self: False))
        it = ImageRecordIter(path_imgrec=str(rec), data_shape=(3, 20, 24), batch_size=8,
                             shuffle=True, seed=3, preprocess_threads=threads,
                             on_corrupt="skip", verbose=False, random_resized_crop=True,
                             min_random_area=0.08, rand_mirror=True, mean_r=120.0,
                             std_r=58.0)  # fmt: skip
        got = []
        for _ in range(2):
            it.reset()
            got += [(b.data[0].copy(), b.label[0].copy(), b.index.copy(), b.pad) for b in it]
        skipped = list(it.skipped)
        it.close()
        monkeypatch.undo()
        if threads == 1:  # (with two, the calls are counted in the worker processes)
            assert (calls.batch > 0) == batched
        return got, skipped

    got, got_skipped = epochs(True)
    want, want_skipped = epochs(False)
    assert got_skipped == want_skipped and len(got_skipped) >= 4  # the two failures, each epoch
    assert len(got) == len(want)
    for (data, label, index, pad), (w_data, w_label, w_index, w_pad) in zip(got, want, strict=True):
        np.testing.assert_array_equal(data, w_data)
        np.testing.assert_array_equal(label, w_label)
        np.testing.assert_array_equal(index, w_index)
        assert pad == w_pad


def test_a_failure_after_later_samples_were_drawn_leaves_the_generator_as_one_by_one(
    mixed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 11 fails in its decoder after 2 and 4 were drawn and rendered with it:
    # the generator is put back to just after 11's draws, 12 is taken in
    # its place (one sample), and the batch goes on from 2.
    ds = dataset(mixed, on_corrupt="skip")
    calls = Calls()
    monkeypatch.setattr(fused, "_jpeg", calls)
    runs = both_ways(ds, [0, 1, 11, 2, 4], 9, monkeypatch)
    assert calls.seen[0][:2] == (5, 2) and "Quantization" in calls.seen[0][2]
    assert [seen[:2] for seen in calls.seen[1:3]] == [(1, 1), (2, 2)]  # (then one by one)
    assert_same(runs)


def helper_threads() -> list[str]:
    """This process's threads under SCHED_IDLE (policy 5)."""
    found = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/sched") as f:
            policy = [line.split()[-1] for line in f if line.startswith("policy")]
        if policy == ["5"]:
            found.append(tid)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux's /proc")
@pytest.mark.slow
def test_the_helper_runs_at_idle_priority_and_after_fork(mixed: Path) -> None:
    import multiprocessing

    ds = dataset(mixed)
    order = [0, 1, 2, 4, 6, 7, 8, 9]
    ds.__getitems__(order)
    if not jpeg_ext._helper():
        pytest.skip("SCHED_IDLE refused here: the caller works alone (tested above)")
    assert len(helper_threads()) == 1  # one, made once
    ds.__getitems__(order)
    assert len(helper_threads()) == 1
    # a forked child (a DataLoader worker) makes its own: fork copies no thread
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        child = pool.apply(_in_child, (str(mixed), order))
    assert child == (True, 1)


def _in_child(rec: str, order: list[int]) -> tuple[bool, int]:
    before = len(helper_threads())
    dataset(Path(rec)).__getitems__(order)
    assert before == 0
    return jpeg_ext._helper(), len(helper_threads())


@pytest.mark.slow
def test_im2rec_helper_0_turns_it_off(mixed: Path) -> None:
    import subprocess
    import sys

    code = "from im2rec.imaging import _jpeg; print(_jpeg._helper())"
    env = dict(os.environ, IM2REC_HELPER="0")
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert got.stdout.strip() == "False"

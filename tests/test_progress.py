"""progress=True: the library's long calls show a tqdm.auto bar (text in a
terminal, a widget in Jupyter) with no callback of the caller's; with one,
both are called. tqdm's one home is im2rec.progress."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest

from im2rec.formats.parquet import export_parquet
from im2rec.formats.parquet_import import import_parquet
from im2rec.formats.wds_export import export_webdataset
from im2rec.formats.wds_import import import_webdataset
from im2rec.inspect.verifying import verify
from im2rec.listing import ListOptions, make_lists
from im2rec.packing import PackOptions, pack_list

ROOT = Path(__file__).resolve().parents[1]
CALLS = [make_lists, pack_list, export_parquet, import_parquet, export_webdataset,
         import_webdataset, verify]  # fmt: skip


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.__name__)
def test_every_long_call_takes_progress(call: object) -> None:
    parameters = inspect.signature(call).parameters  # type: ignore[arg-type]
    assert parameters["progress"].default is False and "on_progress" in parameters


def test_the_bars_count_in_the_calls_units(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyarrow")
    shutil.copytree(ROOT / "examples" / "example", tmp_path / "example")
    seen: list[tuple[int, ...]] = []
    listed = make_lists(tmp_path / "example", tmp_path / "ex", ListOptions(recursive=True),
                        progress=True, on_progress=lambda *a: seen.append(a))  # fmt: skip
    assert seen  # (the caller's callback too)
    bar = capsys.readouterr().err
    assert "listing" in bar and f"{len(listed.scan.entries)} images" in bar
    result = pack_list(tmp_path / "ex.lst", PackOptions(pass_through=True), progress=True)
    bar = capsys.readouterr().err
    assert (
        "packing: 100%" in bar and f"{result.records}/{result.records}" in bar and "images" in bar
    )
    verify(result.rec, progress=True)
    bar = capsys.readouterr().err
    assert "verifying: 100%" in bar and "B/s" in bar  # (bytes, as sizes)
    export_parquet(result.rec, tmp_path / "hub", progress=True)
    bar = capsys.readouterr().err
    assert f"{result.records}/{result.records} [" in bar and "records/s" in bar
    shards = [str(p) for p in (tmp_path / "hub" / "data").iterdir()]
    import_parquet(shards, tmp_path / "back", progress=True)
    assert f"{result.records} records" in capsys.readouterr().err


def test_a_mixtures_class_count_scan_shows_a_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from im2rec.training import MixedDataset, RecordDataset

    from .training.test_iterator import jpeg_rec

    sources = [RecordDataset(jpeg_rec(tmp_path / f"{n}.rec", 9, (16, 12))) for n in "ab"]
    mixed = MixedDataset(sources, progress=True)
    assert mixed.offsets == [0, 9]
    assert "counting classes" in capsys.readouterr().err


def test_a_bar_leaves_no_thread_behind(tmp_path: Path) -> None:
    """tqdm's monitor thread outlived the bars: a process with a thread of
    another's no longer forks its workers."""
    import threading

    shutil.copytree(ROOT / "examples" / "example", tmp_path / "example")
    before = set(threading.enumerate())
    make_lists(tmp_path / "example", tmp_path / "ex", ListOptions(recursive=True), progress=True)
    assert set(threading.enumerate()) == before

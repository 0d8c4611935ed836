"""Picking up an interrupted pack: the partial output kept and continued to the
same bytes, after failed entries and a power loss, earlier failures kept, a
finished pack left alone, a zeroed tail not trusted, other options refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from im2rec.errors import DatasetError
from im2rec.listing.lstfile import read_lst
from im2rec.packing import PackInterrupted, PackOptions, pack_list

from .test_run import outputs


def interrupt_after(n: int):  # type: ignore[no-untyped-def]
    def progress(done: int, _total: int, _bytes: int) -> None:
        if done == n:
            raise KeyboardInterrupt

    return progress


def test_interrupt_keeps_partial_and_resume_is_byte_identical(photos: Path) -> None:
    options = PackOptions(resize=24)
    pack_list(photos, options)
    reference = outputs(photos)
    photos.with_suffix(".rec").unlink()
    photos.with_suffix(".idx").unlink()
    with pytest.raises(PackInterrupted, match=r"interrupted after 51 of 120 entries .*--resume"):
        pack_list(photos, options, on_progress=interrupt_after(51))
    assert not photos.with_suffix(".rec").exists()  # nothing that looks complete
    assert photos.with_suffix(".rec.partial").exists()
    result = pack_list(photos, options, resume=True)
    assert result.resumed_from == 51  # what the interruption said
    assert outputs(photos) == reference


def test_resume_continues_after_entries_that_failed_last(photos: Path) -> None:
    """Interrupted right after images that failed: the resume position still
    agrees with the interruption's count, and the failures are not lost."""
    options = PackOptions(pass_through=True)
    items = read_lst(photos)
    for item in items[40:43]:  # entries 41-43 fail; the run stops after the 43rd
        (photos.parent / "ph" / item.path).unlink()
    with pytest.raises(PackInterrupted, match=r"interrupted after 43 of 120 entries"):
        pack_list(photos, options, on_progress=interrupt_after(43))
    result = pack_list(photos, options, resume=True)
    assert result.resumed_from == 43
    assert result.failures == {"missing": 3} and result.records == 117
    report = photos.with_suffix(".failures.tsv").read_text().splitlines()
    assert [line.split("\t")[1] for line in report[1:]] == [str(i.key) for i in items[40:43]]


@pytest.mark.parametrize("cut", [0, 13, 4000, 9001, -1])
def test_resume_after_power_loss(photos: Path, cut: int) -> None:
    """The partial .rec cut at an arbitrary byte (a torn write), .idx ahead of it."""
    options = PackOptions(pass_through=True, pack_label=True)
    pack_list(photos, options)
    reference = outputs(photos)
    with pytest.raises(PackInterrupted):
        pack_list(photos, options, on_progress=interrupt_after(90))
    partial = photos.with_suffix(".rec.partial")
    size = partial.stat().st_size
    os.truncate(partial, size - 7 if cut < 0 else min(cut, size))
    pack_list(photos, options, resume=True)
    assert outputs(photos) == reference


@pytest.mark.slow
def test_resume_keeps_earlier_failures(odd: tuple[Path, dict[str, str]]) -> None:
    lst, cases = odd
    options = PackOptions(resize=16)
    full = pack_list(lst, options, root=lst.parent / "imgs")
    report = full.failure_report.read_text()  # type: ignore[union-attr]
    with pytest.raises(PackInterrupted):
        pack_list(
            lst, options, root=lst.parent / "imgs", on_progress=interrupt_after(len(cases) - 1)
        )
    again = pack_list(lst, options, root=lst.parent / "imgs", resume=True)
    assert again.failure_report is not None and again.failure_report.read_text() == report
    assert again.failures == full.failures


def test_resume_of_a_finished_pack_does_nothing(photos: Path) -> None:
    pack_list(photos, PackOptions(pass_through=True))
    again = pack_list(photos, PackOptions(pass_through=True), resume=True)
    assert again.already_done and again.records == 120


def test_resume_does_not_trust_a_finished_output_with_a_zeroed_tail(photos: Path) -> None:
    """Outputs are not synced to disk: after a power loss a finished .rec can
    keep its size with its tail zeroed. --resume must not call it done."""
    options = PackOptions(pass_through=True)
    pack_list(photos, options)
    reference = outputs(photos)
    rec = photos.with_suffix(".rec")
    data = rec.read_bytes()
    rec.write_bytes(data[:-100] + bytes(100))
    again = pack_list(photos, options, resume=True)
    assert not again.already_done and outputs(photos) == reference


def test_resume_with_other_options_is_refused(photos: Path) -> None:
    with pytest.raises(PackInterrupted):
        pack_list(photos, PackOptions(resize=24), on_progress=interrupt_after(30))
    with pytest.raises(
        DatasetError,
        match=r"the partial output was made with --resize 24 \(now 32\); run again with those, "
        "or with --overwrite instead of --resume to start over",
    ):
        pack_list(photos, PackOptions(resize=32), resume=True)
    lines = photos.read_text().splitlines(True)
    photos.write_text("".join(lines[:-1]))
    with pytest.raises(DatasetError, match=r"made from another version of ph.lst \(it changed"):
        pack_list(photos, PackOptions(resize=24), resume=True)
    result = pack_list(photos, PackOptions(resize=32))  # without --resume: starts over
    assert result.discarded_partial > 0 and result.resumed_from == 0
    assert not photos.with_suffix(".rec.partial").exists()

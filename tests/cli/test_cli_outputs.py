"""What the commands write, and what they say about it (through the real
CLI): finished outputs are not replaced without a word, a read-only output
folder is one clear error, counts agree after Ctrl-C, `rec info`'s table
and `rec show`'s captions name the classes."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from im2rec.packing import PackInterrupted, PackOptions, pack_list
from im2rec.recordio import RecordReader, RecordWriter, unpack
from im2rec.storage.atomic import AtomicGroup

from ..conftest import photo, photo_folder, write_lst
from ..packing.test_packing import interrupt_after
from .test_cli_pack import example, run

__all__ = ["example"]  # the fixture listed builds on


@pytest.fixture
def listed(example: Path) -> Path:
    """18 photos in 3 class folders, listed by rec list (cwd: that folder)."""
    assert run("list", "./example", "--recursive", "-q")[0] == 0
    return example


# --- a finished output is replaced only with --overwrite ---------------------


@pytest.mark.slow
def test_pack_refuses_to_replace_a_rec_packed_with_other_options(listed: Path) -> None:
    assert run("pack", "--resize", "32", "-q")[0] == 0
    before = (listed / "example.rec").read_bytes()
    code, out = run("pack", "-q")  # every .lst, with the default options
    assert code == 1, out
    assert "example.rec: already packed with --resize 32 (now 0); pass --overwrite" in out
    assert (listed / "example.rec").read_bytes() == before
    code, out = run("pack", "-q", "--overwrite")
    assert code == 0, out
    assert (listed / "example.rec").read_bytes() != before


@pytest.mark.slow
def test_pack_names_flags_and_list_changes(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    code, out = run("pack", "--quality", "80", "-q")
    assert code == 1
    assert "already packed with --pass-through (now without), with --quality 95 (now 80)" in out
    lst = listed / "example.lst"
    lst.write_text("".join(lst.read_text().splitlines(keepends=True)[:-1]))
    code, out = run("pack", "--pass-through", "-q")
    assert code == 1
    assert "already packed from another version of example.lst (it changed since)" in out


def test_pack_refuses_a_rec_it_did_not_make(listed: Path) -> None:
    (listed / "example.rec").write_bytes(b"made by someone else")
    code, out = run("pack", "example.lst", "--pass-through", "-q")
    assert code == 1
    assert "example.rec: already exists, and not from rec pack (no example.pack.json" in out
    assert (listed / "example.rec").read_bytes() == b"made by someone else"


def test_the_identical_command_may_run_again(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    before = (listed / "example.rec").read_bytes()
    assert run("pack", "--pass-through", "-q")[0] == 0
    assert (listed / "example.rec").read_bytes() == before
    code, out = run("pack", "--pass-through", "--resume")
    assert code == 0 and "nothing to do" in out


@pytest.mark.slow
def test_sharded_pack_refuses_to_replace_other_shards(listed: Path) -> None:
    assert run("pack", "--shards", "2", "--resize", "32", "-q")[0] == 0
    code, out = run("pack", "--shards", "2", "-q")
    assert code == 1
    assert "example-00000-of-00002.rec: already packed with --resize 32 (now 0)" in out
    assert "pass --overwrite to replace the shards" in out
    assert run("pack", "--shards", "2", "-q", "--overwrite")[0] == 0


def test_merge_refuses_an_existing_output(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    assert run("merge", "example.rec", "-o", "all.rec")[0] == 0
    code, out = run("merge", "example.rec", "-o", "all.rec")
    assert code == 1 and "all.rec: already exists; pass --overwrite to replace it" in out
    assert run("merge", "example.rec", "-o", "all.rec", "--overwrite")[0] == 0


# --- numbers that agree ---------------------------------------------------------


def test_resumed_summary_counts_this_run(listed: Path) -> None:
    with pytest.raises(PackInterrupted, match="interrupted after 5 of 18 entries"):
        pack_list(
            listed / "example.lst", PackOptions(pass_through=True), on_progress=interrupt_after(5)
        )
    code, out = run("pack", "--pass-through", "--resume")
    assert code == 0, out
    assert "18 records" in out
    assert "resumed after 5 of 18 entries, the other 13 in " in out


# --- a folder that cannot be written ----------------------------------------


def _without_privileges() -> None:
    """Root may write anywhere (CAP_DAC_OVERRIDE): drop every capability
    from the bounding set, so that the program exec'd next runs as a root
    that obeys file permissions (PR_CAPBSET_DROP, Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # EINVAL past the last capability: ignored


def _run_unprivileged(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``args`` so that file permissions apply, as root too."""
    root = os.geteuid() == 0
    return subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=120,
        preexec_fn=_without_privileges if root else None,
    )  # fmt: skip


@pytest.mark.parametrize(
    "command",
    [
        ["rec", "list", "imgs", "--recursive", "-o", "ro/data"],
        ["rec", "pack", "ro/data.lst", "--root", "imgs", "--pass-through"],
        ["rec", "pack", "ro/data.lst", "--root", "imgs", "--resize", "16"],
        ["im2rec", "ro/data", "imgs", "--list", "--recursive"],
        ["im2rec", "ro/data", "imgs", "--pass-through"],
        ["rec", "merge", "ok.rec", "-o", "ro/all.rec"],
    ],
    ids=["rec-list", "rec-pack", "rec-pack-resize", "im2rec-list", "im2rec-pack", "rec-merge"],
)
@pytest.mark.slow
def test_a_read_only_output_folder_is_one_clear_error(tmp_path: Path, command: list[str]) -> None:
    shared_dir = tmp_path
    for c in "ab":
        (shared_dir / "imgs" / c).mkdir(parents=True)
        for i in range(3):
            photo(24, 20, i).save(shared_dir / "imgs" / c / f"{i}.jpg")
    ro = shared_dir / "ro"
    ro.mkdir()
    rec = [sys.executable, "-m", "im2rec"]
    subprocess.run(
        [*rec, "list", "imgs", "--recursive", "-o", "ro/data"], cwd=shared_dir, check=True
    )
    subprocess.run([*rec, "list", "imgs", "--recursive", "-o", "ok"], cwd=shared_dir, check=True)
    subprocess.run([*rec, "pack", "ok.lst", "-q", "--pass-through"], cwd=shared_dir, check=True)
    ro.chmod(0o555)
    before = sorted(p.name for p in ro.iterdir())
    program = rec if command[0] == "rec" else [sys.executable, "-m", "im2rec.cli.im2rec_compat"]
    try:
        done = _run_unprivileged([*program, *command[1:]], shared_dir)
    finally:
        ro.chmod(0o755)  # so that pytest can remove it
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    wording = r"the folder (\S*/)?ro is not writable \(Permission denied\); write somewhere else"
    assert re.search(wording, done.stderr), done.stderr
    assert done.stderr.count("\n") <= 2, done.stderr  # the error (and im2rec's hint)
    assert sorted(p.name for p in ro.iterdir()) == before  # nothing half-written


# --- clean-up never hides the error that led to it ---------------------------


def test_atomic_group_cleanup_failure_keeps_the_original_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="the real problem"), AtomicGroup() as group:
        tmp = group.temp_path(tmp_path / "out.txt")
        (tmp / "sub").mkdir(parents=True)  # a folder: unlink fails with an OSError
        raise ValueError("the real problem")
    assert not (tmp_path / "out.txt").exists()


def test_writer_cleanup_failure_keeps_the_original_error(tmp_path: Path) -> None:
    target = tmp_path / "x.rec"
    with pytest.raises(ValueError, match="the real problem"):
        with RecordWriter(target) as writer:
            writer.write(b"abc")
            tmp = Path(writer.temp_path)
            os.unlink(tmp)
            tmp.mkdir()  # not removable with unlink
            raise ValueError("the real problem")
    assert not target.exists()


# --- rec info reads like a summary; rec show names classes ------------------


def test_info_is_a_readable_table_with_mxnet_label_width(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    code, out = run("info", "example.rec")
    assert code == 0, out
    lines = dict(line.strip().split("  ", 1) for line in out.splitlines())
    lines = {key: value.strip() for key, value in lines.items()}
    assert lines["records"] == "18"
    assert lines["label_width"] == "1 (every record)"
    assert lines["labels"] == "0 class0: 6, 1 class1: 6, 2 class2: 6"
    assert lines["class map"] == "example.classes.tsv"
    assert lines["images"] == "JPEG 18 (18 sampled)"
    assert lines["index"] == "example.idx, agrees with the records"
    assert "{" not in out and "[" not in out  # no Python reprs
    code, out = run("info", "example.rec", "--json")
    info = json.loads(out)
    assert info["label_width"] == {"1": 18} and info["flags"] == {"0": 18}  # the raw field
    assert info["class_map"] == "example.classes.tsv"


def test_info_counts_labels_of_multi_label_records(tmp_path: Path) -> None:
    names = photo_folder(tmp_path / "m", 4, lambda i: (20, 20))
    lst = write_lst(tmp_path / "m.lst", names, [[1.0, 2.0, 3.0]] * 4)
    assert run("pack", str(lst), "--pack-label", "--pass-through", "-q")[0] == 0
    code, out = run("info", str(lst.with_suffix(".rec")))
    assert "label_width  3 (every record)" in out
    info = json.loads(run("info", str(lst.with_suffix(".rec")), "--json")[1])
    assert info["label_width"] == {"3": 4} and info["flags"] == {"3": 4}
    assert info["class_map"] is None


def _caption_strip(sheet: Image.Image, thumb: int = 128) -> Image.Image:
    return sheet.crop((0, thumb, thumb, thumb + 14))


def test_show_captions_use_the_class_map_beside_the_rec(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    code, out = run("show", "example.rec", "-o", "sheet.png", "-n", "4")
    assert code == 0, out
    header, _ = unpack(next(iter(RecordReader(listed / "example.rec"))))
    expected = Image.new("RGB", (128, 14), "white")
    ImageDraw.Draw(expected).text((3, 0), f"{header.id}: class{int(header.label)}", fill="black")
    with Image.open(listed / "sheet.png") as sheet:
        assert np.array_equal(
            np.asarray(_caption_strip(sheet.convert("RGB"))), np.asarray(expected)
        )
    # a map given with --classes wins; by number when there is none
    (listed / "other.tsv").write_text("0\tzero\n1\tone\n2\ttwo\n")
    assert (
        run("show", "example.rec", "-o", "named.png", "-n", "4", "--classes", "other.tsv")[0] == 0
    )
    (listed / "example.classes.tsv").unlink()
    assert run("show", "example.rec", "-o", "numbers.png", "-n", "4")[0] == 0
    numbers = Image.new("RGB", (128, 14), "white")
    ImageDraw.Draw(numbers).text((3, 0), f"{header.id}: {int(header.label)}", fill="black")
    with Image.open(listed / "numbers.png") as sheet:
        assert np.array_equal(np.asarray(_caption_strip(sheet.convert("RGB"))), np.asarray(numbers))


def test_show_label_by_class_name(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    code, out = run("show", "example.rec", "-o", "sheet.png", "--label", "class1")
    assert code == 0 and "sheet.png: 6 records" in out
    code, out = run("show", "example.rec", "-o", "sheet.png", "--label", "clas1")
    assert code == 2 and "no class named 'clas1' in the class map; did you mean 'class1'?" in out
    (listed / "example.classes.tsv").unlink()
    code, out = run("show", "example.rec", "-o", "sheet.png", "--label", "class1")
    assert code == 2 and "there is no class map to look it up in" in out


@pytest.mark.slow
def test_resuming_a_run_that_was_allowed_to_overwrite(listed: Path) -> None:
    assert run("pack", "--resize", "32", "-q")[0] == 0

    with pytest.raises(PackInterrupted):
        pack_list(
            listed / "example.lst", PackOptions(pass_through=True), on_progress=interrupt_after(5)
        )
    code, out = run("pack", "--pass-through", "--resume", "-q")
    assert code == 0, out  # --overwrite is not needed a second time
    code, out = run("info", "example.rec", "--json")
    assert json.loads(out)["records"] == 18
    manifest = json.loads((listed / "example.pack.json").read_text())
    assert manifest["options"]["pass_through"] and manifest["resumed_from"] == 5

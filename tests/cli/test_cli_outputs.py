"""What the commands write, and what they say about it (through the real
CLI): finished outputs are not replaced without a word, a read-only output
folder is one clear error, counts agree after Ctrl-C, `rec info`'s table
and `rec show`'s captions name the classes."""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from im2rec.recordio import RecordWriter

from ..conftest import photo

# --- a finished output is replaced only with --overwrite ---------------------


# --- numbers that agree ---------------------------------------------------------


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

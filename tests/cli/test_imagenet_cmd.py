"""rec imagenet through the real CLI: the tree GluonCV's script makes, a
missing or empty download folder named, and a run stopped by Ctrl-C, SIGTERM
or kill -9 resumed to the same tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from im2rec.cli import main

from ..imagenet.test_preparing import _records, tree
from ..imagenet_fixture import (
    FakeImagenet,
    make_fake_imagenet,
    tar_bytes,
)


def _dirs(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir()]
    except FileNotFoundError:
        return []


def test_cli(fake: FakeImagenet, tmp_path: Path) -> None:
    args = ["imagenet", "--download-dir", str(fake.download), "--target-dir", str(tmp_path / "t")]
    done = CliRunner().invoke(main, [*args, "--with-rec", "--num-thread", "2", "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["rec"]["train"]["records"] == 12 and len(report["odd_images"]) == 3
    again = CliRunner().invoke(main, args)
    assert (
        again.exit_code == 0 and "already prepared by rec imagenet; nothing to do" in again.output
    )
    missing = CliRunner().invoke(main, ["imagenet", "--download-dir", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "Directory" in missing.output and "nope" in missing.output
    (tmp_path / "empty").mkdir()  # a folder named that is there, without the tars in it
    missing = CliRunner().invoke(main, ["imagenet", "--download-dir", str(tmp_path / "empty")])
    assert missing.exit_code == 1 and "ILSVRC2012_img_train.tar: not found" in missing.output
    assert "Traceback" not in missing.output


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT", "SIGTERM"])
@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_tree(tmp_path: Path, sig: str) -> None:
    """kill -9, Ctrl-C or SIGTERM of a real `rec imagenet` in the middle of
    train, then --resume."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from ..imagenet_fixture import TRAIN_ORDER, jpeg

    fake = make_fake_imagenet(tmp_path / "download")
    fake.write_pklz(fake.download / "imagenet_val_maps.pklz")
    photos = [jpeg(500 + k) for k in range(20)]
    outer = []
    for c, wnid in enumerate(TRAIN_ORDER):  # big classes, so the run takes a while
        files = [(f"{wnid}_{k}.JPEG", photos[(c + k) % 20] + bytes(k % 7)) for k in range(1500)]
        fake.train[wnid] = dict(files)
        outer.append((f"{wnid}.tar", tar_bytes(files)))
    (fake.download / "ILSVRC2012_img_train.tar").write_bytes(tar_bytes(outer))
    target = tmp_path / "t"
    cmd = [sys.executable, "-m", "im2rec", "imagenet", "--download-dir", str(fake.download),
           "--target-dir", str(target), "--with-rec", "-q"]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    staging = tmp_path / "t.partial" / "train.partial"
    # The run goes on in 5 ms steps and is looked at only while stopped, so
    # the signal lands after the first class and never after the last,
    # however busy the machine is.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        os.kill(proc.pid, signal.SIGSTOP)
        if any(p.suffix != ".partial" for p in _dirs(staging)):
            break
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.005)
    assert proc.poll() is None, "rec imagenet ended before it was stopped"
    os.kill(proc.pid, getattr(signal, sig))
    os.kill(proc.pid, signal.SIGCONT)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()  # so a hang fails this test alone
        proc.communicate()
        pytest.fail(f"rec imagenet did not exit within 60 s of {sig}")
    if sig != "SIGKILL":
        assert proc.returncode == (130 if sig == "SIGINT" else 143), err
        assert "--resume" in err and "Traceback" not in err, err
    assert not target.exists() and staging.exists()
    subprocess.run([*cmd, "--resume"], check=True)
    assert tree(target) == fake.expected_tree()
    assert len(_records(target / "rec/train.rec")) == 6000

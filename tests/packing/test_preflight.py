"""What rec pack refuses before packing: a detection list without
--pack-label, a replacement that would drop labels, and the next step it
suggests for a folder of images (which must work as printed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from PIL import Image

from ..boxsets import voc_set


def rec(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "im2rec", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_a_detection_list_is_not_packed_without_pack_label(tmp_path: Path) -> None:
    """It exited 0 with records holding each label's first number."""
    voc_set(tmp_path / "VOC")
    assert rec("list", "VOC", "--boxes", "voc", "-o", "v", "-q", cwd=tmp_path).returncode == 0
    done = rec("pack", "v.lst", "--pass-through", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "v.lst: its lines hold detection labels (rec list --boxes made it" in done.stderr
    assert "pass --pack-label" in done.stderr and not (tmp_path / "v.rec").exists()
    (tmp_path / "v.lists.json").unlink()  # (a list from elsewhere: its labels tell)
    done = rec("pack", "v.lst", "--pass-through", cwd=tmp_path)
    assert done.returncode == 2 and "first line's labels are laid out as boxes" in done.stderr
    packed = rec("pack", "v.lst", "--pass-through", "--pack-label", "--root", "VOC", "-q",
                 cwd=tmp_path)  # fmt: skip
    assert packed.returncode == 0, packed.stderr


def test_the_overwrite_hint_names_pack_label_where_labels_would_be_lost(tmp_path: Path) -> None:
    Image.new("RGB", (8, 8)).save(tmp_path / "a.jpg")
    (tmp_path / "m.lst").write_text("0\t1\t0\t1\ta.jpg\n")  # (several labels, not boxes)
    packed = rec("pack", "m.lst", "--pass-through", "--pack-label", "--root", ".", "-q",
                 cwd=tmp_path)  # fmt: skip
    assert packed.returncode == 0, packed.stderr
    done = rec("pack", "m.lst", "--pass-through", "--root", ".", cwd=tmp_path)
    assert done.returncode == 1
    assert "already packed with --pack-label (now without)" in done.stderr
    assert "run again with --pack-label to keep every label" in done.stderr
    assert "--overwrite would replace it with the first label only" in done.stderr


def test_the_next_step_for_a_folder_of_images_works_as_printed(tmp_path: Path) -> None:
    """It said `rec list FOLDER --recursive`, then `rec pack FOLDER`; the
    list is written here, so that said the same again."""
    images = tmp_path / "far" / "photos" / "cats"
    images.mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(images / "a.jpg")
    here = tmp_path / "work"
    here.mkdir()
    done = rec("pack", "../far/photos", cwd=here)
    assert done.returncode == 2
    steps = done.stderr.split("`")[1::2]
    assert steps == ["rec list ../far/photos --recursive", "rec pack photos.lst"], done.stderr
    for step in steps:
        assert rec(*step.split()[1:], "-q", cwd=here).returncode == 0
    assert (here / "photos.rec").exists()
    shutil.rmtree(tmp_path / "far")

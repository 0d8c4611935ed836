"""rec info, rec verify and rec index through the real CLI: readable tables,
MXNet's label width, progress counted in sizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from im2rec.cli.common import size_text

from ..conftest import photo_folder, write_lst
from .conftest import run


def rows(out: str) -> dict[str, str]:
    """``rec info``'s plain rows: what, value."""
    return {k: v.strip() for k, v in (line.strip().split("  ", 1) for line in out.splitlines())}


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


def test_info_of_an_empty_rec_says_it_holds_no_records(tmp_path: Path) -> None:
    (tmp_path / "empty.rec").write_bytes(b"")
    code, out = run("info", str(tmp_path / "empty.rec"))
    assert code == 0, out
    lines = rows(out)
    assert lines["records"] == "0"
    assert lines["labels"] == "none (no records)"  # (not "only multi-label records")
    assert lines["images"] == "none"


@pytest.mark.slow
def test_rec_verify_shows_its_progress_as_sizes(tmp_path: Path) -> None:
    """Through a real `rec verify` on a terminal (TTY_COMPATIBLE)."""
    from im2rec.recordio import IndexedRecordWriter, pack

    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        for key in range(200):
            w.write_key(key, pack((0, 1.0, key, 0), bytes(5000)))
    env = {**os.environ, "TTY_COMPATIBLE": "1", "FORCE_COLOR": "1", "COLUMNS": "160"}
    done = subprocess.run([sys.executable, "-m", "im2rec", "verify", str(tmp_path / "d.rec")],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1.0 MB/1.0 MB" in done.stderr and "img/s" not in done.stderr, done.stderr


def test_info_and_verify_of_a_small_rec_read_right(listed: Path) -> None:
    (listed / "example").rename(listed / "one")
    (listed / "one" / "class0" / "0.jpg").rename(listed / "keep.jpg")
    for folder in (listed / "one").iterdir():
        for f in folder.iterdir():
            f.unlink()
    (listed / "keep.jpg").rename(listed / "one" / "class0" / "0.jpg")
    assert run("list", "./one", "--recursive", "-q")[0] == 0
    assert run("pack", "one.lst", "--pass-through", "-q")[0] == 0
    code, out = run("info", "one.rec")
    assert code == 0 and "records  1\n" in out, out
    size = (listed / "one.rec").stat().st_size
    assert f"one.rec: {size_text(size)}" in out and "0.0 MB" not in out
    code, out = run("verify", "one.rec")
    assert code == 0 and f"one.rec: 1 record, {size_text(size)}: OK" in out, out


def test_info_counts_images_listed_without_objects_apart(tmp_path: Path) -> None:
    """`rec list --keep-empty` labels an image with no object with the header
    alone: rec info counts those images as such, not as broken labels."""
    from ..boxsets import IMAGES, voc_set

    root = voc_set(tmp_path / "voc")
    for keep in (True, False):
        out_prefix = tmp_path / ("kept" if keep else "left")
        args = ["list", str(root), "--boxes", "voc", "-o", str(out_prefix), "--no-shuffle", "-q"]
        assert run(*args, *["--keep-empty"] * keep)[0] == 0
        lst = out_prefix.with_suffix(".lst")
        assert run("pack", str(lst), "--root", str(root), "--pass-through", "--pack-label",
                   "-q")[0] == 0  # fmt: skip
        code, out = run("info", str(out_prefix.with_suffix(".rec")))
        assert code == 0, out
        lines = rows(out)
        assert lines["labels"].startswith("detection: boxes")
        assert lines["objects"] == "6 in 3 images, 1 to 3 an image (mean 2)"
        assert "broken" not in lines
        info = json.loads(run("info", str(out_prefix.with_suffix(".rec")), "--json")[1])
        found = info["detection"]
        assert (found["images"], found["not_detection"]) == (3, 0)
        empty = sum(1 for *_, objects in IMAGES if not objects)
        assert found["images_without_objects"] == (empty if keep else 0)
        if keep:
            assert lines["no objects"].startswith("1 image labelled with the header alone")
        else:
            assert "no objects" not in lines

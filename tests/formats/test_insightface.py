"""InsightFace's layout as a format: labels that are not identities are
refused, the property file older InsightFace scripts read, and converting a
rec into the layout."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ..faces_data import make_faces, rec

# (processes, servers or seconds: `make test-fast` leaves them out)
pytestmark = pytest.mark.slow


def test_labels_that_are_not_identities_are_refused(tmp_path: Path) -> None:
    make_faces(tmp_path / "faces", [2])
    (tmp_path / "odd.lst").write_text("0\t0.5\tid0/000.jpg\n1\t0.000000\tid0/001.jpg\n")
    done = rec("pack", "odd.lst", "--root", "faces", "--layout", "insightface", cwd=tmp_path)
    assert done.returncode == 1
    assert "odd.lst:1: label 0.5 is not an identity (a whole number >= 0)" in done.stderr
    assert not (tmp_path / "odd.rec").exists()
    (tmp_path / "odd.lst").write_text("0\t0.5\tid0/000.jpg\n")
    assert rec("pack", "odd.lst", "--root", "faces", "--pass-through", cwd=tmp_path).returncode == 0
    done = rec("convert", "odd.rec", "--layout", "insightface", "-o", "x", cwd=tmp_path)
    assert done.returncode == 1 and "has label 0.5, not an identity" in done.stderr
    assert not (tmp_path / "x.rec").exists()


def test_the_property_file_older_insightface_scripts_read(tmp_path: Path) -> None:
    """``property`` beside the .rec: classes (the largest identity + 1),
    height, width, as InsightFace's load_property reads it; never over a
    different one without --overwrite; none when the images differ in size."""
    rng = np.random.default_rng(3)
    root = tmp_path / "faces"
    for ident in (0, 1, 4):  # a sparse identity: a classifier needs 5 classes
        for i in range(2):
            path = root / f"id{ident}" / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 256, (112, 96, 3), dtype=np.uint8)).save(path)
    lines = [f"{n}\t{ident}\tid{ident}/{i}.jpg\n" for n, (ident, i) in
             enumerate((d, i) for d in (0, 1, 4) for i in range(2))]  # fmt: skip
    (tmp_path / "faces.lst").write_text("".join(lines))
    prop = tmp_path / "property"

    def pack(*extra: str) -> subprocess.CompletedProcess[str]:
        args = ("pack", "faces.lst", "--root", "faces", "--layout", "insightface", *extra)
        return rec(*args, "--pass-through", cwd=tmp_path)

    done = pack()
    assert done.returncode == 0, done.stderr
    assert prop.read_text() == "5,112,96\n"
    vec = prop.read_text().strip().split(",")  # InsightFace's face_image.load_property
    assert (int(vec[0]), [int(vec[1]), int(vec[2])]) == (5, [112, 96])
    assert "property file (classes,height,width): property" in done.stdout

    prop.write_text("9,1,1\n")  # another dataset's: kept, and the run says so
    done = pack("--json")
    assert done.returncode == 0 and prop.read_text() == "9,1,1\n"
    (summary,) = json.loads(done.stdout)
    assert summary["property"] is None
    assert "says '9,1,1', not '5,112,96'; pass --overwrite" in summary["property_note"]
    assert pack("--overwrite").returncode == 0 and prop.read_text() == "5,112,96\n"

    prop.unlink()
    prop.mkdir()  # not a file: never replaced, even with --overwrite
    done = pack("--overwrite")
    assert done.returncode == 0 and prop.is_dir()
    assert "property is there and is not a property file (property: is a folder)" in done.stdout
    prop.rmdir()
    done = rec("convert", "faces.rec", "--layout", "insightface", "-o", "again", cwd=tmp_path)
    assert "already in the InsightFace layout" in done.stderr and not prop.exists()
    Image.fromarray(rng.integers(0, 256, (50, 40, 3), dtype=np.uint8)).save(root / "id4/1.jpg")
    done = pack("--overwrite")
    assert done.returncode == 0 and not prop.exists()
    assert "property not written: the images are not all one size" in done.stdout


def test_convert_writes_the_property_file(faces: tuple[Path, dict[str, bytes]]) -> None:
    lst, _ = faces
    cwd = lst.parent
    (cwd / "plain.lst").write_bytes(lst.read_bytes())
    assert rec("pack", "plain.lst", "--root", "faces", "--pass-through", cwd=cwd).returncode == 0
    done = rec("convert", "plain.rec", "--layout", "insightface", "-o", "conv", "--json", cwd=cwd)
    summary = json.loads(done.stdout)
    assert summary["property"] == "property"  # beside conv.rec, named as -o names it
    assert (cwd / "property").read_text() == "4,48,48\n" and summary["property_note"] is None

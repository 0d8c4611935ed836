"""InsightFace's face layout: ``rec pack --layout insightface``, ``rec convert``,
and reading it back (``RecordDataset``, ``rec info``, ``rec unpack``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from im2rec.cli import main
from im2rec.packing import PackInterrupted, PackOptions, pack_list
from im2rec.recordio import IndexedRecordReader, unpack
from im2rec.training.dataset import RecordDataset

# (processes, servers or seconds: `make test-fast` leaves them out)
pytestmark = pytest.mark.slow

FACES = PackOptions(pass_through=True, layout="insightface")


def make_faces(root: Path, sizes: list[int], side: int = 48) -> dict[str, bytes]:
    """One folder per identity (``id0`` ... with ``sizes[i]`` images each);
    returns each image's bytes by its path under root."""
    rng = np.random.default_rng(7)
    files = {}
    for ident, count in enumerate(sizes):
        for i in range(count):
            path = root / f"id{ident}" / f"{i:03d}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(path)
            files[f"id{ident}/{i:03d}.jpg"] = path.read_bytes()
    return files


def rec(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "im2rec", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)  # fmt: skip


def records(path: Path) -> dict[int, tuple[Any, bytes]]:
    reader = IndexedRecordReader(path)
    out = {}
    for key in reader.keys:
        header, image = unpack(reader.read_key(key))
        out[key] = (header, bytes(image))
    return out


def check_layout(path: Path, images: int, identities: int) -> list[tuple[int, int, int]]:
    """The layout's invariants; returns (identity, start, end) per identity."""
    got = records(path)
    assert sorted(got) == list(range(images + identities + 1))
    header, payload = got[0]
    assert header.flag == 2 and payload == b""
    assert header.label.tolist() == [images + 1, images + 1 + identities]
    ranges = []
    expected_start = 1
    for j in range(identities):
        h, p = got[images + 1 + j]
        assert h.flag == 2 and p == b"" and h.id == images + 1 + j
        start, end = (int(v) for v in h.label)
        assert start == expected_start and end > start  # contiguous: no hole, no overlap
        identity = {int(got[k][0].label[0]) for k in range(start, end)}
        assert len(identity) == 1
        ranges.append((identity.pop(), start, end))
        expected_start = end
    assert expected_start == images + 1
    for key in range(1, images + 1):
        h, p = got[key]
        assert h.flag == 2 and h.id == key and h.label[1] == 1.0 and p
    return ranges


@pytest.fixture
def faces(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    files = make_faces(tmp_path / "faces", [3, 5, 1, 4])
    done = rec("list", "faces", "--recursive", "-o", "faces", "-q", cwd=tmp_path)  # shuffled
    assert done.returncode == 0, done.stderr
    return tmp_path / "faces.lst", files


def test_pack_writes_insightfaces_layout(faces: tuple[Path, dict[str, bytes]]) -> None:
    lst, files = faces
    result = pack_list(lst, FACES)
    assert (result.records, result.identities) == (13, 4)
    ranges = check_layout(lst.with_suffix(".rec"), 13, 4)
    got = records(lst.with_suffix(".rec"))
    listed = {}
    for line in lst.read_text().splitlines():
        _, label, path = line.split("\t")
        listed[path] = int(float(label))
    order = [path for path in listed]  # list order, shuffled by rec list
    for identity, start, end in ranges:
        want = [files[p] for p in order if listed[p] == identity]  # list order kept
        assert [got[k][1] for k in range(start, end)] == want
    # identities in the order they first appear in the list
    firsts = list(dict.fromkeys(listed[p] for p in order))
    assert [identity for identity, _, _ in ranges] == firsts
    manifest = json.loads(lst.with_suffix(".pack.json").read_text())
    assert manifest["layout"] == "insightface" and manifest["identities"] == 4
    assert manifest["options"]["layout"] == "insightface"
    assert not list(lst.parent.glob(".faces.insightface*"))  # the staging files went
    ds = RecordDataset(lst.with_suffix(".rec"), output="bytes")
    assert ds.layout == "insightface" and len(ds) == 13
    for i in range(13):
        image, label = ds[i]
        assert label == float(int(got[i + 1][0].label[0])) and image == got[i + 1][1]


def test_a_failed_image_leaves_no_hole(faces: tuple[Path, dict[str, bytes]]) -> None:
    lst, _ = faces
    bad = lst.parent / "faces" / "id1" / "002.jpg"
    bad.write_bytes(b"not a jpeg")
    result = pack_list(lst, PackOptions(resize=24, layout="insightface"))
    assert (result.records, result.identities) == (12, 4) and result.failures == {"undecodable": 1}
    check_layout(lst.with_suffix(".rec"), 12, 4)
    report = lst.with_suffix(".failures.tsv").read_text().splitlines()
    line = next(i for i, text in enumerate(lst.read_text().splitlines(), 1) if "id1/002" in text)
    assert report[1].startswith(f"{line}\t") and "id1/002.jpg\tundecodable" in report[1]
    first = records(lst.with_suffix(".rec"))[1][1]
    with Image.open(__import__("io").BytesIO(first)) as im:
        assert min(im.size) == 24  # re-encoded with --resize


def test_a_grouped_list_is_packed_in_its_own_order(tmp_path: Path) -> None:
    # (rec list without shuffling writes identities together: the plan then
    # holds nothing a line, and the staging list is the list read again)
    from im2rec.packing.faces_plan import plan_identities

    files = make_faces(tmp_path / "faces", [2, 3, 1])
    done = rec("list", "faces", "--recursive", "--no-shuffle", "-o", "faces", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lst = tmp_path / "faces.lst"
    assert plan_identities(lst).interleaved is None
    (tmp_path / "faces" / "id1" / "001.jpg").unlink()  # fails: missing
    result = pack_list(lst, FACES)
    assert (result.records, result.identities) == (5, 3)
    ranges = check_layout(lst.with_suffix(".rec"), 5, 3)
    assert [identity for identity, _, _ in ranges] == [0, 1, 2]
    got = records(lst.with_suffix(".rec"))
    paths = [line.split("\t")[2] for line in lst.read_text().splitlines()]
    assert [got[k][1] for k in range(1, 6)] == [files[p] for p in paths if p != "id1/001.jpg"]
    report = lst.with_suffix(".failures.tsv").read_text().splitlines()
    assert report[1].startswith(f"{paths.index('id1/001.jpg') + 1}\t")


def test_interrupted_then_resumed_gives_the_same_bytes(
    faces: tuple[Path, dict[str, bytes]],
) -> None:
    lst, _ = faces
    pack_list(lst, FACES)
    want = lst.with_suffix(".rec").read_bytes(), lst.with_suffix(".idx").read_bytes()
    for suffix in (".rec", ".idx", ".pack.json"):
        lst.with_suffix(suffix).unlink()

    def stop(done: int, _total: int, _bytes: int) -> None:
        if done == 6:
            raise KeyboardInterrupt

    with pytest.raises(PackInterrupted, match=r"6 of 13 entries of .*faces\.lst;"):
        pack_list(lst, FACES, on_progress=stop)
    assert not lst.with_suffix(".rec").exists()
    result = pack_list(lst, FACES, resume=True)
    assert result.resumed_from == 6
    assert (lst.with_suffix(".rec").read_bytes(), lst.with_suffix(".idx").read_bytes()) == want
    again = pack_list(lst, FACES, resume=True)
    assert again.already_done and again.identities == 4


def test_cli_pack_info_unpack_and_convert(faces: tuple[Path, dict[str, bytes]]) -> None:
    lst, _ = faces
    cwd = lst.parent
    done = rec("pack", "faces.lst", "--layout", "insightface", "--pass-through", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert "13 images of 4 identities (InsightFace layout)" in done.stdout
    changed = rec("pack", "faces.lst", "--pass-through", cwd=cwd)
    assert changed.returncode == 1
    assert "already packed with --layout insightface (now plain)" in changed.stderr
    info = rec("info", "faces.rec", cwd=cwd).stdout
    assert "InsightFace: 13 images of 4 identities (record 0 the header, 14 to 17" in info
    assert json.loads(rec("info", "faces.rec", "--json", cwd=cwd).stdout)["layout"] == {
        "name": "insightface", "images": 13, "identities": 4, "identity_records": [14, 17],
    }  # fmt: skip
    done = rec("unpack", "faces.rec", "out", "--classes", "faces.classes.tsv", cwd=cwd)
    assert done.returncode == 0 and "4 header and identity records" not in done.stdout
    assert "its 5 header and identity records were skipped" in done.stdout
    assert sorted(p.name for p in (cwd / "out").iterdir()) == ["id0", "id1", "id2", "id3"]
    assert len(list((cwd / "out").rglob("*.jpg"))) == 13
    # unpacked and packed again: the same file
    done = rec("pack", "out.lst", "--layout", "insightface", "--pass-through", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert (cwd / "out.rec").read_bytes() == (cwd / "faces.rec").read_bytes()
    # a plain pack converted: the same file as packing into the layout
    (cwd / "plain.lst").write_bytes(lst.read_bytes())
    assert rec("pack", "plain.lst", "--root", "faces", "--pass-through", cwd=cwd).returncode == 0
    done = rec("convert", "plain.rec", "--layout", "insightface", "-o", "conv", "--json", cwd=cwd)
    assert json.loads(done.stdout)["identities"] == 4
    for suffix in (".rec", ".idx"):
        assert (cwd / f"conv{suffix}").read_bytes() == (cwd / f"faces{suffix}").read_bytes()
    refused = rec("convert", "plain.rec", "--layout", "insightface", "-o", "conv", cwd=cwd)
    assert (
        refused.returncode == 1 and "conv.rec: already exists; pass --overwrite" in refused.stderr
    )
    again = rec("convert", "faces.rec", "--layout", "insightface", "-o", "x", cwd=cwd)
    assert again.returncode == 1 and "already in the InsightFace layout" in again.stderr
    shards = CliRunner().invoke(
        main, ["pack", str(lst), "--layout", "insightface", "--shards", "2"]
    )
    assert shards.exit_code == 2 and "drop --shards" in shards.output


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

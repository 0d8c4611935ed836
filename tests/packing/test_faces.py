"""InsightFace's face layout: ``rec pack --layout insightface``, ``rec convert``,
and reading it back (``RecordDataset``, ``rec info``, ``rec unpack``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from im2rec.cli import main
from im2rec.packing import PackInterrupted, PackOptions, pack_list
from im2rec.training.dataset import RecordDataset

from ..faces_data import FACES, check_layout, rec, records

# (processes, servers or seconds: `make test-fast` leaves them out)
pytestmark = pytest.mark.slow


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

"""``rec export --to webdataset`` and ``rec import webdataset``: shards read by
the real ``webdataset`` library, round trips byte for byte, shards from
WebDataset's own ``ShardWriter``, and hostile tars."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from im2rec.errors import DatasetError
from im2rec.formats.webdataset import export_webdataset, import_webdataset
from im2rec.packing import PackOptions, pack_list
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, pack, unpack

from ..faces_data import make_faces, rec
from .conftest import export_and_import, hostile, image_sized

wds = pytest.importorskip("webdataset")


# webdataset leaves its shard files for the garbage collector to close
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_webdataset_library_reads_every_sample(mixed: Path, tmp_path: Path) -> None:
    result = export_webdataset(mixed, str(tmp_path / "s-%06d.tar"), maxcount=6)
    got = list(wds.WebDataset(result.shards, shardshuffle=False))
    reader = IndexedRecordReader(mixed)
    assert len(got) == len(reader.keys) == 17
    keys = [s["__key__"] for s in got]
    assert len(set(keys)) == 17 and all("." not in k for k in keys)
    assert keys[:3] == ["000000000", "000000001", "000000002"]
    assert keys[14] == "000000000-14" and keys[16] == "000000015-16"
    for sample, key in zip(got, reader.keys, strict=True):
        header, payload = unpack(reader.read_key(key))
        meta = json.loads(sample["json"])
        assert meta["id"] == header.id and meta["id2"] == header.id2 and meta["key"] == key
        assert meta["flag"] == header.flag
        images = {ext: v for ext, v in sample.items() if ext in ("jpg", "png", "bin")}
        if payload:
            ((ext, data),) = images.items()
            assert data == payload
            assert ext == ("png" if key == 12 else "bin" if key == 15 else "jpg")
        else:
            assert not images
        if header.flag == 0 and float(header.label).is_integer():
            assert int(sample["cls"]) == int(header.label)
        else:
            assert "cls" not in sample
            assert meta["label"] == (
                header.label.tolist() if header.flag else [float(header.label)]
            )


def test_face_layout_round_trip(tmp_path: Path) -> None:
    make_faces(tmp_path / "faces", [3, 2, 4])
    lst = tmp_path / "faces.lst"
    lst.write_text("".join(f"{i}\t{i % 3}.000000\tid{i % 3}/{i // 3:03d}.jpg\n"
                           for i in range(8)))  # fmt: skip
    pack_list(lst, PackOptions(pass_through=True, layout="insightface"))
    back = export_and_import(lst.with_suffix(".rec"), tmp_path)
    assert back.with_suffix(".rec").read_bytes() == lst.with_suffix(".rec").read_bytes()
    assert back.with_suffix(".idx").read_bytes() == lst.with_suffix(".idx").read_bytes()


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([("../up/x.jpg", tarfile.REGTYPE, b"x")], "must be relative paths inside"),
        ([("/abs/x.jpg", tarfile.REGTYPE, b"x")], "is an absolute path"),
        ([("a.jpg", tarfile.REGTYPE, b"x"), ("a.jpg", tarfile.REGTYPE, b"y")], "appears twice"),
    ],
)
def test_hostile_tars_are_refused(
    tmp_path: Path, members: list[tuple[str, bytes, bytes]], message: str
) -> None:
    shard = hostile(tmp_path / "bad.tar", members)
    with pytest.raises(DatasetError, match=message):
        import_webdataset([str(shard)], tmp_path / "out")
    assert not (tmp_path / "out.rec").exists()


@pytest.mark.slow
def test_cli_export_and_import(mixed: Path, tmp_path: Path) -> None:
    done = rec("export", "mixed.rec", "--to", "webdataset", "-o", "wds/m-%03d.tar",
               "--maxcount", "10", "--json", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["samples"] == 17 and out["shards"] == ["wds/m-000.tar", "wds/m-001.tar"]
    done = rec("import", "webdataset", "wds/m-{000..001}.tar", "-o", "again", "--json",
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records"] == 17
    assert (tmp_path / "again.rec").read_bytes() == mixed.read_bytes()
    done = rec("import", "webdataset", "wds/*.tar", "-o", "again", cwd=tmp_path)
    assert done.returncode == 1 and "again.rec: already exists; pass --overwrite" in done.stderr
    done = rec("export", "mixed.rec", "--to", "webdataset", "-o", "one.tar", "--maxcount", "3",
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "needs a number pattern" in done.stderr
    assert not list(tmp_path.glob("*one.tar*"))


@pytest.mark.parametrize("where", ["in memory", "in the file"])
def test_an_export_whose_copies_fail_leaves_no_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Images read into a chunk are written from it at once; larger ones are
    copied into the shards on a thread, a batch at a time: a write or copy
    that fails (here: the disk is full) is raised by export, and no shard,
    finished or temporary, is left."""
    import errno

    from im2rec.recordio.chunks import Chunks
    from im2rec.storage import copying

    rng = np.random.default_rng(3)
    path = tmp_path / "big.rec"
    with IndexedRecordWriter(path) as w:
        for i in range(40):
            w.write_key(i, pack((0, float(i), i, 0), image_sized(rng, 100_000, None)))

    def full(fd: int, items: list[object]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    if where == "in the file":
        monkeypatch.setattr(Chunks, "SIZE", 50_000)
    monkeypatch.setattr(copying, "copy_batch", full)  # (here and on the copying thread)
    out = tmp_path / "out"
    with pytest.raises(OSError, match="No space left"):
        export_webdataset(path, str(out / "s-%04d.tar"), maxcount=15)
    assert not out.exists() or not list(out.iterdir())

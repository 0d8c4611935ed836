"""``rec imagenet`` on a tiny fake ILSVRC2012 (spec: imagenet.md test plan)."""

from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import tarfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from im2rec.cli import main
from im2rec.errors import DatasetError, MissingFileError
from im2rec.imagenet import (
    CHECKSUMS,
    ImagenetOptions,
    load_devkit,
    prepare_imagenet,
)
from im2rec.imagenet.preparing import ImagenetInterrupted
from im2rec.imagenet.tarstream import sniff
from im2rec.recordio import IndexedRecordReader, unpack

from ..imagenet_fixture import (
    VAL_CLASSES,
    WNIDS,
    FakeImagenet,
    tar_bytes,
    train_files,
    val_name,
)


def options(fake: FakeImagenet, target: Path, **kw: Any) -> ImagenetOptions:
    return ImagenetOptions(fake.download, target, **kw)


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.parts[len(root.parts)] in ("train", "val")
    }


def test_happy_path_with_the_pklz(fake: FakeImagenet, tmp_path: Path) -> None:
    target = tmp_path / "imagenet"
    result = prepare_imagenet(options(fake, target))
    assert tree(target) == fake.expected_tree()  # bytes unchanged, odd files included
    assert (result.classes, result.train_images, result.val_images) == (4, 12, 8)
    leftovers = [p.name for p in target.rglob("*") if p.suffix in (".tar", ".lst", ".partial")]
    assert not leftovers and not list((target / "val").glob("*.JPEG"))
    assert not (tmp_path / "imagenet.partial").exists()
    odd = {(o.path, o.kind, o.action) for o in result.odd_images}
    assert odd == {
        ("train/n02105855/n02105855_2933.JPEG", "png", "kept"),
        ("train/n01739381/n01739381_1309.JPEG", "cmyk-jpeg", "kept"),
        ("val/n15075141/ILSVRC2012_val_00000007.JPEG", "cmyk-jpeg", "kept"),
    }
    assert (target / "odd_images.tsv").read_text().count("\n") == 4
    again = prepare_imagenet(options(fake, target))  # a finished target is left alone
    assert again.already_done and tree(target) == fake.expected_tree()


def test_the_devkit_gives_the_same_tree(fake: FakeImagenet, tmp_path: Path) -> None:
    pytest.importorskip("scipy.io")
    (fake.download / "imagenet_val_maps.pklz").unlink()
    devkit = fake.write_devkit(tmp_path / "devkit.tar.gz")
    assert load_devkit(devkit).as_dict() == fake.answer  # IDs are not in WNID order
    prepare_imagenet(options(fake, tmp_path / "t", devkit=devkit))
    assert tree(tmp_path / "t") == fake.expected_tree()


def test_val_map_and_devkit_are_cross_checked(fake: FakeImagenet, tmp_path: Path) -> None:
    pytest.importorskip("scipy.io")
    pklz = fake.download / "imagenet_val_maps.pklz"
    good = fake.write_devkit(tmp_path / "good.tar.gz")
    prepare_imagenet(options(fake, tmp_path / "ok", val_map=pklz, devkit=good))
    truth = [1, 3, 4, 2, 1, 3, 2, 4]  # the classes of val 3 and 4 swapped
    bad = fake.write_devkit(tmp_path / "bad.tar.gz", truth=truth)
    with pytest.raises(DatasetError, match="disagree on 2 image"):
        prepare_imagenet(options(fake, tmp_path / "no", val_map=pklz, devkit=bad))
    assert not (tmp_path / "no").exists() and not (tmp_path / "no.partial").exists()


def _broken(kind: str, fake: FakeImagenet) -> Path:
    path = fake.download / "imagenet_val_maps.pklz"
    if kind == "garbage":
        path.write_bytes(b"\x1f\x8bnot gzip at all")
    elif kind == "structure":
        path.write_bytes(gzip.compress(pickle.dumps({"a": 1}, protocol=0)))
    elif kind == "name":
        fake.write_pklz(path, [("val_1.jpg", "n01440764")])
    elif kind == "wnid":
        fake.write_pklz(path, [(val_name(1), "dog")])
    elif kind == "short":
        fake.write_pklz(path, sorted(fake.answer.items())[:-1])
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("garbage", "damaged gzip"),
        ("structure", r"GluonCV's structure"),
        ("name", r"expected ILSVRC2012_val_00000001.JPEG as entry 1, found 'val_1.jpg'"),
        ("wnid", "not a WNID"),
        (
            "short",
            r"disagree: missing from the tar \[\], not in the map \['ILSVRC2012_val_00000008",
        ),
        ("missing-train", "ILSVRC2012_img_train.tar: not found"),
        ("missing-val", "ILSVRC2012_img_val.tar: not found"),
        ("checksum", "is not the official"),
    ],
)
def test_input_errors_come_before_any_side_effect(
    fake: FakeImagenet, tmp_path: Path, kind: str, message: str
) -> None:
    if kind.startswith("missing-"):
        (fake.download / f"ILSVRC2012_img_{kind[8:]}.tar").unlink()
    elif kind != "checksum":
        _broken(kind, fake)
    with pytest.raises((DatasetError, MissingFileError), match=message):
        prepare_imagenet(options(fake, tmp_path / "t", checksum=kind == "checksum"))
    assert not (tmp_path / "t").exists() and not (tmp_path / "t.partial").exists()


def test_checksums_pass_for_the_right_files(
    fake: FakeImagenet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in CHECKSUMS:
        digest = hashlib.sha1((fake.download / name).read_bytes()).hexdigest()
        monkeypatch.setitem(CHECKSUMS, name, digest)
    prepare_imagenet(options(fake, tmp_path / "t", checksum=True))


def test_an_existing_target_or_interrupted_run_is_not_touched(
    fake: FakeImagenet, tmp_path: Path
) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "mine.txt").write_text("keep")
    with pytest.raises(DatasetError, match="not a finished `rec imagenet` target"):
        prepare_imagenet(options(fake, tmp_path / "t"))
    assert (tmp_path / "t" / "mine.txt").read_text() == "keep"
    (tmp_path / "u.partial").mkdir()
    with pytest.raises(DatasetError, match="continue it with --resume"):
        prepare_imagenet(options(fake, tmp_path / "u"))


def test_an_extra_val_file_is_an_error(fake: FakeImagenet, tmp_path: Path) -> None:
    members = [(n, d) for n, d in fake.val.items()] + [("ILSVRC2012_val_00000009.JPEG", b"x")]
    (fake.download / "ILSVRC2012_img_val.tar").write_bytes(tar_bytes(members))
    with pytest.raises(DatasetError, match=r"not in the map \['ILSVRC2012_val_00000009.JPEG'\]"):
        prepare_imagenet(options(fake, tmp_path / "t"))


def test_a_map_entry_missing_from_the_val_tar_is_an_error(
    fake: FakeImagenet, tmp_path: Path
) -> None:
    members = [(n, d) for n, d in fake.val.items() if n != val_name(3)]
    (fake.download / "ILSVRC2012_img_val.tar").write_bytes(tar_bytes(members))
    with pytest.raises(
        DatasetError, match=r"missing from the tar \['ILSVRC2012_val_00000003.JPEG'\]"
    ):
        prepare_imagenet(options(fake, tmp_path / "t"))
    assert not (tmp_path / "t").exists() and not (tmp_path / "t.partial").exists()


def test_a_train_member_that_is_not_a_class_tar_fails_first(
    fake: FakeImagenet, tmp_path: Path
) -> None:
    outer = [(f"{w}.tar", tar_bytes(train_files(w))) for w in WNIDS] + [("readme.txt", b"hi")]
    (fake.download / "ILSVRC2012_img_train.tar").write_bytes(tar_bytes(outer))
    with pytest.raises(
        DatasetError, match=r"unexpected member 'readme.txt' \(expected <wnid>.tar\)"
    ):
        prepare_imagenet(options(fake, tmp_path / "t"))
    assert not (tmp_path / "t.partial").exists()


def test_train_classes_must_be_the_maps(fake: FakeImagenet, tmp_path: Path) -> None:
    outer = [(f"{w}.tar", tar_bytes(train_files(w))) for w in WNIDS[:3]]
    (fake.download / "ILSVRC2012_img_train.tar").write_bytes(tar_bytes(outer))
    with pytest.raises(DatasetError, match=r"its classes do not match the val map's \(3 vs 4"):
        prepare_imagenet(options(fake, tmp_path / "t"))
    assert not (tmp_path / "t.partial").exists()


def test_dot_entries_and_prefixes_are_normalised(fake: FakeImagenet, tmp_path: Path) -> None:
    dot = tarfile.TarInfo(".")
    dot.type = tarfile.DIRTYPE
    outer = [(f"./{w}.tar", tar_bytes([(f"./{n}", d) for n, d in train_files(w)])) for w in WNIDS]
    (fake.download / "ILSVRC2012_img_train.tar").write_bytes(tar_bytes(outer, extra=[dot]))
    prepare_imagenet(options(fake, tmp_path / "t"))
    assert tree(tmp_path / "t") == fake.expected_tree()


def _link(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return info


@pytest.mark.parametrize(
    ("where", "member", "message"),
    [
        ("train", "../evil.tar", "outside the target"),
        ("train", "/abs.tar", "outside the target"),
        ("train", "link", "is a link"),
        ("val", "../ILSVRC2012_val_00000009.JPEG", "outside the target"),
        ("inner", "../../escape.JPEG", "outside the target"),
        ("inner", "link", "is a link"),
    ],
)
def test_hostile_members_refuse_the_archive(
    fake: FakeImagenet, tmp_path: Path, where: str, member: str, message: str
) -> None:
    link = [_link("x.JPEG" if where != "train" else "x.tar")] if member == "link" else []
    bad = [] if member == "link" else [(member, b"data")]
    if where == "val":
        members = list(fake.val.items()) + bad
        (fake.download / "ILSVRC2012_img_val.tar").write_bytes(tar_bytes(members, link))
    else:
        outer = []
        for w in sorted(fake.train):
            inner = train_files(w) + (bad if where == "inner" else [])
            outer.append((f"{w}.tar", tar_bytes(inner, link if where == "inner" else None)))
        outer += bad if where == "train" else []
        extra = link if where == "train" else None
        (fake.download / "ILSVRC2012_img_train.tar").write_bytes(tar_bytes(outer, extra))
    with pytest.raises(DatasetError, match=message):
        prepare_imagenet(options(fake, tmp_path / "t"))
    assert not (tmp_path / "t").exists()
    assert not list(tmp_path.rglob("escape.JPEG")) and not list(tmp_path.rglob("evil.tar"))


def _zero_header(tar: bytes, name: str) -> bytes:
    """``tar`` with the header block of member ``name`` zeroed: what tar reads
    as its end-of-archive block."""
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        offset = t.getmember(name).offset
    return tar[:offset] + bytes(512) + tar[offset + 512 :]


@pytest.mark.parametrize("where", ["val", "outer", "inner"])
def test_a_zeroed_header_is_damage_not_the_end(
    fake: FakeImagenet, tmp_path: Path, where: str
) -> None:
    """Tar stops at a zeroed header block as if the archive ended there, and
    the members after it would be lost without a word: refused instead."""
    if where == "val":
        val = fake.download / "ILSVRC2012_img_val.tar"
        val.write_bytes(_zero_header(val.read_bytes(), val_name(3)))
    else:
        outer = [(f"{w}.tar", tar_bytes(train_files(w))) for w in WNIDS]
        if where == "inner":
            name, inner = outer[1]
            outer[1] = (name, _zero_header(inner, train_files(WNIDS[1])[1][0]))
        data = tar_bytes(outer)
        if where == "outer":
            data = _zero_header(data, f"{WNIDS[2]}.tar")
        (fake.download / "ILSVRC2012_img_train.tar").write_bytes(data)
    with pytest.raises(DatasetError, match=r"the archive ends at byte [\d,]+ of [\d,]+, yet data"):
        prepare_imagenet(options(fake, tmp_path / "t"))
    assert not (tmp_path / "t").exists()


def _records(rec: Path) -> list[tuple[Any, bytes]]:
    reader = IndexedRecordReader(rec)
    return [unpack(reader.read_key(k)) for k in reader.keys]


@pytest.mark.parametrize("workers", [1, 4])
def test_with_rec(fake: FakeImagenet, tmp_path: Path, workers: int) -> None:
    target = tmp_path / "t"
    result = prepare_imagenet(options(fake, target, with_rec=True, num_workers=workers))
    assert result.rec == {
        "train": {"records": 12, "bytes": (target / "rec/train.rec").stat().st_size},
        "val": {"records": 8, "bytes": (target / "rec/val.rec").stat().st_size},
    }
    assert sorted(p.name for p in (target / "rec").iterdir()) == [
        "train.classes.tsv", "train.idx", "train.pack.json", "train.rec",
        "val.classes.tsv", "val.idx", "val.pack.json", "val.rec",
    ]  # fmt: skip
    # the class names reach rec info, as for a dataset rec list made

    info = CliRunner().invoke(main, ["info", str(target / "rec/val.rec")]).output
    assert f"0 {WNIDS[0]}: 2" in info and "rec/val.classes.tsv" in info, info
    expected = fake.expected_tree()
    val = _records(target / "rec/val.rec")
    for i, (header, payload) in enumerate(val):  # file-name order, labels = sorted-WNID index
        assert (header.flag, header.id, header.id2) == (0, i, 0)
        assert header.label == WNIDS.index(VAL_CLASSES[i])
        assert payload == expected[f"val/{VAL_CLASSES[i]}/{val_name(i + 1)}"]
    train = _records(target / "rec/train.rec")
    by_id = sorted(train, key=lambda r: r[0].id)
    paths = [f"train/{w}/{n}" for w in WNIDS for n in sorted(fake.train[w])]
    for (header, payload), path in zip(by_id, paths, strict=True):
        assert header.label == WNIDS.index(path.split("/")[1]) and payload == expected[path]
    assert [h.id for h, _ in train] != sorted(h.id for h, _ in train)  # shuffled at pack time
    if workers == 4:
        first = tmp_path / "first"
        prepare_imagenet(options(fake, first, with_rec=True, num_workers=1))
        for name in ("train.rec", "train.idx", "val.rec", "val.idx"):
            assert (first / "rec" / name).read_bytes() == (target / "rec" / name).read_bytes()


def test_fix_odd_images(fake: FakeImagenet, tmp_path: Path) -> None:
    result = prepare_imagenet(options(fake, tmp_path / "t", fix_odd_images=True))
    assert {o.action for o in result.odd_images} == {"re-encoded"}
    for odd in result.odd_images:
        data = (tmp_path / "t" / odd.path).read_bytes()
        assert sniff(data) is None and data[:2] == b"\xff\xd8"


def test_resume_after_an_interruption(fake: FakeImagenet, tmp_path: Path) -> None:
    target = tmp_path / "t"

    def interrupt(step: str, done: int, total: int) -> None:
        if step == "val" and done > total // 2:
            raise KeyboardInterrupt

    with pytest.raises(ImagenetInterrupted, match="run the same command with --resume") as err:
        prepare_imagenet(options(fake, target, with_rec=True), on_progress=interrupt)
    assert err.value.exit_code == 130
    staging = tmp_path / "t.partial"
    assert (staging / "train").is_dir() and (staging / "val.partial").is_dir()
    assert not target.exists()
    with pytest.raises(DatasetError, match="--resume"):
        prepare_imagenet(options(fake, target, with_rec=True))
    # a power loss can leave a val file with its size and zeros inside
    torn = next(p for p in (staging / "val.partial").rglob("*.JPEG") if p.stat().st_size)
    torn.write_bytes(bytes(torn.stat().st_size))
    result = prepare_imagenet(options(fake, target, with_rec=True, resume=True))
    assert tree(target) == fake.expected_tree() and result.rec["val"]["records"] == 8
    assert len(result.odd_images) == 3


def test_not_enough_space_fails_first(
    fake: FakeImagenet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    monkeypatch.setattr(shutil, "disk_usage", lambda _p: shutil._ntuple_diskusage(10, 10, 5))  # type: ignore[attr-defined]
    with pytest.raises(DatasetError, match="GB free, about .* GB needed"):
        prepare_imagenet(options(fake, tmp_path / "t", with_rec=True))
    assert not (tmp_path / "t.partial").exists()


def test_a_small_imagenet_against_the_bundled_map_says_to_bring_its_own(
    fake: FakeImagenet, tmp_path: Path
) -> None:
    """A fake or a subset of a few classes met the bundled 1,000-class map
    with only "classes do not match the val map's (4 vs 1000)": now the
    message says why, and how to give a map of its own."""
    for beside in fake.download.glob("*.pklz"):
        beside.unlink()
    with pytest.raises(DatasetError) as caught:
        prepare_imagenet(options(fake, tmp_path / "t"))
    message = str(caught.value)
    assert "its classes do not match the val map's (4 vs 1000" in message
    assert "The bundled map is ILSVRC2012's own (1,000 classes, 50,000 images)" in message
    assert "--val-map FILE" in message and "--devkit" in message

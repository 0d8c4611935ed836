"""Hostile input, one class at a time (see the README's threat model): names
that try to leave the output folder, text formats that must read back what
they wrote, ambiguous archives, values that do not fit, fix-up paths."""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, features

from im2rec.cli import main
from im2rec.imagenet.preparing import ImagenetOptions, prepare_imagenet
from im2rec.inspect.unpacking import read_class_map, unpack_rec
from im2rec.listing import ListOptions, make_lists
from im2rec.listing.lstfile import read_lst
from im2rec.recordio import IndexedRecordWriter, pack

from .imagenet_fixture import make_fake_imagenet, tar_bytes, train_files

#: Every character Python's str.splitlines cuts at; only \n and \r (and
#: \r\n) end a line of a list, a class map or a report.
SEPARATORS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def jpeg_bytes(seed: int = 0) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8 + seed, 6), (seed * 20 % 256, 40, 90)).save(out, "JPEG")
    return out.getvalue()


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.output
    return result.exit_code, result.output


# -- 1. names that try to leave the output folder -------------------------


@pytest.fixture
def small_rec(tmp_path: Path) -> Path:
    rec = tmp_path / "in" / "d.rec"
    rec.parent.mkdir()
    with IndexedRecordWriter(rec) as w:
        for key in range(4):
            w.write_key(key, pack((0, float(key % 2), key, 0), jpeg_bytes(key)))
    return rec


@pytest.mark.parametrize(
    "folder", ["../../x", "/abs/x", "a/../../x", "..", "./..", "", " lead", "a\\..\\..\\x", "C:\\x"]
)
def test_class_map_folders_cannot_leave_the_output(
    small_rec: Path, tmp_path: Path, folder: str
) -> None:
    if folder == "/abs/x":
        folder = str(tmp_path / "elsewhere" / "x")
    classes = tmp_path / "in" / "map.tsv"
    classes.write_text(f"0\t{folder}\n1\tdogs\n", encoding="utf-8")
    out = tmp_path / "out" / "images"
    code, output = cli("unpack", str(small_rec), str(out), "--classes", str(classes))
    assert code == 1 and output.startswith("Error: ") and output.count("\n") == 1, output
    assert "map.tsv:1: the name" in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]  # nothing written anywhere


def test_the_root_class_is_the_top_of_the_output(small_rec: Path, tmp_path: Path) -> None:
    """``.``: the class a recursive listing gives the images at its top (as
    im2rec.py labels them); its images go to the top of the output."""
    classes = tmp_path / "in" / "map.tsv"
    classes.write_text("0\t.\n1\tdogs\n", encoding="utf-8")
    out = tmp_path / "out" / "images"
    code, output = cli("unpack", str(small_rec), str(out), "--classes", str(classes))
    assert code == 0, output
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.jpg")) == [
        "0.jpg", "2.jpg", "dogs/1.jpg", "dogs/3.jpg"
    ]  # fmt: skip


def test_unpack_never_writes_through_a_symlink(small_rec: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "0").symlink_to(outside)  # a folder im2rec would write label 0 into
    code, output = cli("unpack", str(small_rec), str(out), "--force")
    assert code == 1 and "does not write through links" in output, output
    assert list(outside.iterdir()) == []


def test_unpack_replaces_a_hard_link_instead_of_writing_through_it(
    small_rec: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "out"
    (out / "0").mkdir(parents=True)
    os.link(victim, out / "0" / "0.jpg")
    unpack_rec(small_rec, out, force=True)
    assert victim.read_text() == "keep me"
    assert (out / "0" / "0.jpg").read_bytes() == jpeg_bytes(0)


def test_a_hostile_lists_json_cannot_delete_other_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.jpg").write_bytes(jpeg_bytes())
    keep = [tmp_path / "train.rec", tmp_path / "notes.txt", tmp_path / "other.lst"]
    for path in keep:
        path.write_text("precious")
    paths = [str(p) for p in keep] + [str(tmp_path / "train_old.lst")]
    (tmp_path / "train_old.lst").write_text("0\t0\ta/x.jpg\n")
    manifest = {"lists": [{"path": p} for p in paths], "skipped_report": str(keep[1])}
    (tmp_path / "train.lists.json").write_text(json.dumps(manifest))
    make_lists(root, tmp_path / "train", ListOptions(recursive=True))
    assert all(p.read_text() == "precious" for p in keep)
    assert not (tmp_path / "train_old.lst").exists()  # a stale list of this prefix goes


# -- 4. text formats that read back what they wrote -------------------------


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    names=st.lists(
        st.text(
            st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="/\0")
            | st.sampled_from(SEPARATORS + "\t\n\r "),
            min_size=1,
            max_size=12,
        ),
        min_size=1,
        max_size=6,
        unique=True,
    )
)
@pytest.mark.slow
def test_every_name_rec_list_writes_reads_back_the_same(
    tmp_path_factory: pytest.TempPathFactory, names: list[str]
) -> None:
    base = tmp_path_factory.mktemp("names")
    root = base / "root"
    (root / f"c{SEPARATORS}d").mkdir(parents=True)
    (root / f"c{SEPARATORS}d" / "plain.jpg").write_bytes(jpeg_bytes())
    made = [f"c{SEPARATORS}d/plain.jpg"]
    for i, name in enumerate(names):
        file = f"{name}.jpg"
        # only dots before ".jpg" make no suffix (os.path.splitext, MXNet's
        # rule): not an image, so neither listed nor skipped
        if os.path.splitext(file)[1] != ".jpg" or file == "plain.jpg" or len(file.encode()) > 200:
            continue
        try:
            (root / f"c{SEPARATORS}d" / file).write_bytes(jpeg_bytes(i))
        except OSError:
            continue
        made.append(f"c{SEPARATORS}d/{file}")
    result = make_lists(root, base / "all", ListOptions(recursive=True, shuffle=False))
    listed = [item.path for item in read_lst(base / "all.lst")]
    skipped = result.scan.skipped.get("name cannot be stored in a .lst line", [])
    assert sorted(listed + skipped) == sorted(made)  # each name listed as itself, or skipped
    assert all(not any(c in p for c in "\t\n\r") for p in listed)
    # and packing finds every listed file under the same name
    code, output = cli("pack", str(base / "all.lst"), "--pass-through", "--root", str(root))
    assert code == 0 and "failed" not in output, output


def test_a_bom_and_crlf_lst_is_read(tmp_path: Path) -> None:
    lst = tmp_path / "a.lst"
    lst.write_bytes("\ufeff0\t1.000000\ta b.jpg\r\n1\t2.000000\tc\u2028d.jpg\r\n".encode())
    items = read_lst(lst)
    assert [(i.key, i.labels, i.path) for i in items] == [
        (0, (1.0,), "a b.jpg"),
        (1, (2.0,), "c\u2028d.jpg"),
    ]


def test_class_map_keeps_separators_inside_names(tmp_path: Path) -> None:
    path = tmp_path / "m.tsv"
    path.write_bytes("\ufeff0\tcats\x1cbig\r\n1\tdogs\u2028small\n".encode())
    assert read_class_map(path) == {0: "cats\x1cbig", 1: "dogs\u2028small"}


# -- 5. ambiguous archives; 4. names a list cannot hold ----------------------


def imagenet_with(download: Path, *, outer: list[tuple[str, bytes]] | None = None,
                  val: list[tuple[str, bytes]] | None = None) -> None:  # fmt: skip
    fake = make_fake_imagenet(download)
    if outer is not None:
        (download / "ILSVRC2012_img_train.tar").write_bytes(tar_bytes(outer))
    if val is not None:
        (download / "ILSVRC2012_img_val.tar").write_bytes(tar_bytes(val))
    fake.write_pklz(download / "imagenet_val_maps.pklz")


def outer_with(wnid: str, inner: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    from .imagenet_fixture import TRAIN_ORDER

    return [(f"{w}.tar", tar_bytes(inner if w == wnid else train_files(w))) for w in TRAIN_ORDER]


def val_members(download: Path) -> list[tuple[str, bytes]]:
    with tarfile.open(download / "ILSVRC2012_img_val.tar") as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("where", "expect"),
    [
        ("outer", "member 'n01440764.tar' appears twice"),
        ("inner", "member 'n01440764_1.JPEG' appears twice"),
        ("val", r"member 'ILSVRC2012_val_\d{8}.JPEG' appears twice"),
        ("newline", r"member 'n01440764_1\\nx.JPEG' has a TAB, a newline"),
        ("tab", r"member 'ILSVRC2012_val_\d{8}.JPEG\\t' has a TAB, a newline"),
    ],
)
def test_ambiguous_or_unlistable_tars_are_refused(tmp_path: Path, where: str, expect: str) -> None:
    download = tmp_path / "dl"
    make_fake_imagenet(download)
    files = train_files("n01440764")
    if where == "outer":
        outer = outer_with("n01440764", files)
        imagenet_with(download, outer=[*outer, outer[2]])
    elif where == "inner":
        imagenet_with(download, outer=outer_with("n01440764", [*files, (files[0][0], b"other")]))
    elif where == "newline":
        imagenet_with(
            download,
            outer=outer_with("n01440764", [("n01440764_1\nx.JPEG", files[0][1]), *files[1:]]),
        )
    else:
        members = val_members(download)
        extra = (members[0][0] + ("\t" if where == "tab" else ""), members[1][1])
        imagenet_with(download, val=[*members, extra])
    target = tmp_path / "target"
    code, output = cli("imagenet", "--download-dir", str(download), "--target-dir", str(target))
    assert code == 1 and re.search(expect, output) and output.count("\n") == 1, output
    assert not target.exists()


def test_fix_odd_images_keeps_what_it_cannot_fix_and_says_so(tmp_path: Path) -> None:
    download = tmp_path / "dl"
    make_fake_imagenet(download)
    files = train_files("n02105855")  # holds the PNG named .JPEG
    png = next(d for n, d in files if n == "n02105855_2933.JPEG")
    broken = [(n, png[: len(png) // 2] if n == "n02105855_2933.JPEG" else d) for n, d in files]
    imagenet_with(download, outer=outer_with("n02105855", broken))
    target = tmp_path / "target"
    code, output = cli(
        "imagenet", "--download-dir", str(download), "--target-dir", str(target),
        "--fix-odd-images", "--with-rec",
    )  # fmt: skip
    assert code == 0, output
    assert "n02105855_2933.JPEG could not be re-encoded and was kept as it is" in output
    kept = target / "train" / "n02105855" / "n02105855_2933.JPEG"
    assert kept.read_bytes() == png[: len(png) // 2]
    report = (target / "odd_images.tsv").read_text(encoding="utf-8")
    assert "n02105855_2933.JPEG\tpng\tnot re-encoded (" in report


@pytest.mark.slow
def test_fix_odd_images_refuses_to_decode_a_bomb(tmp_path: Path) -> None:
    download = tmp_path / "dl"
    make_fake_imagenet(download)
    bomb = io.BytesIO()
    Image.new("1", (12_000, 12_000)).save(bomb, "PNG")  # 144 Mpx, a few KB
    files = [
        ("n02105855_2933.JPEG" if n == "n02105855_2933.JPEG" else n, d)
        for n, d in train_files("n02105855")
    ]
    files = [(n, bomb.getvalue() if n == "n02105855_2933.JPEG" else d) for n, d in files]
    imagenet_with(download, outer=outer_with("n02105855", files))
    prepare_imagenet(ImagenetOptions(download, tmp_path / "t", fix_odd_images=True))
    report = (tmp_path / "t" / "odd_images.tsv").read_text(encoding="utf-8")
    assert "more than the limit" in report


# -- 6. values that do not fit ---------------------------------------------


@pytest.mark.slow
def test_a_label_float32_cannot_hold_is_a_line_error(tmp_path: Path) -> None:
    lst = tmp_path / "a.lst"
    lst.write_text("0\t1.0\ta.jpg\n1\t1e40\tb.jpg\n")
    code, output = cli("pack", str(lst), "--root", str(tmp_path))
    assert code == 1 and "a.lst:2: a label does not fit float32" in output, output


# -- the inspection commands name their file ---------------------------------


def test_merge_names_both_files_of_a_repeated_key(small_rec: Path, tmp_path: Path) -> None:
    other = tmp_path / "in" / "e.rec"
    other.write_bytes(small_rec.read_bytes())
    other.with_suffix(".idx").write_bytes(small_rec.with_suffix(".idx").read_bytes())
    code, output = cli("merge", str(small_rec), str(other), "-o", str(tmp_path / "m.rec"))
    assert code == 1 and f"key 0 is in both {small_rec.with_suffix('.idx')} and" in output


@pytest.mark.parametrize("suffix", [".jpg", ".png", ".webp"])
def test_show_writes_the_format_its_name_says(small_rec: Path, tmp_path: Path, suffix: str) -> None:
    if suffix == ".webp" and not features.check("webp"):
        code, output = cli("show", str(small_rec), "-o", str(tmp_path / "s.webp"))
        assert code == 2 and "name the sheet .png or .jpg" in output, output
        return
    out = tmp_path / f"sheet{suffix}"
    code, output = cli("show", str(small_rec), "-o", str(out))
    assert code == 0, output
    with Image.open(out) as im:
        assert im.format == {".jpg": "JPEG", ".png": "PNG", ".webp": "WEBP"}[suffix]


def test_show_refuses_a_name_without_an_image_format(small_rec: Path, tmp_path: Path) -> None:
    code, output = cli("show", str(small_rec), "-o", str(tmp_path / "sheet.txt"))
    assert code == 2 and "cannot tell an image format from '.txt'" in output
    code, output = cli("show", str(small_rec), "-n", "100000", "--size", "4000")
    assert code == 2 and "a contact sheet of" in output and "more than the limit" in output

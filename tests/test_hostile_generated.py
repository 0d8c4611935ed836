"""Generated hostile input, through the real command line.

Hypothesis makes the names (every Unicode line and field separator, ``..``,
absolute paths, very long names, bytes that are not UTF-8), the class maps,
the lists and the tars; each case runs real ``rec`` commands in a sandbox
and checks, whatever happened:

* nothing was written outside the output folder (a sibling folder that the
  names aim at stays empty, and the sandbox holds only what it held);
* the exit code is 0, 1 or 2, with exactly one ``Error:`` line when not 0,
  and no traceback;
* no partial output is left behind unless the message says that ``--resume``
  continues it.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image

from im2rec.cli import main
from im2rec.recordio import IndexedRecordWriter, pack

from .imagenet_fixture import TRAIN_ORDER, make_fake_imagenet, tar_bytes, train_files

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ESCAPES = ["..", "../..", "../elsewhere/x", "/ELSEWHERE/x", "a/../../elsewhere", "./.", "..\\.."]
ODD_CHARS = "\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00 /\\."
NOT_UTF8 = os.fsdecode(b"caf\xe9")  # a Latin-1 name: a surrogate escape in Python


def names() -> st.SearchStrategy[str]:
    piece = st.text(
        st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from(ODD_CHARS),
        min_size=1,
        max_size=10,
    )
    return st.one_of(
        piece,
        st.sampled_from(ESCAPES),
        st.just("x" * 300),
        st.just(NOT_UTF8),
        st.builds(lambda a, b: f"{a}/{b}", piece, piece),
    )


def jpeg(seed: int = 0) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (6 + seed % 5, 5), (seed * 37 % 256, 10, 200)).save(out, "JPEG")
    return out.getvalue()


class Sandbox:
    """``in/`` (inputs), ``out/`` (the output folder), ``elsewhere/`` (what
    hostile names aim at, which must stay empty)."""

    def __init__(self, base: Path):
        self.base = base
        for name in ("in", "out", "elsewhere"):
            (base / name).mkdir(parents=True, exist_ok=True)

    def aim(self, name: str) -> str:
        return name.replace("ELSEWHERE", str(self.base / "elsewhere")[1:])

    def run(self, *args: str) -> int:
        result = CliRunner().invoke(main, list(args))
        out = result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{args}: {result.exception!r}\n{out}"
        )
        assert result.exit_code in (0, 1, 2), (args, result.exit_code, out)
        assert "Traceback" not in out, out
        if result.exit_code:
            assert sum(line.startswith("Error:") for line in out.splitlines()) == 1, out
        self.check(out)
        return result.exit_code

    def check(self, output: str) -> None:
        assert sorted(p.name for p in self.base.iterdir()) == ["elsewhere", "in", "out"]
        assert list((self.base / "elsewhere").iterdir()) == []
        leftovers = [
            p.name
            for p in (self.base / "out").rglob("*")
            if p.name.endswith((".tmp", ".staging")) or p.name.endswith(".partial")
        ]
        assert not leftovers or "--resume" in output, (leftovers, output)  # said how to use them


@SETTINGS
@given(folders=st.lists(names(), min_size=1, max_size=4), files=st.lists(names(), max_size=5))
@example(folders=["a\x1cb", "c\u2028d/e\x85"], files=["f\x0bg", " h\u2029"])
@pytest.mark.slow
def test_list_then_pack_any_tree(
    tmp_path_factory: pytest.TempPathFactory, folders: list[str], files: list[str]
) -> None:
    box = Sandbox(tmp_path_factory.mktemp("tree"))
    root = box.base / "in" / "root"
    root.mkdir()
    (root / "plain").mkdir()
    (root / "plain" / "ok.jpg").write_bytes(jpeg())
    for i, (folder, file) in enumerate(zip(folders, files + ["f"] * len(folders), strict=False)):
        try:
            where = (root / folder).resolve()
            if not where.is_relative_to(root):
                continue  # the tree itself stays inside in/; the names are what we test
            where.mkdir(parents=True, exist_ok=True)
            (where / f"{file}.jpg").write_bytes(jpeg(i))
        except (OSError, ValueError):
            continue  # a name this file system cannot hold
    prefix = box.base / "out" / "lists" / "all"
    code = box.run("list", str(root), "--recursive", "-o", str(prefix))
    assert code == 0  # there is always plain/ok.jpg
    assert box.run("pack", f"{prefix}.lst", "--pass-through", "--root", str(root)) == 0
    report = prefix.with_suffix(".failures.tsv")
    assert not report.exists(), report.read_text(encoding="utf-8")  # every listed name found


@SETTINGS
@given(
    lines=st.lists(
        st.tuples(
            st.one_of(st.integers(-2, 10), st.just(2**64), st.text(max_size=3)),
            st.one_of(
                st.floats(allow_nan=True), st.sampled_from(["1e40", "-1e39", "x", "", "1 2"])
            ),
            names(),
        ),
        min_size=1,
        max_size=6,
    )
)
@pytest.mark.slow
def test_pack_any_list(
    tmp_path_factory: pytest.TempPathFactory, lines: list[tuple[object, object, str]]
) -> None:
    box = Sandbox(tmp_path_factory.mktemp("lst"))
    (box.base / "in" / "img.jpg").write_bytes(jpeg())
    lst = box.base / "out" / "any.lst"
    text = "".join(f"{k}\t{v}\t{box.aim(p)}\n" for k, v, p in lines) + "99\t1\timg.jpg\n"
    try:
        lst.write_text(text, encoding="utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return
    box.run("pack", str(lst), "--root", str(box.base / "in"), "--resize", "16")


@SETTINGS
@given(
    classes=st.lists(st.tuples(st.integers(0, 3), names()), min_size=1, max_size=4),
    labels=st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0, 0.5, -1.0]), min_size=1, max_size=5),
)
def test_unpack_with_any_class_map(
    tmp_path_factory: pytest.TempPathFactory,
    classes: list[tuple[int, str]],
    labels: list[float],
) -> None:
    box = Sandbox(tmp_path_factory.mktemp("unpack"))
    rec = box.base / "in" / "d.rec"
    with IndexedRecordWriter(rec) as w:
        for key, label in enumerate(labels):
            w.write_key(key, pack((0, label, key, 0), jpeg(key)))
    class_map = box.base / "in" / "map.tsv"
    text = "".join(f"{label}\t{box.aim(name)}\n" for label, name in classes)
    class_map.write_bytes(text.encode("utf-8", "surrogateescape"))
    box.run("unpack", str(rec), str(box.base / "out" / "images"), "--classes", str(class_map))


def member(
    name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b""
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        info.linkname = "/etc/passwd"
    return info, data


def tar_of(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return out.getvalue()


KINDS = st.sampled_from(
    [tarfile.REGTYPE] * 4 + [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE, tarfile.FIFOTYPE]
)


@SETTINGS
@given(
    inner=st.lists(st.tuples(names(), KINDS), max_size=3),
    outer=st.lists(st.tuples(names(), KINDS), max_size=2),
    duplicate=st.booleans(),
    fix=st.booleans(),
)
@example(inner=[("0\x00", tarfile.REGTYPE)], outer=[], duplicate=False, fix=False)
@pytest.mark.slow
def test_imagenet_with_any_tar(
    tmp_path_factory: pytest.TempPathFactory,
    inner: list[tuple[str, bytes]],
    outer: list[tuple[str, bytes]],
    duplicate: bool,
    fix: bool,
) -> None:
    box = Sandbox(tmp_path_factory.mktemp("tars"))
    download = box.base / "in"
    fake = make_fake_imagenet(download)
    fake.write_pklz(download / "imagenet_val_maps.pklz")
    wnid = TRAIN_ORDER[0]
    odd = [member(box.aim(n), k, jpeg(i)) for i, (n, k) in enumerate(inner)]
    files = [member(n, tarfile.REGTYPE, d) for n, d in train_files(wnid)]
    if duplicate:
        files.append(files[0])
    classes = [
        member(
            f"{w}.tar",
            tarfile.REGTYPE,
            tar_of(files + odd) if w == wnid else tar_bytes(train_files(w)),
        )
        for w in TRAIN_ORDER
    ]
    extra = [member(box.aim(n), k, tar_bytes([])) for n, k in outer]
    (download / "ILSVRC2012_img_train.tar").write_bytes(tar_of(classes + extra))
    args = [
        "imagenet",
        "--download-dir",
        str(download),
        "--target-dir",
        str(box.base / "out" / "t"),
    ]
    code = box.run(*args, *(["--fix-odd-images"] if fix else []))
    if code == 0:  # the images, and any plain file of a class tar; folders are skipped
        target = box.base / "out" / "t"
        written = {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()} - {
            ".im2rec-imagenet.json",
            "odd_images.tsv",
        }
        # (a tar header's name ends at its first NUL: "0\x00" is stored as "0")
        extra = {f"train/{wnid}/{n.split(chr(0))[0]}" for n, k in inner if k == tarfile.REGTYPE}
        assert (
            not duplicate
            and set(fake.expected_tree()) <= written <= set(fake.expected_tree()) | extra
        )

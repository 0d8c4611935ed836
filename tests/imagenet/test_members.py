"""A class tar's files read in place (``im2rec.imagenet.members``): the
plain headers parsed directly give what ``tarfile`` gives, for every tar
format ``tarfile`` writes, with the rest left to ``tarfile`` from the
first header that is not plain."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from im2rec.errors import DatasetError
from im2rec.imagenet import members
from im2rec.imagenet.members import class_files

FORMATS = {"gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT, "ustar": tarfile.USTAR_FORMAT}


def tar_of(files: list[tuple[str, bytes]], fmt: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def by_tarfile(blob: bytes) -> list[tuple[str, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]  # type: ignore[union-attr]


def read(tmp_path: Path, blob: bytes, pad: int = 0) -> Iterator[tuple[str, bytes, int]]:
    """class_files of ``blob`` placed ``pad`` bytes into a file, as a class
    tar lies inside the train tar."""
    path = tmp_path / "outer.tar"
    path.write_bytes(b"\x7f" * pad + blob + b"\x7f" * 700)
    fd = os.open(path, os.O_RDONLY)
    try:
        for name, data, taken in class_files(fd, pad, len(blob), "train.tar:n1.tar"):
            yield name, bytes(data), taken
    finally:
        os.close(fd)


NAMES = st.text("abcxyz_0123456789", min_size=1, max_size=12).map(lambda s: s + ".JPEG")
LONG = st.text("abc", min_size=101, max_size=140).map(lambda s: s + ".JPEG")  # a pax/GNU header


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(NAMES | LONG, st.binary(max_size=2000)), max_size=12, unique_by=lambda f: f[0]
    ),
    st.sampled_from(sorted(FORMATS)),
    st.integers(0, 3).map(lambda k: k * 512),
)
@pytest.mark.slow
def test_files_are_tarfiles_in_every_format(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[tuple[str, bytes]],
    fmt: str,
    pad: int,
) -> None:
    if fmt == "ustar":  # (ustar cannot hold a name past 100 characters without a folder)
        files = [(n, d) for n, d in files if len(n) <= 100]
    blob = tar_of(files, FORMATS[fmt])
    got = list(read(tmp_path_factory.mktemp("t"), blob, pad))
    assert [(n, d) for n, d, _ in got] == by_tarfile(blob) == files
    assert all(taken == 512 + len(d) for _, d, taken in got)


def test_plain_tars_never_reach_tarfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A class tar of plain headers (GNU tar's, as ILSVRC2012's are) is read
    without tarfile; a long name hands the rest to it."""

    def refused(*_: object) -> Iterator[tuple[str, bytes, int]]:
        raise AssertionError("tarfile was asked")

    files = [(f"n1_{k}.JPEG", bytes([k]) * (300 + k)) for k in range(20)]
    monkeypatch.setattr(members, "_tarfile_files", refused)
    for fmt in FORMATS.values():
        assert [(n, d) for n, d, _ in read(tmp_path, tar_of(files, fmt))] == files
    long = files[:3] + [("x" * 120 + ".JPEG", b"long")] + files[3:]
    with pytest.raises(AssertionError, match="tarfile was asked"):
        list(read(tmp_path, tar_of(long, tarfile.GNU_FORMAT)))


def test_a_size_past_the_archive_is_refused_before_it_is_read(tmp_path: Path) -> None:
    blob = bytearray(tar_of([("a.JPEG", b"x" * 10), ("b.JPEG", b"y" * 10)], tarfile.GNU_FORMAT))
    info = tarfile.TarInfo("b.JPEG")
    info.size = 1 << 40  # a terabyte claimed inside a 10 kB tar: refused by its size
    blob[1024:1536] = info.tobuf(tarfile.GNU_FORMAT)
    with pytest.raises(DatasetError, match="no ILSVRC2012 file is larger than 64 MiB"):
        list(read(tmp_path, bytes(blob)))
    info.size = 60 << 20  # a size a file may have, past the tar's end
    blob[1024:1536] = info.tobuf(tarfile.GNU_FORMAT)
    with pytest.raises(DatasetError, match=r"member 'b.JPEG' of 62,914,560 bytes runs past"):
        list(read(tmp_path, bytes(blob)))


@pytest.mark.parametrize(
    ("name", "message"),
    [("../x.JPEG", "outside the target"), ("d/x.JPEG", "unexpected folder"),
     ("a.JPEG", "appears twice"), ("tab\t.JPEG", "has a TAB")],
)  # fmt: skip
def test_plain_names_are_checked_as_tarfiles_are(tmp_path: Path, name: str, message: str) -> None:
    blob = tar_of([("a.JPEG", b"1"), (name, b"2")], tarfile.GNU_FORMAT)
    with pytest.raises(DatasetError, match=message):
        list(read(tmp_path, blob))


def test_dot_entries_and_prefixes(tmp_path: Path) -> None:
    blob = tar_of([(".", b""), ("./a.JPEG", b"1"), ("././b.JPEG", b"22")], tarfile.GNU_FORMAT)
    assert [(n, d) for n, d, _ in read(tmp_path, blob)] == [("a.JPEG", b"1"), ("b.JPEG", b"22")]


def test_a_cut_or_zeroed_tar_is_damage(tmp_path: Path) -> None:
    blob = tar_of([(f"{k}.JPEG", b"z" * 700) for k in range(4)], tarfile.GNU_FORMAT)
    with pytest.raises(DatasetError, match="runs past the archive's end"):
        list(read(tmp_path, blob[:2148]))  # the second file cut
    with pytest.raises(DatasetError, match="damaged tar"):
        list(read(tmp_path, blob[:2000]))  # its header cut
    zeroed = blob[:1536] + bytes(512) + blob[2048:]  # the third header
    with pytest.raises(DatasetError, match=r"the archive ends at byte 1,536 of [\d,]+, yet data"):
        list(read(tmp_path, zeroed))

"""Archives that expand or never end (docs/security.md, "Archives"): every
size in a tar is bounded before it is read or allocated, only regular files
are opened as tars, brace patterns are bounded as a whole, and JSON nested
past the parser's depth is a bad sample, not a crash. The bombs run in
``rec`` processes limited to 1 GiB of address space (see test_resources)."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from im2rec.cli import main
from im2rec.formats.shards import MAX_EXPANSION, expand_shards

from .imagenet_fixture import make_fake_imagenet, tar_bytes
from .test_resources import one_error, rec_cmd


def jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (90, 20, 200)).save(out, "JPEG")
    return out.getvalue()


def member(name: str, data: bytes, **attrs: object) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in attrs.items():
        setattr(info, key, value)
    return info, data


def tar_of(members: list[tuple[tarfile.TarInfo, bytes]], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def good_sample(key: str = "b") -> list[tuple[tarfile.TarInfo, bytes]]:
    return [member(f"{key}.jpg", jpeg()), member(f"{key}.cls", b"3")]


def with_checksum(header: bytearray) -> bytes:
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def sparse_member(name: str, real_size: int) -> bytes:
    """An old-GNU sparse member: 512 bytes stored, ``real_size`` bytes of
    holes and data once expanded (tarfile expands it on read)."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.GNUTYPE_SPARSE
    info.size = 512
    header = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    header[386:398] = b"%011o\0" % (real_size - 512)  # one data run at the end
    header[398:410] = b"%011o\0" % 512
    header[483:495] = b"%011o\0" % real_size
    return with_checksum(header) + b"\xff" * 512


@pytest.mark.slow
def test_a_sparse_member_is_not_expanded(tmp_path: Path) -> None:
    # 500 MB of holes in 1 kB: tarfile's reader made every zero in memory
    shard = sparse_member("a.jpg", 500_000_000) + tar_of([member("a.cls", b"1"), *good_sample()])
    (tmp_path / "s.tar").write_bytes(shard)
    proc = rec_cmd("import", "webdataset", "s.tar", "-o", "out", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = (tmp_path / "out.import-skipped.tsv").read_text()
    assert "s.tar\ta\tno image: jpg: not a regular file" in report


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.slow
def test_a_pax_size_past_64_bits_is_one_error(tmp_path: Path, compress: bool) -> None:
    data = tar_of([member("a.jpg", jpeg(), pax_headers={"size": "1" + "0" * 30}), *good_sample()])
    name = "s.tar.gz" if compress else "s.tar"
    (tmp_path / name).write_bytes(gzip.compress(data) if compress else data)
    error = one_error(rec_cmd("import", "webdataset", name, "-o", "out", cwd=tmp_path))
    assert f"{name}:" in error and "claims 1,000,000,000" in error


@pytest.mark.parametrize("kind", ["pax", "longname"])
@pytest.mark.slow
def test_a_huge_extended_header_is_not_read(tmp_path: Path, kind: str) -> None:
    # 900 MB of header text, gzipped to under 1 MB: tarfile read it whole
    big = 900 << 20
    if kind == "pax":
        info, _ = member("a.jpg", b"", pax_headers={"comment": "x" * 16})
        head = bytearray(tarfile.TarInfo("././@PaxHeader").tobuf(format=tarfile.USTAR_FORMAT))
        head[156:157] = tarfile.XHDTYPE
    else:
        head = bytearray(tarfile.TarInfo("././@LongLink").tobuf(format=tarfile.USTAR_FORMAT))
        head[156:157] = tarfile.GNUTYPE_LONGNAME
    head[124:136] = b"%011o\0" % big
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as gz:
        gz.write(with_checksum(head))
        chunk = b"7" * (1 << 20)
        for _ in range(big >> 20):
            gz.write(chunk)
        gz.write(tar_of(good_sample()))
    (tmp_path / "s.tar.gz").write_bytes(raw.getvalue())
    error = one_error(rec_cmd("import", "webdataset", "s.tar.gz", "-o", "out", cwd=tmp_path))
    assert "extended header of 943,718,400 bytes" in error


@pytest.mark.slow
def test_a_compressed_member_that_inflates_a_thousandfold_is_refused(tmp_path: Path) -> None:
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as gz:
        info = tarfile.TarInfo("a.jpg")
        info.size = 500 << 20
        gz.write(info.tobuf(format=tarfile.USTAR_FORMAT))
        for _ in range(500):
            gz.write(bytes(1 << 20))
        gz.write(tar_of([member("a.cls", b"1"), *good_sample()])[0:])
    (tmp_path / "s.tar.gz").write_bytes(raw.getvalue())
    error = one_error(rec_cmd("import", "webdataset", "s.tar.gz", "-o", "out", cwd=tmp_path))
    assert "compression bomb" in error and "s.tar.gz: member a.jpg" in error


@pytest.mark.slow
def test_a_compressed_shard_of_images_still_imports(tmp_path: Path) -> None:
    data = tar_of([m for k in "abc" for m in good_sample(k)])
    (tmp_path / "s.tar.gz").write_bytes(gzip.compress(data))
    proc = rec_cmd("import", "webdataset", "s.tar.gz", "-o", "out", "--json", cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["records"] == 3, proc.stderr


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
@pytest.mark.slow
def test_only_regular_files_are_read_as_shards(tmp_path: Path, kind: str) -> None:
    shard = tmp_path / "s.tar"
    if kind == "fifo":
        os.mkfifo(shard)
    elif kind == "dev-zero":
        shard.symlink_to("/dev/zero")
    else:
        shard.mkdir()
    error = one_error(rec_cmd("import", "webdataset", "s.tar", "-o", "out", cwd=tmp_path))
    assert "s.tar:" in error and ("not a regular file" in error or "is a folder" in error)


@pytest.mark.parametrize(
    "pattern",
    [
        "x{0..999999}{0..999999}.tar",  # each range alone is allowed: they multiply
        "x" + "{a,b}" * 40 + ".tar",
        "x{0..99999999999999999999999}.tar",
    ],
)
@pytest.mark.slow
def test_brace_patterns_are_bounded_as_a_whole(tmp_path: Path, pattern: str) -> None:
    proc = rec_cmd("import", "webdataset", pattern, "-o", "out", cwd=tmp_path)
    error = one_error(proc, code=2)
    assert "over 1,000,000" in error or "digits" in error


def test_brace_patterns_in_several_arguments_add_up(tmp_path: Path) -> None:
    half = f"x{{0..{MAX_EXPANSION // 2}}}.tar"
    with pytest.raises(Exception, match="over 1,000,000"):
        expand_shards([half, half], exists=lambda _: True)
    assert len(expand_shards(["x{0..9}{a,b}.tar"], exists=lambda _: True)) == 20


def test_json_nested_past_the_parser_is_a_bad_sample(tmp_path: Path) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    shard = tar_of([member("a.jpg", jpeg()), member("a.json", deep), *good_sample()])
    (tmp_path / "s.tar").write_bytes(shard)
    result = CliRunner().invoke(
        main, ["import", "webdataset", str(tmp_path / "s.tar"), "-o", str(tmp_path / "o")]
    )
    assert result.exit_code == 0, result.output
    assert "\ta\tbad json: nested too deeply" in (tmp_path / "o.import-skipped.tsv").read_text()


def test_a_deeply_nested_sidecar_is_ignored(tmp_path: Path) -> None:
    from im2rec.storage.files import read_json

    (tmp_path / "x.pack.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        read_json(tmp_path / "x.pack.json")


# -- rec imagenet ------------------------------------------------------------


@pytest.fixture
def download(tmp_path: Path) -> Path:
    fake = make_fake_imagenet(tmp_path / "dl")
    fake.write_pklz(fake.download / "imagenet_val_maps.pklz")
    return fake.download


@pytest.mark.slow
def test_imagenet_refuses_a_pax_size_past_64_bits(download: Path, tmp_path: Path) -> None:
    val = tar_of([member("ILSVRC2012_val_00000001.JPEG", jpeg(),
                         pax_headers={"size": "9" * 40})])  # fmt: skip
    (download / "ILSVRC2012_img_val.tar").write_bytes(val)
    proc = rec_cmd("imagenet", "--download-dir", str(download), "--target-dir",
                   str(tmp_path / "t"))  # fmt: skip
    assert "claims 9,999,999" in one_error(proc)


@pytest.mark.slow
def test_imagenet_refuses_a_sparse_member(download: Path, tmp_path: Path) -> None:
    sparse = sparse_member("ILSVRC2012_val_00000001.JPEG", 60 << 20) + bytes(1024)
    (download / "ILSVRC2012_img_val.tar").write_bytes(sparse)
    proc = rec_cmd("imagenet", "--download-dir", str(download), "--target-dir",
                   str(tmp_path / "t"))  # fmt: skip
    assert "is a sparse file" in one_error(proc)


@pytest.mark.slow
def test_imagenet_refuses_a_tar_that_is_a_fifo(download: Path, tmp_path: Path) -> None:
    (download / "ILSVRC2012_img_train.tar").unlink()
    os.mkfifo(download / "ILSVRC2012_img_train.tar")
    proc = rec_cmd("imagenet", "--download-dir", str(download), "--target-dir",
                   str(tmp_path / "t"))  # fmt: skip
    assert "not a regular file" in one_error(proc)


@pytest.mark.slow
def test_imagenet_refuses_a_huge_pax_header_in_a_class_tar(download: Path, tmp_path: Path) -> None:
    inner = bytearray(tarfile.TarInfo("././@PaxHeader").tobuf(format=tarfile.USTAR_FORMAT))
    inner[156:157] = tarfile.XHDTYPE
    inner[124:136] = b"%011o\0" % (40 << 20)
    inner_tar = with_checksum(inner) + b"9" * (40 << 20) + bytes(1024)
    outer = tar_bytes([("n01440764.tar", inner_tar)])
    (download / "ILSVRC2012_img_train.tar").write_bytes(outer)
    proc = rec_cmd("imagenet", "--download-dir", str(download), "--target-dir",
                   str(tmp_path / "t"))  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("size", [b"-0000000012", b"-0000077777"])
@pytest.mark.slow
def test_imagenet_refuses_a_signed_tar_size(download: Path, tmp_path: Path, size: bytes) -> None:
    """A negative size (which ``int()`` reads from a sign) is damage, never
    a length to read by: it had extracted 502 bytes of the next header as
    an image, or said to free space."""
    train = download / "ILSVRC2012_img_train.tar"
    with tarfile.open(train) as tar:
        classes = [(m.name, tar.extractfile(m).read()) for m in tar]  # type: ignore[union-attr]
    inner = bytearray(classes[0][1])
    inner[124:135] = size
    inner[:512] = with_checksum(inner[:512])
    classes[0] = (classes[0][0], bytes(inner))
    train.write_bytes(tar_bytes(classes))
    proc = rec_cmd("imagenet", "--download-dir", str(download), "--target-dir",
                   str(tmp_path / "t"))  # fmt: skip
    error = one_error(proc)
    assert f"{classes[0][0]}: " in error and "damaged" in error, error


@pytest.mark.parametrize("option", ["--val-map", "--devkit"])
@pytest.mark.slow
def test_imagenet_refuses_a_val_map_or_devkit_that_is_a_fifo(
    download: Path, tmp_path: Path, option: str
) -> None:
    fifo = tmp_path / "map.fifo"
    os.mkfifo(fifo)
    proc = rec_cmd("imagenet", "--download-dir", str(download), "--target-dir",
                   str(tmp_path / "t"), option, str(fifo))  # fmt: skip
    assert "not a regular file" in one_error(proc)

"""Sizes that a file (or an option) controls are bounded before anything is
allocated. Each case runs real ``rec`` commands in a subprocess limited to
1 GiB of address space (``RLIMIT_AS``): a regression that allocates what a
hostile file asks for fails its test with a MemoryError or a signal, instead
of taking the machine down."""

from __future__ import annotations

import gzip
import io
import os
import resource
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import pytest
from PIL import Image

from im2rec.recordio import IndexedRecordWriter, pack

from .imagenet_fixture import make_fake_imagenet

LIMIT = 1 << 30


def rec_cmd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``rec ARGS`` in a process that cannot map more than LIMIT bytes."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MALLOC_ARENA_MAX="2")
    return subprocess.run(
        [sys.executable, "-m", "im2rec", *args],
        preexec_fn=limit,  # noqa: PLW1509 - no threads in the parent at this point
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def one_error(proc: subprocess.CompletedProcess[str], code: int = 1) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def png(size: tuple[int, int], mode: str = "L") -> bytes:
    out = io.BytesIO()
    Image.new(mode, size).save(out, "PNG")
    return out.getvalue()


@pytest.mark.slow
def test_resize_of_an_extreme_aspect_ratio_is_refused_per_image(tmp_path: Path) -> None:
    # 1 x 65,500 pixels, 200 bytes on disk: a 128-pixel short side asks for
    # 128 x 8,384,000 pixels (3 GB as RGB)
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "needle.png").write_bytes(png((1, 65_500)))
    (tmp_path / "img" / "bomb.png").write_bytes(png((12_000, 12_000), "1"))  # 144 Mpx
    Image.new("RGB", (40, 30)).save(tmp_path / "img" / "ok.jpg")
    (tmp_path / "a.lst").write_text("0\t0\tneedle.png\n1\t0\tbomb.png\n2\t0\tok.jpg\n")
    proc = rec_cmd("pack", "a.lst", "--root", "img", "--resize", "128", cwd=tmp_path)
    assert "MemoryError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    report = (tmp_path / "a.failures.tsv").read_text(encoding="utf-8")
    assert "needle.png\toutput-too-large\tthe resized image of 128x8,384,000 pixels" in report
    assert "bomb.png\tdecompression-bomb\t" in report
    assert (tmp_path / "a.rec").stat().st_size > 0  # the good image is packed


@pytest.fixture(scope="module")
def bomb_rec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rec = tmp_path_factory.mktemp("bomb") / "b.rec"
    with IndexedRecordWriter(rec) as w:
        w.write_key(0, pack((0, 0.0, 0, 0), png((12_000, 12_000), "1")))
        w.write_key(1, pack((0, 1.0, 1, 0), png((8, 8), "RGB")))
    return rec


@pytest.mark.slow
def test_inspection_commands_do_not_decode_a_bomb(bomb_rec: Path, tmp_path: Path) -> None:
    proc = rec_cmd("verify", str(bomb_rec), "--decode")
    assert proc.returncode == 1 and "more than the limit" in proc.stdout, proc.stdout + proc.stderr
    proc = rec_cmd("info", str(bomb_rec), "--json")
    assert proc.returncode == 0 and '"over the pixel limit": 1' in proc.stdout, proc.stderr
    proc = rec_cmd("show", str(bomb_rec), "-o", str(tmp_path / "s.png"))
    assert proc.returncode == 0 and (tmp_path / "s.png").exists(), proc.stderr
    proc = rec_cmd(
        "show", str(bomb_rec), "--size", "30000", "-n", "1", "-o", str(tmp_path / "t.png")
    )
    assert "a contact sheet of 30,000x30,014 pixels" in one_error(proc, 2)


@pytest.mark.slow
def test_readers_refuse_a_bomb_record(bomb_rec: Path) -> None:
    code = (
        "import sys\n"
        "from im2rec import RecordDataset, ImageRecordIter\n"
        "from im2rec.errors import ImageTooLargeError, ConfigError\n"
        f"ds = RecordDataset({str(bomb_rec)!r})\n"
        "try:\n    ds[0]\nexcept ImageTooLargeError as e:\n    print('dataset:', e)\n"
        f"it = ImageRecordIter(path_imgrec={str(bomb_rec)!r}, data_shape=(3, 32, 32), batch_size=2,"
        " preprocess_threads=1)\n"
        "try:\n    it.next()\nexcept ImageTooLargeError as e:\n    print('iterator:', e)\n"
        "try:\n"
        f"    ImageRecordIter(path_imgrec={str(bomb_rec)!r}, data_shape=(3, 100000, 100000),"
        " batch_size=2)\n"
        "except ConfigError as e:\n    print('config:', e)\n"
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    proc = subprocess.run(
        [sys.executable, "-c", code], preexec_fn=limit, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, OPENBLAS_NUM_THREADS="1", MALLOC_ARENA_MAX="2"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["dataset", "iterator", "config"], proc.stdout
    assert "more than the limit" in lines[0] and "more than the limit" in lines[1]


def zeros_gzip(size: int) -> bytes:
    """``size`` zero bytes, gzipped (about size / 1000 bytes)."""
    deflate = zlib.compressobj(1, zlib.DEFLATED, 31)
    block = bytes(1 << 24)
    parts = [deflate.compress(block) for _ in range(size >> 24)]
    return b"".join([*parts, deflate.flush()])


@pytest.fixture(scope="module")
def download(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("imagenet")
    make_fake_imagenet(path)
    return path


@pytest.mark.slow
def test_a_val_map_that_inflates_to_gigabytes(download: Path, tmp_path: Path) -> None:
    bomb = tmp_path / "val.pklz"
    bomb.write_bytes(zeros_gzip(3 << 30))  # 3 GB of zeros in about 3 MB
    proc = rec_cmd("imagenet", "--download-dir", str(download), "--val-map", str(bomb),
                   "--target-dir", str(tmp_path / "t"))  # fmt: skip
    assert "inflates to more than 16 MiB" in one_error(proc)


@pytest.mark.slow
def test_a_pickle_that_builds_millions_of_objects(download: Path, tmp_path: Path) -> None:
    # MARK, 15 million EMPTY_LISTs, LIST: 15 MB that would build ~1 GB of lists
    bomb = tmp_path / "val.pklz"
    bomb.write_bytes(gzip.compress(b"(" + b"]" * 15_000_000 + b"l."))
    proc = rec_cmd("imagenet", "--download-dir", str(download), "--val-map", str(bomb),
                   "--target-dir", str(tmp_path / "t"))  # fmt: skip
    assert "more than 1,000,000 operations" in one_error(proc)


@pytest.mark.slow
def test_a_devkit_with_a_huge_or_endless_member_list(download: Path, tmp_path: Path) -> None:
    devkit = tmp_path / "devkit.tar.gz"
    info = tarfile.TarInfo("ILSVRC2012_devkit_t12/data/meta.mat")
    info.size = 3 << 30  # claims 3 GB; no data follows: the header alone must be refused
    devkit.write_bytes(gzip.compress(info.tobuf(tarfile.GNU_FORMAT)))
    proc = rec_cmd("imagenet", "--download-dir", str(download), "--devkit", str(devkit),
                   "--target-dir", str(tmp_path / "t"))  # fmt: skip
    assert "meta.mat is 3,221,225,472 bytes; this is not the devkit" in one_error(proc)
    many = tmp_path / "many.tar.gz"
    with tarfile.open(many, "w:gz") as tar:
        for i in range(10_001):
            tar.addfile(tarfile.TarInfo(f"f{i}"))
    proc = rec_cmd("imagenet", "--download-dir", str(download), "--devkit", str(many),
                   "--target-dir", str(tmp_path / "t"))  # fmt: skip
    assert "more than 10,000 files; not the devkit" in one_error(proc)


def limited_python(code: str) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    return subprocess.run(
        [sys.executable, "-c", code], preexec_fn=limit, capture_output=True, text=True,
        timeout=300, env=dict(os.environ, OPENBLAS_NUM_THREADS="1", MALLOC_ARENA_MAX="2"),
    )  # fmt: skip


@pytest.mark.slow
def test_a_mat_file_whose_dimensions_claim_billions_of_elements(tmp_path: Path) -> None:
    import struct

    def element(kind: int, data: bytes) -> bytes:
        return struct.pack("<II", kind, len(data)) + data + bytes(-len(data) % 8)

    flags = element(6, struct.pack("<II", 2, 0))  # miUINT32: class 2, a struct array
    dims = element(5, struct.pack("<ii", 2**31 - 1, 1))  # 2,147,483,647 x 1
    matrix = (
        flags + dims + element(1, b"synsets") + element(5, struct.pack("<i", 32)) + element(1, b"")
    )
    mat = tmp_path / "meta.mat"
    mat.write_bytes(b"MATLAB 5.0".ljust(124) + b"\x00\x01IM" + element(14, matrix))
    proc = limited_python(
        "from im2rec.imagenet.matfile import read_mat\n"
        "from im2rec.errors import DatasetError\n"
        f"try:\n    read_mat(open({str(mat)!r}, 'rb').read(), 'meta.mat')\n"
        "except DatasetError as e:\n    print(e)\n"
    )
    assert proc.returncode == 0 and "claims 2,147,483,647 elements" in proc.stdout, proc.stderr


@pytest.mark.slow
def test_a_text_val_map_of_millions_of_lines(download: Path, tmp_path: Path) -> None:
    lines = tmp_path / "val.txt"
    lines.write_bytes(b"x\n" * (8 << 20))  # 16 MiB: 8 million one-word lines
    proc = rec_cmd("imagenet", "--download-dir", str(download), "--val-map", str(lines),
                   "--target-dir", str(tmp_path / "t"))  # fmt: skip
    assert "more than 200,000 lines" in one_error(proc)


def test_a_huge_sidecar_json_is_not_parsed(tmp_path: Path) -> None:
    from im2rec.listing.finding import find_root
    from im2rec.storage.files import MAX_JSON

    (tmp_path / "a").mkdir()
    lst = tmp_path / "a.lst"
    lst.write_text("0\t0\tx.jpg\n")
    with open(tmp_path / "a.lists.json", "wb") as f:  # sparse: no disk used
        f.truncate(MAX_JSON + 1)
    assert find_root(lst) == tmp_path / "a"  # the sidecar is ignored, the folder found

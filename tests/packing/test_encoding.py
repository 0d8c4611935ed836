"""One image to one record: every odd image packed or reported, EXIF
orientation applied before resizing, colour modes, im2rec.py's geometry,
draft decoding for large shrinks, and a file too large for a record refused
before it is read."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from im2rec.imaging.codec import im2rec_geometry
from im2rec.packing import PackOptions, pack_list

from ..conftest import photo, write_lst
from .test_run import records


def test_every_odd_image_is_packed_or_reported(odd: tuple[Path, dict[str, str]]) -> None:
    lst, cases = odd
    result = pack_list(lst, PackOptions(resize=32), root=lst.parent / "imgs")
    expected_failures = {n: r for n, r in cases.items() if r != "ok"}
    assert result.records == len(cases) - len(expected_failures)
    assert dict(result.failures) == Counter(expected_failures.values())
    assert Counter(expected_failures.values())["undecodable"] >= 2
    assert result.failure_report is not None
    rows = [line.split("\t") for line in result.failure_report.read_text().splitlines()]
    assert rows[0] == ["line", "index", "path", "reason", "detail"]
    assert {r[2]: r[3] for r in rows[1:]} == expected_failures
    for _header, payload in records(result.rec):
        img = Image.open(io.BytesIO(payload))
        assert img.format == "JPEG" and img.mode == "RGB" and min(img.size) == 32


def test_exif_orientation_is_applied_before_resizing(odd: tuple[Path, dict[str, str]]) -> None:
    lst, cases = odd
    result = pack_list(lst, PackOptions(resize=24), root=lst.parent / "imgs")
    index = list(cases).index("rotated.jpg")
    payload = dict((h.id, p) for h, p in records(result.rec))[index]  # type: ignore[attr-defined]
    assert Image.open(io.BytesIO(payload)).size == (24, 32)  # 64x48 shown rotated: 48x64


@pytest.mark.slow
def test_color_modes(odd: tuple[Path, dict[str, str]]) -> None:
    lst, cases = odd
    gray = pack_list(lst, PackOptions(color=0), root=lst.parent / "imgs")
    assert {Image.open(io.BytesIO(p)).mode for _, p in records(gray.rec)} == {"L"}
    keep = pack_list(lst, PackOptions(color=-1, encoding=".png"), root=lst.parent / "imgs")
    payloads = {h.id: p for h, p in records(keep.rec)}  # type: ignore[attr-defined]
    modes = {key: Image.open(io.BytesIO(p)).mode for key, p in payloads.items()}
    assert modes[list(cases).index("alpha.png")] == "RGBA"
    # 16 bits kept: the PNG header says so (Pillow before 10.2 opens it as "I")
    ihdr = payloads[list(cases).index("sixteen.png")][16:26]
    assert (ihdr[8], ihdr[9]) == (16, 0)  # bit depth 16, colour type 0 (gray)
    assert modes[list(cases).index("gray.jpg")] == "L"


@pytest.mark.parametrize(
    ("size", "resize", "crop", "expected"),
    [((40, 60), 16, False, (16, 24)), ((31, 17), 16, False, (29, 16)), ((10, 10), 16, False, (16, 16)),
     ((90, 30), 0, True, (30, 30)), ((30, 90), 20, True, (20, 20)), ((64, 48), 0, False, (64, 48))],
)  # fmt: skip
def test_geometry_matches_im2rec(
    tmp_path: Path, size: tuple[int, int], resize: int, crop: bool, expected: tuple[int, int]
) -> None:
    assert im2rec_geometry(*size, resize, crop)[1] == expected
    photo(*size).save(tmp_path / "x.jpg")
    lst = write_lst(tmp_path / "g.lst", ["x.jpg"])
    result = pack_list(lst, PackOptions(resize=resize, center_crop=crop), root=tmp_path)
    assert Image.open(io.BytesIO(records(result.rec)[0][1])).size == expected


def test_large_shrink_uses_draft_and_keeps_geometry(tmp_path: Path) -> None:
    photo(800, 600).save(tmp_path / "big.jpg", quality=90)
    lst = write_lst(tmp_path / "b.lst", ["big.jpg"])
    result = pack_list(lst, PackOptions(resize=100, center_crop=True), root=tmp_path)
    out = Image.open(io.BytesIO(records(result.rec)[0][1]))
    assert out.size == (100, 100)
    reference = (
        photo(800, 600).crop((100, 0, 700, 600)).resize((100, 100), Image.Resampling.BILINEAR)
    )
    diff = np.abs(np.asarray(out, np.int16) - np.asarray(reference, np.int16))
    assert diff.mean() < 4  # DCT-domain scaling is visually the same


def test_a_file_too_large_for_a_record_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """2**29 bytes cannot be framed; the file is refused from its size (a
    sparse file here: reading it would take 512 MB), the rest is packed."""
    root = tmp_path / "r"
    root.mkdir()
    with open(root / "huge.jpg", "wb") as f:
        f.truncate(1 << 29)
    (root / "ok.jpg").write_bytes(b"small")
    lst = write_lst(tmp_path / "h.lst", ["huge.jpg", "ok.jpg"])
    result = pack_list(lst, PackOptions(pass_through=True), root=root)
    assert result.records == 1 and dict(result.failures) == {"record-too-large": 1}
    report = (tmp_path / "h.failures.tsv").read_text().splitlines()
    assert (
        report[1] == "1\t0\thuge.jpg\trecord-too-large\t536,870,912 bytes; RecordIO stores < 2**29"
    )

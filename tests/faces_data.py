"""Face datasets for the tests of InsightFace's layout: identity folders of
noise photos, a real `rec` process, and the layout's invariants checked
record by record."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from im2rec.packing import PackOptions
from im2rec.recordio import IndexedRecordReader, unpack

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

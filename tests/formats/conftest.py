"""What the tests of formats share: images, hostile tars, an export and
import round trip, and a .rec of every kind of record."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from im2rec.formats.webdataset import export_webdataset, import_webdataset
from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.recordio.framing import MAGIC_BYTES


def image(kind: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(out, kind)
    return out.getvalue()


def export_and_import(rec: Path, out: Path, **kw: int) -> Path:
    result = export_webdataset(rec, str(out / "wds-%04d.tar"), **kw)
    assert result.shards
    back = out / "back"
    import_webdataset(result.shards, back)
    return back


def hostile(path: Path, members: list[tuple[str, bytes, bytes]]) -> Path:
    """A tar of ``(name, type, data)`` members."""
    with tarfile.open(path, "w") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.type, info.size = kind, len(data) if kind == tarfile.REGTYPE else 0
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return path


def image_sized(rng: np.random.Generator, size: int, magic_at: int | None) -> bytes:
    body = bytearray(b"\xff\xd8\xff\xe0" + rng.bytes(size - 4))
    body[:] = body.replace(MAGIC_BYTES, b"____")
    if magic_at is not None:
        body[magic_at : magic_at + 4] = MAGIC_BYTES
    return bytes(body)


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """Every kind of record a .rec holds: JPEG and PNG, whole and fractional
    labels, several labels, no payload, a payload that is no image and holds
    the magic word (a split record), ids that repeat and go back."""
    path = tmp_path / "mixed.rec"
    with IndexedRecordWriter(path) as w:
        for i in range(12):
            w.write_key(i, pack((0, float(i % 3), i, 0), image("JPEG", i)))
        w.write_key(12, pack((0, 0.5, 12, 7), image("PNG", 12)))
        w.write_key(13, pack((0, [1.0, 2.5, -1.0], 13, 0), image("JPEG", 13)))
        w.write_key(14, pack((0, [3.0, 4.0], 0, 0), b""))  # id 0 again, no image
        w.write_key(15, pack((0, 2.0, 15, 0), b"abcd" + MAGIC_BYTES + b"xyz" * 5))
        w.write_key(16, pack((0, 1.0, 15, 0), image("JPEG", 16)))  # the same id twice
    return path

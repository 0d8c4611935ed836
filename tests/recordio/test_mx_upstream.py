"""MXNet's own recordio unit tests (docs/format.md, "MXNet's own tests"), ported to im2rec.recordio with
only the import changed, plus the golden sizes and hashes the spec records."""

from __future__ import annotations

import hashlib
import random
import string
from pathlib import Path

import numpy as np
import pytest

from im2rec import recordio

N = 255


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_recordio(tmp_path: Path) -> None:
    frec = tmp_path / "rec"
    writer = recordio.MXRecordIO(str(frec), "w")
    for i in range(N):
        writer.write(bytes(str(chr(i)), "utf-8"))
    del writer

    reader = recordio.MXRecordIO(str(frec), "r")
    for i in range(N):
        res = reader.read()
        assert res == bytes(str(chr(i)), "utf-8")
    assert frec.stat().st_size == 3060
    assert sha256(frec) == "7edce720c68b64945d2addf56342b92d28e3b410992b33ef06f259c7711e0402"


def test_indexed_recordio(tmp_path: Path) -> None:
    fidx, frec = tmp_path / "idx", tmp_path / "rec"
    writer = recordio.MXIndexedRecordIO(str(fidx), str(frec), "w")
    for i in range(N):
        writer.write_idx(i, bytes(str(chr(i)), "utf-8"))
    del writer

    reader = recordio.MXIndexedRecordIO(str(fidx), str(frec), "r")
    keys = reader.keys
    assert sorted(keys) == list(range(N))
    random.shuffle(keys)
    for i in keys:
        res = reader.read_idx(i)
        assert res == bytes(str(chr(i)), "utf-8")
    assert fidx.read_text() == "".join(f"{i}\t{12 * i}\n" for i in range(N))
    assert fidx.stat().st_size == 2091
    assert sha256(fidx) == "7867b403cae8de38459e9e19f565dc0b9f4f9914cafa0464b0c190939607c877"
    assert sha256(frec) == "7edce720c68b64945d2addf56342b92d28e3b410992b33ef06f259c7711e0402"


@pytest.mark.slow
def test_recordio_pack_label() -> None:
    rng = random.Random(0)
    for i in range(1, 255):
        for j in range(0, 255, 7):  # upstream walks every j; a stride keeps it quick
            content = "".join(rng.choice(string.ascii_letters) for _ in range(j)).encode()
            label = np.random.default_rng(i * 1000 + j).random(i).astype(np.float32)
            header = (0, label, 0, 0)
            s = recordio.pack(header, content)
            rheader, rcontent = recordio.unpack(s)
            assert (label == rheader.label).all()
            assert content == rcontent


def test_dmlc_sample_rec(golden: Path) -> None:
    """dmlc-core test/unittest/sample.rec facts (checklist 38)."""
    path = golden / "sample.rec"
    assert path.stat().st_size == 532
    assert sha256(path) == "298b836b39227aad13f63fe8293c773c830bb4fcf132995310e1886474050e08"
    reader = recordio.MXRecordIO(str(path), "r")
    for i in range(1, 11):
        header, payload = recordio.unpack(reader.read())
        assert header == recordio.IRHeader(0, float(i % 2), i, 0)
        assert payload == (f"{i}\n" * 10).encode()
    assert reader.read() is None


def test_dmlc_sample_rec_rebuilt_byte_identical(tmp_path: Path, golden: Path) -> None:
    out = tmp_path / "sample.rec"
    writer = recordio.MXRecordIO(out, "w")
    for i in range(1, 11):
        writer.write(recordio.pack(recordio.IRHeader(0, i % 2, i, 0), (f"{i}\n" * 10).encode()))
    writer.close()
    assert out.read_bytes() == (golden / "sample.rec").read_bytes()

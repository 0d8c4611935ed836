"""Live cross-checks against real MXNet 1.9.1 (``make compat``).

Each test runs MXNet in its own interpreter (numpy<1.24, Python 3.11) on files
we wrote, or has MXNet write files that we read, and compares both ways.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import numpy as np
import pytest

from im2rec import recordio
from im2rec.recordio.framing import MAGIC_BYTES

from ..conftest import MXNet

pytestmark = pytest.mark.compat


def random_payloads(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = [rng.randbytes(rng.randint(0, 9)) for _ in range(rng.randint(0, 5))]
        if rng.random() < 0.5:  # magic words at aligned and unaligned offsets
            parts.insert(rng.randint(0, len(parts)), MAGIC_BYTES)
        out.append(b"".join(parts))
    out += [b"", MAGIC_BYTES, MAGIC_BYTES * 3, b"abcd" + MAGIC_BYTES, rng.randbytes(70_000)]
    # From 64 KiB records are scanned for magic words another way (numpy):
    # split records that large, and an unaligned word that must not split.
    out += [
        _with_magic(bytes(70_000), [0, 65_536, 69_996]),
        _with_magic(rng.randbytes(100_003), [65_537]),
        _with_magic(rng.randbytes(200_000), sorted(rng.sample(range(0, 199_996, 4), 50))),
        _with_magic(rng.randbytes(65_536), [65_532]),
    ]
    return out


def _with_magic(data: bytes, offsets: list[int]) -> bytes:
    out = bytearray(data)
    for at in offsets:
        out[at : at + 4] = MAGIC_BYTES
    return bytes(out)


def test_mxnet_reads_what_we_wrote(tmp_path: Path, mxnet: MXNet) -> None:
    payloads = random_payloads(1, 300)
    keys = list(range(len(payloads)))
    random.Random(2).shuffle(keys)
    with recordio.IndexedRecordWriter(tmp_path / "ours.rec") as w:
        for key, data in zip(keys, payloads, strict=True):
            w.write_key(key, data)
    result = mxnet.run(
        """
        import hashlib
        r = mx.recordio.MXIndexedRecordIO(idx, rec, 'r')
        by_key = {k: hashlib.sha256(r.read_idx(k)).hexdigest() for k in r.keys}
        r.reset()
        seq = []
        while True:
            s = r.read()
            if s is None:
                break
            seq.append(hashlib.sha256(s).hexdigest())
        result = {"keys": r.keys, "by_key": by_key, "seq": seq}
        """,
        idx=str(tmp_path / "ours.idx"),
        rec=str(tmp_path / "ours.rec"),
    )
    digests = [hashlib.sha256(p).hexdigest() for p in payloads]
    assert result["keys"] == keys and result["seq"] == digests
    assert {int(k): v for k, v in result["by_key"].items()} == dict(zip(keys, digests, strict=True))


def test_we_read_what_mxnet_wrote_and_write_the_same_bytes(tmp_path: Path, mxnet: MXNet) -> None:
    payloads = random_payloads(3, 300)
    mxnet.run(
        """
        w = mx.recordio.MXIndexedRecordIO(idx, rec, 'w')
        for i, h in enumerate(payloads):
            w.write_idx(i * 3, bytes.fromhex(h))
        w.close()
        result = None
        """,
        payloads=[p.hex() for p in payloads],
        idx=str(tmp_path / "mx.idx"),
        rec=str(tmp_path / "mx.rec"),
    )
    reader = recordio.MXIndexedRecordIO(str(tmp_path / "mx.idx"), str(tmp_path / "mx.rec"), "r")
    assert [reader.read_idx(i * 3) for i in range(len(payloads))] == payloads
    w = recordio.MXIndexedRecordIO(str(tmp_path / "we.idx"), str(tmp_path / "we.rec"), "w")
    for i, data in enumerate(payloads):
        w.write_idx(i * 3, data)
    w.close()
    for ext in (".rec", ".idx"):
        assert (tmp_path / f"we{ext}").read_bytes() == (tmp_path / f"mx{ext}").read_bytes()


def test_headers_and_labels_both_ways(tmp_path: Path, mxnet: MXNet) -> None:
    rng = np.random.default_rng(5)
    cases = [(float(rng.random()), int(rng.integers(0, 2**63)), 0) for _ in range(20)]
    cases += [(rng.random(k).astype(np.float32).tolist(), k, 7) for k in (1, 2, 5, 40)]
    w = recordio.MXIndexedRecordIO(str(tmp_path / "h.idx"), str(tmp_path / "h.rec"), "w")
    for n, (label, id_, id2) in enumerate(cases):
        w.write_idx(n, recordio.pack((0, label, id_, id2), f"p{n}".encode()))
    w.close()
    result = mxnet.run(
        """
        r = mx.recordio.MXIndexedRecordIO(idx, rec, 'r')
        out = []
        for k in r.keys:
            h, s = mx.recordio.unpack(r.read_idx(k))
            label = h.label.tolist() if h.flag else h.label
            out.append([h.flag, label, h.id, h.id2, s.decode()])
        mine = [mx.recordio.pack(mx.recordio.IRHeader(0, c[0], c[1], c[2]), b'x').hex() for c in cases]
        result = {"read": out, "packed": mine}
        """,
        idx=str(tmp_path / "h.idx"),
        rec=str(tmp_path / "h.rec"),
        cases=cases,
    )
    for n, ((label, id_, id2), (flag, got, rid, rid2, payload)) in enumerate(
        zip(cases, result["read"], strict=True)
    ):
        assert (rid, rid2, payload) == (id_, id2, f"p{n}")
        if isinstance(label, list):
            assert flag == len(label) and got == pytest.approx(label, rel=1e-7)
        else:
            assert flag == 0 and got == float(np.float32(label))
    for (label, id_, id2), theirs in zip(cases, result["packed"], strict=True):
        assert recordio.pack(recordio.IRHeader(0, label, id_, id2), b"x").hex() == theirs


def test_pack_img_matches_opencv_live(tmp_path: Path, mxnet: MXNet) -> None:
    rng = np.random.default_rng(11)
    images = {
        "photo": np.clip(rng.normal(128, 40, (37, 53, 3)), 0, 255).astype(np.uint8),
        "gray": rng.integers(0, 256, (31, 17), dtype=np.uint8),
        "wide": rng.integers(0, 256, (8, 300, 3), dtype=np.uint8),
    }
    np.savez(tmp_path / "src.npz", **images)
    params = [
        (name, fmt, q) for name in images for fmt in (".jpg", ".png") for q in (1, 75, 95, 100)
    ]
    result = mxnet.run(
        """
        src = np.load(path)
        out = {}
        for name, fmt, q in params:
            s = mx.recordio.pack_img(mx.recordio.IRHeader(0, 1.0, 2, 0), src[name], quality=q, img_fmt=fmt)
            out[f"{name}{fmt}{q}"] = s.hex()
        result = out
        """,
        path=str(tmp_path / "src.npz"),
        params=params,
    )
    ours = {
        f"{name}{fmt}{q}": recordio.pack_img(
            recordio.IRHeader(0, 1.0, 2, 0), images[name], quality=q, img_fmt=fmt
        )
        for name, fmt, q in params
    }
    for name, fmt, q in params:
        if fmt == ".jpg":
            assert ours[f"{name}{fmt}{q}"].hex() == result[f"{name}{fmt}{q}"], (name, q)
    # PNG bytes differ (zlib settings); the pixels must not: both files are
    # decoded by OpenCV, and ours by our decoder too.
    pngs = [f"{name}.png{q}" for name, fmt, q in params if fmt == ".png"]
    decoded = mxnet.run(
        """
        import cv2
        result = {}
        for key in keys:
            for side, s in (("ours", bytes.fromhex(ours[key])), ("theirs", bytes.fromhex(theirs[key]))):
                payload = np.frombuffer(mx.recordio.unpack(s)[1], np.uint8)
                for flag in (-1, 0, 1):
                    img = cv2.imdecode(payload, flag)
                    result[f"{key} {side} {flag}"] = [list(img.shape), img.tobytes().hex()]
        """,
        keys=pngs,
        ours={k: ours[k].hex() for k in pngs},
        theirs={k: result[k] for k in pngs},
    )
    for key in pngs:
        for flag in (-1, 0, 1):
            assert decoded[f"{key} ours {flag}"] == decoded[f"{key} theirs {flag}"], (key, flag)
            shape, raw = decoded[f"{key} ours {flag}"]
            mine = recordio.unpack_img(ours[key], flag)[1]
            assert mine is not None and list(mine.shape) == shape, (key, flag)
            assert mine.tobytes().hex() == raw, (key, flag)


def test_image_record_iter_reads_our_files(tmp_path: Path, mxnet: MXNet) -> None:
    """mx.io.ImageRecordIter iterates a .rec/.idx we wrote from pack_img records."""
    rng = np.random.default_rng(3)
    n, h, w = 10, 24, 32
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(n)]
    writer = recordio.MXIndexedRecordIO(str(tmp_path / "img.idx"), str(tmp_path / "img.rec"), "w")
    for i, img in enumerate(images):
        header = recordio.IRHeader(0, [float(i), i * 2.0, -1.0], i, 0)
        writer.write_idx(i, recordio.pack_img(header, img, img_fmt=".png"))
    writer.close()
    # single-label file for the default label_width=1 path
    writer = recordio.MXIndexedRecordIO(str(tmp_path / "one.idx"), str(tmp_path / "one.rec"), "w")
    for i, img in enumerate(images):
        writer.write_idx(i, recordio.pack_img((0, float(i % 3), i, 0), img, img_fmt=".png"))
    writer.close()
    assert (tmp_path / "one.rec").stat().st_size % 4 == 0
    result = mxnet.run(
        """
        it = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, h, w),
                                   batch_size=5, shuffle=False, round_batch=False)
        data, labels = [], []
        for batch in it:
            data.append(batch.data[0].asnumpy().astype('uint8').tolist())
            labels += batch.label[0].asnumpy().tolist()
        result = {"data": data, "labels": labels}
        """,
        rec=str(tmp_path / "one.rec"),
        idx=str(tmp_path / "one.idx"),
        h=h,
        w=w,
    )
    data = np.array(result["data"], dtype=np.uint8).reshape(n, 3, h, w)
    expected = np.stack([img[:, :, ::-1].transpose(2, 0, 1) for img in images])  # RGB planes
    assert np.array_equal(data, expected)
    assert result["labels"] == [float(i % 3) for i in range(n)]
    multi = mxnet.run(
        """
        it = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, h, w),
                                   batch_size=5, label_width=3, shuffle=False)
        result = [batch.label[0].asnumpy().tolist() for batch in it]
        """,
        rec=str(tmp_path / "img.rec"),
        idx=str(tmp_path / "img.idx"),
        h=h,
        w=w,
    )
    assert [row for batch in multi for row in batch] == [[i, i * 2.0, -1.0] for i in range(n)]


def test_golden_files_regenerate_identically(tmp_path: Path, mxnet: MXNet, golden: Path) -> None:
    """The committed golden files are what this MXNet makes today."""
    import subprocess

    subprocess.run([mxnet.python, str(golden / "make_golden.py"), str(tmp_path)], check=True)
    for name in ("framing.rec", "framing.idx", "labels.rec", "labels.idx", "images.rec",
                 "images.idx", "sample.rec", "upstream255.rec", "upstream255.idx"):  # fmt: skip
        assert (tmp_path / name).read_bytes() == (golden / name).read_bytes(), name

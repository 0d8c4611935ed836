"""Files written by real MXNet 1.9.1 (tests/golden, made by make_golden.py):
we read them, and our writer reproduces them byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from im2rec import recordio
from im2rec.errors import RecordFormatError
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter


def test_golden_files_are_intact(golden: Path, manifest: dict[str, Any]) -> None:
    assert manifest["generator"]["mxnet"] == "1.9.1"
    for name, digest in manifest["sha256"].items():
        assert hashlib.sha256((golden / name).read_bytes()).hexdigest() == digest, name


def test_framing_golden(tmp_path: Path, golden: Path, manifest: dict[str, Any]) -> None:
    records = [bytes.fromhex(h) for h in manifest["sets"]["framing"]["records_hex"]]
    reader = IndexedRecordReader(golden / "framing.rec")
    assert [reader.read_key(i) for i in range(len(records))] == records
    with IndexedRecordWriter(tmp_path / "framing.rec") as w:
        for i, data in enumerate(records):
            w.write_key(i, data)
    for ext in (".rec", ".idx"):
        assert (tmp_path / f"framing{ext}").read_bytes() == (golden / f"framing{ext}").read_bytes()


# What MXNet's pack() made of each label (make_golden.py LABELS), as unpack sees it.
EXPECTED_LABELS = [
    (0, 3.0),
    (0, float(np.float32(0.1))),
    (0, 2.5),
    (0, 4.0),
    (0, 1.0),
    (3, [1.0, 2.0, 3.0]),
    (1, [7.0]),
    (1, [2.0]),
    (0, 0.0),
    (6, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
    (2, [float(np.float32(0.1)), float("inf")]),
    (0, 1.5),
]
LABEL_ARGS: list[Any] = [
    3, 0.1, np.float32(2.5), np.int64(4), True, [1, 2, 3], (7,), np.array(2.0), [],
    np.arange(6).reshape(2, 3), [0.1, 1e40], 1.5,
]  # fmt: skip


def test_labels_golden(tmp_path: Path, golden: Path, manifest: dict[str, Any]) -> None:
    cases = manifest["sets"]["labels"]["cases"]
    reader = recordio.MXIndexedRecordIO(str(golden / "labels.idx"), str(golden / "labels.rec"), "r")
    writer = recordio.MXIndexedRecordIO(str(tmp_path / "l.idx"), str(tmp_path / "l.rec"), "w")
    for n, (case, (flag, label), arg) in enumerate(
        zip(cases, EXPECTED_LABELS, LABEL_ARGS, strict=True)
    ):
        header, payload = recordio.unpack(reader.read_idx(n))
        assert (header.flag, header.id, header.id2) == (flag, case["id"], case["id2"])
        assert payload == case["payload"].encode()
        got = header.label.tolist() if flag else header.label
        assert got == label
        if isinstance(arg, list) and arg == [0.1, 1e40]:
            # MXNet stored 1e40 as inf without a word; we refuse it, and pack
            # what MXNet's reader gives back (inf), to the same bytes
            with pytest.raises(RecordFormatError, match="does not fit float32"):
                recordio.pack(recordio.IRHeader(99, arg, case["id"], case["id2"]), payload)
            arg = header.label
        writer.write_idx(
            n, recordio.pack(recordio.IRHeader(99, arg, case["id"], case["id2"]), payload)
        )
    writer.close()
    for ext in (".rec", ".idx"):
        assert (tmp_path / f"l{ext}").read_bytes() == (golden / f"labels{ext}").read_bytes()


@pytest.fixture(scope="module")
def image_golden(golden: Path, manifest: dict[str, Any]) -> tuple[list[dict[str, Any]], Any, Any]:
    return (
        manifest["sets"]["images"]["cases"],
        np.load(golden / "images_src.npz"),
        np.load(golden / "images_decoded.npz"),
    )


def test_unpack_img_matches_opencv(golden: Path, image_golden: Any) -> None:
    cases, _, decoded = image_golden
    reader = recordio.MXIndexedRecordIO(str(golden / "images.idx"), str(golden / "images.rec"), "r")
    for n, case in enumerate(cases):
        s = reader.read_idx(n)
        for flag in (-1, 0, 1):
            header, img = recordio.unpack_img(s, flag)
            expected = decoded[f"{n}_{flag}"]
            assert header.id == n and header.label == float(n)
            assert img is not None and img.dtype == expected.dtype, (case, flag)
            assert img.shape == expected.shape, (case, flag)
            assert np.array_equal(img, expected), (case, flag)


def test_pack_img_jpeg_bytes_match_opencv(golden: Path, image_golden: Any) -> None:
    """JPEG output is byte-identical to cv2.imencode's; PNG is pixel-identical."""
    cases, src, _ = image_golden
    reader = recordio.MXIndexedRecordIO(str(golden / "images.idx"), str(golden / "images.rec"), "r")
    for n, case in enumerate(cases):
        ours = recordio.pack_img(
            recordio.IRHeader(0, float(n), n, 0),
            src[case["array"]],
            case["quality"],
            case["img_fmt"],
        )
        theirs = reader.read_idx(n)
        if case["img_fmt"].lower() in (".jpg", ".jpeg"):
            assert ours == theirs, case
        else:
            for flag in (-1, 0, 1):
                mine, ref = recordio.unpack_img(ours, flag)[1], recordio.unpack_img(theirs, flag)[1]
                assert mine is not None and ref is not None
                assert np.array_equal(mine, ref), (case, flag)

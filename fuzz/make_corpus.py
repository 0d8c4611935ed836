"""Writes the seed corpus in fuzz/corpus/ (committed; run again only to
change it): a few small valid inputs per harness, from which libFuzzer's
mutations start. Other seeds there were found, not written here, and are
kept as regressions (each run starts with them):

* ``jpeg/batch-drawn-past-a-failure``: a progressive JPEG whose second
  scan is invalid: its batch fails in the decoder after its header was
  taken, which the batch answers with the decoder's message."""

from __future__ import annotations

import gzip
import io
import struct
import sys
import tarfile
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).parent / "corpus"


def jpegs() -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    pixels = Image.fromarray(rng.integers(0, 255, (21, 27, 3), np.uint8))
    out = {}
    for name, params in {
        "420": {}, "422": {"subsampling": 1}, "444": {"subsampling": 0},
        "progressive": {"progressive": True}, "gray": {"gray": True},
    }.items():  # fmt: skip
        buf = io.BytesIO()
        image = pixels.convert("L") if params.pop("gray", False) else pixels
        image.save(buf, "JPEG", quality=70, **params)
        out[name] = buf.getvalue()
    exif = b"Exif\0\0II*\0" + struct.pack("<IHHHIHH", 8, 1, 0x0112, 3, 1, 6, 0)
    seg = b"\xff\xe1" + struct.pack(">H", len(exif) + 2) + exif
    out["exif"] = out["420"][:2] + seg + out["420"][2:]
    return out


def region_params(jpeg: bytes) -> bytes:
    # what fuzz_jpeg consumes first: scale pick, four numbers, two bools, a limit pick
    return bytes([0, 1, 2, 1, 3, 1, 20, 1, 15, 0, 1, 0]) + jpeg


def shard(compress: bool = False, pax: bool = False) -> bytes:
    out = io.BytesIO()
    fmt = tarfile.PAX_FORMAT if pax else tarfile.USTAR_FORMAT
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for key, fields in (("a", {"jpg": jpegs()["420"], "cls": b"3"}),
                            ("b", {"png": b"\x89PNG", "json": b'{"label": 2}'})):  # fmt: skip
            for ext, data in fields.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                if pax:
                    info.pax_headers = {"comment": "x"}
                tar.addfile(info, io.BytesIO(data))
    data = out.getvalue()
    return gzip.compress(data) if compress else data


def ndarray() -> bytes:
    sys.path.insert(0, str(Path(__file__).parent.parent))
    from im2rec.training.augment.ndarray_file import save_ndarrays

    path = HERE / "mean.tmp"
    save_ndarrays(path, [("mean_img", np.arange(12, dtype=np.float32).reshape(3, 2, 2))])
    data = path.read_bytes()
    path.unlink()
    return data


def records() -> bytes:
    from im2rec.recordio import IndexedRecordWriter, pack

    rec = HERE / "r.tmp.rec"
    with IndexedRecordWriter(rec) as w:
        for key in range(3):
            w.write_key(key, pack((0, float(key), key, 0), b"\xce\xd7\xe6\xed" * key + b"img"))
    idx = rec.with_suffix(".idx").read_bytes()
    data = rec.read_bytes()
    rec.unlink()
    rec.with_suffix(".idx").unlink()
    return bytes([len(idx)]) + idx + data


def main() -> None:
    HERE.mkdir(exist_ok=True)
    seeds: dict[str, dict[str, bytes]] = {
        "jpeg": {k: region_params(v) for k, v in jpegs().items()},
        "tensor": {"rgbx": bytes([2, 12, 2, 0, 2, 0, 2, 0, 2, 4, 2, 3, 2, 0, 1, 0]) + bytes(200)},
        "words": {"hit": b"\xce\xd7\xe6\xed\0" + b"abcd\xce\xd7\xe6\xed" * 4},
        "tar": {"plain": shard(), "gzip": shard(compress=True), "pax": shard(pax=True)},
        "json": {"exported": b'\x00{"flag":0,"label":[3.0],"id":5,"id2":0,"key":5}',
                 "labels": b'\x01{"label": [1, 2.5], "flag": 2}'},
        "ndarray": {"mean": ndarray()},
        "records": {"three": records()},
        # (one byte of piece size and none of floats, then the file)
        "jsoncols": {"coco": b"\x07\x00" + b'{"images": [{"id": 1, "file_name": "a.jpg", '
                     b'"width": 64}], "annotations": [{"image_id": 1, "bbox": [1, 2.5, 3e1, 4], '
                     b'"iscrowd": 0, "area": 1.5}], "categories": [{"id": 1, "name": "cat"}]}',
                     "odd": b"\x03\x01\x00\x00\x80\x3f" + b'{"annotations": [{"bbox": [NaN, '
                     b'-Infinity, 1e400, 1], "iscrowd": true}], "info": [[[]]], "images": 0}'},
    }  # fmt: skip
    for harness, files in seeds.items():
        folder = HERE / harness
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)


if __name__ == "__main__":
    main()

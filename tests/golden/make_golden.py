"""Regenerate the golden files with real MXNet 1.9.1 (``make golden``).

Run with the MXNet venv's Python (mxnet==1.9.1, numpy<1.24, OpenCV):

    .venv-mx/bin/python tests/golden/make_golden.py tests/golden

Every file here was written by MXNet's own ``mx.recordio`` (and OpenCV for
images); ``manifest.json`` records what went into each and its SHA-256.
"""

import hashlib
import json
import os
import sys

import cv2
import mxnet as mx
import numpy as np

M = b"\x0a\x23\xd7\xce"

# Framing cases of docs/format.md, "Records on disk" plus a few more: empty, short, exact multiples,
# aligned and unaligned magic words, magic at the end, consecutive magics.
FRAMING = [
    b"",
    b"a",
    b"abcd",
    b"abcde",
    M,
    b"abcd" + M + b"xy",
    b"ab" + M + b"xy",
    b"abcd" + M,
    M + M,
    b"1234" + M + b"5678" + M + b"9",
    b"x" * 4099,
    bytes(range(256)) * 3,
]

LABELS = [
    (3, 0, 0),
    (0.1, 1, 0),
    (np.float32(2.5), 2, 7),
    (np.int64(4), 3, 0),
    (True, 4, 0),
    ([1, 2, 3], 5, 0),
    ((7,), 6, 0),
    (np.array(2.0), 7, 0),
    ([], 8, 0),
    (np.arange(6).reshape(2, 3), 9, 0),
    ([0.1, 1e40], 10, 0),
    (1.5, 2**64 - 1, 2**63),
]


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def framing(out):
    rec, idx = os.path.join(out, "framing.rec"), os.path.join(out, "framing.idx")
    w = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    for i, data in enumerate(FRAMING):
        w.write_idx(i, data)
    w.close()
    return {"records_hex": [d.hex() for d in FRAMING]}


def upstream(out):
    # mxnet tests/python/unittest/test_recordio.py: 255 one-byte records.
    rec, idx = os.path.join(out, "upstream255.rec"), os.path.join(out, "upstream255.idx")
    w = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    for i in range(255):
        w.write_idx(i, bytes(chr(i), "utf-8"))
    w.close()
    # dmlc-core test/unittest/sample.rec, rebuilt from its documented recipe.
    w = mx.recordio.MXRecordIO(os.path.join(out, "sample.rec"), "w")
    for i in range(1, 11):
        w.write(mx.recordio.pack(mx.recordio.IRHeader(0, i % 2, i, 0), (f"{i}\n" * 10).encode()))
    w.close()
    return {}


def labels(out):
    rec, idx = os.path.join(out, "labels.rec"), os.path.join(out, "labels.idx")
    w = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    cases = []
    for n, (label, id_, id2) in enumerate(LABELS):
        payload = f"payload-{n}".encode()
        w.write_idx(n, mx.recordio.pack(mx.recordio.IRHeader(99, label, id_, id2), payload))
        cases.append({"label": repr(label), "id": id_, "id2": id2, "payload": payload.decode()})
    w.close()
    return {"cases": cases}


def images(out):
    rng = np.random.RandomState(1234)
    smooth = cv2.GaussianBlur(rng.randint(0, 256, (48, 64, 3)).astype(np.uint8), (7, 7), 3)
    arrays = {
        "bgr": smooth,
        "gray": cv2.cvtColor(smooth, cv2.COLOR_BGR2GRAY),
        "bgra": np.dstack([smooth, rng.randint(0, 256, (48, 64)).astype(np.uint8)]),
        "tiny": rng.randint(0, 256, (1, 1, 3)).astype(np.uint8),
    }
    cases = [
        ("bgr", ".jpg", 95),
        ("bgr", ".jpg", 50),
        ("bgr", ".jpeg", 100),
        ("bgr", ".JPG", 10),
        ("bgr", ".png", 95),
        ("bgr", ".png", 0),
        ("gray", ".jpg", 90),
        ("gray", ".png", 3),
        ("bgra", ".png", 9),
        ("bgra", ".jpg", 80),
        ("tiny", ".jpg", 95),
    ]
    rec, idx = os.path.join(out, "images.rec"), os.path.join(out, "images.idx")
    w = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    decoded = {}
    meta = []
    for n, (name, fmt, q) in enumerate(cases):
        s = mx.recordio.pack_img(
            mx.recordio.IRHeader(0, float(n), n, 0), arrays[name], quality=q, img_fmt=fmt
        )
        w.write_idx(n, s)
        for flag in (-1, 0, 1):
            decoded[f"{n}_{flag}"] = mx.recordio.unpack_img(s, flag)[1]
        meta.append({"array": name, "img_fmt": fmt, "quality": q})
    w.close()
    np.savez_compressed(os.path.join(out, "images_src.npz"), **arrays)
    np.savez_compressed(os.path.join(out, "images_decoded.npz"), **decoded)
    return {"cases": meta}


def main(out):
    os.makedirs(out, exist_ok=True)
    manifest = {
        "generator": {"mxnet": mx.__version__, "numpy": np.__version__, "opencv": cv2.__version__},
        "sets": {f.__name__: f(out) for f in (framing, upstream, labels, images)},
    }
    manifest["sha256"] = {
        name: sha(os.path.join(out, name))
        for name in sorted(os.listdir(out))
        if name.endswith((".rec", ".idx", ".npz"))
    }
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])

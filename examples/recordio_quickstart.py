"""A minute with the RecordIO core: write a .rec/.idx, read it back three ways.

    .venv/bin/python examples/recordio_quickstart.py [OUT_DIR]

Makes a few synthetic images, packs them with labels into OUT_DIR/demo.rec
(default: a temporary folder), then reads them back with the drop-in
``mx.recordio`` API, the random-access reader, and a sequential scan.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from im2rec import recordio


def main(out: Path) -> None:
    rng = np.random.default_rng(0)
    rec = out / "demo.rec"

    # 1. Write: an atomic, indexed writer (nothing appears until the block ends).
    with recordio.IndexedRecordWriter(rec) as writer:
        for i in range(8):
            bgr = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
            label = float(i % 3) if i % 2 else [float(i % 3), 0.5]  # scalar or multi-label
            writer.write_key(i, recordio.pack_img((0, label, i, 0), bgr, quality=90))
    print(f"wrote {rec} ({rec.stat().st_size:,} bytes) and {rec.with_suffix('.idx').name}")

    # 2. The drop-in API: code written for mx.recordio, with only the import changed.
    mx_reader = recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    header, img = recordio.unpack_img(mx_reader.read_idx(5))
    assert img is not None
    print(f"key 5: {header}, image {img.shape} (BGR)")

    # 3. Random access by position, memory-mapped and safe to share with workers.
    reader = recordio.IndexedRecordReader(rec)
    header, _ = recordio.unpack(reader[0])
    print(f"{len(reader)} records; first has flag={header.flag} labels={header.label}")

    # 4. Sequential scan, no index needed.
    ids = [recordio.unpack(payload)[0].id for payload in recordio.RecordReader(rec)]
    print(f"ids in file order: {ids}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))

"""Large ``.rec``/``.idx`` pairs made in seconds with numpy, for tests of
indexes at scale."""

from __future__ import annotations

from pathlib import Path

import numpy as np

MAGIC = 0xCED7230A


RECORD = np.dtype([("magic", "<u4"), ("lrec", "<u4"), ("flag", "<u4"), ("label", "<f4"),
                   ("id", "<u8"), ("id2", "<u8"), ("payload", "<u4")])  # fmt: skip


def synthetic(prefix: Path, n: int, keys: np.ndarray | None = None) -> Path:
    """A ``.rec``/``.idx`` pair of ``n`` tiny records (a 24-byte header and
    4 bytes of payload), written with numpy in a second for a million."""
    records = np.zeros(n, RECORD)
    records["magic"], records["lrec"] = MAGIC, 28
    records["label"] = np.arange(n) % 1000
    records["id"] = np.arange(n)
    records.tofile(f"{prefix}.rec")
    keys = np.arange(n, dtype=np.int64) if keys is None else keys
    offsets = np.arange(n, dtype=np.int64) * RECORD.itemsize
    with open(f"{prefix}.idx", "w") as f:
        for start in range(0, n, 1 << 20):
            f.write("".join(f"{k}\t{o}\n" for k, o in zip(keys[start : start + (1 << 20)].tolist(),
                                                         offsets[start : start + (1 << 20)].tolist(),
                                                         strict=True)))  # fmt: skip
    return Path(f"{prefix}.rec")

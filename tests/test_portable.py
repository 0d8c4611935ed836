"""Nothing POSIX-only on the import or the plain read/write path without a
fallback: a Python without ``os.pread``, ``os.writev``, ``os.O_NONBLOCK``
(Windows) still writes, reads and iterates a ``.rec``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# (processes, servers or seconds: `make test-fast` leaves them out)
pytestmark = pytest.mark.slow

PROGRAM = """
import os
for name in ("pread", "writev", "O_NONBLOCK", "O_NOFOLLOW"):
    if hasattr(os, name):
        delattr(os, name)
import io
from PIL import Image
from im2rec import RecordDataset, recordio
from im2rec.storage.files import pread
assert pread.__module__ == "im2rec.storage.files"  # the fallback, not os.pread
w = recordio.MXIndexedRecordIO("p.idx", "p.rec", "w")
for i in range(20):
    out = io.BytesIO()
    Image.new("RGB", (8 + i, 6), (i * 10, 0, 0)).save(out, "PNG")
    w.write_idx(i, recordio.pack((0, float(i), i, 0), out.getvalue()))
w.close()
r = recordio.MXIndexedRecordIO("p.idx", "p.rec", "r")
assert [recordio.unpack(r.read_idx(k))[0].label for k in range(20)] == [float(i) for i in range(20)]
ds = RecordDataset("p.rec", output="numpy")
assert [ds[i][0].shape for i in range(20)] == [(6, 8 + i, 3) for i in range(20)]
print("ok")
"""


def test_reads_and_writes_without_posix_only_calls(tmp_path: Path) -> None:
    # a cache folder of one's own, so that opening the index looks for its copy
    (tmp_path / "cache" / "index").mkdir(mode=0o700, parents=True)
    (tmp_path / "cache").chmod(0o700)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROGRAM)],
        cwd=tmp_path,
        env={**os.environ, "IM2REC_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr

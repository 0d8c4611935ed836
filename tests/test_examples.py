"""The bundled examples run as documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_recordio_quickstart(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "recordio_quickstart.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "8 records; first has flag=2" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.idx", "demo.rec"]

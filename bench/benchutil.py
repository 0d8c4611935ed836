"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import os
from pathlib import Path


def drop_caches() -> bool:
    """Empty the page cache (Linux, root only); False when not allowed."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return True
    except OSError:
        return False

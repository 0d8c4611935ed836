"""Helpers for the tests of writers and copies: ranges of a source file,
and a process whose files cannot grow past a limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from im2rec.recordio.framing import has_aligned_magic
from im2rec.storage.files import FileRange, HeldFile


def ranges_of(tmp_path: Path, pieces: list[bytes]) -> list[FileRange]:
    """Each piece as a range of one source file, with its magic word scanned."""
    src = tmp_path / "source.bin"
    src.write_bytes(b"".join(pieces))
    fd = os.open(src, os.O_RDONLY)
    held = HeldFile(fd)
    out, offset = [], 0
    for piece in pieces:
        out.append(FileRange(fd, offset, len(piece), str(src), has_aligned_magic(piece), held))
        offset += len(piece)
    return out


def with_small_files(script: str, folder: Path, limit: int) -> Any:
    """Run ``script`` (Python, with ``folder`` as ``FOLDER``) in a process of
    its own whose files cannot grow past ``limit`` bytes, and return what it
    printed, as JSON. ``RLIMIT_FSIZE``: a write past the limit fails with
    EFBIG on every kernel and file system, as a write to a full disk fails
    with ENOSPC (Python ignores SIGXFSZ); only after the script's own set-up,
    whose files may be larger."""
    env = dict(os.environ)
    prelude = (
        "import json, os, resource, sys\n"
        f"FOLDER = {str(folder)!r}\n"
        "def small_files():\n"
        "    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]\n"
        f"    resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, hard))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)

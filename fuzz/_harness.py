"""What every harness shares: atheris set-up, and the rule that a hostile
input may raise an im2rec error (or the ones an entry point documents) but
never anything else, and never crash the process.

Run one: ``python fuzz/fuzz_jpeg.py WORK_CORPUS fuzz/corpus/jpeg
-max_total_time=30`` (``make fuzz`` runs them all; libFuzzer's options
apply). Under ``make sanitize`` the C extensions are built with
AddressSanitizer and UndefinedBehaviorSanitizer first.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable

import atheris

#: a scratch folder for harnesses that need files (one per process)
SCRATCH = tempfile.mkdtemp(prefix="im2rec-fuzz-")


def scratch_file(data: bytes, name: str = "input") -> str:
    path = os.path.join(SCRATCH, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def run(test_one: Callable[[bytes], None]) -> None:
    atheris.Setup(sys.argv, test_one)
    atheris.Fuzz()

"""Fails when a C extension was not built although this machine can build
it: setup.py builds them as optional (an install without a compiler or
libjpeg's headers goes on without them), so a broken build would
otherwise pass unnoticed. Run after ``setup.py build_ext --inplace``
(``make install`` does)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import sysconfig

from im2rec import native


def compiles(header: str) -> bool:
    """Whether this machine's C compiler finds ``header``."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if shutil.which(cc[0]) is None:
        return False
    got = subprocess.run([*cc, "-E", "-x", "c", "-"], input=f"#include <{header}>\n",
                         capture_output=True, text=True, check=False)  # fmt: skip
    return got.returncode == 0


def main() -> int:
    if native.switched_off():
        print("IM2REC_NO_NATIVE is set: not checking the extensions")
        return 0
    can = {"jpeg": compiles("jpeglib.h")}
    compiler = compiles("stddef.h")
    missing = [
        ext.module
        for ext in native.extensions()
        if ext.state == "not built" and compiler and can.get(ext.name, True)
    ]
    if missing:
        names = ", ".join(missing)
        print(f"not built, though this machine has what they need: {names}; see the "
              "build's output (python setup.py build_ext --inplace)", file=sys.stderr)  # fmt: skip
        return 1
    print("native extensions: " + ", ".join(f"{e.name} {e.state}" for e in native.extensions()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""An installed im2rec wheel, checked as a user gets it (``make wheel`` runs
it in a fresh venv; cibuildwheel, as its test command, on every platform
the release workflow builds):

* ``rec --version`` lists every C extension as on;
* the JPEG region decoder loads the libjpeg bundled in the wheel (Linux:
  ``im2rec.libs/``, by auditwheel; macOS: ``.dylibs/``, by delocate), not
  one the system happens to have;
* the bundled examples list, pack, verify, and read back through
  ``RecordDataset`` with an ``Augmenter`` (a batch in one C call).

    python scripts/check_wheel.py PROJECT_ROOT

Run it from outside the checkout (the installed package must be the one
imported). Exits 1 naming what does not hold.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def fail(why: str) -> None:
    sys.exit(f"check_wheel: {why}")


def linked_libraries(extension: str) -> str:
    tool = ["otool", "-L"] if sys.platform == "darwin" else ["ldd"]
    return subprocess.run([*tool, extension], capture_output=True, text=True, check=True).stdout


def main() -> None:
    project = Path(sys.argv[1]).resolve()
    beside = Path(sys.executable).with_name("rec")  # (the venv's, activated or not)
    rec = str(beside) if beside.exists() else shutil.which("rec") or fail("no `rec` command")
    import im2rec
    import im2rec.imaging._jpeg as jpeg

    if Path(im2rec.__file__).resolve().is_relative_to(project):
        fail(f"im2rec was imported from the checkout ({im2rec.__file__}), not the wheel")
    version = subprocess.run([rec, "--version"], capture_output=True, text=True, check=True).stdout
    print(version, end="")
    for name in ("words on", "jpeg on (libjpeg-turbo", "tensor on", "text on"):
        if name not in version:
            fail(f"`rec --version` does not say {name!r}: not every extension is on")
    libraries = linked_libraries(str(jpeg.__file__))
    bundled = ".dylibs/libjpeg" if sys.platform == "darwin" else "im2rec.libs/libjpeg"
    if bundled not in libraries:
        fail(f"_jpeg does not load the bundled libjpeg ({bundled}):\n{libraries}")
    with tempfile.TemporaryDirectory() as work:
        examples = str(project / "examples" / "example")
        for args in (["list", examples, "--recursive", "-o", "ex", "-q"],
                     ["pack", "ex.lst", "--root", examples, "--resize", "64", "-q"],
                     ["verify", "ex.rec", "--decode"]):  # fmt: skip
            subprocess.run([rec, *args], cwd=work, check=True)
        from im2rec.training import Augmenter, RecordDataset

        augment = Augmenter((3, 32, 32), rand_crop=True, rand_mirror=True,
                            mean=(1, 2, 3), std=(4, 5, 6))  # fmt: skip
        ds = RecordDataset(os.path.join(work, "ex.rec"), output="bytes", transform=augment)
        batch = ds.__getitems__(list(range(len(ds))))
        if batch.images.shape != (len(ds), 3, 32, 32):
            fail(f"a batch of {batch.images.shape}")
        print(f"RecordDataset: {len(ds)} samples in one batch; classes {ds.classes}")
    print("the wheel holds")


if __name__ == "__main__":
    main()

"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image


def compile_package() -> None:
    """Compile im2rec's modules to bytecode, as ``pip install`` does for a
    wheel. The editable install has none until a module is first imported,
    and with ``PYTHONDONTWRITEBYTECODE`` set (as on the machines measured)
    never: every ``rec`` run then compiled its modules again, about 30 ms
    of a 500 MB import's start-up that no installed copy pays."""
    import compileall

    import im2rec

    compileall.compile_dir(os.path.dirname(im2rec.__file__), quiet=1)


def drop_caches() -> bool:
    """Empty the page cache (Linux, root only); False when not allowed."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return True
    except OSError:
        return False


def make_images(root: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    sizes = random.Random(seed)
    for i in range(n):
        w = sizes.randint(300, 1024)
        h = min(768, max(225, int(w * sizes.uniform(0.6, 0.9))))
        low = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
        field = np.asarray(Image.fromarray(low).resize((w, h), Image.Resampling.BICUBIC), np.int16)
        grain = rng.integers(-12, 13, (h, w, 1), dtype=np.int16)
        img = Image.fromarray(np.clip(field + grain, 0, 255).astype(np.uint8))
        folder = root / f"class{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        img.save(folder / f"img{i:05d}.jpg", quality=90)


def listed_images(work: Path, n: int, copies: tuple[str, ...] = ()) -> Path:
    """``n`` generated photo-like JPEGs in ``work/images`` (10 class folders),
    listed with ``rec list`` into ``work/images.lst``, and the list copied to
    ``work/<name>/images.lst`` for each of ``copies``."""
    make_images(work / "images", n)
    rec = str(Path(sys.executable).with_name("rec"))
    subprocess.run(
        [rec, "list", str(work / "images"), "--recursive", "-o", str(work / "images"), "-q"],
        check=True,
    )
    lst = work / "images.lst"
    for name in copies:
        (work / name).mkdir()
        (work / name / "images.lst").write_bytes(lst.read_bytes())
    return lst


#: where each benchmark's last results go, as JSON (bench/charts.py draws them)
RESULTS = Path(os.environ.get("IM2REC_BENCH_RESULTS", Path(__file__).parent / "results"))


def ratio(label: str, reference: str, value: float, target: float | None = None) -> dict[str, Any]:
    """One row of a results file: im2rec against ``reference`` (higher is
    better for im2rec), and the target it must meet, if any."""
    return {"label": label, "reference": reference, "ratio": round(value, 4), "target": target}


def save_results(bench: str, data: dict[str, Any], ratios: list[dict[str, Any]]) -> Path:
    """``bench/results/BENCH.json``: the run's ratios (for the charts) and
    everything it measured, with when, where and at which commit it ran."""
    import datetime
    import json
    import platform

    import im2rec

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=Path(__file__).parent, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        commit = ""
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.processor()) if Path("/proc/cpuinfo").exists() else platform.processor()  # fmt: skip
    doc = {
        "bench": bench,
        "when": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": {"cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version()},
        "im2rec": im2rec.__version__,
        "commit": commit,
        "ratios": ratios,
        "data": data,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{bench}.json"
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return path

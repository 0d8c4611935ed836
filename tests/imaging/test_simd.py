"""The vector levels (im2rec/imaging/simd/): IM2REC_SIMD caps which kernels
run, and the native tests pass at every level this CPU has, the portable
one always, so a kernel that disagrees with the portable loops, or a path
that does not run where its level is in use, fails here instead of
depending on the machine the suite happens to run on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from im2rec import native
from im2rec.errors import ConfigError

tensor: Any = pytest.importorskip("im2rec.imaging._tensor", reason="built without the extension")
pytestmark = pytest.mark.skipif(native.switched_off(), reason="the extensions are off")

ROOT = Path(__file__).resolve().parents[2]
#: the tests that run the kernels against the portable loops, Pillow and numpy
KERNEL_TESTS = (
    "tests/imaging/test_resample.py", "tests/imaging/test_regions.py",
    "tests/imaging/test_native_safety.py", "tests/training/augment/test_fused.py",
    "tests/training/test_crop_native.py", "tests/training/test_filling.py",
)  # fmt: skip


def levels_here() -> list[str]:
    """Every level this CPU has, lowest first."""
    best = tensor.simd()[1]
    return list(native.SIMD_LEVELS[: native.SIMD_LEVELS.index(best) + 1])


def run(level: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, IM2REC_SIMD=level, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)  # fmt: skip


@pytest.mark.parametrize("level", native.SIMD_LEVELS)
def test_the_cap_sets_the_level(level: str) -> None:
    got = run(level, "-c", "from im2rec.imaging import _tensor; print(*_tensor.simd())")
    in_use, cpu, cap = got.stdout.split()
    assert cap == level and cpu == tensor.simd()[1]
    order = native.SIMD_LEVELS.index
    assert order(in_use) == min(order(level), order(cpu))


@pytest.mark.slow
@pytest.mark.parametrize("level", native.SIMD_LEVELS)
def test_the_kernel_tests_pass_at_every_level_this_cpu_has(level: str) -> None:
    if level not in levels_here():
        pytest.skip(f"this CPU's best is {tensor.simd()[1]}")
    got = run(level, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *KERNEL_TESTS)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-2000:]
    assert " passed" in got.stdout


def test_a_word_that_is_not_a_level_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IM2REC_SIMD", "avx3")
    with pytest.raises(ConfigError, match="portable, avx2, avx512"):
        native.simd_cap()
    rec = Path(sys.executable).with_name("rec")
    got = subprocess.run([str(rec), "--version"], capture_output=True, text=True, timeout=60)
    assert got.returncode == 0 and "IM2REC_SIMD='avx3' is not a level" in got.stdout
    assert "Traceback" not in got.stderr

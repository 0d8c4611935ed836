"""Shared fixtures: golden files made by real MXNet, and a runner for MXNet code."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).parent / "golden"


def touch(root: Path, *paths: str) -> None:
    """Create small placeholder files (listing reads names, not pixels)."""
    for p in paths:
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_bytes(b"x")


@pytest.fixture(scope="session")
def golden() -> Path:
    return GOLDEN


@pytest.fixture(scope="session")
def manifest() -> dict[str, Any]:
    return json.loads((GOLDEN / "manifest.json").read_text())


class MXNet:
    """Runs snippets under the real MXNet 1.9.1 interpreter (``make compat``)."""

    def __init__(self, python: str):
        self.python = python

    @property
    def im2rec_py(self) -> str:
        """The im2rec.py that the mxnet 1.9.1 wheel ships."""
        return str(
            self.run(
                "import os; result = os.path.join(os.path.dirname(mx.__file__), 'tools', 'im2rec.py')"
            )
        )

    def im2rec(self, *args: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run im2rec.py with this interpreter."""
        return subprocess.run(
            [self.python, self.im2rec_py, *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=600,
            check=True,
        )

    def run(self, code: str, **params: Any) -> Any:
        """Run ``code`` with ``params`` bound as globals; it sets ``result``,
        which comes back through JSON."""
        program = (
            "import json, sys, warnings\nwarnings.simplefilter('ignore')\n"
            "import numpy as np\nimport mxnet as mx\n"
            f"globals().update(json.loads({json.dumps(json.dumps(params))}))\n"
            + textwrap.dedent(code)
            + "\nprint('@@RESULT@@' + json.dumps(result))\n"
        )
        proc = subprocess.run(
            [self.python, "-"], input=program, capture_output=True, text=True, timeout=300
        )
        if proc.returncode != 0:
            raise AssertionError(f"MXNet snippet failed:\n{proc.stderr[-3000:]}")
        line = proc.stdout.rsplit("@@RESULT@@", 1)[1]
        return json.loads(line)


@pytest.fixture(scope="session")
def mxnet() -> MXNet:
    python = os.environ.get("IM2REC_MXNET_PYTHON")
    if not python:
        pytest.fail("IM2REC_MXNET_PYTHON is not set: run the MXNet cross-checks with `make compat`")
    return MXNet(python)
